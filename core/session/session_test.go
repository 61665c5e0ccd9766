package session

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/bridge"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// answerCodec decodes every reply as the boxed answer 1 (so MathEnv rewards it 1).
type answerCodec struct{}

func (answerCodec) Encode(text string, addSpecial bool) ([]uint32, error) { return nil, nil }
func (answerCodec) Decode(ids []uint32, skipSpecial bool) (string, error) {
	return `\boxed{1}`, nil
}

// stopPolicy answers every request with one token and a stop.
type stopPolicy struct{ calls atomic.Int64 }

func (p *stopPolicy) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	p.calls.Add(1)
	return &generate.Result{Tokens: []uint32{7}, Logprobs: []float64{-0.5}, StopReason: generate.StopReasonStop, ExactGeneration: true}, nil
}

// blockPolicy waits for its context to end.
type blockPolicy struct{ started chan struct{} }

func (p *blockPolicy) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	select {
	case p.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// fakeResolver resolves policy handle 1 and codec handle 1; its HTTP critics count
// their closes.
type fakeResolver struct {
	policy       collect.Policy
	criticOpened atomic.Int64
	criticClosed atomic.Int64
	turns        *collect.Turns
}

func (r *fakeResolver) Policy(handle uint64) (collect.Policy, error) {
	if handle != 1 || r.policy == nil {
		return nil, status.Errorf(status.InvalidHandle, "handle %d is unknown or already released", handle)
	}
	return r.policy, nil
}

func (r *fakeResolver) Codec(handle uint64) (collect.Codec, error) {
	if handle != 1 {
		return nil, status.Errorf(status.InvalidHandle, "handle %d is unknown or already released", handle)
	}
	return answerCodec{}, nil
}

func (r *fakeResolver) HTTPCritic(url string, timeout time.Duration) (collect.Critic, func(), error) {
	r.criticOpened.Add(1)
	return collect.ConstantCritic{Value: 0.5}, func() { r.criticClosed.Add(1) }, nil
}

func (r *fakeResolver) Turns(codec uint64, turn Turn) (*collect.Turns, error) {
	if r.turns == nil {
		return nil, status.Errorf(status.InvalidArgument, "no turns here")
	}
	return r.turns, nil
}

const searchJSON = `"search":{"budget":4,"warmup":2,"per_pass":4,"max_children":4,"score":"value_refinement"}`

// mathSpec is a native policy, MathEnv and a constant critic, as the Python side sends it.
const mathSpec = `{"problem_id":"p","prompt_tokens":[1,2,3],"prompt_text":"q","segments":8,` + searchJSON + `,
	"sampling":{"temperature":1,"logprobs":0},"reward":null,"allow_partial":false,"codec":1,
	"policy":{"kind":"native","handle":1},"env":{"kind":"math","label":"1"},"critic":{"kind":"constant","value":0.5},
	"policy_timeout":0,"env_timeout":0,"critic_timeout":0,"turn":null}`

func decode(t *testing.T, data string) Spec {
	t.Helper()
	var s Spec
	require.NoError(t, json.Unmarshal([]byte(data), &s))
	return s
}

func TestSpecDecodesThePythonForm(t *testing.T) {
	s := decode(t, `{"problem_id":"p","prompt_tokens":[1,2],"segments":16,"max_segments":3,"max_total_tokens":99,`+searchJSON+`,
		"sampling":{"temperature":0.5,"top_p":0.9},"allow_partial":true,"max_retries":2,"codec":5,
		"policy_timeout":1.5,"env_timeout":0.25,"critic_timeout":2,
		"policy":{"kind":"remote","object":3},"env":{"kind":"remote","object":4},"critic":{"kind":"http","url":"http://v","timeout":3},
		"turn":{"parser":"hermes","messages":[{"role":"user","content":"hi"}],"tools":null,"template_kwargs":{"enable_thinking":false}}}`)
	c := s.Config
	assert.Equal(t, "p", c.ProblemID)
	assert.Equal(t, []uint32{1, 2}, c.PromptTokens)
	assert.Equal(t, []int{16, 3, 99, 2}, []int{c.Segments, c.MaxSegments, c.MaxTotalTokens, c.MaxRetries})
	assert.Equal(t, 0.5, *c.Sampling.Temperature)
	assert.Equal(t, 0.9, *c.Sampling.TopP)
	assert.Equal(t, 4, c.Search.Budget)
	assert.Equal(t, prepare.DefaultRewardConfig(), c.Reward, "reward absent means the defaults")
	assert.True(t, c.AllowPartial)
	assert.Equal(t, []time.Duration{1500 * time.Millisecond, 250 * time.Millisecond, 2 * time.Second}, []time.Duration{c.PolicyTimeout, c.EnvTimeout, c.CriticTimeout})
	assert.Equal(t, uint64(5), s.Codec)
	assert.Equal(t, Part{Kind: "remote", Object: 3}, s.Policy)
	assert.Equal(t, Part{Kind: "remote", Object: 4}, s.Env)
	require.NotNil(t, s.Critic)
	assert.Equal(t, Part{Kind: "http", URL: "http://v", Timeout: 3}, *s.Critic)
	require.NotNil(t, s.Turn)
	assert.Equal(t, "hermes", s.Turn.Parser)
	assert.Len(t, s.Turn.Messages, 1)
	assert.JSONEq(t, `false`, string(s.Turn.TemplateKwargs["enable_thinking"]))

	r := decode(t, `{"reward":{"gamma":0.5,"critic_weight":2,"reward_min":-1,"reward_max":1,"truncated_reward":0,"truncation":"bootstrap"}}`)
	assert.Equal(t, prepare.RewardConfig{Gamma: 0.5, CriticWeight: 2, RewardMin: -1, RewardMax: 1, Truncation: "bootstrap"}, r.Config.Reward)
	assert.Nil(t, r.Critic, "no critic part: no critic")

	var bad Spec
	assert.Error(t, json.Unmarshal([]byte(`{"critic_timeout":"NaN"}`), &bad))
	assert.Error(t, json.Unmarshal([]byte(`{"policy":{"kind":3}}`), &bad))
}

func TestSessionRunsToOneResult(t *testing.T) {
	r := &fakeResolver{policy: &stopPolicy{}}
	s, err := Start(context.Background(), decode(t, mathSpec), r)
	require.NoError(t, err)
	defer s.Close()
	done, err := s.Wait(context.Background(), -1)
	require.NoError(t, err)
	require.True(t, done)

	out, err := s.Result()
	require.NoError(t, err)
	require.NoError(t, out.Err)
	require.NotNil(t, out.Tree)
	assert.Empty(t, out.Failures)
	assert.Equal(t, 4, out.Tree.Stats.Rollouts)
	assert.Equal(t, "p", out.Tree.ProblemID)
	for _, n := range out.Tree.Nodes[1:] {
		assert.Equal(t, 1.0, n.Reward, "MathEnv graded the decoded reply")
	}

	// The tree is handed over once: a second Result would give a second owner.
	_, err = s.Result()
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.ErrorContains(t, err, "already taken")

	// Polling a finished collection says so.
	_, err = s.Poll(context.Background(), 8)
	assert.Equal(t, status.Cancelled, status.CodeOf(err))
	assert.ErrorContains(t, err, "collection finished")
	assert.NoError(t, s.Close())
	assert.NoError(t, s.Close(), "Close is idempotent")
}

func TestSessionCancelWhileRunning(t *testing.T) {
	p := &blockPolicy{started: make(chan struct{}, 1)}
	s, err := Start(context.Background(), decode(t, mathSpec), &fakeResolver{policy: p})
	require.NoError(t, err)
	defer s.Close()
	<-p.started

	_, err = s.Result()
	assert.ErrorContains(t, err, "still running; wait for it first")
	done, err := s.Wait(context.Background(), 5*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, done, "the timeout passed first")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done, err = s.Wait(ctx, -1)
	assert.False(t, done)
	assert.Equal(t, status.Cancelled, status.CodeOf(err), "the wait itself was cancelled")

	s.Cancel()
	done, err = s.Wait(context.Background(), -1)
	require.NoError(t, err)
	require.True(t, done)
	out, err := s.Result()
	require.NoError(t, err)
	assert.Equal(t, status.Cancelled, status.CodeOf(out.Err))
	assert.NotNil(t, out.Tree, "the tree so far is kept")
}

func TestSessionCancelBeforeStart(t *testing.T) {
	p := &stopPolicy{}
	r := &fakeResolver{policy: p}
	spec := decode(t, mathSpec)
	spec.Critic = &Part{Kind: "http", URL: "http://127.0.0.1:9/v"}
	s, err := New(spec, r)
	require.NoError(t, err)

	// Before Start there is nothing to wait for or take.
	_, err = s.Wait(context.Background(), -1)
	assert.ErrorContains(t, err, "not started")
	_, err = s.Result()
	assert.ErrorContains(t, err, "not started")

	s.Cancel()
	err = s.Start(context.Background())
	assert.Equal(t, status.Cancelled, status.CodeOf(err))
	assert.ErrorContains(t, err, "cancelled before it started")
	done, err := s.Wait(context.Background(), -1)
	require.NoError(t, err)
	assert.True(t, done, "a cancelled session has ended")
	out, err := s.Result()
	require.NoError(t, err)
	assert.Nil(t, out.Tree)
	assert.Equal(t, status.Cancelled, status.CodeOf(out.Err))
	assert.Zero(t, p.calls.Load(), "nothing ran")

	require.NoError(t, s.Close())
	assert.Equal(t, int64(1), r.criticClosed.Load(), "the critic the session opened is closed")
}

func TestSessionStartsOnce(t *testing.T) {
	s, err := Start(context.Background(), decode(t, mathSpec), &fakeResolver{policy: &stopPolicy{}})
	require.NoError(t, err)
	defer s.Close()
	err = s.Start(context.Background())
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.ErrorContains(t, err, "already started")

	// Once it has ended (this policy stops at once) it is still a session that started,
	// not one cancelled before it started.
	done, err := s.Wait(context.Background(), -1)
	require.NoError(t, err)
	require.True(t, done)
	err = s.Start(context.Background())
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.ErrorContains(t, err, "already started")
}

func TestSessionCloseUnstarted(t *testing.T) {
	r := &fakeResolver{policy: &stopPolicy{}}
	spec := decode(t, mathSpec)
	spec.Critic = &Part{Kind: "http", URL: "http://127.0.0.1:9/v"}
	s, err := New(spec, r)
	require.NoError(t, err)
	require.NoError(t, s.Close(), "closing a session never started does not wait for it")
	assert.Equal(t, int64(1), r.criticClosed.Load())
	err = s.Start(context.Background())
	assert.Error(t, err, "a closed session does not start")
}

// A remote policy is served through Poll and Answer, as Python serves it.
func TestSessionServesRemoteParts(t *testing.T) {
	spec := decode(t, `{"problem_id":"p","prompt_tokens":[1,2,3],"segments":8,`+searchJSON+`,"codec":1,
		"policy":{"kind":"remote","object":1},"env":{"kind":"math","label":"1"},"critic":{"kind":"constant","value":0.5}}`)
	s, err := Start(context.Background(), spec, &fakeResolver{})
	require.NoError(t, err)
	defer s.Close()
	served := 0
	for {
		reqs, err := s.Poll(context.Background(), 16)
		if status.CodeOf(err) == status.Cancelled {
			break
		}
		require.NoError(t, err)
		for _, req := range reqs {
			require.Equal(t, bridge.KindPolicyGenerate, req.Kind)
			assert.Equal(t, []uint32{1, 2, 3}, req.Tokens[:3], "the prefix starts with the prompt")
			require.NoError(t, s.Answer(req.ID, bridge.Reply{Payload: []byte(`{"stop_reason":"stop"}`), Tokens: []uint32{7}, Logprobs: []float64{-1}}))
			served++
		}
	}
	// The bridge closes when the tree is done, a moment before the session records its
	// result: wait for the end first, as Python does (focus_collection_wait).
	done, err := s.Wait(context.Background(), -1)
	require.NoError(t, err)
	require.True(t, done)
	out, err := s.Result()
	require.NoError(t, err)
	require.NoError(t, out.Err)
	assert.Equal(t, 4, served)
	assert.Equal(t, 4, out.Tree.Stats.Rollouts)

	// A request that is no longer pending is refused, not lost silently.
	assert.Error(t, s.Resolve(12345, []byte(`{}`)))
	assert.Error(t, s.Fail(12345, status.Backend, "late"))
}

// TestNewRejectsBadSpecs: each error names what was wrong, and nothing the spec opened
// stays open.
func TestNewRejectsBadSpecs(t *testing.T) {
	const ok = `"problem_id":"p","prompt_tokens":[1],"codec":1,` + searchJSON
	tests := []struct {
		name, spec string
		code       status.Code
		contains   string
	}{
		{"no prompt", `{"policy":{"kind":"native","handle":1},"env":{"kind":"math"}}`, status.InvalidArgument, "prompt has no tokens"},
		{"search warmup", `{"prompt_tokens":[1],"search":{"budget":2,"warmup":3,"per_pass":4,"max_children":4,"score":"value_refinement"}}`, status.InvalidArgument, "warmup"},
		{"search score", `{"prompt_tokens":[1],"search":{"budget":2,"warmup":1,"per_pass":4,"max_children":4,"score":"best"}}`, status.InvalidArgument, "score"},
		{"reward gamma", `{` + ok + `,"reward":{"gamma":2,"reward_max":1}}`, status.InvalidArgument, "gamma"},
		{"max_retries", `{` + ok + `,"max_retries":-1}`, status.InvalidArgument, "max_retries"},
		{"segments", `{` + ok + `,"segments":-4}`, status.InvalidArgument, "segments"},
		{"negative timeout", `{` + ok + `,"env_timeout":-1}`, status.InvalidArgument, "timeouts must not be negative"},
		{"overflowing timeout", `{` + ok + `,"policy_timeout":1e300}`, status.InvalidArgument, "timeouts must not be negative"},
		{"sampling", `{` + ok + `,"sampling":{"temperature":-1}}`, status.InvalidArgument, "base sampling parameters"},
		{"unknown policy kind", `{` + ok + `,"policy":{"kind":"python"},"env":{"kind":"remote"}}`, status.InvalidArgument, `unknown policy kind "python", expected native or remote`},
		{"unknown native policy", `{` + ok + `,"policy":{"kind":"native","handle":9},"env":{"kind":"remote"}}`, status.InvalidHandle, "handle 9"},
		{"unknown env kind", `{` + ok + `,"policy":{"kind":"remote"},"env":{"kind":"gym"}}`, status.InvalidArgument, `unknown env kind "gym", expected math or remote`},
		{"math env without codec", `{"prompt_tokens":[1],` + searchJSON + `,"policy":{"kind":"remote"},"env":{"kind":"math"}}`, status.InvalidArgument, "MathEnv needs a codec"},
		{"unknown critic kind", `{` + ok + `,"policy":{"kind":"remote"},"env":{"kind":"remote"},"critic":{"kind":"oracle"}}`, status.InvalidArgument, `unknown critic kind "oracle", expected constant, http or remote`},
		{"unknown codec", `{"prompt_tokens":[1],"codec":7}`, status.InvalidHandle, "handle 7"},
		{"turn without codec", `{"prompt_tokens":[1],"turn":{"parser":"hermes","messages":[{}]}}`, status.InvalidArgument, "whole-turn context needs a codec"},
		{"turn the resolver refuses", `{` + ok + `,"turn":{"parser":"hermes","messages":[{}]}}`, status.InvalidArgument, "no turns here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &fakeResolver{policy: &stopPolicy{}}
			_, err := New(decode(t, tt.spec), r)
			require.Error(t, err)
			assert.Equal(t, tt.code, status.CodeOf(err), "%v", err)
			assert.Contains(t, err.Error(), tt.contains)
			assert.Equal(t, r.criticOpened.Load(), r.criticClosed.Load(), "an opened critic is closed")
		})
	}

	// Native parts need a resolver.
	_, err := New(decode(t, mathSpec), nil)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.ErrorContains(t, err, "resolver")
}

