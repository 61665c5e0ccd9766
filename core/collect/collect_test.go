package collect

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
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

const promptLen = 8

func baseConfig(sc search.Config) Config {
	prompt := make([]uint32, promptLen)
	for i := range prompt {
		prompt[i] = uint32(i + 1)
	}
	return Config{
		ProblemID: "p1", PromptTokens: prompt, PromptText: "prompt|",
		Segments: 256, MaxTotalTokens: 8192, Search: sc, Reward: prepare.DefaultRewardConfig(),
	}
}

func newPolicy(length int) *fakePolicy {
	return &fakePolicy{promptLen: promptLen, length: length, tMax: 8192}
}

// pathGenerated is the generated tokens on the path root..id.
func pathGenerated(t *tree.Tree, id int) int {
	n := 0
	for ; id >= 0; id = t.Nodes[id].Parent {
		n += t.Nodes[id].GeneratedTokens()
	}
	return n
}

// branchStarts lists, for every rollout, its start checkpoint and first
// node: a rollout's first node is a root child or a node whose search pass
// is later than its parent's (branches start only from existing nodes).
func rolloutStarts(t *tree.Tree) (firsts []int) {
	for id := 1; id < len(t.Nodes); id++ {
		nd := &t.Nodes[id]
		if nd.Parent == 0 || nd.SearchPass > t.Nodes[nd.Parent].SearchPass {
			firsts = append(firsts, id)
		}
	}
	return firsts
}

func TestSelectiveAccounting(t *testing.T) {
	// ALGORITHM.md §6.3: fixed 1024-token responses = 4 segments of 256.
	pol := newPolicy(1024)
	pol.fixed = 2 * time.Millisecond // long enough for every warmup call to be in flight together
	env := newFakeEnv()
	cfg := baseConfig(search.Selective(32, 16))
	res, err := Run(context.Background(), cfg, pol, env, &fakeCritic{})
	require.NoError(t, err)
	tr := res.Tree
	require.NoError(t, tr.Validate())
	st := tr.Stats

	assert.Equal(t, 32, st.Rollouts+st.BudgetUnspent, "B units are spent or reported unspent")
	firsts := rolloutStarts(tr)
	assert.Len(t, firsts, st.Rollouts, "one rollout per unit")

	reused, warmup := 0, 0
	seenBranch := false
	for _, f := range firsts {
		nd := &tr.Nodes[f]
		if nd.SearchPass == 0 {
			require.False(t, seenBranch, "warmup rollouts precede every branch")
			require.Equal(t, 0, nd.Parent)
			warmup++
			continue
		}
		seenBranch = true
		reused += tr.Nodes[nd.Parent].Depth * 256
	}
	assert.Equal(t, 16, warmup, "exactly W root rollouts in warmup")
	assert.Equal(t, reused, st.PrefixTokensReused, "prefix_tokens_reused = sum over branches of depth(s)*L")
	assert.Equal(t, st.Rollouts*1024-reused, st.GeneratedTokens, "every path is 1024 tokens; branches reuse their prefix")
	assert.Positive(t, reused)

	for id := range tr.Nodes {
		nd := &tr.Nodes[id]
		if id == 0 {
			assert.NotNil(t, nd.Critic, "the root is scored")
			continue
		}
		assert.LessOrEqual(t, nd.EdgeLen(), 256)
		if len(nd.Children) == 0 {
			assert.True(t, nd.Done, "node %d: every leaf is a finished path", id)
			assert.Equal(t, 1024, pathGenerated(tr, id))
		}
		if nd.Done {
			assert.Equal(t, float64(tr.Nodes[id].Spans[0].Tokens[nd.EdgeLen()-1]%2), nd.Reward)
		}
		if !nd.Terminal() {
			assert.LessOrEqual(t, len(nd.Children), 4, "max_children")
		}
		if nd.SearchPass > 0 {
			assert.Less(t, nd.SearchPass, 1+st.Rollouts)
		}
	}
	// Node 4 (depth 4) is EOS exactly at a segment boundary: terminal.
	assert.True(t, tr.Nodes[4].Done)
	assert.Equal(t, 4, tr.Nodes[4].Depth)
	assert.Equal(t, int64(0), env.stats.concurrent.Load(), "an env is never called concurrently")
	assert.Equal(t, int64(1), env.stats.resets.Load(), "the root env is reset once")
	assert.Equal(t, env.stats.forks.Load(), env.stats.closes.Load(), "every fork is closed")
	assert.Zero(t, env.stats.doubleCloses.Load())
	assert.Equal(t, int64(16), pol.maxInFlight.Load(), "all warmup rollouts are in flight at once")
	assert.Positive(t, st.PolicySeconds)
	assert.Positive(t, st.WallSeconds)
	finished, successes := tr.Outcomes(cfg.Reward.RewardMax)
	assert.Equal(t, len(firsts), finished, "every rollout of this policy finishes")
	assert.Equal(t, finished, st.FinishedRollouts, "the engine records the outcomes in the stats")
	assert.Equal(t, successes, st.Successes)
	assert.Positive(t, successes)
	assert.Less(t, successes, finished)
	assert.False(t, st.AllFailed)
}

