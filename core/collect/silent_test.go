package collect

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/search"
)

// A server that accepts and never answers costs the tree one timed-out round, not one per
// round: the rest of the budget stays unspent.
func TestASilentPolicyStopsTheTreeAfterOneTimedOutRound(t *testing.T) {
	pol := newPolicy(256)
	pol.fixed = time.Minute
	cfg := baseConfig(search.Selective(16, 4))
	cfg.Search.Score = search.ScoreUniform
	cfg.PolicyTimeout, cfg.AllowPartial, cfg.MaxRetries = 20*time.Millisecond, true, 2
	// The policy would answer after a minute: failures prove the 20 ms timeout ended them.
	res, err := Run(context.Background(), cfg, pol, newFakeEnv(), nil)
	require.NoError(t, err)
	assert.Len(t, res.Failures, 4, "the warmup's rollouts fail, no retry and no branch round follows")
	assert.Equal(t, 12, res.Tree.Stats.BudgetUnspent)
	assert.Equal(t, int64(4), pol.calls.Load())
}

// A round where only some rollouts time out goes on.
func TestSomeTimeoutsDoNotStopTheTree(t *testing.T) {
	pol := newPolicy(700)
	var n atomic.Int64
	pol.fail = func(generate.Request, int) error {
		if n.Add(1) <= 2 { // two of the warmup's four rollouts
			return context.DeadlineExceeded
		}
		return nil
	}
	cfg := baseConfig(search.Selective(8, 4))
	cfg.AllowPartial, cfg.Search.Score, cfg.Search.StopAlike = true, search.ScoreUniform, false
	res, err := Run(context.Background(), cfg, pol, newFakeEnv(), nil)
	require.NoError(t, err)
	assert.Greater(t, res.Tree.Stats.Rollouts, 4, "the rounds after the warmup are launched")
	assert.NotEmpty(t, res.Failures)
}