func TestSessionProgress(t *testing.T) {
	p := &blockPolicy{started: make(chan struct{}, 1)}
	s, err := New(decode(t, mathSpec), &fakeResolver{policy: p})
	require.NoError(t, err)
	defer s.Close()
	before := s.Progress()
	assert.Equal(t, 4, before.Budget, "the spec's budget before the run starts")
	assert.Zero(t, before.RolloutsLaunched)
	assert.False(t, before.Done)

	require.NoError(t, s.Start(context.Background()))
	<-p.started
	// Read concurrently with the running engine (go test -race checks the reads).
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				got := s.Progress()
				assert.Equal(t, 4, got.Budget)
				assert.Equal(t, 2, got.RolloutsLaunched, "the two warmup rollouts are in flight")
				assert.False(t, got.Done)
			}
		}()
	}
	wg.Wait()
	s.Cancel()
	_, err = s.Wait(context.Background(), -1)
	require.NoError(t, err)
	end := s.Progress()
	assert.True(t, end.Done)
	assert.Zero(t, end.RolloutsFinished, "cancelled rollouts are not counted")
}

func TestSessionProgressMatchesResult(t *testing.T) {
	s, err := Start(context.Background(), decode(t, mathSpec), &fakeResolver{policy: &stopPolicy{}})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Wait(context.Background(), -1)
	require.NoError(t, err)
	out, err := s.Result()
	require.NoError(t, err)
	got := s.Progress()
	assert.True(t, got.Done)
	assert.Equal(t, out.Tree.Stats.Rollouts, got.RolloutsFinished)
	assert.Equal(t, out.Tree.Stats.GeneratedTokens, got.GeneratedTokens)
	assert.Equal(t, len(out.Tree.Nodes)-1, got.Segments)
}