func TestNoBranchFromClosedCheckpoints(t *testing.T) {
	// T_max = 900 with 2048-token answers: depth 3 has 768 tokens, 132 left
	// (< L = 256), so only the root and depths 1-2 may be branched from; the
	// fourth segment asks for 132 tokens and ends truncated.
	pol := newPolicy(2048)
	pol.tMax = 900
	cfg := baseConfig(search.Selective(24, 4))
	cfg.MaxTotalTokens = 900
	cfg.Search.Score = search.ScoreUniform
	cfg.Reward.TruncatedReward = 0.25
	res, err := Run(context.Background(), cfg, pol, newFakeEnv(), nil)
	require.NoError(t, err)
	tr := res.Tree
	assert.Zero(t, pol.overRemaining.Load(), "max_tokens never exceeds T_max - generated")
	assert.Equal(t, int64(256), pol.maxTokensSeen.Load())
	for _, f := range rolloutStarts(tr) {
		s := tr.Nodes[f].Parent
		sn := &tr.Nodes[s]
		assert.False(t, sn.Terminal(), "no branch from a terminal node")
		assert.GreaterOrEqual(t, 900-pathGenerated(tr, s), 256, "no branch from a node with < L tokens left")
		if s != 0 {
			assert.LessOrEqual(t, len(sn.Children), 4, "no branch past max_children")
		}
	}
	for id := 1; id < len(tr.Nodes); id++ {
		nd := &tr.Nodes[id]
		if len(nd.Children) == 0 {
			assert.True(t, nd.Truncated, "node %d", id)
			assert.Equal(t, 0.25, nd.Reward, "a truncated edge carries truncated_reward")
			assert.Equal(t, 900, pathGenerated(tr, id))
		}
	}
	assert.Equal(t, 24, tr.Stats.Rollouts+tr.Stats.BudgetUnspent)
}

func TestEmptyPlanStopsEarly(t *testing.T) {
	// One segment per answer, every one rewarded 1: the root is the only
	// candidate and with p = 1 (no critic) its value_refinement gain is 0, so
	// the plan is empty after warmup and the rest of the budget is unspent.
	pol := newPolicy(4)
	cfg := baseConfig(search.Selective(16, 4))
	cfg.Segments = 4
	env := newFakeEnv()
	env.step = func(e *fakeEnv, c *action.TokenChunk) (Step, error, bool) {
		return Step{Reward: 1, Done: true}, nil, true
	}
	res, err := Run(context.Background(), cfg, pol, env, nil)
	require.NoError(t, err)
	assert.Equal(t, 4, res.Tree.Stats.Rollouts)
	assert.Equal(t, 12, res.Tree.Stats.BudgetUnspent)
	assert.Len(t, res.Tree.Nodes, 5)
}

// zeroTiming removes the wall-clock stats, the only non-deterministic fields.
func marshalDeterministic(t *testing.T, tr *tree.Tree) []byte {
	t.Helper()
	cp := *tr
	cp.Stats.WallSeconds, cp.Stats.PolicySeconds = 0, 0
	data, err := tree.Marshal(&cp)
	require.NoError(t, err)
	return data
}

