package collect

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// snapshot is a checkpoint's env state. It is only ever forked, never
// stepped; the mutex serialises forks so an Env needs no locking of its own.
type snapshot struct {
	mu     sync.Mutex
	env    Env
	closed bool
	owned  bool // a fork the engine made (the root env stays the caller's)
}

func (s *snapshot) fork(ctx context.Context) (Env, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, status.Errorf(status.Internal, "snapshot was already released")
	}
	return s.env.Fork(ctx)
}

func (s *snapshot) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.owned {
		s.env.Close()
	}
}

// launch is one budget unit: a rollout from a checkpoint.
type launch struct {
	start   int    // checkpoint id
	pass    int    // search pass: 0 warmup, t for round t
	seed    uint64 // rollout seed
	attempt int    // 0 for the first try, k for the k-th retry
	base    uint64 // the first try's seed, from which retry seeds derive

	// Read off the tree before the round starts (it does not change while
	// rollouts run).
	prefix    []uint32 // the checkpoint's exact context, with room to grow
	generated int      // generated tokens on the path to the checkpoint
	depth     int
	snap      *snapshot
}

// outcome is what one rollout produced, built without touching the tree.
type outcome struct {
	nodes     []tree.Node
	snaps     []*snapshot // aligned with nodes; nil where no snapshot was kept
	failure   string      // "" = completed
	aborted   bool        // the failure is a generation the server aborted
	cancelled bool
	panicked  string // a recovered panic (a bug in a collaborator or the engine)
}

// discard releases the snapshots of an outcome that will not enter the tree.
func (o *outcome) discard() {
	for _, s := range o.snaps {
		if s != nil {
			s.release()
		}
	}
	o.nodes, o.snaps = nil, nil
}

// segmentSeed is the sampler seed of segment k of a rollout: 31 bits of
// H(rollout seed, problem id, "segment", k), small enough for every backend.
func segmentSeed(rolloutSeed uint64, problemID string, k int) int64 {
	return int64(search.Hash(rolloutSeed, problemID, "segment", k) >> 33)
}

// retrySeed is the rollout seed of retry `attempt` of a launch.
func retrySeed(base uint64, problemID string, attempt int) uint64 {
	return search.Hash(base, problemID, "retry", attempt)
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return ctx, func() {}
}

// failed builds the message of a failed call; cancelled reports that the
// collection itself was cancelled (not a failure).
func (e *engine) failed(ctx context.Context, what string, err error) (msg string, cancelled bool) {
	if ctx.Err() != nil {
		return "", true
	}
	return what + ": " + err.Error(), false
}

