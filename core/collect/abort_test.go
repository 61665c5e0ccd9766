package collect

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
)

// abortingPolicy answers call number abortAt with an "abort" finish once every other call
// of the warmup is in flight; every other call blocks until its context ends (an
// in-flight HTTP request that only cancellation ends) unless release is set.
type abortingPolicy struct {
	abortAt  int64
	inFlight int64 // calls that must be waiting before the abort is answered
	release  bool  // answer the other calls (as the fake policy does) instead of blocking

	calls, waiting, cancelled atomic.Int64
	fallback                  *fakePolicy
	ready                     chan struct{}
}

func (p *abortingPolicy) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	n := p.calls.Add(1)
	if n == p.abortAt {
		if p.inFlight > 0 {
			<-p.ready
		}
		return &generate.Result{Tokens: []uint32{11}, Logprobs: []float64{-0.5}, StopReason: generate.StopReasonAbort,
			AbortMessage: "Abort by /abort_request.", ExactGeneration: true}, nil
	}
	if p.release {
		return p.fallback.Generate(ctx, req)
	}
	if p.waiting.Add(1) == p.inFlight {
		close(p.ready)
	}
	<-ctx.Done()
	p.cancelled.Add(1)
	return nil, status.Wrap(status.CodeOf(ctx.Err()), ctx.Err(), "fake: generate")
}

func TestStopOnAbort(t *testing.T) {
	t.Run("ends the collection at once", func(t *testing.T) {
		const warmup = 8
		pol := &abortingPolicy{abortAt: 3, inFlight: warmup - 1, ready: make(chan struct{})}
		cfg := baseConfig(search.Selective(32, warmup))
		cfg.StopOnAbort, cfg.MaxRetries, cfg.AllowPartial = true, 2, true
		env := newFakeEnv()
		res, err := Run(context.Background(), cfg, pol, env, &fakeCritic{})
		require.Error(t, err)
		assert.Equal(t, status.Collection, status.CodeOf(err), "%v", err)
		var fe *FailureError
		require.True(t, errors.As(err, &fe), "%v", err)
		require.Len(t, fe.Failures, 1)
		assert.True(t, fe.Failures[0].Aborted)
		assert.Equal(t, fe.Failures, res.Failures)
		// Every other request was in flight and was cancelled; none was sent after the abort
		// (no retry, no further round), whatever allow_partial and max_retries say.
		assert.Equal(t, int64(warmup), pol.calls.Load())
		assert.Equal(t, int64(warmup-1), pol.cancelled.Load())
		require.NotNil(t, res.Tree)
		assert.Len(t, res.Tree.Nodes, 2, "the root and the aborted rollout's failed node")
		assert.Equal(t, env.stats.forks.Load(), env.stats.closes.Load())
	})
	t.Run("off by default: the aborted rollout is one failure", func(t *testing.T) {
		pol := &abortingPolicy{abortAt: 3, release: true, fallback: newPolicy(512)}
		cfg := baseConfig(search.Selective(8, 4))
		cfg.AllowPartial = true
		res, err := Run(context.Background(), cfg, pol, newFakeEnv(), &fakeCritic{})
		require.NoError(t, err)
		require.Len(t, res.Failures, 1)
		assert.True(t, res.Failures[0].Aborted)
		assert.Greater(t, pol.calls.Load(), int64(4), "the search went on after the abort")
	})
}