func TestDeterministicUnderShuffledCompletion(t *testing.T) {
	tests := []struct {
		name string
		sc   search.Config
	}{
		{"selective", search.Selective(20, 8)},
		{"selective per_pass 3", func() search.Config {
			c := search.Selective(14, 3)
			c.PerPass, c.Seed, c.StopAlike = 3, 7, false // branch whatever the warmup returned
			return c
		}()},
		{"independent", search.Independent(6)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var first []byte
			for run := range 3 {
				pol := newPolicy(600)
				pol.delay = 3 * time.Millisecond
				pol.rng = rand.New(rand.NewPCG(uint64(run), 99))
				pol.fail = func(req generate.Request, generated int) error {
					if *req.Params.Seed%5 == 0 {
						return status.Errorf(status.Backend, "fake: seed %d refused", *req.Params.Seed)
					}
					return nil
				}
				cfg := baseConfig(tt.sc)
				cfg.AllowPartial = true
				cfg.MaxRetries = 1
				cfg.Codec = byteCodec{}
				res, err := Run(context.Background(), cfg, pol, newFakeEnv(), &fakeCritic{})
				require.NoError(t, err)
				data := marshalDeterministic(t, res.Tree)
				if run == 0 {
					first = data
					failed, branched := 0, 0
					for _, nd := range res.Tree.Nodes {
						if nd.Failed != "" {
							failed++
						}
						if nd.SearchPass > 0 {
							branched++
						}
					}
					require.Positive(t, failed, "the run exercises failures and retries")
					require.Equal(t, !tt.sc.Independent, branched > 0)
					continue
				}
				require.Equal(t, string(first), string(data), "run %d differs", run)
			}
		})
	}
}

func TestSameSeedDifferentSeedTree(t *testing.T) {
	run := func(seed uint64) []byte {
		sc := search.Selective(10, 4)
		sc.Seed = seed
		res, err := Run(context.Background(), baseConfig(sc), newPolicy(512), newFakeEnv(), &fakeCritic{})
		require.NoError(t, err)
		return marshalDeterministic(t, res.Tree)
	}
	assert.Equal(t, run(1), run(1))
	assert.NotEqual(t, run(1), run(2))
}

