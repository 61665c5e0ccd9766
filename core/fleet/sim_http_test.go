package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/backends/sglang"
	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/mathenv"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/sim"
)

// The fleet against simulated SGLang servers over loopback HTTP: whole collections
// (core/collect) routed over two replicas.

// simFleet starts n simulated SGLang servers and an SGLang client for each.
func simFleet(t *testing.T, n int, cfg sim.Config) ([]*sim.Server, []Replica) {
	t.Helper()
	var servers []*sim.Server
	var reps []Replica
	for i := 0; i < n; i++ {
		srv, err := sim.Start(cfg)
		require.NoError(t, err)
		t.Cleanup(func() { srv.Close() })
		c, err := sglang.New(sglang.Config{BaseURL: srv.URL(),
			Retry: transport.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		servers = append(servers, srv)
		reps = append(reps, Replica{Name: srv.URL(), Policy: c})
	}
	return servers, reps
}

// byReplica wraps a replica and records which trees it served.
type byReplica struct {
	Policy
	mu    sync.Mutex
	trees map[uint64]int
	calls atomic.Int64
	// before, when set, runs before call number n (1-based) is sent.
	before func(n int64)
}

func (b *byReplica) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	n := b.calls.Add(1)
	if b.before != nil {
		b.before(n)
	}
	res, err := b.Policy.Generate(ctx, req)
	if err == nil {
		b.mu.Lock()
		b.trees[req.Tree]++
		b.mu.Unlock()
	}
	return res, err
}

func collectTree(t *testing.T, srv *sim.Server, policy collect.Policy, p sim.Problem, seed uint64) collect.Result {
	t.Helper()
	tk := srv.Tokenizer()
	prompt, err := tk.Encode(p.Prompt, false)
	require.NoError(t, err)
	decode := func(ids []uint32) (string, error) { return tk.Decode(ids, false) }
	cfg := collect.Config{ProblemID: p.ID, PromptTokens: prompt, Segments: 32,
		Sampling: generate.SamplingParams{Temperature: generate.Float64(1), Logprobs: generate.Int(0)},
		Search:   search.Selective(12, 6), Reward: prepare.DefaultRewardConfig(), Codec: tk}
	cfg.Search.Seed = seed
	res, err := collect.Run(context.Background(), cfg, policy, mathenv.New(p.Label, decode), nil)
	require.NoError(t, err)
	require.Empty(t, res.Failures)
	return res
}

// TestAffinityKeepsEachTreeOnOneReplica: over real HTTP to two simulated servers, every
// tree's requests reach one replica (the one that holds its prefix), and the trees are
// spread over both.
func TestAffinityKeepsEachTreeOnOneReplica(t *testing.T) {
	servers, reps := simFleet(t, 2, sim.Config{Seed: 1})
	var wrapped []*byReplica
	for i := range reps {
		w := &byReplica{Policy: reps[i].Policy, trees: map[uint64]int{}}
		wrapped = append(wrapped, w)
		reps[i].Policy, reps[i].Capacity = w, 64
	}
	f, err := New(Config{Replicas: reps})
	require.NoError(t, err)
	var wg sync.WaitGroup
	problems := sim.Problems()
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); collectTree(t, servers[0], f, problems[i%len(problems)], uint64(i)) }()
	}
	wg.Wait()
	seen := map[uint64]int{}
	for i, w := range wrapped {
		assert.NotEmpty(t, w.trees, "replica %d served no tree", i)
		for tree := range w.trees {
			seen[tree]++
		}
	}
	assert.Len(t, seen, 6)
	for tree, n := range seen {
		assert.Equal(t, 1, n, "tree %d was split over replicas", tree)
	}
	// Each replica's prefix cache served the branches of the trees it holds.
	for _, s := range servers {
		st := s.Stats()
		assert.Greater(t, st.CachedTokens, int64(0))
	}
}

// TestFailoverWhenAReplicaDiesMidTree: the replica serving the tree is shut down after a
// few requests (while others are in flight); its rollouts move to the other replica, the
// tree completes without a failed rollout, and the dead replica is reported down.
func TestFailoverWhenAReplicaDiesMidTree(t *testing.T) {
	servers, reps := simFleet(t, 2, sim.Config{Seed: 2})
	var wrapped []*byReplica
	var once sync.Once
	for i := range reps {
		w := &byReplica{Policy: reps[i].Policy, trees: map[uint64]int{}}
		wrapped = append(wrapped, w)
		reps[i].Policy = w
	}
	f, err := New(Config{Replicas: reps, Cooldown: time.Hour})
	require.NoError(t, err)
	// Whichever replica receives its 4th request dies just before sending it.
	for i, w := range wrapped {
		srv := servers[i]
		w.before = func(n int64) {
			if n == 4 {
				once.Do(func() { srv.Close() })
			}
		}
	}
	res := collectTree(t, servers[1], f, sim.Problems()[0], 5)
	require.NoError(t, res.Tree.Validate())
	assert.Equal(t, 12, res.Tree.Stats.Rollouts+res.Tree.Stats.BudgetUnspent)
	assert.GreaterOrEqual(t, res.Tree.Stats.Rollouts, 6, "every warmup rollout completed")
	l := f.Load()
	down, live := 0, -1
	for i, r := range l.Replicas {
		if r.Down {
			down++
			assert.Positive(t, r.Failed)
		} else {
			live = i
		}
	}
	require.Equal(t, 1, down, "%+v", l)
	assert.NotEmpty(t, wrapped[live].trees, "the tree moved to the live replica")
	assert.Zero(t, l.Replicas[live].Failed)
}
