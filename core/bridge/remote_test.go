package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/mathenv"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

func byteIDs(s string) []uint32 {
	ids := make([]uint32, len(s))
	for i := range s {
		ids[i] = uint32(s[i])
	}
	return ids
}

func byteText(ids []uint32) (string, error) {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b), nil
}

// answerPolicy writes "so x=\boxed{5}" or "...{4}" depending on the seed,
// `segment` tokens at a time, continuing from the prefix.
type answerPolicy struct{ prompt int }

func (p answerPolicy) Generate(_ context.Context, req generate.Request) (*generate.Result, error) {
	answer := "so x=\\boxed{5}"
	if *req.Params.Seed%3 == 0 {
		answer = "so x=\\boxed{4}"
	}
	done := len(req.Tokens) - p.prompt
	n := min(*req.Params.MaxTokens, len(answer)-done)
	stop := generate.StopReasonLength
	if done+n == len(answer) {
		stop = generate.StopReasonStop
	}
	lps := make([]float64, n)
	for i := range lps {
		lps[i] = -0.125 * float64(i%4)
	}
	return &generate.Result{Tokens: byteIDs(answer[done : done+n]), Logprobs: lps, StopReason: stop, Text: answer[done : done+n], ExactGeneration: true}, nil
}

// python plays the Python driver: it polls, serves each request in its own
// goroutine from native Go objects through the documented JSON shapes, and
// resolves by id.
type python struct {
	b         *Bridge
	policy    collect.Policy
	critic    collect.Critic
	mu        sync.Mutex
	envs      map[int64]collect.Env
	next      int64
	closes    atomic.Int64
	cancels   atomic.Int64
	forkSteps atomic.Int64 // env.step requests that also forked
	wg        sync.WaitGroup
}

// answerOne answers the bridge's next request, in the background, with what answer returns.
func answerOne(b *Bridge, answer func(Request) Reply) {
	go func() {
		if r, err := b.Poll(context.Background()); err == nil {
			_ = b.Answer(r.ID, answer(r))
		}
	}()
}

func servePython(b *Bridge, policy collect.Policy, env collect.Env, c collect.Critic) *python {
	py := &python{b: b, policy: policy, critic: c, envs: map[int64]collect.Env{100: env}, next: 100}
	py.wg.Add(1)
	go func() {
		defer py.wg.Done()
		for {
			r, err := b.Poll(context.Background())
			if err != nil {
				return
			}
			py.wg.Add(1)
			go func() {
				defer py.wg.Done()
				py.serve(r)
			}()
		}
	}()
	return py
}

func (py *python) env(id int64) collect.Env {
	py.mu.Lock()
	defer py.mu.Unlock()
	return py.envs[id]
}

func (py *python) fork(object int64) (int64, error) {
	forked, err := py.env(object).Fork(context.Background())
	if err != nil {
		return 0, err
	}
	py.mu.Lock()
	defer py.mu.Unlock()
	py.next++
	py.envs[py.next] = forked
	return py.next, nil
}

