package collect

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// abortAfter answers as the fake policy does for its first `after` calls and with an
// "abort" finish from then on (a trainer that aborted its rollout).
type abortAfter struct {
	*fakePolicy
	after int64
	n     atomic.Int64
}

func (p *abortAfter) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	if p.n.Add(1) > p.after {
		return &generate.Result{Tokens: []uint32{11}, Logprobs: []float64{-0.5}, StopReason: generate.StopReasonAbort, ExactGeneration: true}, nil
	}
	return p.fakePolicy.Generate(ctx, req)
}

// partialTree collects with every call after the first `after` aborted (StopOnAbort), as
// Slime's abort leaves a tree, and returns the tree so far.
func partialTree(t *testing.T, cfg Config, env Env, length int, after int64) *tree.Tree {
	t.Helper()
	cfg.StopOnAbort = true
	res, err := Run(context.Background(), cfg, &abortAfter{fakePolicy: newPolicy(length), after: after}, env, &fakeCritic{})
	require.Error(t, err)
	require.Equal(t, status.Collection, status.CodeOf(err), "%v", err)
	require.NotNil(t, res.Tree)
	return res.Tree
}

// kept is what a resume keeps of from: its nodes other than the failed ones, in order.
func kept(from *tree.Tree) []tree.Node {
	var out []tree.Node
	for _, nd := range from.Nodes[1:] {
		if nd.Failed == "" {
			out = append(out, nd)
		}
	}
	return out
}

func finishedRollouts(tr *tree.Tree, pass int) int {
	n := 0
	for _, nd := range tr.Nodes {
		if nd.Terminal() && nd.Failed == "" && (pass < 0 || nd.SearchPass == pass) {
			n++
		}
	}
	return n
}

func TestResumeKeepsTheTreeAndSpendsTheRest(t *testing.T) {
	const budget, warmup, length = 32, 8, 1024
	cfg := baseConfig(search.Selective(budget, warmup))
	// Each rollout is four 256-token segments: the warmup makes 32 calls, and every call
	// of round 1 is aborted, so the partial tree is exactly the warmup.
	env := newFakeEnv()
	from := partialTree(t, cfg, env, length, warmup*length/256)
	require.Equal(t, warmup, finishedRollouts(from, -1))
	fromJSON := marshalDeterministic(t, from)

	pol := newPolicy(length)
	res, err := Run(context.Background(), cfg, pol, env, &fakeCritic{}, WithResume(from))
	require.NoError(t, err)
	got := res.Tree
	assert.Equal(t, fromJSON, marshalDeterministic(t, from), "the tree resumed from is not changed")

	// The kept nodes come first, unchanged but for their off-policy mark; everything
	// after them is new.
	want := kept(from)
	require.Greater(t, len(got.Nodes), 1+len(want))
	for i, nd := range want {
		g := got.Nodes[1+i]
		assert.True(t, g.OffPolicy, "node %d", 1+i)
		g.OffPolicy, g.Children, nd.Children = false, nil, nil
		assert.Equal(t, nd, g, "node %d", 1+i)
	}
	for _, nd := range got.Nodes[1+len(want):] {
		assert.False(t, nd.OffPolicy, "node %d", nd.ID)
		assert.Greater(t, nd.SearchPass, 1, "node %d: rounds continue after the aborted round 1", nd.ID)
	}
	// The budget counts the kept rollouts: the whole tree has exactly B of them.
	st := got.Stats
	assert.Equal(t, budget, finishedRollouts(got, -1))
	assert.Equal(t, budget, st.Rollouts)
	assert.Equal(t, 0, st.BudgetUnspent)
	assert.Equal(t, 1, st.Resumes)
	assert.Equal(t, warmup, st.RolloutsResumed)
	assert.Equal(t, from.GeneratedTokens(), st.TokensResumed)
	assert.Equal(t, got.GeneratedTokens(), st.TokensResumed+st.GeneratedTokens, "the resume generated only the new nodes")
	assert.Equal(t, int64(len(got.Nodes)-1-len(want)), pol.calls.Load(), "one call per new node")
	assert.Positive(t, branchesFromKept(got, len(want)), "the search branched from kept checkpoints (replayed)")
	assert.Equal(t, env.stats.forks.Load(), env.stats.closes.Load(), "every fork, replays included, is closed")

	// The same partial tree resumes to the same tree, and the mark survives JSON.
	again, err := Run(context.Background(), cfg, newPolicy(length), env, &fakeCritic{}, WithResume(from))
	require.NoError(t, err)
	assert.Equal(t, marshalDeterministic(t, got), marshalDeterministic(t, again.Tree))
	data, err := tree.Marshal(got)
	require.NoError(t, err)
	back, err := tree.Unmarshal(data)
	require.NoError(t, err)
	assert.True(t, back.Nodes[1].OffPolicy)
}

