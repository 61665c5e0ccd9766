package collect

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// cappedPolicy is a fakePolicy that reports a capacity, as a fleet does.
type cappedPolicy struct {
	*fakePolicy
	capacity int
}

func (p cappedPolicy) Capacity() int { return p.capacity }

// A round runs no more rollouts at once than the policy's capacity, and the tree does not
// depend on it: outcomes enter in launch order whatever order they finish in.
func TestRolloutsInFlightFollowThePolicysCapacity(t *testing.T) {
	collectTree := func(capacity int) (*tree.Tree, int64) {
		pol := newPolicy(700)
		pol.delay, pol.rng = 2*time.Millisecond, rand.New(rand.NewPCG(uint64(capacity), 9))
		var policy Policy = pol
		if capacity > 0 {
			policy = cappedPolicy{pol, capacity}
		}
		res, err := Run(context.Background(), baseConfig(search.Selective(40, 24)), policy, newFakeEnv(), nil)
		require.NoError(t, err)
		res.Tree.Stats.WallSeconds, res.Tree.Stats.PolicySeconds = 0, 0 // the clock's, not the tree's
		return res.Tree, pol.maxInFlight.Load()
	}
	unlimited, peak := collectTree(0)
	assert.Equal(t, int64(24), peak, "without a capacity the whole warmup runs at once")
	want, err := tree.Marshal(unlimited)
	require.NoError(t, err)
	for _, capacity := range []int{1, 3, 7} {
		got, peak := collectTree(capacity)
		assert.LessOrEqual(t, peak, int64(capacity), "capacity %d", capacity)
		b, err := tree.Marshal(got)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, b), "capacity %d gives another tree", capacity)
	}
}

// residentBytes is the process's resident set (Linux); ok is false elsewhere.
func residentBytes() (n int64, ok bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

// memoryCeiling is what the largest budget may add to the process's resident set while
// it runs (docs/reliability.md).
const memoryCeiling = 256 << 20

// The largest budget (Independent(MaxBudget), and Selective with its whole budget as
// warmup) holds only the rollouts in flight and the tree so far: its resident set stays
// under memoryCeiling over its first rollouts. It is measured in memory, never in time:
// the collection is cancelled after a count of rollouts.
func TestTheLargestBudgetStaysUnderItsMemoryCeiling(t *testing.T) {
	if _, ok := residentBytes(); !ok {
		t.Skip("needs /proc/self/statm to read the resident set")
	}
	if raceDetector {
		t.Skip("the race detector's shadow memory is not the collection's")
	}
	const rollouts = 20000
	for name, sc := range map[string]search.Config{
		"independent": search.Independent(search.MaxBudget),
		"warmup":      search.Selective(search.MaxBudget, search.MaxBudget),
	} {
		t.Run(name, func(t *testing.T) {
			debug.FreeOSMemory()
			base, _ := residentBytes()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var peak atomic.Int64
			over := errors.New("over the memory ceiling")
			sample := func() {
				n, _ := residentBytes()
				if n-base > peak.Load() {
					peak.Store(n - base)
				}
				if n-base > memoryCeiling {
					cancel()
				}
			}
			pol := newPolicy(64)
			pol.fail = func(generate.Request, int) error {
				if c := pol.calls.Load(); c%256 == 0 {
					sample()
					if c >= rollouts {
						cancel()
					}
				}
				return nil
			}
			// The policy samples as it is called; this samples while it is not (a setup
			// that runs no rollout).
			stop := make(chan struct{})
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
						sample()
						runtime.Gosched()
					}
				}
			}()
			cfg := baseConfig(sc)
			cfg.AllowPartial = true
			res, err := Run(ctx, cfg, pol, newFakeEnv(), nil)
			close(stop)
			sample()
			require.Error(t, err, "the collection stops by cancellation")
			assert.Equal(t, status.Cancelled, status.CodeOf(err), "%v", err)
			assert.NotErrorIs(t, err, over)
			assert.GreaterOrEqual(t, res.Tree.Stats.Rollouts, rollouts-MaxRolloutsInFlight, "rollouts ran before the stop")
			assert.LessOrEqual(t, peak.Load(), int64(memoryCeiling), "peak resident growth %d MiB", peak.Load()>>20)
			t.Logf("%s: %d rollouts, peak resident growth %d MiB", name, res.Tree.Stats.Rollouts, peak.Load()>>20)
		})
	}
}