func (py *python) serve(r Request) {
	ctx := context.Background()
	reply := func(v any, err error) {
		if err != nil {
			_ = py.b.Fail(r.ID, status.CodeOf(err), err.Error())
			return
		}
		data, _ := json.Marshal(v)
		_ = py.b.Resolve(r.ID, data)
	}
	switch r.Kind {
	case KindCancel:
		py.cancels.Add(1)
	case KindPolicyGenerate:
		var p struct {
			Params generate.SamplingParams `json:"params"`
		}
		if err := json.Unmarshal(r.Payload, &p); err != nil {
			reply(nil, err)
			return
		}
		res, err := py.policy.Generate(ctx, generate.Request{Tokens: r.Tokens, Params: p.Params})
		if err != nil {
			reply(nil, err)
			return
		}
		// As the Python driver does: ids and logprobs beside the JSON.
		meta, _ := json.Marshal(map[string]any{"text": res.Text, "stop_reason": res.StopReason, "matched_stop": nil})
		_ = py.b.Answer(r.ID, Reply{Payload: meta, Tokens: res.Tokens, Logprobs: res.Logprobs})
	case KindEnvReset:
		obs, err := py.env(r.Object).Reset(ctx)
		reply(map[string]any{"observation": map[string]any{"text": obs.Text, "tokens": obs.Tokens}}, err)
	case KindEnvStep:
		var p struct {
			Action struct {
				Kind     string `json:"kind"`
				Finished bool   `json:"finished"`
			} `json:"action"`
			Fork bool `json:"fork"`
		}
		if err := json.Unmarshal(r.Payload, &p); err != nil || p.Action.Kind != "tokens" {
			reply(nil, fmt.Errorf("bad step payload %s", r.Payload))
			return
		}
		step, err := py.env(r.Object).Step(ctx, action.Action{Kind: action.KindTokens, Chunk: &action.TokenChunk{Tokens: r.Tokens, Finished: p.Action.Finished}})
		if err != nil {
			reply(nil, err)
			return
		}
		out := map[string]any{"observation": nil, "reward": step.Reward, "done": step.Done, "info": json.RawMessage(step.Info)}
		if p.Fork && !step.Done { // as the Python driver does: fork after the step
			py.forkSteps.Add(1)
			id, err := py.fork(r.Object)
			if err != nil {
				reply(nil, err)
				return
			}
			out["object"] = id
		}
		reply(out, nil)
	case KindEnvFork:
		id, err := py.fork(r.Object)
		reply(map[string]any{"object": id}, err)
	case KindEnvClose:
		py.mu.Lock()
		delete(py.envs, r.Object)
		py.mu.Unlock()
		py.closes.Add(1)
	case KindCriticScore:
		var p struct {
			Contexts []string `json:"contexts"`
		}
		if err := json.Unmarshal(r.Payload, &p); err != nil {
			reply(nil, err)
			return
		}
		values, err := py.critic.Score(ctx, p.Contexts)
		reply(map[string]any{"values": values}, err)
	default:
		_ = py.b.Fail(r.ID, status.InvalidArgument, "unknown kind "+r.Kind)
	}
}

func remoteConfig() collect.Config {
	prompt := "Solve 3x+7=22. "
	return collect.Config{
		ProblemID: "linear", PromptTokens: byteIDs(prompt), PromptText: prompt,
		Segments: 4, MaxTotalTokens: 64, Search: search.Selective(12, 6), Reward: prepare.DefaultRewardConfig(),
	}
}

func marshal(t *testing.T, tr *tree.Tree) string {
	t.Helper()
	cp := *tr
	cp.Stats.WallSeconds, cp.Stats.PolicySeconds = 0, 0
	data, err := tree.Marshal(&cp)
	require.NoError(t, err)
	return string(data)
}

func TestRemoteCollectionMatchesNative(t *testing.T) {
	cfg := remoteConfig()
	policy := answerPolicy{prompt: len(cfg.PromptTokens)}
	native, err := collect.Run(context.Background(), cfg, policy, mathenv.New("5", byteText), collect.ConstantCritic{Value: 0.5})
	require.NoError(t, err)

	b := New()
	py := servePython(b, policy, mathenv.New("5", byteText), collect.ConstantCritic{Value: 0.5})
	remote, err := collect.Run(context.Background(), cfg, Policy{b, 1}, Env{b, 100}, Critic{b, 2})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.Queued() == 0 }, time.Minute, time.Millisecond, "close notifications are taken")
	b.Close()
	py.wg.Wait()

	assert.Equal(t, marshal(t, native.Tree), marshal(t, remote.Tree), "the bridge changes nothing")
	py.mu.Lock()
	defer py.mu.Unlock()
	assert.Len(t, py.envs, 1, "every fork was closed; only the caller's root env is left")
	assert.Positive(t, py.closes.Load())
	assert.Positive(t, py.forkSteps.Load(), "snapshots were taken in the step's round trip")
	assert.Zero(t, b.Pending())
}