// rollout generates segments from l.start until done, truncation or
// failure. It reads only l and the engine's immutable settings.
func (e *engine) rollout(ctx context.Context, l *launch) (out outcome) {
	cfg := &e.cfg
	fail := func(what string, err error) outcome {
		out.discard()
		out.failure, out.cancelled = e.failed(ctx, what, err)
		out.aborted = errors.Is(err, action.ErrAborted)
		return out
	}
	// Result.Validate already names the policy: "policy: response has ...".
	failValidate := func(err error) outcome {
		out.discard()
		out.failure, out.cancelled = err.Error(), ctx.Err() != nil
		return out
	}
	ectx, cancel := withTimeout(ctx, cfg.EnvTimeout)
	env, err := l.snap.fork(ectx)
	cancel()
	if err != nil {
		return fail("env: fork", err)
	}
	defer env.Close()

	// Appending never changes ids an earlier request was given, so a policy
	// may keep req.Tokens.
	prefix := l.prefix
	generated, depth := l.generated, l.depth
	// Room for the segments a typical path still needs, without reserving
	// the whole T_max for every rollout.
	expect := min(cfg.MaxSegments-depth, (cfg.MaxTotalTokens-generated+cfg.Segments-1)/cfg.Segments, 8)
	out.nodes = make([]tree.Node, 0, expect)
	out.snaps = make([]*snapshot, 0, expect)
	for k := 0; ; k++ {
		// One allocation for both per-request values: a policy may keep the
		// request's pointers, so they are never reused.
		perRequest := &struct {
			maxTokens int
			seed      int64
		}{min(cfg.Segments, cfg.MaxTotalTokens-generated), segmentSeed(l.seed, cfg.ProblemID, k)}
		maxTokens := perRequest.maxTokens
		params := cfg.Sampling
		params.MaxTokens, params.Seed = &perRequest.maxTokens, &perRequest.seed

		pctx, cancel := withTimeout(ctx, cfg.PolicyTimeout)
		began := time.Now()
		res, err := e.policy.Generate(pctx, generate.Request{Tokens: prefix, Params: params, RoutingKey: cfg.RoutingKey})
		e.policyNanos.Add(int64(time.Since(began)))
		cancel()
		if err != nil {
			return fail("policy", err)
		}
		if res == nil {
			return fail("policy", errors.New("returned no result and no error"))
		}
		if err := res.Validate("policy", maxTokens); err != nil {
			return failValidate(err)
		}
		// Counted once validated (a broken response's count means nothing),
		// whether or not the rollout later fails: the tokens were generated.
		e.generatedTokens.Add(int64(len(res.Tokens)))
		var act action.Action
		if e.turns != nil {
			if act, err = e.turns.turnAction(res.Tokens, res.StopReason); err != nil {
				return fail("policy", err)
			}
		} else {
			chunk, err := action.ParseTokenChunk(action.Result{Tokens: res.Tokens, Text: res.Text, StopReason: res.StopReason})
			if err != nil {
				return fail("policy", err)
			}
			act = action.Action{Kind: action.KindTokens, Chunk: &chunk}
		}
		text := res.Text
		if cfg.Codec != nil {
			if text, err = cfg.Codec.Decode(res.Tokens, false); err != nil {
				return fail("policy: decode the generated tokens", err)
			}
		}

		// The node keeps a snapshot unless it ends the path; the truncation limits are
		// known now, so an env that can fork in its step call is asked to.
		n := len(res.Tokens)
		truncates := generated+n >= cfg.MaxTotalTokens || depth+1 >= cfg.MaxSegments
		wantSnap := !truncates && e.branchable(generated+n)
		ectx, cancel := withTimeout(ctx, cfg.EnvTimeout)
		var step Step
		var snap *snapshot
		sf, isStepForker := env.(StepForker)
		if isStepForker && wantSnap {
			var twin Env
			step, twin, err = sf.StepFork(ectx, act)
			if twin != nil {
				snap = &snapshot{env: twin, owned: true}
			}
		} else {
			step, err = env.Step(ectx, act)
		}
		cancel()
		// From here a failure also releases the snapshot the step made.
		failStepped := func(what string, err error) outcome {
			if snap != nil {
				snap.release()
			}
			return fail(what, err)
		}
		if err != nil {
			what := "env: step"
			if wantSnap && isStepForker {
				what = "env: step and fork"
			}
			return failStepped(what, err)
		}
		if math.IsNaN(step.Reward) || math.IsInf(step.Reward, 0) {
			return failStepped("env", fmt.Errorf("step reward %v is not finite", step.Reward))
		}
		if step.Reward < cfg.Reward.RewardMin || step.Reward > cfg.Reward.RewardMax {
			return failStepped("env", fmt.Errorf("step reward %v is outside [reward_min, reward_max] = [%v, %v]",
				step.Reward, cfg.Reward.RewardMin, cfg.Reward.RewardMax))
		}
		var obsTokens []uint32
		var obsText string
		if e.turns != nil {
			obsTokens, obsText, err = e.turns.conditioning(res.Tokens, step)
		} else {
			obsTokens, obsText, err = e.observation(step.Observation)
		}
		if err != nil {
			return failStepped("env: observation", err)
		}

		span := tree.PackedSequence{
			Tokens:    make([]uint32, n+len(obsTokens)),
			Trainable: make([]bool, n+len(obsTokens)),
			Logprobs:  make([]float64, n+len(obsTokens)),
		}
		copy(span.Tokens, res.Tokens)
		copy(span.Tokens[n:], obsTokens)
		inexact := inexactReason(res)
		if inexact == "" {
			copy(span.Logprobs, res.Logprobs)
			for i := range n {
				span.Trainable[i] = true
			}
		}
		generated += n
		depth++
		node := tree.Node{
			Spans: []tree.PackedSequence{span}, Reward: step.Reward, Text: text + obsText,
			Observation: obsText, Done: step.Done, SearchPass: l.pass, Inexact: inexact,
		}
		if !node.Done && (generated >= cfg.MaxTotalTokens || depth >= cfg.MaxSegments) {
			node.Truncated, node.Reward = true, cfg.Reward.TruncatedReward
		}
		switch {
		case node.Terminal() || !e.branchable(generated):
			if snap != nil {
				snap.release() // a StepForker forked although the step ended the path
				snap = nil
			}
		case snap == nil:
			ectx, cancel := withTimeout(ctx, cfg.EnvTimeout)
			forked, err := env.Fork(ectx)
			cancel()
			if err != nil {
				return fail("env: fork", err)
			}
			snap = &snapshot{env: forked, owned: true}
		}
		out.nodes = append(out.nodes, node)
		out.snaps = append(out.snaps, snap)
		if node.Terminal() {
			return out
		}
		prefix = append(prefix, span.Tokens...)
	}
}

