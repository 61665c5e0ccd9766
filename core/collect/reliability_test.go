package collect

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// subtree renders a node and everything under it without node ids (which shift around a
// failed node), so that rollouts of two collections can be compared.
func subtree(t *tree.Tree, id int) string {
	nd := &t.Nodes[id]
	if nd.Failed != "" {
		return "FAILED"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "(%v %v %v %v %v %v", nd.Spans[0].Tokens, nd.Spans[0].Trainable, nd.Spans[0].Logprobs, nd.Reward, nd.Done, nd.Truncated)
	for _, c := range nd.Children {
		b.WriteString(subtree(t, c))
	}
	b.WriteByte(')')
	return b.String()
}

// recordsOf is the multiset of actor records (rendered) of the rollouts under the root
// children whose index keep accepts.
func recordsOf(t *testing.T, tr *tree.Tree, keep func(child int) bool) map[string]int {
	t.Helper()
	b, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), prepare.GroupBaseline{})
	require.NoError(t, err)
	under := map[int]int{} // node -> index of its root child
	for i, c := range tr.Nodes[0].Children {
		var walk func(id int)
		walk = func(id int) {
			under[id] = i
			for _, k := range tr.Nodes[id].Children {
				walk(k)
			}
		}
		walk(c)
	}
	out := map[string]int{}
	for k := range b.Actor {
		a := &b.Actor[k]
		assert.Empty(t, tr.Nodes[a.NodeID].Failed, "a record from failed node %d", a.NodeID)
		if !keep(under[a.NodeID]) {
			continue
		}
		for s := range a.NumSpans() {
			sp := a.Span(s)
			out[fmt.Sprint(sp.Tokens, sp.Trainable, sp.Logprobs)]++
		}
	}
	return out
}

// hangEnv is a fakeEnv whose second step blocks until its context ends on rollouts that
// hit, as a stuck tool would.
type hangEnv struct {
	*fakeEnv
	hit func([]uint32) bool
}

func (e *hangEnv) Step(ctx context.Context, act action.Action) (Step, error) {
	if e.steps == 1 && e.hit(act.Chunk.Tokens) {
		<-ctx.Done()
		return Step{}, status.Wrap(status.CodeOf(ctx.Err()), ctx.Err(), "tool")
	}
	return e.fakeEnv.Step(ctx, act)
}

func (e *hangEnv) Fork(ctx context.Context) (Env, error) {
	f, err := e.fakeEnv.Fork(ctx)
	if err != nil {
		return nil, err
	}
	return &hangEnv{fakeEnv: f.(*fakeEnv), hit: e.hit}, nil
}

// TestFaultsCostExactlyTheirRollouts: each fault fails the rollouts it hits (chosen by
// their content, so the same ones in every run), leaving every other rollout and its
// records bit-identical to the fault-free collection's: nothing lost, nothing invented.
func TestFaultsCostExactlyTheirRollouts(t *testing.T) {
	const n = 24
	// A rollout is hit when the first token of its second segment is divisible by 3
	// (policy faults: when its second request's seed is).
	hit := func(tokens []uint32) bool { return len(tokens) > 0 && tokens[0]%3 == 0 }
	secondStep := func(step func() (Step, error)) func(e *fakeEnv) {
		return func(e *fakeEnv) {
			e.step = func(e *fakeEnv, c *action.TokenChunk) (Step, error, bool) {
				if e.steps == 2 && hit(c.Tokens) {
					s, err := step()
					return s, err, true
				}
				return Step{}, nil, false
			}
		}
	}
	tests := []struct {
		name     string
		policy   func(p *fakePolicy)
		env      func(e *fakeEnv)
		hang     bool
		contains string
		aborted  bool
	}{
		{name: "server error after retries", policy: func(p *fakePolicy) {
			p.fail = func(req generate.Request, generated int) error {
				if generated == 256 && *req.Params.Seed%3 == 0 {
					return status.Errorf(status.Backend, "sglang: POST /generate: HTTP 503 Service Unavailable (after 3 retries)")
				}
				return nil
			}
		}, contains: "policy: sglang: POST /generate: HTTP 503"},
		{name: "too many tokens", policy: func(p *fakePolicy) {
			p.mutate = func(r *generate.Result) {
				if len(r.Tokens) == 256 && hit(r.Tokens) {
					r.Tokens = append(r.Tokens, 1, 2)
					r.Logprobs = append(r.Logprobs, 0, 0)
				}
			}
		}, contains: "max_tokens was 256"},
		{name: "missing logprobs", policy: func(p *fakePolicy) {
			p.mutate = func(r *generate.Result) {
				if hit(r.Tokens) {
					r.Logprobs = nil
				}
			}
		}, contains: "logprob"},
		{name: "aborted generation", policy: func(p *fakePolicy) {
			p.mutate = func(r *generate.Result) {
				if hit(r.Tokens) {
					r.StopReason = generate.StopReasonAbort
				}
			}
		}, contains: `"abort"`, aborted: true},
		{name: "empty segment that does not finish", policy: func(p *fakePolicy) {
			p.mutate = func(r *generate.Result) {
				if hit(r.Tokens) && r.StopReason == generate.StopReasonLength {
					r.Tokens, r.Logprobs = nil, nil
				}
			}
		}, contains: `policy: the response has no tokens and finish reason "length"`},
		{name: "env raises", env: secondStep(func() (Step, error) { return Step{}, errors.New("grader crashed") }), contains: "env: step: grader crashed"},
		{name: "env nan reward", env: secondStep(func() (Step, error) { return Step{Reward: math.NaN()}, nil }), contains: "not finite"},
		{name: "env infinite reward", env: secondStep(func() (Step, error) { return Step{Reward: math.Inf(-1), Done: true}, nil }), contains: "not finite"},
		{name: "env hangs past its timeout", hang: true, contains: "env: step: tool: context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := func(faulty bool) Result {
				before := runtime.NumGoroutine()
				pol := newPolicy(1024)
				fe := newFakeEnv()
				var env Env = fe
				if faulty {
					if tt.policy != nil {
						tt.policy(pol)
					}
					if tt.env != nil {
						tt.env(fe)
					}
					if tt.hang {
						env = &hangEnv{fakeEnv: fe, hit: hit}
					}
				}
				cfg := baseConfig(search.Independent(n))
				cfg.AllowPartial, cfg.EnvTimeout = true, 20*time.Millisecond
				res, err := Run(context.Background(), cfg, pol, env, &fakeCritic{})
				require.NoError(t, err)
				require.NoError(t, res.Tree.Validate())
				assert.Equal(t, fe.stats.forks.Load(), fe.stats.closes.Load(), "every fork is closed")
				waitGoroutines(t, before)
				return res
			}
			clean, faulty := run(false), run(true)
			require.Empty(t, clean.Failures)
			ct, ft := clean.Tree, faulty.Tree
			require.Len(t, ft.Nodes[0].Children, n)
			lost := map[int]bool{}
			for i := range n {
				got := subtree(ft, ft.Nodes[0].Children[i])
				if got == "FAILED" {
					lost[i] = true
					continue
				}
				assert.Equal(t, subtree(ct, ct.Nodes[0].Children[i]), got, "rollout %d", i)
			}
			require.NotEmpty(t, lost, "the fault hit no rollout")
			assert.Less(t, len(lost), n, "no rollout survived the fault")
			assert.Len(t, faulty.Failures, len(lost))
			for _, f := range faulty.Failures {
				assert.Contains(t, f.Message, tt.contains)
				assert.Equal(t, tt.aborted, f.Aborted)
				assert.Equal(t, f.Message, ft.Nodes[f.NodeID].Failed)
			}
			want := recordsOf(t, ct, func(i int) bool { return !lost[i] })
			got := recordsOf(t, ft, func(int) bool { return true })
			assert.NotEmpty(t, got)
			assert.Equal(t, want, got)
		})
	}
}

