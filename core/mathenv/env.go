package mathenv

import (
	"context"
	"encoding/json"

	"github.com/focus-go/focus-go/core/action"
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
	key    *answerKey // the label prepared for grading, shared with forks
	decode Decoder
	last   *stepChunk // the episode's token chunks, newest first; shared with forks
	done   bool
}

// stepChunk is one step's tokens in an immutable list: a fork shares its episode's chunks
// instead of copying the whole history, which the engine does before every segment.
type stepChunk struct {
	tokens []uint32
	prev   *stepChunk
	n      int // tokens in this chunk and every earlier one
}

var _ collect.Env = (*Env)(nil)

// New returns an episode graded against label (boxed or bare).
func New(label string, decode Decoder) *Env {
	return &Env{label: label, key: labelKey(label), decode: decode}
}

// Label is the reference answer.
func (e *Env) Label() string { return e.label }

// Tokens are the ids generated so far in this episode, in a new slice.
func (e *Env) Tokens() []uint32 {
	if e.last == nil {
		return nil
	}
	out := make([]uint32, e.last.n)
	for c := e.last; c != nil; c = c.prev {
		copy(out[c.n-len(c.tokens):], c.tokens)
	}
	return out
}

// Reset starts the episode over; it adds no observation.
func (e *Env) Reset(ctx context.Context) (collect.Observation, error) {
	e.last, e.done = nil, false
	return collect.Observation{}, nil
}

// StepInfo is the Info of the grading step.
type StepInfo struct {
	Answer  *string `json:"answer"` // nil: no complete \boxed{} answer
	Label   string  `json:"label"`
	Correct bool    `json:"correct"`
}

// Graded is the last step of an episode: reward Correct or Wrong, done, and its info.
type Graded struct {
	Reward float64  `json:"reward"`
	Done   bool     `json:"done"`
	Info   StepInfo `json:"info"`
}

// GradeEpisode is the step that ends an episode whose whole response decoded to text:
// its last \boxed{} answer graded against label. Env.Step ends every episode with it,
// and so does Python's MathEnv (through focus_math_grade) when its decode is a Python
// function, so that both give the same reward and info.
func GradeEpisode(text, label string) Graded {
	return gradeEpisode(text, label, labelKey(label))
}

// gradeEpisode is GradeEpisode against key, label's prepared key: the response's last
// \boxed{} is found once (Grade would find it again).
func gradeEpisode(text, label string, key *answerKey) Graded {
	g := Graded{Reward: Wrong, Done: true, Info: StepInfo{Label: label}}
	if answer, ok := LastBoxed(text); ok {
		g.Info.Answer = &answer
		if g.Info.Correct = key.equal(answer); g.Info.Correct {
			g.Reward = Correct
		}
	}
	return g
}

// Step appends a token chunk, keeping its Tokens slice (read-only, as collect.Env allows;
// Step never writes to it). An unfinished chunk gives reward 0 and the
// episode goes on; a finished one is graded: the decoded response's last
// \boxed{} answer against the label, reward Correct or Wrong, done.
func (e *Env) Step(ctx context.Context, act action.Action) (collect.Step, error) {
	if act.Kind != action.KindTokens || act.Chunk == nil {
		return collect.Step{}, status.Errorf(status.InvalidArgument, "mathenv: action of kind %q, expected %q (a token chunk)", act.Kind, action.KindTokens)
	}
	if e.done {
		return collect.Step{}, status.Errorf(status.InvalidArgument, "mathenv: step after the episode ended; fork or reset first")
	}
	if k := len(act.Chunk.Tokens); k > 0 {
		n := k
		if e.last != nil {
			n += e.last.n
		}
		// Kept as it is: a chunk's tokens are read-only (collect.Env's ownership rule).
		e.last = &stepChunk{tokens: act.Chunk.Tokens, prev: e.last, n: n}
	}
	if !act.Chunk.Finished {
		return collect.Step{}, nil
	}
	tokens := e.Tokens()
	if e.decode == nil {
		return collect.Step{}, status.Errorf(status.InvalidArgument, "mathenv: no decode function to turn the %d generated tokens into text", len(tokens))
	}
	text, err := e.decode(tokens)
	if err != nil {
		return collect.Step{}, status.Wrap(status.CodeOf(err), err, "mathenv: decode %d generated tokens", len(tokens))
	}
	e.done = true
	g := gradeEpisode(text, e.label, e.key)
	raw, err := json.Marshal(g.Info)
	if err != nil {
		return collect.Step{}, status.Wrap(status.Internal, err, "mathenv: encode step info")
	}
	return collect.Step{Reward: g.Reward, Done: g.Done, Info: raw}, nil
}

// Fork copies the episode: steps of the copy and of the original do not affect each other
// (they share the history so far, which neither changes).
func (e *Env) Fork(ctx context.Context) (collect.Env, error) {
	c := *e
	return &c, nil
}

// Close does nothing: an Env holds no resources.
func (e *Env) Close() {}