// branchesFromKept counts the new rollouts that start at a kept checkpoint other than
// the root.
func branchesFromKept(tr *tree.Tree, kept int) int {
	n := 0
	for _, nd := range tr.Nodes[1+kept:] {
		if nd.Parent != 0 && tr.Nodes[nd.Parent].OffPolicy {
			n++
		}
	}
	return n
}

func TestResumeInWarmup(t *testing.T) {
	const budget, warmup = 8, 4
	cfg := baseConfig(search.Selective(budget, warmup))
	// The first 6 calls answer: some warmup rollouts finish, the others are aborted.
	from := partialTree(t, cfg, newFakeEnv(), 512, 6)
	keptWarm := finishedRollouts(from, 0)
	require.Less(t, keptWarm, warmup)
	res, err := Run(context.Background(), cfg, newPolicy(512), newFakeEnv(), &fakeCritic{}, WithResume(from))
	require.NoError(t, err)
	assert.Equal(t, warmup, finishedRollouts(res.Tree, 0), "the missing warmup rollouts run first")
	assert.Equal(t, budget, res.Tree.Stats.Rollouts)
	assert.Equal(t, keptWarm, res.Tree.Stats.RolloutsResumed)
	// No new warmup rollout repeats a kept one (their seeds come from a new block).
	seen := map[string]bool{}
	for _, nd := range res.Tree.Nodes[1:] {
		if nd.Parent == 0 {
			key := string(tokensOf(nd))
			assert.False(t, seen[key], "node %d repeats a warmup rollout", nd.ID)
			seen[key] = true
		}
	}
}

func tokensOf(nd tree.Node) []byte {
	var b []byte
	for _, id := range nd.Tokens() {
		b = append(b, byte(id))
	}
	return b
}

func TestResumeRefusesAnotherTree(t *testing.T) {
	cfg := baseConfig(search.Selective(8, 4))
	from := partialTree(t, cfg, newFakeEnv(), 512, 8)
	t.Run("another problem", func(t *testing.T) {
		other := cfg
		other.ProblemID = "p2"
		res, err := Run(context.Background(), other, newPolicy(512), newFakeEnv(), &fakeCritic{}, WithResume(from))
		require.Error(t, err)
		assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
		assert.Contains(t, err.Error(), `the tree is of problem "p1", this collection is of problem "p2"`)
		assert.Equal(t, 1, res.Tree.Len(), "nothing was collected")
	})
	t.Run("another root context", func(t *testing.T) {
		env := newFakeEnv()
		env.obs = Observation{Tokens: []uint32{7, 7}}
		_, err := Run(context.Background(), cfg, newPolicy(512), env, &fakeCritic{}, WithResume(from))
		require.Error(t, err)
		assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
		assert.Contains(t, err.Error(), "the tree's root context (8 tokens) differs from the one this collection starts from (10 tokens")
	})
	t.Run("more rollouts than the budget", func(t *testing.T) {
		small := baseConfig(search.Selective(3, 2))
		_, err := Run(context.Background(), small, newPolicy(512), newFakeEnv(), &fakeCritic{}, WithResume(from))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the tree has 4 finished rollouts, more than the budget of 3")
	})
}

func TestResumeFailsWhenTheEnvDoesNotReplay(t *testing.T) {
	const length = 1024
	cfg := baseConfig(search.Selective(32, 8))
	// An env whose observation after an unfinished chunk is the collection's epoch: a
	// later collection's env no longer answers what the tree holds.
	envAt := func(epoch uint32) *fakeEnv {
		env := newFakeEnv()
		env.step = func(e *fakeEnv, chunk *action.TokenChunk) (Step, error, bool) {
			if chunk.Finished {
				return Step{}, nil, false
			}
			return Step{Observation: Observation{Tokens: []uint32{epoch}}}, nil, true
		}
		return env
	}
	from := partialTree(t, cfg, envAt(1), length, 8*length/256)
	res, err := Run(context.Background(), cfg, newPolicy(length), envAt(1), &fakeCritic{}, WithResume(from))
	require.NoError(t, err, "the same env replays")
	assert.Equal(t, 32, res.Tree.Stats.Rollouts)
	assert.Positive(t, branchesFromKept(res.Tree, len(kept(from))))

	env := envAt(2)
	_, err = Run(context.Background(), cfg, newPolicy(length), env, &fakeCritic{}, WithResume(from))
	require.Error(t, err)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.Regexp(t, `collect: resume: the env did not replay node \d+: the step's observation \(1 tokens, ""\) differs from the tree's \(1 tokens`, err.Error())
	assert.Equal(t, env.stats.forks.Load(), env.stats.closes.Load())
}