func TestRemoteFailuresAndCancellation(t *testing.T) {
	t.Run("python exception fails the rollout", func(t *testing.T) {
		b := New()
		defer b.Close()
		failing := failingPolicy{}
		py := servePython(b, failing, mathenv.New("5", byteText), collect.ConstantCritic{Value: 0.5})
		defer py.wg.Wait()
		defer b.Close()
		cfg := remoteConfig()
		cfg.Search = search.Independent(2)
		res, err := collect.Run(context.Background(), cfg, Policy{b, 1}, Env{b, 100}, Critic{b, 2})
		assert.Equal(t, status.Collection, status.CodeOf(err))
		require.Len(t, res.Failures, 2)
		assert.Equal(t, "policy: RuntimeError: CUDA out of memory", res.Failures[0].Message)
	})
	t.Run("cancel abandons python calls", func(t *testing.T) {
		b := New()
		// A Python side that takes requests but never answers.
		polled := make(chan Request, 64)
		go func() {
			for {
				r, err := b.Poll(context.Background())
				if err != nil {
					close(polled)
					return
				}
				polled <- r
			}
		}()
		// Reset and one fork per warmup rollout are answered; generation hangs.
		go func() {
			for r := range polled {
				switch r.Kind {
				case KindEnvReset:
					_ = b.Resolve(r.ID, []byte(`{"observation": null}`))
				case KindEnvFork:
					_ = b.Resolve(r.ID, []byte(fmt.Sprintf(`{"object": %d}`, 1000+r.ID)))
				}
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		cfg := remoteConfig()
		cfg.Search = search.Independent(3)
		// No policy call is ever answered: Run returning shows the deadline ended it.
		res, err := collect.Run(ctx, cfg, Policy{b, 1}, Env{b, 100}, nil)
		assert.Equal(t, status.Timeout, status.CodeOf(err))
		assert.Len(t, res.Tree.Nodes, 1)
		assert.Zero(t, b.Pending(), "nothing is left waiting")
		b.Close()
	})
}

type failingPolicy struct{}

func (failingPolicy) Generate(context.Context, generate.Request) (*generate.Result, error) {
	return nil, status.Errorf(status.Backend, "RuntimeError: CUDA out of memory")
}

func TestRemoteDecoding(t *testing.T) {
	tests := []struct {
		name    string
		kind    string
		reply   string
		check   func(t *testing.T, b *Bridge) error
		wantErr string
	}{
		{"result with matched stop token", KindPolicyGenerate,
			`{"tokens":[5,6],"logprobs":[-0.5,-1],"text":"ab","stop_reason":"stop","matched_stop":151645,"top_logprobs":[{"5":-0.5},{"6":-1,"7":-2}],"prompt_tokens":3,"cached_tokens":2}`,
			func(t *testing.T, b *Bridge) error {
				res, err := Policy{b, 1}.Generate(context.Background(), generate.Request{Tokens: []uint32{1, 2, 3}, Params: generate.SamplingParams{MaxTokens: generate.Int(4)}})
				if err != nil {
					return err
				}
				assert.Equal(t, []uint32{5, 6}, res.Tokens)
				assert.Equal(t, generate.StopMatch{Kind: generate.MatchToken, Token: 151645}, res.MatchedStop)
				assert.Equal(t, []map[uint32]float64{{5: -0.5}, {6: -1, 7: -2}}, res.TopLogprobs)
				assert.Equal(t, []uint32{1, 2, 3}, res.PrefixTokens)
				assert.Equal(t, 0.75, res.Entropy)
				return res.Validate("policy", 4)
			}, ""},
		{"matched stop string", KindPolicyGenerate, `{"tokens":[],"logprobs":[],"stop_reason":"stop","matched_stop":"</answer>"}`,
			func(t *testing.T, b *Bridge) error {
				res, err := Policy{b, 1}.Generate(context.Background(), generate.Request{})
				if err == nil {
					assert.Equal(t, "</answer>", res.MatchedStop.String)
				}
				return err
			}, ""},
		{"null logprob is no logprob (valid; the engine makes the edge inexact)", KindPolicyGenerate, `{"tokens":[5],"logprobs":[null],"stop_reason":"stop"}`,
			func(t *testing.T, b *Bridge) error {
				res, err := Policy{b, 1}.Generate(context.Background(), generate.Request{})
				require.NoError(t, err)
				assert.True(t, math.IsNaN(res.Logprobs[0]))
				return res.Validate("policy", 4)
			}, ""},
		{"positive logprob is rejected by validation", KindPolicyGenerate, `{"tokens":[5],"logprobs":[0.5],"stop_reason":"stop"}`,
			func(t *testing.T, b *Bridge) error {
				res, err := Policy{b, 1}.Generate(context.Background(), generate.Request{})
				require.NoError(t, err)
				return res.Validate("policy", 4)
			}, "is positive"},
		{"exact defaults to true", KindPolicyGenerate, `{"tokens":[5],"logprobs":[-1],"stop_reason":"stop"}`,
			func(t *testing.T, b *Bridge) error {
				res, err := Policy{b, 1}.Generate(context.Background(), generate.Request{})
				require.NoError(t, err)
				assert.True(t, res.ExactGeneration)
				return nil
			}, ""},
		{"exact false (Policy.is_exact) reaches the result", KindPolicyGenerate, `{"tokens":[5],"logprobs":[-1],"stop_reason":"stop","exact":false}`,
			func(t *testing.T, b *Bridge) error {
				res, err := Policy{b, 1}.Generate(context.Background(), generate.Request{})
				require.NoError(t, err)
				assert.False(t, res.ExactGeneration)
				return nil
			}, ""},
		{"no tokens", KindPolicyGenerate, `{"text":"hi","stop_reason":"stop"}`,
			func(t *testing.T, b *Bridge) error {
				_, err := Policy{b, 1}.Generate(context.Background(), generate.Request{})
				return err
			}, `has no "tokens" list`},
		{"step reply", KindEnvStep, `{"observation":{"text":"result: 3","tokens":[9,9]},"reward":0.5,"done":false,"info":{"tool":"calc"}}`,
			func(t *testing.T, b *Bridge) error {
				step, err := Env{b, 1}.Step(context.Background(), action.Action{Kind: action.KindTokens, Chunk: &action.TokenChunk{Tokens: []uint32{1}}})
				if err == nil {
					assert.Equal(t, collect.Observation{Text: "result: 3", Tokens: []uint32{9, 9}}, step.Observation)
					assert.Equal(t, 0.5, step.Reward)
					assert.JSONEq(t, `{"tool":"calc"}`, string(step.Info))
				}
				return err
			}, ""},
		{"step without reward", KindEnvStep, `{"done":true}`,
			func(t *testing.T, b *Bridge) error {
				_, err := Env{b, 1}.Step(context.Background(), action.Action{Kind: action.KindText, Text: "hi"})
				return err
			}, `has no "reward"`},
		{"step with the fork asked for", KindEnvStep, `{"reward":0,"done":false,"object":7}`,
			func(t *testing.T, b *Bridge) error {
				_, twin, err := Env{b, 1}.StepFork(context.Background(), action.Action{Kind: action.KindText, Text: "hi"})
				if err == nil {
					assert.Equal(t, Env{b, 7}, twin)
				}
				return err
			}, ""},
		{"done step forks nothing", KindEnvStep, `{"reward":1,"done":true}`,
			func(t *testing.T, b *Bridge) error {
				step, twin, err := Env{b, 1}.StepFork(context.Background(), action.Action{Kind: action.KindText, Text: "hi"})
				assert.True(t, step.Done)
				assert.Nil(t, twin)
				return err
			}, ""},
		{"step without the fork asked for", KindEnvStep, `{"reward":0,"done":false}`,
			func(t *testing.T, b *Bridge) error {
				_, _, err := Env{b, 1}.StepFork(context.Background(), action.Action{Kind: action.KindText, Text: "hi"})
				return err
			}, `has no "object" handle for the fork it was asked for`},
		{"fork without object", KindEnvFork, `{}`,
			func(t *testing.T, b *Bridge) error {
				_, err := Env{b, 1}.Fork(context.Background())
				return err
			}, `has no "object" handle`},
		{"reset with null observation", KindEnvReset, `{"observation":null}`,
			func(t *testing.T, b *Bridge) error {
				obs, err := Env{b, 1}.Reset(context.Background())
				assert.True(t, obs.Empty())
				return err
			}, ""},
		{"critic wrong count", KindCriticScore, `{"values":[0.5]}`,
			func(t *testing.T, b *Bridge) error {
				_, err := Critic{b, 2}.Score(context.Background(), []string{"a", "b"})
				return err
			}, "critic: python critic (object 2): returned 1 values for 2 contexts"},
		{"not json", KindCriticScore, `NaN`,
			func(t *testing.T, b *Bridge) error {
				_, err := Critic{b, 2}.Score(context.Background(), []string{"a"})
				return err
			}, "critic.score reply from object 2 is not the expected JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New()
			defer b.Close()
			answerOne(b, func(r Request) Reply {
				assert.Equal(t, tt.kind, r.Kind)
				return Reply{Payload: []byte(tt.reply)}
			})
			err := tt.check(t, b)
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
			}
		})
	}
}

