package collect

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/search"
)

// watchProgress reads p until stop is closed, checking that no count ever goes down.
func watchProgress(t *testing.T, p *Progress, stop <-chan struct{}) (wait func() int) {
	var wg sync.WaitGroup
	reads := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last ProgressSnapshot
		for {
			s := p.Snapshot()
			reads++
			if s.RolloutsLaunched < last.RolloutsLaunched || s.RolloutsFinished < last.RolloutsFinished ||
				s.RolloutsFailed < last.RolloutsFailed || s.Segments < last.Segments || s.GeneratedTokens < last.GeneratedTokens {
				t.Errorf("progress went down: %+v after %+v", s, last)
				return
			}
			last = s
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	return func() int { wg.Wait(); return reads }
}

func TestProgressAdvancesAndMatchesStats(t *testing.T) {
	pol := newPolicy(1024) // 4 segments of 256 per path
	var prog Progress
	var mu sync.Mutex
	var midRun []ProgressSnapshot
	var midGenerated []int
	pol.fail = func(req generate.Request, generated int) error {
		// Read from inside a policy call: the collection is running.
		s := prog.Snapshot()
		mu.Lock()
		midRun, midGenerated = append(midRun, s), append(midGenerated, generated)
		mu.Unlock()
		return nil
	}
	stop := make(chan struct{})
	wait := watchProgress(t, &prog, stop)
	res, err := Run(context.Background(), baseConfig(search.Selective(32, 16)), pol, newFakeEnv(), &fakeCritic{}, WithProgress(&prog))
	close(stop)
	wait()
	require.NoError(t, err)
	st := res.Tree.Stats

	require.NotEmpty(t, midRun)
	for i, s := range midRun {
		assert.False(t, s.Done, "read while running")
		assert.Equal(t, 32, s.Budget)
		assert.Positive(t, s.RolloutsLaunched, "a policy call belongs to a launched rollout")
		assert.LessOrEqual(t, s.RolloutsFinished, s.RolloutsLaunched)
		// Every generated token on the request's path came from an accepted response.
		assert.GreaterOrEqual(t, s.GeneratedTokens, midGenerated[i])
		if midGenerated[i] > 0 {
			assert.Positive(t, s.Segments)
		}
	}
	// Branch rounds run after the 16 warmup rollouts finished.
	last := midRun[len(midRun)-1]
	if st.Rollouts > 16 {
		assert.GreaterOrEqual(t, last.RolloutsFinished, 16)
	}

	end := prog.Snapshot()
	assert.True(t, end.Done)
	assert.Nil(t, end.ETASeconds, "no estimate once ended")
	assert.Equal(t, st.Rollouts, end.RolloutsFinished)
	assert.Equal(t, st.Rollouts, end.RolloutsLaunched, "no retries: one launch per rollout")
	assert.Equal(t, 32-st.BudgetUnspent, end.RolloutsLaunched)
	assert.Equal(t, 0, end.RolloutsFailed)
	assert.Equal(t, st.GeneratedTokens, end.GeneratedTokens)
	assert.Equal(t, len(res.Tree.Nodes)-1, end.Segments, "one accepted response per edge")
	assert.Equal(t, end, prog.Snapshot(), "an ended collection's progress stays put")
}

func TestProgressCountsFailedRollouts(t *testing.T) {
	pol := newPolicy(512)
	calls := 0
	var mu sync.Mutex
	pol.fail = func(req generate.Request, generated int) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if generated > 0 && calls%3 == 0 {
			return errors.New("injected")
		}
		return nil
	}
	var prog Progress
	cfg := baseConfig(search.Selective(12, 6))
	cfg.AllowPartial = true
	res, err := Run(context.Background(), cfg, pol, newFakeEnv(), nil, WithProgress(&prog))
	require.NoError(t, err)
	failed := 0
	for _, n := range res.Tree.Nodes {
		if n.Failed != "" {
			failed++
		}
	}
	require.Positive(t, failed, "the test injects failures")
	end := prog.Snapshot()
	assert.Equal(t, failed, end.RolloutsFailed)
	assert.Equal(t, res.Tree.Stats.Rollouts, end.RolloutsFinished)
	assert.Equal(t, res.Tree.Stats.GeneratedTokens, end.GeneratedTokens, "tokens of failed rollouts count in both")
	assert.Equal(t, 12-res.Tree.Stats.BudgetUnspent, end.RolloutsLaunched)
}

func TestProgressBeforeStart(t *testing.T) {
	var p Progress
	s := p.Snapshot()
	assert.Equal(t, ProgressSnapshot{}, s, "nothing counted, not started, not done")
}

func TestWithoutProgress(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithProgress(nil)}} {
		res, err := Run(context.Background(), baseConfig(search.Independent(2)), newPolicy(10), newFakeEnv(), nil, opts...)
		require.NoError(t, err)
		assert.Equal(t, 2, res.Tree.Stats.Rollouts, "Run counts for itself when no Progress is given")
	}
}
