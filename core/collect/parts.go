package collect

import (
	"context"
	"encoding/json"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/generate"
)

// Policy generates one segment: a continuation of req.Tokens under
// req.Params. sglang.Client and vllm.Client satisfy it; a Python policy is
// served through core/bridge. Generate must return promptly once ctx ends.
// The engine checks every Result against its request (at most max_tokens
// tokens, one finite logprob per token) and never trusts the policy to.
//
// Ownership: req.Tokens is the engine's and valid only during the call (a
// policy that keeps the prefix copies it). A returned Result's Tokens and
// Logprobs are read-only from then on, for the policy and the engine alike:
// the engine does not copy them but makes them the Env's action chunk and the
// tree's edge, so a policy must not write to or reuse those arrays after
// Generate returns (a pooled buffer handed out twice would change trees
// already collected). The engine never writes to them either, so a policy may
// return the same arrays more than once (a cache, a replay).
type Policy interface {
	Generate(ctx context.Context, req generate.Request) (*generate.Result, error)
}

// Observation is what an environment shows the policy after an action: text
// that the engine appends to the edge as conditioning (untrainable) tokens,
// after the generated ones. Tokens, when non-nil, are the exact conditioning
// ids and Text is only their display form; otherwise Text is encoded with
// the collection's Codec. Messages (chat messages such as {"role": "tool",
// "content": ...}, each one JSON object) are for the whole-turn chat context
// (Config.Turns), which renders them with the chat template; with
// exact-token segments they are an error. The zero Observation adds nothing.
type Observation struct {
	Text     string            `json:"text"`
	Tokens   []uint32          `json:"tokens"`
	Messages []json.RawMessage `json:"messages,omitempty"`
}

// Empty reports whether the observation adds nothing to the context.
func (o Observation) Empty() bool {
	return o.Text == "" && len(o.Tokens) == 0 && len(o.Messages) == 0
}

// Step is an environment's answer to one action (Python's Step).
type Step struct {
	Observation Observation     `json:"observation"`
	Reward      float64         `json:"reward"`
	Done        bool            `json:"done"`
	Info        json.RawMessage `json:"info,omitempty"`
}

// Env is the task a rollout acts in. Exact-token segments reach Step as a
// action.Action of kind action.KindTokens carrying the segment's TokenChunk;
// whole turns (Config.Turns) as the action Turns.Parser reads from the reply
// (action.KindTool or action.KindText).
//
// The engine Resets the collection's root env once and never steps it: every
// rollout works on a Fork. Each checkpoint keeps its own fork as a snapshot,
// and a branch from the checkpoint steps a fork of that snapshot, so an
// implementation must make Fork an independent copy. The engine never calls
// one Env from two goroutines at once, and it Closes every fork it made
// exactly once (the root env stays the caller's).
//
// Ownership: an action's TokenChunk.Tokens are the policy's result itself,
// shared with the tree's edge. Step may keep the slice (MathEnv keeps every
// chunk, and its forks share them) but must not write to it.
type Env interface {
	Reset(ctx context.Context) (Observation, error)
	Step(ctx context.Context, act action.Action) (Step, error)
	Fork(ctx context.Context) (Env, error)
	Close()
}

// StepForker is an Env that can also step and fork in one call: a remote env answers both
// in one round trip. StepFork steps; unless the step ends the episode it also returns a
// fork of the env as it is after the step (the checkpoint's snapshot). The engine calls it
// instead of Step when it will keep a snapshot of the step's node if the episode goes on.
type StepForker interface {
	StepFork(ctx context.Context, act action.Action) (Step, Env, error)
}

// Critic predicts the value of checkpoints from their context text, one
// value per context, in order (batched).
type Critic interface {
	Score(ctx context.Context, contexts []string) ([]float64, error)
}

// Codec turns token ids into display text and observation text into
// conditioning ids. backends/tokenizer.Tokenizer satisfies it (as does
// chat.Codec.Tokenizer()). The engine decodes with skipSpecial false and
// encodes with addSpecial false.
type Codec interface {
	Encode(text string, addSpecial bool) ([]uint32, error)
	Decode(ids []uint32, skipSpecial bool) (string, error)
}