func TestSessionResumesATree(t *testing.T) {
	run := func(spec string) *tree.Tree {
		t.Helper()
		s, err := Start(context.Background(), decode(t, spec), &fakeResolver{policy: &stopPolicy{}})
		require.NoError(t, err)
		defer s.Close()
		_, err = s.Wait(context.Background(), -1)
		require.NoError(t, err)
		out, err := s.Result()
		require.NoError(t, err)
		require.NoError(t, out.Err)
		return out.Tree
	}
	first := run(mathSpec)
	data, err := tree.Marshal(first)
	require.NoError(t, err)
	bigger := strings.Replace(mathSpec, `"budget":4`, `"budget":6`, 1)
	resumed := run(strings.Replace(bigger, `"turn":null`, `"turn":null,"resume":`+string(data), 1))
	assert.Equal(t, 6, resumed.Stats.Rollouts)
	assert.Equal(t, 4, resumed.Stats.RolloutsResumed)
	assert.True(t, resumed.Nodes[1].OffPolicy)
	assert.Nil(t, decode(t, strings.Replace(mathSpec, `"turn":null`, `"turn":null,"resume":null`, 1)).Resume)

	var bad Spec
	err = json.Unmarshal([]byte(`{"resume":{"problem_id":"p","nodes":[]}}`), &bad)
	assert.ErrorContains(t, err, "resume: tree")
}
