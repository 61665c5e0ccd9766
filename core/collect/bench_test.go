package collect

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/search"
)

// benchPolicy answers every path with 1024 tokens in 256-token segments from
// two shared, precomputed results: it allocates nothing, so the benchmark
// measures the engine.
type benchPolicy struct {
	promptLen   int
	more, final *generate.Result
	calls       atomic.Int64
}

func newBenchPolicy(promptLen int) *benchPolicy {
	mk := func(stop string) *generate.Result {
		r := &generate.Result{Tokens: make([]uint32, 256), Logprobs: make([]float64, 256), StopReason: stop, Text: "segment", ExactGeneration: true}
		for i := range r.Tokens {
			r.Tokens[i] = uint32(i)
			r.Logprobs[i] = -0.25
		}
		return r
	}
	return &benchPolicy{promptLen: promptLen, more: mk(generate.StopReasonLength), final: mk(generate.StopReasonStop)}
}

func (p *benchPolicy) Generate(_ context.Context, req generate.Request) (*generate.Result, error) {
	p.calls.Add(1)
	if len(req.Tokens)-p.promptLen+256 >= 1024 {
		return p.final, nil
	}
	return p.more, nil
}

// nopEnv is a stateless env: reward 1 on a finished chunk.
type nopEnv struct{}

func (nopEnv) Reset(context.Context) (Observation, error) { return Observation{}, nil }
func (nopEnv) Step(_ context.Context, a action.Action) (Step, error) {
	if a.Chunk.Finished {
		return Step{Reward: 1, Done: true}, nil
	}
	return Step{}, nil
}
func (nopEnv) Fork(context.Context) (Env, error) { return nopEnv{}, nil }
func (nopEnv) Close()                            {}

func BenchmarkSelective32x16(b *testing.B) {
	cfg := baseConfig(search.Selective(32, 16))
	pol := newBenchPolicy(promptLen)
	ctx := context.Background()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := Run(ctx, cfg, pol, nopEnv{}, ConstantCritic{Value: 0.5}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	segments := float64(pol.calls.Load())
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "trees/s")
	b.ReportMetric(segments/float64(b.N), "segments/tree")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/segments, "allocs/segment")
}
