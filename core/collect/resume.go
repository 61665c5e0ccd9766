package collect

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// WithResume has Run continue an earlier collection of the same problem from its
// partial tree (one that was aborted or cancelled, as Run returns it with its error)
// instead of starting from an empty tree. from is read, never changed.
//
// The tree must be of the same problem (ProblemID), its root context must be the one
// Run builds now (PromptTokens and the env's reset observation), its edges must have
// been cut by the same segment rule (tree.Stats.SegmentRule: Segments, and Turns or
// not), and it must keep at least one node besides the root; otherwise Run returns
// status.InvalidArgument naming what differs. Its failed nodes (the aborted
// rollout, failures) are dropped and their budget refunded; every other node is kept,
// renumbered in its id order, and marked tree.Node.OffPolicy (generated under an
// older policy). Each finished rollout kept counts as one spent budget unit (more
// than the budget is an error). The warmup rollouts still missing run first, with
// seeds of warmup indices no earlier collection of the tree used; then branching
// rounds continue after the tree's highest search pass, with the same planning rule
// as ever. Stats counts what was kept (Resumes, RolloutsResumed, TokensResumed).
//
// Before anything runs, every kept path is replayed on forks of the freshly reset env
// (each edge's action read as the engine read it, then stepped), one step per kept
// node: each checkpoint's step must give back the reward, done flag and observation
// the tree holds, and each finished leaf takes the reward the env gives it now (a
// truncated one the configured TruncatedReward); Stats.RewardsRegraded counts the
// rewards that changed. So a reward edited in the saved tree, or graded by another
// label, is never kept. A replayed step that differs ends Run with a
// status.InvalidArgument error "the env did not replay node N: ...", never a silently
// different tree. A kept checkpoint has no env snapshot: the first time the search
// branches from one, Run rebuilds it the same way. A deterministic env (MathEnv)
// replays trivially; a tool env runs its tool calls again. An inexact edge (no exact
// token ids) cannot be replayed, so a tree that keeps one is refused.
func WithResume(from *tree.Tree) Option {
	return func(o *options) { o.resume = from }
}

// resumed is where a resumed collection continues.
type resumed struct {
	firstWarmup int // the warmup index of the first warmup rollout still to launch
	warmup      int // the warmup rollouts still to launch (indices firstWarmup, firstWarmup+1, ...)
	firstRound  int // the first branching round
}