// inexactReason says why res cannot train the actor ("" when it can): its ids are not
// the ones the model sampled, or a generated token has no finite behaviour logprob
// (SGLang's null, vLLM's -9999 floor, a policy's -inf). The edge then keeps its tokens as
// conditioning (tree.Node.Inexact).
func inexactReason(res *generate.Result) string {
	if !res.ExactGeneration {
		return "the policy's response is not token-exact (exact=False or exact_generation=False): " +
			"actor training needs a backend that preserves exact token ids"
	}
	if n, first := res.NonFiniteLogprobs(); n > 0 {
		return fmt.Sprintf("the server gave no finite logprob for %d of %d generated tokens (first: token %d, id %d, logprob %v): "+
			"actor training needs the behaviour logprob of every token", n, len(res.Tokens), first, res.Tokens[first], res.Logprobs[first])
	}
	return ""
}

// branchable reports whether a checkpoint with this many generated tokens on
// its path could ever be a branch candidate, i.e. whether it needs an env
// snapshot.
func (e *engine) branchable(generated int) bool {
	return !e.cfg.Search.Independent && e.cfg.MaxTotalTokens-generated >= e.minRemaining
}

// observation turns an env observation into conditioning tokens and text.
func (e *engine) observation(o Observation) ([]uint32, string, error) {
	switch {
	case len(o.Messages) > 0 && o.Tokens == nil:
		return nil, "", fmt.Errorf("has %d chat messages, which need the whole-turn chat context (Agent(context=None)); exact-token segments take text or tokens", len(o.Messages))
	case o.Tokens != nil:
		text := o.Text
		if text == "" && len(o.Tokens) > 0 && e.cfg.Codec != nil {
			var err error
			if text, err = e.cfg.Codec.Decode(o.Tokens, false); err != nil {
				return nil, "", err
			}
		}
		return o.Tokens, text, nil
	case o.Text == "":
		return nil, "", nil
	case e.cfg.Codec == nil:
		return nil, "", fmt.Errorf("has text (%d bytes) but no tokens, and the collection has no codec to encode it", len(o.Text))
	}
	ids, err := e.cfg.Codec.Encode(o.Text, false)
	if err != nil {
		return nil, "", err
	}
	return ids, o.Text, nil
}