func TestFailures(t *testing.T) {
	boom := func(req generate.Request, generated int) error {
		if generated == 512 && *req.Params.Seed%3 == 0 {
			return status.Errorf(status.Backend, "sglang: connection reset")
		}
		return nil
	}
	tests := []struct {
		name     string
		policy   func(p *fakePolicy)
		env      func(e *fakeEnv)
		critic   *fakeCritic
		retries  int
		contains string
		critics  bool // the failures are critic failures
	}{
		{name: "policy error", policy: func(p *fakePolicy) { p.fail = boom }, contains: "policy: sglang: connection reset"},
		{name: "policy error with retries", policy: func(p *fakePolicy) { p.fail = boom }, retries: 2, contains: "policy: sglang: connection reset"},
		{name: "too many tokens", policy: func(p *fakePolicy) {
			p.mutate = func(r *generate.Result) {
				if len(r.Tokens) == 256 && r.Tokens[0]%4 == 0 {
					r.Tokens = append(r.Tokens, make([]uint32, 44)...)
					r.Logprobs = append(r.Logprobs, make([]float64, 44)...)
				}
			}
		}, contains: "policy: response has 300 tokens, max_tokens was 256"},
		{name: "misaligned logprobs", policy: func(p *fakePolicy) {
			p.mutate = func(r *generate.Result) {
				if r.Tokens[0]%5 == 0 {
					r.Logprobs = r.Logprobs[1:]
				}
			}
		}, contains: "logprobs"},
		{name: "abort finish", policy: func(p *fakePolicy) {
			p.mutate = func(r *generate.Result) {
				if r.Tokens[0]%5 == 0 {
					r.StopReason = generate.StopReasonAbort
				}
			}
		}, contains: `policy: parse: finish reason "abort"`},
		{name: "env error", env: func(e *fakeEnv) {
			e.step = func(e *fakeEnv, c *action.TokenChunk) (Step, error, bool) {
				if e.steps == 2 && c.Tokens[0]%3 == 0 {
					return Step{}, errors.New("tool crashed"), true
				}
				return Step{}, nil, false
			}
		}, contains: "env: step: tool crashed"},
		{name: "nan reward", env: func(e *fakeEnv) {
			e.step = func(e *fakeEnv, c *action.TokenChunk) (Step, error, bool) {
				if c.Finished && c.Tokens[0]%2 == 0 {
					return Step{Reward: math.NaN(), Done: true}, nil, true
				}
				return Step{}, nil, false
			}
		}, contains: "env: step reward NaN is not finite"},
		{name: "reward out of range", env: func(e *fakeEnv) {
			e.step = func(e *fakeEnv, c *action.TokenChunk) (Step, error, bool) {
				if c.Finished && c.Tokens[0]%2 == 0 {
					return Step{Reward: 2, Done: true}, nil, true
				}
				return Step{}, nil, false
			}
		}, contains: "outside [reward_min, reward_max] = [0, 1]"},
		{name: "env fork error", env: func(e *fakeEnv) {
			e.fork = func(e *fakeEnv) error {
				if e.steps == 1 {
					return errors.New("cannot copy the sandbox")
				}
				return nil
			}
		}, contains: "env: fork: cannot copy the sandbox"},
		{name: "critic wrong count", critic: &fakeCritic{score: func(ctx context.Context, contexts []string) ([]float64, error) {
			return make([]float64, len(contexts)-1), nil
		}}, contains: "critic: returned", critics: true},
		{name: "critic error", critic: &fakeCritic{score: func(ctx context.Context, contexts []string) ([]float64, error) {
			return nil, status.Errorf(status.Backend, "critic: http://127.0.0.1:9/value: 503")
		}}, contains: "critic: http://127.0.0.1:9/value: 503", critics: true},
		{name: "critic nan", critic: &fakeCritic{score: func(ctx context.Context, contexts []string) ([]float64, error) {
			v := make([]float64, len(contexts))
			v[0] = math.Inf(1)
			return v, nil
		}}, contains: "value 0 is +Inf, not finite", critics: true},
	}
	for _, tt := range tests {
		for _, partial := range []bool{false, true} {
			name := tt.name
			if partial {
				name += "/allow_partial"
			}
			t.Run(name, func(t *testing.T) {
				pol := newPolicy(1024)
				if tt.policy != nil {
					tt.policy(pol)
				}
				env := newFakeEnv()
				if tt.env != nil {
					tt.env(env)
				}
				critic := tt.critic
				if critic == nil {
					critic = &fakeCritic{}
				}
				cfg := baseConfig(search.Selective(16, 8))
				cfg.AllowPartial, cfg.MaxRetries = partial, tt.retries
				res, err := Run(context.Background(), cfg, pol, env, critic)
				require.NotNil(t, res.Tree, "the tree is returned with the error")
				require.NoError(t, res.Tree.Validate())
				require.NotEmpty(t, res.Failures)
				if partial {
					require.NoError(t, err)
				} else {
					require.Error(t, err)
					assert.Equal(t, status.Collection, status.CodeOf(err))
					var fe *FailureError
					require.True(t, errors.As(err, &fe))
					assert.Equal(t, res.Failures, fe.Failures)
					assert.Contains(t, err.Error(), tt.contains)
				}
				tr := res.Tree
				for _, f := range res.Failures {
					assert.Contains(t, f.Message, tt.contains)
					assert.Equal(t, strings.Contains(tt.contains, `"abort"`), f.Aborted, "aborted flag of %q", f.Message)
					nd := tr.Node(f.NodeID)
					require.NotNil(t, nd)
					if tt.critics {
						assert.Empty(t, nd.Failed)
						assert.Nil(t, nd.Critic, "a node the critic failed on stays unscored")
						continue
					}
					assert.Equal(t, f.Message, nd.Failed)
					assert.Empty(t, nd.Children)
					assert.Equal(t, 0, nd.EdgeLen(), "a failed rollout keeps none of its tokens")
				}
				// Every unit left exactly one leaf: its finished path or its
				// failed node (partial nodes of failed rollouts are discarded).
				leaves := 0
				for id := 1; id < len(tr.Nodes); id++ {
					nd := &tr.Nodes[id]
					if len(nd.Children) == 0 {
						leaves++
						assert.True(t, nd.Done || nd.Failed != "", "node %d is a dangling checkpoint", id)
					}
				}
				assert.Equal(t, tr.Stats.Rollouts, leaves)
				assert.Equal(t, 16, tr.Stats.Rollouts+tr.Stats.BudgetUnspent)
				failedRollouts := 0
				for _, f := range res.Failures {
					if tr.Nodes[f.NodeID].Failed != "" {
						failedRollouts++
					}
				}
				assert.Equal(t, leaves-failedRollouts, tr.Stats.FinishedRollouts, "the stats count the finished rollouts, failures or not")
				assert.Equal(t, tr.Stats.FinishedRollouts == 0, tr.Stats.AllFailed)
				assert.Equal(t, env.stats.forks.Load(), env.stats.closes.Load(), "every fork is closed")
				if tt.retries > 0 {
					// A retry starts from the same checkpoint right after the
					// failed attempt and costs a unit.
					for _, f := range res.Failures {
						parent := tr.Nodes[f.NodeID].Parent
						assert.Greater(t, len(tr.Nodes[parent].Children), 1)
					}
				}
			})
		}
	}
}