func TestActionPayloads(t *testing.T) {
	// A token action's ids travel beside the JSON (Request.Tokens: never nil for a token
	// action, so an empty chunk still crosses as an empty array); other kinds carry none.
	tests := []struct {
		name       string
		act        action.Action
		want       string
		wantTokens []uint32
	}{
		{"tokens", action.Action{Kind: action.KindTokens, Chunk: &action.TokenChunk{Tokens: []uint32{1, 2}, Finished: true}},
			`{"action":{"kind":"tokens","finished":true}}`, []uint32{1, 2}},
		{"empty chunk", action.Action{Kind: action.KindTokens, Chunk: &action.TokenChunk{}},
			`{"action":{"kind":"tokens","finished":false}}`, []uint32{}},
		{"text", action.Action{Kind: action.KindText, Text: "42"}, `{"action":{"kind":"text","text":"42"}}`, nil},
		{"tool", action.Action{Kind: action.KindTool, Turn: &action.ToolTurn{Text: "", Reasoning: "hm", ToolCalls: []action.ToolCall{{Name: "calc", Arguments: `{"x":1}`}}}},
			`{"action":{"kind":"tool","text":"","reasoning":"hm","tool_calls":[{"name":"calc","arguments":"{\"x\":1}","call_id":"","error":""}]}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New()
			defer b.Close()
			got := make(chan Request, 1)
			answerOne(b, func(r Request) Reply {
				got <- r
				return Reply{Payload: []byte(`{"reward":0}`)}
			})
			_, err := Env{b, 1}.Step(context.Background(), tt.act)
			require.NoError(t, err)
			r := <-got
			assert.JSONEq(t, tt.want, string(r.Payload))
			assert.Equal(t, tt.wantTokens, r.Tokens)
		})
	}
	_, err := Env{New(), 1}.Step(context.Background(), action.Action{Kind: "image"})
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
}

func TestGenerateCarriesTokensBesideTheJSON(t *testing.T) {
	tests := []struct {
		name     string
		tokens   []uint32
		logprobs []float64
		wantErr  string
	}{
		{"ids and logprobs as arrays", []uint32{5, 6}, []float64{-0.5, -1}, ""},
		{"empty generation", []uint32{}, []float64{}, ""},
		{"logprob count differs", []uint32{5, 6}, []float64{-0.5}, "has 2 tokens but 1 logprobs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New()
			defer b.Close()
			answerOne(b, func(r Request) Reply {
				assert.Equal(t, []uint32{1, 2, 3}, r.Tokens, "the prefix travels beside the payload")
				assert.NotContains(t, string(r.Payload), `"tokens"`)
				return Reply{Payload: []byte(`{"text":"ab","stop_reason":"length"}`), Tokens: tt.tokens, Logprobs: tt.logprobs}
			})
			res, err := Policy{b, 1}.Generate(context.Background(), generate.Request{Tokens: []uint32{1, 2, 3}, Params: generate.SamplingParams{MaxTokens: generate.Int(4)}})
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.tokens, res.Tokens)
			assert.Equal(t, tt.logprobs, res.Logprobs)
			assert.Equal(t, "ab", res.Text)
			assert.NoError(t, res.Validate("policy", 4))
		})
	}
}