// terminalLeaves lists the finished (not failed) leaves of tr.
func terminalLeaves(tr *tree.Tree) []int {
	var ids []int
	for id, nd := range tr.Nodes {
		if nd.Terminal() && nd.Failed == "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// A resume re-grades every kept finished rollout with its env: a reward edited in the
// saved tree is not kept, and an env that grades otherwise (another label) re-grades
// them all; checkpoints must still replay exactly.
func TestResumeRegradesTheKeptRollouts(t *testing.T) {
	const length = 512
	cfg := baseConfig(search.Selective(16, 8))
	from := partialTree(t, cfg, newFakeEnv(), length, 8*length/256)
	leaves := terminalLeaves(from)
	require.NotEmpty(t, leaves)

	t.Run("an edited reward", func(t *testing.T) {
		var edited tree.Tree
		require.NoError(t, json.Unmarshal(marshalDeterministic(t, from), &edited))
		leaf := leaves[0]
		edited.Nodes[leaf].Reward = 1 - from.Nodes[leaf].Reward
		res, err := Run(context.Background(), cfg, newPolicy(length), newFakeEnv(), &fakeCritic{}, WithResume(&edited))
		require.NoError(t, err)
		assert.Equal(t, 1, res.Tree.Stats.RewardsRegraded)
		got := terminalLeaves(res.Tree) // the kept leaves first, in their order
		for i, id := range leaves {
			assert.Equal(t, from.Nodes[id].Reward, res.Tree.Nodes[got[i]].Reward, "kept leaf %d has the env's reward", id)
		}
	})
	t.Run("another grader", func(t *testing.T) {
		flipped := newFakeEnv() // rewards 1 - parity: another label's grading
		flipped.step = func(e *fakeEnv, chunk *action.TokenChunk) (Step, error, bool) {
			if !chunk.Finished {
				return Step{}, nil, false
			}
			return Step{Reward: float64(1 - chunk.Tokens[len(chunk.Tokens)-1]%2), Done: true}, nil, true
		}
		res, err := Run(context.Background(), cfg, newPolicy(length), flipped, &fakeCritic{}, WithResume(from))
		require.NoError(t, err)
		assert.Equal(t, len(leaves), res.Tree.Stats.RewardsRegraded)
		for _, id := range terminalLeaves(res.Tree) {
			nd := res.Tree.Nodes[id]
			last := nd.Tokens()[len(nd.Tokens())-1]
			assert.Equal(t, float64(1-last%2), nd.Reward, "node %d (off-policy %t) is graded by this env", id, nd.OffPolicy)
		}
	})
	t.Run("the same env", func(t *testing.T) {
		res, err := Run(context.Background(), cfg, newPolicy(length), newFakeEnv(), &fakeCritic{}, WithResume(from))
		require.NoError(t, err)
		assert.Zero(t, res.Tree.Stats.RewardsRegraded)
	})
}

// The segment rule is part of the saved tree: a resume with another is refused naming
// both, and so is a tree that records none.
func TestResumeRefusesAnotherSegmentRule(t *testing.T) {
	cfg := baseConfig(search.Selective(8, 4))
	cfg.Segments = 16
	from := partialTree(t, cfg, newFakeEnv(), 64, 8)
	assert.Equal(t, "Segments(16)", from.Stats.SegmentRule)
	for _, segments := range []int{8, 64} {
		other := cfg
		other.Segments = segments
		_, err := Run(context.Background(), other, newPolicy(64), newFakeEnv(), &fakeCritic{}, WithResume(from))
		require.Error(t, err)
		assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
		assert.Contains(t, err.Error(), fmt.Sprintf("the tree's edges were cut by Segments(16), this collection cuts by Segments(%d)", segments))
	}
	var unruled tree.Tree
	require.NoError(t, json.Unmarshal(marshalDeterministic(t, from), &unruled))
	unruled.Stats.SegmentRule = ""
	_, err := Run(context.Background(), cfg, newPolicy(64), newFakeEnv(), &fakeCritic{}, WithResume(&unruled))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the tree records no segment rule (stats.segment_rule)")
}

// A tree whose every node failed keeps nothing to resume: refused, not a fresh tree.
func TestResumeRefusesATreeThatKeepsNothing(t *testing.T) {
	cfg := baseConfig(search.Selective(8, 4))
	from := partialTree(t, cfg, newFakeEnv(), 512, 0) // the first call is aborted
	require.Greater(t, from.Len(), 1)
	require.Empty(t, kept(from))
	res, err := Run(context.Background(), cfg, newPolicy(512), newFakeEnv(), &fakeCritic{}, WithResume(from))
	require.Error(t, err)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.Contains(t, err.Error(), "the tree keeps nothing")
	assert.Equal(t, 1, res.Tree.Len())
}