// TestHangingCriticTimesOut: a critic that never answers costs its batches (listed as
// failures on unscored checkpoints), not the rollouts. The critic answers only when its
// context ends, so Run returning at all shows the timeout ended each batch.
func TestHangingCriticTimesOut(t *testing.T) {
	critic := &fakeCritic{score: func(ctx context.Context, contexts []string) ([]float64, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	cfg := baseConfig(search.Selective(8, 4))
	cfg.AllowPartial, cfg.CriticTimeout = true, 20*time.Millisecond
	res, err := Run(context.Background(), cfg, newPolicy(1024), newFakeEnv(), critic)
	require.NoError(t, err)
	require.NotEmpty(t, res.Failures)
	for _, f := range res.Failures {
		assert.Contains(t, f.Message, "critic: context deadline exceeded")
		assert.Nil(t, res.Tree.Nodes[f.NodeID].Critic)
		assert.Empty(t, res.Tree.Nodes[f.NodeID].Failed)
	}
	assert.Equal(t, 8, res.Tree.Stats.Rollouts)
}

// TestStressConcurrentCollections: 1,000 trees from 64 concurrent collections (random
// completion order inside each) equal the serial reference trees, and no goroutine
// outlives them. `make race` runs it with the race detector.
func TestStressConcurrentCollections(t *testing.T) {
	const trees, workers, seeds = 1000, 64, 8
	critic := &fakeCritic{}
	collectOne := func(seed uint64, shuffle bool) (string, error) {
		pol := newPolicy(700)
		if shuffle {
			pol.delay = 200 * time.Microsecond
			pol.rng = rand.New(rand.NewPCG(seed, 1))
		}
		cfg := baseConfig(search.Selective(8, 4))
		cfg.Search.Seed = seed
		env := newFakeEnv()
		res, err := Run(context.Background(), cfg, pol, env, critic)
		if err != nil {
			return "", err
		}
		if f, c := env.stats.forks.Load(), env.stats.closes.Load(); f != c {
			return "", fmt.Errorf("%d forks, %d closes", f, c)
		}
		res.Tree.Stats = tree.Stats{}
		data, err := tree.Marshal(res.Tree)
		return string(data), err
	}
	want := make([]string, seeds)
	for s := range seeds {
		var err error
		want[s], err = collectOne(uint64(s), false)
		require.NoError(t, err)
	}
	before := runtime.NumGoroutine()
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, trees)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < trees; i += workers {
				got, err := collectOne(uint64(i%seeds), true)
				if err == nil && got != want[i%seeds] {
					err = fmt.Errorf("tree %d differs from the serial run", i)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d trees from %d concurrent collections in %v", trees, workers, time.Since(began).Round(time.Millisecond))
	waitGoroutines(t, before)
}
