package main

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/backends/chat"
	"github.com/focus-go/focus-go/backends/parse"
	"github.com/focus-go/focus-go/capi/binding"
	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/session"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/sim"
)

// The C ABI's JSON inputs, fuzzed through the Go code behind the exports: _test files
// cannot use cgo, so each case runs what its export runs after goBytes (decodeJSON's
// binding.Decode, then the export's pure-Go translation and validation). Whatever the
// bytes, the result is a value or an error with a status code, never a panic (guard would
// turn a panic into an Internal error, which is still a bug).

// abiInputs are the exports' JSON inputs, by name.
var abiInputs = []struct {
	name string
	run  func(data []byte) error
}{
	{"collection spec", func(data []byte) error {
		var spec session.Spec
		if err := binding.Decode("collection spec", data, &spec); err != nil {
			return err
		}
		s, err := session.New(spec, handleParts{})
		if err != nil {
			return err
		}
		return s.Close()
	}},
	{"parse request", func(data []byte) error {
		var req wireParseRequest
		if err := binding.Decode("parse request", data, &req); err != nil {
			return err
		}
		r := action.Result{Tokens: req.Result.Tokens, Text: req.Result.Text, StopReason: req.Result.StopReason}
		for _, c := range req.Result.NativeToolCalls {
			r.NativeToolCalls = append(r.NativeToolCalls, action.ToolCall{Name: c.Name, Arguments: c.Arguments, CallID: c.CallID})
		}
		var last error
		for _, profile := range []string{parse.ProfileQwenXML, parse.ProfileHermes, parse.ProfileNative, parse.ProfileText, parse.ProfileTokenChunk} {
			parser, err := parse.ForProfile(profile, req.Tools)
			if err != nil {
				return err
			}
			if _, err := parser.Parse(r); err != nil {
				last = err
			}
		}
		return last
	}},
	{"sampling params", func(data []byte) error {
		var sp generate.SamplingParams
		if err := binding.Decode("sampling params", data, &sp); err != nil {
			return err
		}
		_, err := sp.Resolve()
		return err
	}},
	{"reward config", func(data []byte) error {
		var cfg prepare.RewardConfig
		if err := binding.Decode("reward config", data, &cfg); err != nil {
			return err
		}
		return cfg.Validate()
	}},
	{"batch", func(data []byte) error {
		var b prepare.Batch
		if err := binding.Decode("batch", data, &b); err != nil {
			return err
		}
		if err := b.Check(); err != nil {
			return err
		}
		for i := range b.Actor {
			for k := range b.Actor[i].NumSpans() {
				_ = b.Actor[i].Span(k)
			}
		}
		return nil
	}},
	{"tools and messages", func(data []byte) error {
		var req wireRenderRequest
		if err := binding.Decode("render request", data, &req); err != nil {
			return err
		}
		_, err := chat.ParseTools(req.Tools)
		return err
	}},
	{"simulated server config", func(data []byte) error {
		var cfg sim.Config
		if err := binding.Decode("simulated server config", data, &cfg); err != nil {
			return err
		}
		var fs []sim.Fault
		if err := binding.Decode("faults", data, &fs); err != nil {
			return err
		}
		return nil
	}},
	{"policy config", func(data []byte) error {
		var cfg wirePolicyConfig
		if err := binding.Decode("policy config", data, &cfg); err != nil {
			return err
		}
		return nil
	}},
	{"critic rule request", func(data []byte) error {
		var req binding.CriticRuleRequest
		if err := binding.Decode("critic rule request", data, &req); err != nil {
			return err
		}
		_, err := binding.CriticRule(req)
		return err
	}},
}

var abiSeeds = []string{
	``, `{}`, `null`, `[]`, `{"problem_id":"p","prompt_tokens":[1,2,3],"search":{"budget":4,"warmup":2,"per_pass":4,"max_children":4,"score":"value_refinement"},"policy":{"kind":"remote","object":1},"env":{"kind":"remote","object":2},"critic":{"kind":"constant","value":0.5}}`,
	`{"prompt_tokens":[1],"search":{"budget":4,"warmup":2,"per_pass":4,"max_children":4,"score":"value_refinement"},"policy":{"kind":"native","handle":99999},"env":{"kind":"math","label":"1"}}`,
	`{"prompt_tokens":[1],"search":{"budget":2,"warmup":1,"per_pass":4,"max_children":4,"score":"value_refinement"},"policy_timeout":1e308,"env_timeout":-1,"critic_timeout":"NaN"}`,
	`{"prompt_tokens":[1],"search":{"budget":2,"warmup":1,"per_pass":4,"max_children":4,"score":"value_refinement"},"policy":{"kind":"remote"},"env":{"kind":"remote"},"critic":{"kind":"http","url":"http://127.0.0.1:9/v","timeout":1}}`,
	`{"turn":{"parser":"hermes","messages":[{"role":"user"}],"tools":[{"type":"function"}]}}`,
	`{"result":{"text":"<tool_call>\n{\"name\":\"f\",\"arguments\":{}}\n</tool_call>","stop_reason":"stop"},"tools":[]}`,
	`{"result":{"text":"<tool_call><function=f><parameter=a>1</parameter></function></tool_call>","tokens":[1,2],"stop_reason":"abort"}}`,
	`{"result":{"native_tool_calls":[{"name":"f","arguments":"{"}]}}`,
	`{"temperature":-1,"top_p":2,"max_tokens":0,"stop":["a"],"seed":-5}`,
	`{"actor":[{"node_id":1,"spans":[{"tokens":[1,2],"trainable":[true],"logprobs":[0]}]}]}`,
	`{"actor":[{"node_id":-1,"spans":[{"tokens":[],"trainable":[],"logprobs":[]}]}],"critic":[{"node_id":0}]}`,
	`{"reward_min":1,"reward_max":0,"gamma":2}`,
	`{"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`,
	`{"faults":[{"kind":"hang","count":-1}],"latency":{"first_token":"5ms"},"warmup":"x"}`,
	`[{"kind":"http_error","status":503,"count":2}]`,
	`{"threshold":1,"state":{"fit":{"nodes":3,"variance":0.25,"squared_error":0.5,"inverse_count":1.8},"batches":1},"batch":[{"nodes":-1}],"base_kappa":65}`,
}