// adopt copies from's kept nodes into the new tree (whose root is built) and counts
// them as spent; see WithResume.
func (e *engine) adopt(ctx context.Context, from *tree.Tree, env Env) (resumed, error) {
	cfg := &e.cfg
	if from.ProblemID != cfg.ProblemID {
		return resumed{}, status.Errorf(status.InvalidArgument, "collect: resume: the tree is of problem %q, this collection is of problem %q", from.ProblemID, cfg.ProblemID)
	}
	if err := from.Revalidate(); err != nil {
		return resumed{}, status.Wrap(status.InvalidArgument, err, "collect: resume")
	}
	switch rule := e.t.Stats.SegmentRule; from.Stats.SegmentRule {
	case rule:
	case "":
		return resumed{}, status.Errorf(status.InvalidArgument,
			"collect: resume: the tree records no segment rule (stats.segment_rule), so its edges cannot be checked against %s; start a new collection instead", rule)
	default:
		return resumed{}, status.Errorf(status.InvalidArgument,
			"collect: resume: the tree's edges were cut by %s, this collection cuts by %s; resume it with %s, or start a new collection",
			from.Stats.SegmentRule, rule, from.Stats.SegmentRule)
	}
	was, now := from.ContextTokens(0), e.t.ContextTokens(0)
	if !slices.Equal(was, now) {
		at := 0
		for at < min(len(was), len(now)) && was[at] == now[at] {
			at++
		}
		return resumed{}, status.Errorf(status.InvalidArgument,
			"collect: resume: the tree's root context (%d tokens) differs from the one this collection starts from "+
				"(%d tokens: the prompt and the env's reset observation) at token %d", len(was), len(now), at)
	}
	ids := make([]int, len(from.Nodes)) // from's id -> the new id; -1 = dropped
	kept, warm, tokens, lastPass := 0, 0, 0, 0
	for id := 1; id < len(from.Nodes); id++ {
		nd := from.Nodes[id]
		lastPass = max(lastPass, nd.SearchPass)
		if nd.Parent >= id {
			return resumed{}, status.Errorf(status.InvalidArgument, "collect: resume: node %d comes before its parent %d; a collected tree lists parents first", id, nd.Parent)
		}
		if nd.Failed != "" || ids[nd.Parent] < 0 {
			ids[id] = -1
			continue
		}
		nd.OffPolicy = true
		if nd.Critic != nil {
			v := *nd.Critic
			nd.Critic = &v
		}
		newID, err := e.addChild(ids[nd.Parent], nd, nil)
		if err != nil {
			return resumed{}, err
		}
		ids[id] = newID
		e.scored[newID] = nd.Critic != nil
		tokens += e.t.Nodes[newID].GeneratedTokens()
		if nd.Terminal() {
			kept++
			if nd.SearchPass == 0 {
				warm++
			}
		}
	}
	if len(e.t.Nodes) == 1 {
		return resumed{}, status.Errorf(status.InvalidArgument,
			"collect: resume: the tree keeps nothing: %d of its %d nodes besides the root failed or lie under a failed node, and a resume drops them; start a new collection instead",
			len(from.Nodes)-1, len(from.Nodes)-1)
	}
	if kept > cfg.Search.Budget {
		return resumed{}, status.Errorf(status.InvalidArgument, "collect: resume: the tree has %d finished rollouts, more than the budget of %d", kept, cfg.Search.Budget)
	}
	e.spent, e.rollouts = kept, kept
	e.prog.launched.Add(int64(kept))
	e.prog.finished.Add(int64(kept))
	st := &e.t.Stats
	st.Resumes = from.Stats.Resumes + 1
	st.RolloutsResumed, st.TokensResumed = kept, tokens
	// The reset env, never stepped: replays fork it (the root's own snapshot is released
	// once the root stops being a candidate).
	e.base = &snapshot{env: env}
	if err := e.regrade(ctx); err != nil {
		return resumed{}, err
	}

	// Each collection of the tree (the first, then each resume) launches at most W
	// warmup rollouts, from its own block of indices, so no seed of a kept rollout is
	// used again. Once a branching round ran, the warmup is over.
	var next resumed
	next.firstRound = lastPass + 1
	if lastPass == 0 {
		next.firstWarmup, next.warmup = st.Resumes*cfg.Search.Warmup, max(cfg.Search.Warmup-warm, 0)
	}
	return next, nil
}

// restore rebuilds the env snapshot of a kept checkpoint by replaying its path from the
// nearest ancestor that still has one (the reset env at worst).
func (e *engine) restore(ctx context.Context, id int) error {
	if s := e.snaps[id]; s != nil && !s.closed {
		return nil
	}
	var path []int
	from := e.base
	for n := id; n > 0; n = e.t.Nodes[n].Parent {
		if s := e.snaps[n]; s != nil && !s.closed {
			from = s
			break
		}
		path = append(path, n)
	}
	slices.Reverse(path)
	ectx, cancel := withTimeout(ctx, e.cfg.EnvTimeout)
	env, err := from.fork(ectx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return e.cancelled(ctx)
		}
		return status.Wrap(status.CodeOf(err), err, "collect: resume: fork the env to replay node %d", id)
	}
	generated := 0 // on the path to the first node replayed
	if len(path) > 0 {
		generated = e.t.PathGeneratedTokens(e.t.Nodes[path[0]].Parent)
	}
	for _, n := range path {
		g, err := e.replayStep(ctx, env, n, generated, false)
		if err != nil {
			env.Close()
			if ctx.Err() != nil {
				return e.cancelled(ctx)
			}
			return status.Wrap(status.InvalidArgument, err, "collect: resume: the env did not replay node %d", n)
		}
		generated += g
	}
	e.snaps[id] = &snapshot{env: env, owned: true}
	return nil
}

// regrade replays every kept path on forks of the reset env (one step per kept node): each
// checkpoint must replay exactly (replayStep), and each finished leaf takes the reward the
// env gives it now, so a kept reward is never one this env did not grade. Stats counts
// the rewards that changed.
func (e *engine) regrade(ctx context.Context) error {
	ectx, cancel := withTimeout(ctx, e.cfg.EnvTimeout)
	env, err := e.base.fork(ectx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return e.cancelled(ctx)
		}
		return status.Wrap(status.CodeOf(err), err, "collect: resume: fork the env to re-grade the kept rollouts")
	}
	defer env.Close()
	return e.regradeBelow(ctx, env, 0, 0)
}

