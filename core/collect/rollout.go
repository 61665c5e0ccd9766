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

// release closes the snapshot's env (if the engine made it) once; a nil snapshot is a
// no-op.
func (s *snapshot) release() {
	if s == nil {
		return
	}
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
	timedOut  bool        // the failure is a policy call past its deadline (a server that did not answer)
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

// stepError is a failed step of a rollout: the call that failed (what: "policy",
// "env: step", ...) and its error. An empty what means err already names the call
// (Result.Validate's "policy: response has ...").
type stepError struct {
	what string
	err  error
}

func stepFailed(what string, err error) *stepError { return &stepError{what: what, err: err} }

// path is where a rollout stands: the exact context so far and what it spent.
type path struct {
	// Appending never changes ids an earlier request was given, so a policy
	// may keep req.Tokens.
	prefix    []uint32
	generated int // generated policy tokens from the root
	depth     int // edges from the root
}

// rollout generates segments from l.start until done, truncation or
// failure. It reads only l and the engine's immutable settings.
func (e *engine) rollout(ctx context.Context, l *launch) (out outcome) {
	se := e.runSegments(ctx, l, &out)
	if se == nil {
		return out
	}
	out.discard()
	if se.what == "" {
		out.failure, out.cancelled = se.err.Error(), ctx.Err() != nil
		return out
	}
	out.failure, out.cancelled = e.failed(ctx, se.what, se.err)
	out.aborted = errors.Is(se.err, action.ErrAborted)
	out.timedOut = se.what == "policy" && status.CodeOf(se.err) == status.Timeout
	return out
}

// runSegments forks the checkpoint's env and appends one node (with its snapshot) per
// segment to out until the path ends, or returns the step that failed.
func (e *engine) runSegments(ctx context.Context, l *launch, out *outcome) *stepError {
	cfg := &e.cfg
	ectx, cancel := withTimeout(ctx, cfg.EnvTimeout)
	env, err := l.snap.fork(ectx)
	cancel()
	if err != nil {
		return stepFailed("env: fork", err)
	}
	defer env.Close()

	p := path{prefix: l.prefix, generated: l.generated, depth: l.depth}
	// Room for the segments a typical path still needs, without reserving
	// the whole T_max for every rollout.
	expect := min(cfg.MaxSegments-p.depth, (cfg.MaxTotalTokens-p.generated+cfg.Segments-1)/cfg.Segments, 8)
	out.nodes = make([]tree.Node, 0, expect)
	out.snaps = make([]*snapshot, 0, expect)
	for k := 0; ; k++ {
		node, snap, se := e.segment(ctx, l, env, &p, k)
		if se != nil {
			return se
		}
		out.nodes = append(out.nodes, node)
		out.snaps = append(out.snaps, snap)
		if node.Terminal() {
			return nil
		}
		p.prefix = append(p.prefix, node.Spans[0].Tokens...)
	}
}

// segment runs segment k of a rollout standing at p: generate, read the action, step the
// env, encode the observation, build the node, and keep the snapshot a later branch from
// the node forks (nil when none can). It advances p's counts past the new edge.
func (e *engine) segment(ctx context.Context, l *launch, env Env, p *path, k int) (tree.Node, *snapshot, *stepError) {
	cfg := &e.cfg
	res, se := e.generateSegment(ctx, l, p, k)
	if se != nil {
		return tree.Node{}, nil, se
	}
	act, text, se := e.readReply(res)
	if se != nil {
		return tree.Node{}, nil, se
	}

	// The node keeps a snapshot unless it ends the path; the truncation limits are
	// known now, so an env that can fork in its step call is asked to.
	n := len(res.Tokens)
	truncates := p.generated+n >= cfg.MaxTotalTokens || p.depth+1 >= cfg.MaxSegments
	wantSnap := !truncates && e.branchable(p.generated+n)
	step, snap, se := e.stepEnv(ctx, env, act, wantSnap)
	if se != nil {
		return tree.Node{}, nil, se
	}
	var obsTokens []uint32
	var obsText string
	var err error
	if e.turns != nil {
		obsTokens, obsText, err = e.turns.conditioning(res.Tokens, step)
	} else {
		obsTokens, obsText, err = e.observation(step.Observation)
	}
	if err != nil {
		snap.release()
		return tree.Node{}, nil, stepFailed("env: observation", err)
	}

	span, inexact := edgeSpan(res, obsTokens)
	p.generated += n
	p.depth++
	node := tree.Node{
		Spans: []tree.PackedSequence{span}, Reward: step.Reward, Text: text + obsText,
		Observation: obsText, Done: step.Done, SearchPass: l.pass, Inexact: inexact, WeightVersion: res.WeightVersion,
	}
	if !node.Done && (p.generated >= cfg.MaxTotalTokens || p.depth >= cfg.MaxSegments) {
		node.Truncated, node.Reward = true, cfg.Reward.TruncatedReward
	}
	snap, se = e.keepSnapshot(ctx, env, &node, p.generated, snap)
	return node, snap, se
}

// generateSegment asks the policy for segment k from p's prefix (max_tokens = min(L,
// T_max - generated), the segment's derived seed) and checks the response.
func (e *engine) generateSegment(ctx context.Context, l *launch, p *path, k int) (*generate.Result, *stepError) {
	cfg := &e.cfg
	// One allocation for both per-request values: a policy may keep the
	// request's pointers, so they are never reused.
	perRequest := &struct {
		maxTokens int
		seed      int64
	}{min(cfg.Segments, cfg.MaxTotalTokens-p.generated), segmentSeed(l.seed, cfg.ProblemID, k)}
	maxTokens := perRequest.maxTokens
	params := cfg.Sampling
	params.MaxTokens, params.Seed = &perRequest.maxTokens, &perRequest.seed

	pctx, cancel := withTimeout(ctx, cfg.PolicyTimeout)
	began := time.Now()
	res, err := e.policy.Generate(pctx, generate.Request{Tokens: p.prefix, Params: params, RoutingKey: cfg.RoutingKey, Tree: e.tree,
		SkipText: cfg.Codec != nil})
	e.policyNanos.Add(int64(time.Since(began)))
	cancel()
	if err != nil {
		return nil, stepFailed("policy", err)
	}
	if res == nil {
		return nil, stepFailed("policy", errors.New("returned no result and no error"))
	}
	if err := res.Validate("policy", maxTokens); err != nil {
		return nil, stepFailed("", err)
	}
	// A segment that generates nothing and does not finish leaves the rollout where it
	// was: asking again would loop, and keeping it would train on an empty edge.
	if len(res.Tokens) == 0 && res.StopReason == generate.StopReasonLength {
		return nil, stepFailed("policy", fmt.Errorf("the response has no tokens and finish reason %q (max_tokens was %d): "+
			"a segment that generates nothing without finishing cannot advance the rollout", res.StopReason, maxTokens))
	}
	// Counted once validated (a broken response's count means nothing),
	// whether or not the rollout later fails: the tokens were generated.
	e.prog.tokens.Add(int64(len(res.Tokens)))
	e.prog.segments.Add(1)
	return res, nil
}

// readReply reads the action off a checked response (the whole turn's parser, or the
// exact-token chunk) and the edge's display text (the codec's decoding when there is one).
func (e *engine) readReply(res *generate.Result) (act action.Action, text string, se *stepError) {
	var err error
	if e.turns != nil {
		if act, err = e.turns.turnAction(res.Tokens, res.StopReason); err != nil {
			return act, "", stepFailed("policy", err)
		}
	} else {
		// The chunk shares res.Tokens (Policy's and Env's ownership rule).
		chunk, err := action.ParseTokenChunk(action.Result{Tokens: res.Tokens, Text: res.Text, StopReason: res.StopReason})
		if err != nil {
			return act, "", stepFailed("policy", err)
		}
		act = action.Action{Kind: action.KindTokens, Chunk: &chunk}
	}
	text = res.Text
	if e.cfg.Codec != nil {
		if text, err = e.cfg.Codec.Decode(res.Tokens, false); err != nil {
			return act, "", stepFailed("policy: decode the generated tokens", err)
		}
	}
	return act, text, nil
}

// stepEnv steps env with act and checks the reward. With wantSnap an env that can step
// and fork in one call (StepForker) does, and the fork is returned as the new node's
// snapshot; on an error no snapshot is left behind.
func (e *engine) stepEnv(ctx context.Context, env Env, act action.Action, wantSnap bool) (Step, *snapshot, *stepError) {
	cfg := &e.cfg
	ectx, cancel := withTimeout(ctx, cfg.EnvTimeout)
	var step Step
	var snap *snapshot
	var err error
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
	var se *stepError
	switch {
	case err != nil:
		what := "env: step"
		if wantSnap && isStepForker {
			what = "env: step and fork"
		}
		se = stepFailed(what, err)
	case math.IsNaN(step.Reward) || math.IsInf(step.Reward, 0):
		se = stepFailed("env", fmt.Errorf("step reward %v is not finite", step.Reward))
	case step.Reward < cfg.Reward.RewardMin || step.Reward > cfg.Reward.RewardMax:
		se = stepFailed("env", fmt.Errorf("step reward %v is outside [reward_min, reward_max] = [%v, %v]",
			step.Reward, cfg.Reward.RewardMin, cfg.Reward.RewardMax))
	}
	if se != nil {
		snap.release()
		return Step{}, nil, se
	}
	return step, snap, nil
}

// edgeSpan is the new edge: the generated tokens (trainable, with their logprobs, unless
// the response is inexact) followed by the observation's conditioning tokens. Without
// observation tokens the edge is the result's own Tokens (and Logprobs, when exact), as
// Policy's ownership rule allows: no copy, capacity capped at the length so that nothing
// appended to the edge can write into the result's arrays.
func edgeSpan(res *generate.Result, obsTokens []uint32) (span tree.PackedSequence, inexact string) {
	n := len(res.Tokens)
	inexact = inexactReason(res)
	span.Trainable = make([]bool, n+len(obsTokens))
	if inexact == "" {
		for i := range n {
			span.Trainable[i] = true
		}
	}
	if len(obsTokens) == 0 && n > 0 {
		span.Tokens = res.Tokens[:n:n]
		if inexact == "" {
			span.Logprobs = res.Logprobs[:n:n]
		} else {
			span.Logprobs = make([]float64, n)
		}
		return span, inexact
	}
	span.Tokens = make([]uint32, n+len(obsTokens))
	span.Logprobs = make([]float64, n+len(obsTokens))
	copy(span.Tokens, res.Tokens)
	copy(span.Tokens[n:], obsTokens)
	if inexact == "" {
		copy(span.Logprobs, res.Logprobs)
	}
	return span, inexact
}

// keepSnapshot decides the new node's snapshot: none when the node ends its path or can
// never be branched from (a StepForker's fork is released), else the step's fork or, when
// the env made none, a fork made now.
func (e *engine) keepSnapshot(ctx context.Context, env Env, node *tree.Node, generated int, snap *snapshot) (*snapshot, *stepError) {
	switch {
	case node.Terminal() || !e.branchable(generated):
		snap.release() // a StepForker forked although the step ended the path
		return nil, nil
	case snap == nil:
		ectx, cancel := withTimeout(ctx, e.cfg.EnvTimeout)
		forked, err := env.Fork(ectx)
		cancel()
		if err != nil {
			return nil, stepFailed("env: fork", err)
		}
		return &snapshot{env: forked, owned: true}, nil
	}
	return snap, nil
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