func TestCancellation(t *testing.T) {
	t.Run("in flight", func(t *testing.T) {
		before := runtime.NumGoroutine()
		pol := newPolicy(1024)
		pol.fixed = time.Minute // every call blocks until cancelled
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(30*time.Millisecond, cancel)
		env := newFakeEnv()
		began := time.Now()
		res, err := Run(ctx, baseConfig(search.Selective(32, 16)), pol, env, &fakeCritic{})
		assert.Less(t, time.Since(began), 30*time.Second, "cancellation is prompt: the calls would answer after a minute")
		assert.Equal(t, status.Cancelled, status.CodeOf(err), "%v", err)
		require.NotNil(t, res.Tree)
		assert.Len(t, res.Tree.Nodes, 1, "unfinished rollouts are discarded")
		assert.Equal(t, env.stats.forks.Load(), env.stats.closes.Load())
		waitGoroutines(t, before)
	})
	t.Run("between rounds keeps the warmup", func(t *testing.T) {
		before := runtime.NumGoroutine()
		ctx, cancel := context.WithCancel(context.Background())
		critic := &fakeCritic{score: func(c context.Context, contexts []string) ([]float64, error) {
			cancel()
			return nil, c.Err()
		}}
		res, err := Run(ctx, baseConfig(search.Selective(32, 8)), newPolicy(512), newFakeEnv(), critic)
		assert.Equal(t, status.Cancelled, status.CodeOf(err))
		assert.Empty(t, res.Failures, "cancellation is not a failure")
		assert.Equal(t, 8, res.Tree.Stats.Rollouts)
		assert.Len(t, res.Tree.Nodes, 1+8*2)
		require.NoError(t, res.Tree.Validate())
		waitGoroutines(t, before)
	})
	t.Run("deadline", func(t *testing.T) {
		pol := newPolicy(1024)
		pol.fixed = 10 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := Run(ctx, baseConfig(search.Independent(4)), pol, newFakeEnv(), nil)
		assert.Equal(t, status.Timeout, status.CodeOf(err))
	})
}

func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a guard against a leak, not a timing check
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "no goroutine outlives Run")
}

func TestPerCallTimeoutIsAFailure(t *testing.T) {
	pol := newPolicy(256)
	pol.fixed = time.Second
	cfg := baseConfig(search.Independent(2))
	cfg.PolicyTimeout = 10 * time.Millisecond
	res, err := Run(context.Background(), cfg, pol, newFakeEnv(), nil)
	assert.Equal(t, status.Collection, status.CodeOf(err))
	require.Len(t, res.Failures, 2)
	assert.Contains(t, res.Failures[0].Message, "policy: fake: generate: context deadline exceeded")
}

