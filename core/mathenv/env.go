package mathenv

import (
	"context"
	"encoding/json"

	"github.com/focus-go/focus-go/backends/parse"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/status"
)

// Rewards of a graded episode.
const (
	Correct = 1.0
	Wrong   = 0.0
)

// Decoder turns generated token ids into text (a tokenizer's decode, with
// special tokens kept or skipped as the caller prefers).
type Decoder func(ids []uint32) (string, error)

// Env is one math episode: MathEnv(label, decode). It consumes exact token
// chunks; a finished chunk ends the episode with reward Correct or Wrong.
type Env struct {
	label  string
	decode Decoder
	tokens []uint32
	done   bool
}

var _ collect.Env = (*Env)(nil)

// New returns an episode graded against label (boxed or bare).
func New(label string, decode Decoder) *Env {
	return &Env{label: label, decode: decode}
}

// Label is the reference answer.
func (e *Env) Label() string { return e.label }

// Tokens are the ids generated so far in this episode (not a copy).
func (e *Env) Tokens() []uint32 { return e.tokens }

// Reset starts the episode over; it adds no observation.
func (e *Env) Reset(ctx context.Context) (collect.Observation, error) {
	e.tokens, e.done = e.tokens[:0], false
	return collect.Observation{}, nil
}

// stepInfo is the Info of the grading step.
type stepInfo struct {
	Answer  *string `json:"answer"` // nil: no complete \boxed{} answer
	Label   string  `json:"label"`
	Correct bool    `json:"correct"`
}

// Step appends a token chunk. An unfinished chunk gives reward 0 and the
// episode goes on; a finished one is graded: the decoded response's last
// \boxed{} answer against the label, reward Correct or Wrong, done.
func (e *Env) Step(ctx context.Context, action parse.Action) (collect.Step, error) {
	if action.Kind != parse.KindTokens || action.Chunk == nil {
		return collect.Step{}, status.Errorf(status.InvalidArgument, "mathenv: action of kind %q, expected %q (a token chunk)", action.Kind, parse.KindTokens)
	}
	if e.done {
		return collect.Step{}, status.Errorf(status.InvalidArgument, "mathenv: step after the episode ended; fork or reset first")
	}
	e.tokens = append(e.tokens, action.Chunk.Tokens...)
	if !action.Chunk.Finished {
		return collect.Step{}, nil
	}
	if e.decode == nil {
		return collect.Step{}, status.Errorf(status.InvalidArgument, "mathenv: no decode function to turn the %d generated tokens into text", len(e.tokens))
	}
	text, err := e.decode(e.tokens)
	if err != nil {
		return collect.Step{}, status.Wrap(status.CodeOf(err), err, "mathenv: decode %d generated tokens", len(e.tokens))
	}
	e.done = true
	info := stepInfo{Label: e.label}
	reward := Wrong
	if answer, ok := LastBoxed(text); ok {
		info.Answer = &answer
		if _, info.Correct = Grade(text, e.label); info.Correct {
			reward = Correct
		}
	}
	raw, err := json.Marshal(info)
	if err != nil {
		return collect.Step{}, status.Wrap(status.Internal, err, "mathenv: encode step info")
	}
	return collect.Step{Reward: reward, Done: true, Info: raw}, nil
}

// Fork copies the episode: the copy's token history is its own.
func (e *Env) Fork(ctx context.Context) (collect.Env, error) {
	c := *e
	c.tokens = append(make([]uint32, 0, len(e.tokens)+256), e.tokens...)
	return &c, nil
}

// Close does nothing: an Env holds no resources.
func (e *Env) Close() {}
