package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
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

// TestAdmitCancelledContext: a context already ended is not admitted, even on an idle
// fleet with room (it would hold a reservation nobody releases).
func TestAdmitCancelledContext(t *testing.T) {
	f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: newGated(), Capacity: 3}}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tk, err := f.Admit(ctx, 2)
	assert.Nil(t, tk)
	assert.Equal(t, status.Cancelled, status.CodeOf(err))
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