func TestRoundsRunConcurrently(t *testing.T) {
	pol := newPolicy(256) // one segment per rollout
	// Each call waits until all four are in the policy at once: run one at a time, the
	// first would never be answered (a guard of a minute ends the wait).
	guard := time.Now()
	var arrived atomic.Int64
	pol.fail = func(generate.Request, int) error {
		arrived.Add(1)
		for arrived.Load() < 4 {
			if time.Since(guard) > time.Minute {
				return errors.New("the four rollouts never ran at once")
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	}
	res, err := Run(context.Background(), baseConfig(search.Independent(4)), pol, newFakeEnv(), nil)
	require.NoError(t, err)
	assert.Equal(t, int64(4), pol.maxInFlight.Load())
	assert.Equal(t, 4, res.Tree.Stats.Rollouts)
}

func TestIndependent(t *testing.T) {
	critic := &fakeCritic{}
	env := newFakeEnv()
	res, err := Run(context.Background(), baseConfig(search.Independent(6)), newPolicy(700), env, critic)
	require.NoError(t, err)
	tr := res.Tree
	assert.Len(t, tr.Root().Children, 6)
	assert.Equal(t, 6, tr.Stats.Rollouts)
	assert.Zero(t, tr.Stats.BudgetUnspent)
	assert.Zero(t, tr.Stats.PrefixTokensReused)
	assert.Equal(t, 6*700, tr.Stats.GeneratedTokens)
	assert.Equal(t, int64(1), critic.calls.Load(), "one batch")
	for id := range tr.Nodes {
		nd := &tr.Nodes[id]
		assert.LessOrEqual(t, len(nd.Children), map[bool]int{true: 6, false: 1}[id == 0])
		assert.Equal(t, !nd.Terminal(), nd.Critic != nil, "node %d: every checkpoint is scored", id)
		assert.Zero(t, nd.SearchPass)
	}
	assert.Equal(t, int64(6), env.stats.forks.Load(), "Independent keeps no checkpoint snapshots")
	assert.Equal(t, int64(6), env.stats.closes.Load())

	res, err = Run(context.Background(), baseConfig(search.Independent(3)), newPolicy(700), newFakeEnv(), nil)
	require.NoError(t, err)
	for _, nd := range res.Tree.Nodes {
		assert.Nil(t, nd.Critic, "no critic, no predictions")
	}
}

func TestCriticScoresEachCheckpointOnce(t *testing.T) {
	seen := map[string]int{}
	critic := &fakeCritic{}
	critic.score = func(ctx context.Context, contexts []string) ([]float64, error) {
		for _, c := range contexts {
			seen[c]++
		}
		return make([]float64, len(contexts)), nil
	}
	cfg := baseConfig(search.Selective(20, 8))
	cfg.Codec = byteCodec{}
	res, err := Run(context.Background(), cfg, newPolicy(1024), newFakeEnv(), critic)
	require.NoError(t, err)
	for c, n := range seen {
		assert.Equal(t, 1, n, "context scored %d times: %.40q", n, c)
	}
	scored := 0
	for id, nd := range res.Tree.Nodes {
		if nd.Critic != nil {
			scored++
			assert.False(t, nd.Terminal(), "node %d", id)
		}
	}
	assert.Equal(t, len(seen), scored)
	assert.NotNil(t, res.Tree.Root().Critic)
}

func TestObservationsAndText(t *testing.T) {
	env := newFakeEnv()
	env.obs = Observation{Text: "[reset]"}
	env.step = func(e *fakeEnv, c *action.TokenChunk) (Step, error, bool) {
		if e.steps == 1 {
			return Step{Observation: Observation{Text: "[tool]"}, Reward: 0.5}, nil, true
		}
		if e.steps == 2 {
			return Step{Observation: Observation{Tokens: []uint32{'#', '#'}}}, nil, true
		}
		return Step{Reward: 1, Done: true}, nil, true
	}
	pol := newPolicy(0)
	pol.promptLen = 1 << 30 // unused: the env ends the episode
	cfg := baseConfig(search.Independent(1))
	cfg.Segments = 4
	cfg.Codec = byteCodec{}
	res, err := Run(context.Background(), cfg, pol, env, nil)
	require.NoError(t, err)
	tr := res.Tree
	require.Len(t, tr.Nodes, 4)
	root := tr.Root()
	assert.Equal(t, "prompt|[reset]", root.Text)
	assert.Equal(t, promptLen+len("[reset]"), root.EdgeLen())
	assert.False(t, root.Spans[0].HasTrainable())

	n1 := &tr.Nodes[1]
	span := n1.Spans[0]
	require.Equal(t, 4+len("[tool]"), span.Len())
	assert.Equal(t, []bool{true, true, true, true, false, false, false, false, false, false}, span.Trainable)
	assert.Equal(t, 0.0, span.Logprobs[5])
	assert.Equal(t, "[tool]", n1.Observation)
	assert.True(t, strings.HasSuffix(n1.Text, "[tool]"))
	assert.Equal(t, 0.5, n1.Reward)
	assert.Equal(t, 4, n1.GeneratedTokens(), "observation tokens are not generated")
	assert.Equal(t, "##", tr.Nodes[2].Observation, "exact observation tokens are decoded for display")
	assert.True(t, tr.Nodes[3].Done)
	// The third request continued the exact context: prompt, reset, two edges.
	assert.Equal(t, tr.ContextLen(2), promptLen+len("[reset]")+4+6+4+2)

	// Without a codec an observation needs exact tokens.
	cfg.Codec = nil
	env2 := newFakeEnv()
	env2.step = env.step
	res, err = Run(context.Background(), cfg, pol, env2, nil)
	assert.Equal(t, status.Collection, status.CodeOf(err))
	require.Len(t, res.Failures, 1)
	assert.Contains(t, res.Failures[0].Message, "env: observation: has text (6 bytes) but no tokens")
}

// With a codec the engine decodes each edge itself, so it tells the policy it will not read
// the server's text (Request.SkipText); without one the edge text is the server's.
func TestTheServersTextIsSkippedOnlyWhenACodecDecodes(t *testing.T) {
	for _, withCodec := range []bool{true, false} {
		var asked, skipped atomic.Int64
		pol := newPolicy(8)
		pol.fail = func(req generate.Request, generated int) error {
			asked.Add(1)
			if req.SkipText {
				skipped.Add(1)
			}
			return nil
		}
		cfg := baseConfig(search.Independent(2))
		cfg.Segments = 4
		if withCodec {
			cfg.Codec = byteCodec{}
		}
		res, err := Run(context.Background(), cfg, pol, newFakeEnv(), nil)
		require.NoError(t, err)
		require.Positive(t, asked.Load())
		edge := res.Tree.Nodes[1].Text
		if withCodec {
			assert.Equal(t, asked.Load(), skipped.Load(), "every request says its text is not read")
			assert.NotContains(t, edge, "tokens>", "the edge is the codec's decoding")
		} else {
			assert.Zero(t, skipped.Load(), "no request skips the text the edges need")
			assert.Equal(t, "<4 tokens>", edge)
		}
	}
}

func TestMaxSegmentsTruncates(t *testing.T) {
	cfg := baseConfig(search.Independent(2))
	cfg.MaxSegments = 3
	cfg.Segments = 16
	res, err := Run(context.Background(), cfg, newPolicy(0), newFakeEnv(), nil)
	require.NoError(t, err)
	for id, nd := range res.Tree.Nodes {
		if len(nd.Children) == 0 {
			assert.True(t, nd.Truncated, "node %d", id)
			assert.Equal(t, 3, nd.Depth)
		}
	}
}

func TestInvalidConfig(t *testing.T) {
	good := baseConfig(search.Selective(8, 4))
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{"empty prompt", func(c *Config) { c.PromptTokens = nil }, "prompt has no tokens"},
		{"negative segments", func(c *Config) { c.Segments = -1 }, "segments is -1"},
		{"negative retries", func(c *Config) { c.MaxRetries = -1 }, "max_retries is -1"},
		{"warmup over budget", func(c *Config) { c.Search.Warmup = 9 }, "warmup"},
		{"bad reward", func(c *Config) { c.Reward.Gamma = 0 }, "gamma"},
		{"bad sampling", func(c *Config) { c.Sampling.TopP = generate.Float64(2) }, "top_p"},
		{"negative timeout", func(c *Config) { c.EnvTimeout = -time.Second }, "timeouts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.mutate(&cfg)
			res, err := Run(context.Background(), cfg, newPolicy(10), newFakeEnv(), nil)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tt.want)
			assert.Nil(t, res.Tree)
		})
	}
	_, err := Run(context.Background(), good, nil, newFakeEnv(), nil)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
}