// regradeBelow replays the kept subtree under node id, whose state env holds (with
// generated tokens on the path to it); the last child steps env itself, the others a fork.
func (e *engine) regradeBelow(ctx context.Context, env Env, id, generated int) error {
	kids := e.t.Nodes[id].Children
	for i, c := range kids {
		child := env
		if i < len(kids)-1 {
			ectx, cancel := withTimeout(ctx, e.cfg.EnvTimeout)
			forked, err := env.Fork(ectx)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return e.cancelled(ctx)
				}
				return status.Wrap(status.CodeOf(err), err, "collect: resume: fork the env to re-grade node %d", c)
			}
			child = forked
		}
		err := e.regradeNode(ctx, child, c, generated)
		if child != env {
			child.Close()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (e *engine) regradeNode(ctx context.Context, env Env, id, generated int) error {
	g, err := e.replayStep(ctx, env, id, generated, true)
	if err != nil {
		if ctx.Err() != nil {
			return e.cancelled(ctx)
		}
		return status.Wrap(status.InvalidArgument, err, "collect: resume: the env did not replay node %d", id)
	}
	if e.t.Nodes[id].Terminal() {
		return nil
	}
	return e.regradeBelow(ctx, env, id, generated+g)
}

// replayStep steps env with node id's edge, read as the engine read it when it
// generated it, and checks that the env gives back what the tree holds. It returns
// the edge's generated tokens. With regrade, a finished leaf's reward is not checked but
// replaced: a done leaf takes the step's reward (finite, within the reward range), a
// truncated one the configured truncated reward.
func (e *engine) replayStep(ctx context.Context, env Env, id, generated int, regrade bool) (int, error) {
	nd := &e.t.Nodes[id]
	if nd.Inexact != "" {
		return 0, fmt.Errorf("its edge is inexact (%s), so its generated tokens are not known apart from its observation", nd.Inexact)
	}
	n, _ := e.t.EdgeTrainable(id)
	tokens := nd.Tokens()
	reply, want := tokens[:n], tokens[n:]
	// The finish is not stored: a reply shorter than its max_tokens stopped; one that
	// filled it stopped if it ended its path done (a finished answer exactly at the
	// limit), else it ran to the length limit. A wrong guess shows as a step that
	// differs, never as a different tree.
	stop := generate.StopReasonLength
	if n < min(e.cfg.Segments, e.cfg.MaxTotalTokens-generated) || nd.Done {
		stop = generate.StopReasonStop
	}
	var act action.Action
	if e.turns != nil {
		var err error
		if act, err = e.turns.turnAction(reply, stop); err != nil {
			return 0, fmt.Errorf("read the turn: %w", err)
		}
	} else {
		act = action.Action{Kind: action.KindTokens, Chunk: &action.TokenChunk{Tokens: reply, Finished: stop == generate.StopReasonStop}}
	}
	ectx, cancel := withTimeout(ctx, e.cfg.EnvTimeout)
	step, err := env.Step(ectx, act)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("env: step: %w", err)
	}
	var obsTokens []uint32
	var obsText string
	if e.turns != nil {
		obsTokens, obsText, err = e.turns.conditioning(reply, step)
	} else {
		obsTokens, obsText, err = e.observation(step.Observation)
	}
	graded := regrade && nd.Terminal()
	switch {
	case err != nil:
		return 0, fmt.Errorf("env: observation: %w", err)
	case graded && nd.Done && (math.IsNaN(step.Reward) || math.IsInf(step.Reward, 0) ||
		step.Reward < e.cfg.Reward.RewardMin || step.Reward > e.cfg.Reward.RewardMax):
		return 0, fmt.Errorf("the step's reward %v is not a finite value in [reward_min, reward_max] = [%v, %v]",
			step.Reward, e.cfg.Reward.RewardMin, e.cfg.Reward.RewardMax)
	case !graded && step.Reward != nd.Reward:
		return 0, fmt.Errorf("the step's reward is %v, the tree's %v", step.Reward, nd.Reward)
	case step.Done != nd.Done:
		return 0, fmt.Errorf("the step's done is %t, the tree's %t", step.Done, nd.Done)
	case !slices.Equal(obsTokens, want) || obsText != nd.Observation:
		return 0, fmt.Errorf("the step's observation (%d tokens, %.60q) differs from the tree's (%d tokens, %.60q)", len(obsTokens), obsText, len(want), nd.Observation)
	}
	if graded {
		r := step.Reward
		if nd.Truncated {
			r = e.cfg.Reward.TruncatedReward
		}
		if r != nd.Reward {
			nd.Reward = r
			e.t.Stats.RewardsRegraded++
		}
	}
	return n, nil
}
