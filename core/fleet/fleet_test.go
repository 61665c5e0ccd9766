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
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/sim"
)

// gated is a fake replica whose calls block until released, recording their order.
type gated struct {
	mu      sync.Mutex
	started []uint64
	release chan struct{}
	now     atomic.Int64
	peak    atomic.Int64
}

func newGated() *gated { return &gated{release: make(chan struct{})} }

func (g *gated) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	g.mu.Lock()
	g.started = append(g.started, req.Tree)
	g.mu.Unlock()
	n := g.now.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	defer g.now.Add(-1)
	select {
	case <-g.release:
		return &generate.Result{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (g *gated) order() []uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]uint64(nil), g.started...)
}

// waitFor polls a condition (never a timing assertion: it only waits for the state).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 20000; i++ {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("never reached: %s", what)
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no replicas", Config{}},
		{"nil policy", Config{Replicas: []Replica{{Name: "a"}}}},
		{"negative capacity", Config{Replicas: []Replica{{Name: "a", Policy: newGated(), Capacity: -1}}}},
		{"unknown routing", Config{Replicas: []Replica{{Name: "a", Policy: newGated()}}, Routing: "random"}},
		{"negative limit", Config{Replicas: []Replica{{Name: "a", Policy: newGated()}}, Limit: -2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err), "%v", err)
		})
	}
}

// TestSlotsAreFIFOAndCapped: with capacity 2, requests beyond it wait and are granted in
// arrival order (no tree starves behind later ones), and never more than 2 run at once.
func TestSlotsAreFIFOAndCapped(t *testing.T) {
	g := newGated()
	f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: g, Capacity: 2}}})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for tree := uint64(1); tree <= 6; tree++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.Generate(context.Background(), generate.Request{Tree: tree})
			assert.NoError(t, err)
		}()
		// Each request is in place (running or queued) before the next arrives.
		want := int(tree)
		waitFor(t, "request queued", func() bool { l := f.Load(); return l.InFlight+l.Queued == want })
	}
	assert.Equal(t, 2, f.Load().InFlight)
	assert.Equal(t, 4, f.Load().Queued)
	waitFor(t, "two running", func() bool { return len(g.order()) == 2 })
	for i := 0; i < 6; i++ {
		g.release <- struct{}{}
		// The freed slot goes to the oldest waiting request; it starts before the next ends.
		want := min(i+3, 6)
		waitFor(t, "next request started", func() bool { return len(g.order()) == want })
	}
	wg.Wait()
	assert.Equal(t, []uint64{1, 2, 3, 4, 5, 6}, g.order())
	assert.Equal(t, int64(2), g.peak.Load())
	l := f.Load()
	assert.Equal(t, 0, l.InFlight+l.Queued)
	assert.Equal(t, 2, l.PeakInFlight)
}

// TestCancelFreesEverything: requests cancelled while running or waiting, and tickets
// cancelled while waiting or released unused, leave no slot, queue entry or reservation.
func TestCancelFreesEverything(t *testing.T) {
	g := newGated()
	f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: g, Capacity: 3}}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for tree := uint64(1); tree <= 8; tree++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.Generate(ctx, generate.Request{Tree: tree})
			errs <- err
		}()
	}
	waitFor(t, "3 running, 5 queued", func() bool { l := f.Load(); return l.InFlight == 3 && l.Queued == 5 })
	admitted := make(chan error, 1)
	go func() { _, err := f.Admit(ctx, 4); admitted <- err }()
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.Contains(t, []status.Code{status.Cancelled}, status.CodeOf(err), "%v", err)
	}
	assert.Equal(t, status.Cancelled, status.CodeOf(<-admitted))
	l := f.Load()
	assert.Equal(t, Load{Capacity: 3, PeakInFlight: 3, Routing: Affinity,
		Replicas: []ReplicaLoad{{Name: "a", Capacity: 3, Failed: 3}}}, l)

	tk, err := f.Admit(context.Background(), 5)
	require.NoError(t, err)
	assert.Equal(t, 5, f.Load().Reserved)
	tk.Release()
	tk.Release()
	assert.Equal(t, 0, f.Load().Reserved)
}

// TestAdmitWaitsForDemandBelowCapacity: a ticket reserves its tree's first burst until the
// tree's requests arrive; further trees are admitted only once in-flight + queued +
// reserved is below the capacity again.
func TestAdmitWaitsForDemandBelowCapacity(t *testing.T) {
	g := newGated()
	f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: g, Capacity: 4}}})
	require.NoError(t, err)
	ctx := context.Background()
	t1, err := f.Admit(ctx, 4)
	require.NoError(t, err)
	second := make(chan *Ticket, 1)
	go func() {
		tk, err := f.Admit(ctx, 4)
		assert.NoError(t, err)
		second <- tk
	}()
	// Tree 7 takes ticket 1's reservation as its requests arrive: demand stays 4.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); f.Generate(ctx, generate.Request{Tree: 7}) }()
	}
	waitFor(t, "tree 7 running", func() bool { return f.Load().InFlight == 4 })
	assert.Equal(t, 0, f.Load().Reserved)
	assert.Empty(t, second, "admitted while the server is full")
	g.release <- struct{}{} // one of tree 7's requests ends: demand 3 < 4
	t2 := <-second
	assert.Equal(t, 4, f.Load().Reserved)
	for i := 0; i < 3; i++ {
		g.release <- struct{}{}
	}
	wg.Wait()
	t1.Release()
	t2.Release()
	assert.Equal(t, 0, f.Load().Reserved+f.Load().InFlight)
	assert.Equal(t, int64(2), f.Load().Admitted)
}

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

// TestAdmissionsAreFIFO: trees asking to be admitted while the server is full are admitted
// in the order they asked, each as soon as demand falls below the capacity.
func TestAdmissionsAreFIFO(t *testing.T) {
	g := newGated()
	f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: g, Capacity: 2}}})
	require.NoError(t, err)
	ctx := context.Background()
	first, err := f.Admit(ctx, 2)
	require.NoError(t, err)
	order := make(chan int, 5)
	tickets := make(chan *Ticket, 5)
	for i := 1; i <= 5; i++ {
		go func() {
			tk, err := f.Admit(ctx, 2)
			assert.NoError(t, err)
			order <- i
			tickets <- tk
		}()
		want := i
		waitFor(t, "admission queued", func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			return len(f.admitting) == want
		})
	}
	first.Release()
	for want := 1; want <= 5; want++ {
		assert.Equal(t, want, <-order)
		(<-tickets).Release()
	}
	assert.Equal(t, int64(6), f.Load().Admitted)
	assert.Zero(t, f.Load().Reserved)
}