func TestEnvResetFailure(t *testing.T) {
	env := &failingResetEnv{fakeEnv: newFakeEnv()}
	res, err := Run(context.Background(), baseConfig(search.Independent(2)), newPolicy(10), env, nil)
	assert.Equal(t, status.Backend, status.CodeOf(err))
	assert.Contains(t, err.Error(), "collect: env reset: sandbox down")
	require.NotNil(t, res.Tree)
	assert.Len(t, res.Tree.Nodes, 1)
}

type failingResetEnv struct{ *fakeEnv }

func (e *failingResetEnv) Reset(ctx context.Context) (Observation, error) {
	return Observation{}, status.Errorf(status.Backend, "sandbox down")
}

type panickyPolicy struct{}

func (panickyPolicy) Generate(context.Context, generate.Request) (*generate.Result, error) {
	var m map[string]int
	m["x"]++
	return nil, nil
}

func TestPanicInRolloutIsAnError(t *testing.T) {
	env := newFakeEnv()
	res, err := Run(context.Background(), baseConfig(search.Independent(2)), panickyPolicy{}, env, nil)
	assert.Equal(t, status.Internal, status.CodeOf(err))
	assert.Contains(t, err.Error(), "collect: panic in a rollout from node 0: assignment to entry in nil map")
	require.NotNil(t, res.Tree)
	assert.Equal(t, env.stats.forks.Load(), env.stats.closes.Load())
}