func FuzzABIJSONInputs(f *testing.F) {
	for _, s := range abiSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range abiInputs {
			// Every rejection carries the code the C boundary reports; Internal would
			// mean an error without one (or a bug).
			if err := in.run(data); err != nil && status.CodeOf(err) == status.Internal {
				t.Errorf("%s: %v", in.name, err)
			}
		}
	})
}

// TestABIInputsRejectWithCodes: the seeds that are invalid fail with InvalidArgument (or
// InvalidHandle for a handle never issued), naming what was wrong.
func TestABIInputsRejectWithCodes(t *testing.T) {
	collectCfg := abiInputs[0].run
	tests := []struct {
		name, data string
		code       status.Code
		contains   string
	}{
		{"not JSON", `{"prompt_tokens":`, status.InvalidArgument, "bad JSON"},
		{"no prompt", `{}`, status.InvalidArgument, "prompt has no tokens"},
		{"unknown handle", abiSeeds[5], status.InvalidHandle, "99999"},
		{"negative timeout", `{"prompt_tokens":[1],"search":{"budget":2,"warmup":1,"per_pass":4,"max_children":4,"score":"value_refinement"},"env_timeout":-1}`, status.InvalidArgument, "timeouts must not be negative"},
		{"overflowing timeout", `{"prompt_tokens":[1],"search":{"budget":2,"warmup":1,"per_pass":4,"max_children":4,"score":"value_refinement"},"policy_timeout":1e300}`, status.InvalidArgument, "timeouts must not be negative"},
		{"misspelt key", `{"prompt_tokens":[1],"max_retriez":3}`, status.InvalidArgument, `collection spec: unknown key "max_retriez", did you mean "max_retries"?`},
		{"misspelt part key", `{"prompt_tokens":[1],"policy":{"kind":"remote","objct":1}}`, status.InvalidArgument, `collection spec: unknown key "objct" in policy`},
		{"unknown policy kind", `{"prompt_tokens":[1],"search":{"budget":2,"warmup":1,"per_pass":4,"max_children":4,"score":"value_refinement"},"policy":{"kind":"python"},"env":{"kind":"remote"}}`, status.InvalidArgument, `unknown policy kind "python"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := collectCfg([]byte(tt.data))
			require.Error(t, err)
			assert.Equal(t, tt.code, status.CodeOf(err), "%v", err)
			assert.Contains(t, err.Error(), tt.contains)
		})
	}
}

// TestUnpublishedInputsAreStrict: the simulated server's config and faults, outside the
// schema, refuse an unknown key as the published inputs do.
func TestUnpublishedInputsAreStrict(t *testing.T) {
	var cfg sim.Config
	err := binding.Decode("simulated server config", []byte(`{"seed": 1, "verbosty": 3}`), &cfg)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.Contains(t, err.Error(), `simulated server config: unknown key "verbosty", did you mean "verbosity"? (allowed: cache, faults, latency, `)
	err = binding.Decode("simulated server config", []byte(`{"latency": {"first_token": "5ms", "per_tokn": 0.1}}`), &cfg)
	assert.Contains(t, err.Error(), `unknown key "per_tokn" in latency, did you mean "per_token"?`)
	var fs []sim.Fault
	err = binding.Decode("faults", []byte(`[{"kind": "hang"}, {"kind": "slow", "delai": 1}]`), &fs)
	assert.Contains(t, err.Error(), `faults: unknown key "delai" in [1], did you mean "delay"?`)
	require.NoError(t, binding.Decode("faults", []byte(`[{"kind": "slow", "delay": "5ms", "count": 1}]`), &fs))
	assert.Equal(t, sim.FaultSlow, fs[0].Kind)
}

// TestConcurrentCollectionHandles: collections started, polled, answered and released
// from many goroutines at once through the handle table (run with -race).
func TestConcurrentCollectionHandles(t *testing.T) {
	const workers, each = 16, 20
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				c, err := session.New(session.Spec{
					Config: collect.Config{PromptTokens: []uint32{1}, Search: search.Independent(1), Reward: prepare.DefaultRewardConfig()},
					Policy: session.Part{Kind: "remote"}, Env: session.Part{Kind: "remote"},
				}, nil)
				if !assert.NoError(t, err) {
					return
				}
				h := handles.put(c)
				got, err := collectionHandle(h)
				if !assert.NoError(t, err) {
					return
				}
				assert.Same(t, c, got)
				if (w+i)%2 == 0 {
					// Release twice from two goroutines: exactly one succeeds.
					errs := make(chan error, 2)
					go func() { errs <- handles.release(h) }()
					go func() { errs <- handles.release(h) }()
					e1, e2 := <-errs, <-errs
					assert.True(t, (e1 == nil) != (e2 == nil), "%v / %v", e1, e2)
				} else {
					assert.NoError(t, handles.release(h))
				}
				_, err = collectionHandle(h)
				assert.Equal(t, status.InvalidHandle, status.CodeOf(err))
			}
		}()
	}
	wg.Wait()
}

func collectionHandle(h uint64) (*session.Session, error) {
	return handleAs[*session.Session](h, "collection")
}