func TestStepForkerTakesSnapshotsInItsStep(t *testing.T) {
	cfg := baseConfig(search.Selective(32, 16))
	plain, err := Run(context.Background(), cfg, newPolicy(1024), newFakeEnv(), &fakeCritic{})
	require.NoError(t, err)

	env := newFakeEnv()
	var stepForks atomic.Int64
	res, err := Run(context.Background(), cfg, newPolicy(1024), stepForkEnv{env, &stepForks}, &fakeCritic{})
	require.NoError(t, err)
	assert.Equal(t, string(marshalDeterministic(t, plain.Tree)), string(marshalDeterministic(t, res.Tree)))
	assert.Positive(t, stepForks.Load())
	// Forks in the step: one per kept checkpoint. Plain forks: one per rollout's working copy.
	assert.Equal(t, int64(res.Tree.Stats.Rollouts), env.stats.forks.Load()-stepForks.Load())
	assert.Equal(t, env.stats.forks.Load(), env.stats.closes.Load(), "every fork is closed")
	assert.Zero(t, env.stats.doubleCloses.Load())

	t.Run("a failure after the step closes its fork", func(t *testing.T) {
		env := newFakeEnv()
		env.step = func(e *fakeEnv, c *action.TokenChunk) (Step, error, bool) {
			if !c.Finished && e.steps == 2 {
				return Step{Reward: 2}, nil, true // outside [reward_min, reward_max]
			}
			return Step{}, nil, false
		}
		cfg.AllowPartial = true
		res, err := Run(context.Background(), cfg, newPolicy(1024), stepForkEnv{env, &stepForks}, &fakeCritic{})
		require.NoError(t, err)
		require.NotEmpty(t, res.Failures)
		assert.Contains(t, res.Failures[0].Message, "outside [reward_min, reward_max]")
		assert.Equal(t, env.stats.forks.Load(), env.stats.closes.Load(), "every fork is closed")
		assert.Zero(t, env.stats.doubleCloses.Load())
	})
}
