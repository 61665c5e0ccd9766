package binding_test

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	jsoniter "github.com/json-iterator/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/backends/openai"
	"github.com/focus-go/focus-go/capi/binding"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/session"
	"github.com/focus-go/focus-go/core/status"
)

// specKeys are every key of a collection spec, sorted: what an unknown key's error lists.
const specKeys = "allow_partial, codec, critic, critic_timeout, env, env_timeout, max_retries, max_segments, " +
	"max_total_tokens, policy, policy_timeout, problem_id, prompt_text, prompt_tokens, resume, reward, routing_key, sampling, " +
	"search, segments, stop_on_abort, turn"

func TestDecodeRejectsUnknownKeys(t *testing.T) {
	tests := []struct {
		name, input, data string
		into              any
		message           string
		path, key         string
	}{
		{"misspelt spec key", "collection spec", `{"prompt_tokens": [1], "max_retriez": 3}`, &session.Spec{},
			`collection spec: unknown key "max_retriez", did you mean "max_retries"? (allowed: ` + specKeys + `)`, "", "max_retriez"},
		{"a key of another case", "collection spec", `{"Max_Retries": 3}`, &session.Spec{},
			`collection spec: unknown key "Max_Retries" (keys are case-sensitive), did you mean "max_retries"? (allowed: ` + specKeys + `)`, "", "Max_Retries"},
		{"a key of another case beside the key", "collection spec", `{"max_retries": 3, "MAX_RETRIES": 0}`, &session.Spec{},
			`collection spec: unknown key "MAX_RETRIES" (keys are case-sensitive), did you mean "max_retries"?`, "", "MAX_RETRIES"},
		{"a batch key of another case", "batch", `{"actor": [{"node_id": 1, "Weight": 2}]}`, &prepare.Batch{},
			`batch: unknown key "Weight" in actor[0] (keys are case-sensitive), did you mean "weight"?`, "actor[0]", "Weight"},
		{"a critic rule key of another case", "critic rule request", `{"state": {"fit": {"Nodes": 8}}}`, &binding.CriticRuleRequest{},
			`critic rule request: unknown key "Nodes" in state.fit (keys are case-sensitive), did you mean "nodes"?`, "state.fit", "Nodes"},
		{"in the search", "collection spec", `{"search": {"budget": 4, "budgett": 8}}`, &session.Spec{},
			`collection spec: unknown key "budgett" in search, did you mean "budget"? (allowed: budget, independent, max_children, min_remaining, per_pass, score, seed, stop_alike, warmup)`,
			"search", "budgett"},
		{"in a part", "collection spec", `{"policy": {"kind": "remote", "objekt": 1}}`, &session.Spec{},
			`collection spec: unknown key "objekt" in policy, did you mean "object"? (allowed: handle, kind, label, object, timeout, url, value)`,
			"policy", "objekt"},
		{"in the critic", "collection spec", `{"critic": {"kind": "constant", "val": 1}}`, &session.Spec{},
			`collection spec: unknown key "val" in critic`, "critic", "val"},
		{"in the turn", "collection spec", `{"turn": {"parser": "hermes", "template_kwarg": {}}}`, &session.Spec{},
			`collection spec: unknown key "template_kwarg" in turn, did you mean "template_kwargs"?`, "turn", "template_kwarg"},
		{"in the sampling", "collection spec", `{"sampling": {"temprature": 1}}`, &session.Spec{},
			`collection spec: unknown key "temprature" in sampling, did you mean "temperature"?`, "sampling", "temprature"},
		{"in the reward", "collection spec", `{"reward": {"kappa": 1}}`, &session.Spec{},
			`collection spec: unknown key "kappa" in reward (allowed: critic_weight, gamma, reward_max, reward_min, truncated_reward, truncation)`, "reward", "kappa"},
		{"sampling params", "sampling params", `{"max_token": 8}`, &generate.SamplingParams{},
			`sampling params: unknown key "max_token", did you mean "max_tokens"?`, "", "max_token"},
		{"reward config", "reward config", `{"gama": 0.9}`, &prepare.RewardConfig{},
			`reward config: unknown key "gama", did you mean "gamma"?`, "", "gama"},
		{"policy config", "policy config", `{"backend": "sglang", "base_url": "http://x", "retries": 2}`, &binding.PolicyConfig{},
			`policy config: unknown key "retries"`, "", "retries"},
		{"openai request params", "openai request", `{"messages": [], "params": {"topp": 1}}`, &binding.OpenAIRequest{},
			`openai request: unknown key "topp" in params, did you mean "top_p"?`, "params", "topp"},
		{"in a list", "parse request", `{"result": {"native_tool_calls": [{"name": "f"}, {"name": "g", "args": "{}"}]}}`, &binding.ParseRequest{},
			`parse request: unknown key "args" in result.native_tool_calls[1]`, "result.native_tool_calls[1]", "args"},
		{"grade request", "math grade request", `{"text": "x", "labels": "1"}`, &binding.GradeRequest{},
			`math grade request: unknown key "labels", did you mean "label"? (allowed: label, text)`, "", "labels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := binding.Decode(tt.input, []byte(tt.data), tt.into)
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tt.message)
			var unknown *binding.UnknownKeyError
			require.True(t, errors.As(err, &unknown), "%v", err)
			assert.Equal(t, tt.input, unknown.Input)
			assert.Equal(t, tt.path, unknown.Path)
			assert.Equal(t, tt.key, unknown.Key)
		})
	}
}

func TestDecodeReadsKnownKeys(t *testing.T) {
	var spec session.Spec
	require.NoError(t, binding.Decode("collection spec", []byte(`{"prompt_tokens": [1, 2], "max_retries": 3, "policy_timeout": 1.5,
		"search": {"budget": 4, "warmup": 2}, "policy": {"kind": "native", "handle": 7}, "env": {"kind": "math", "label": "4"},
		"critic": null, "reward": null, "turn": {"parser": "hermes", "messages": [{"role": "user", "anything": 1}], "template_kwargs": {"enable_thinking": false}}}`), &spec))
	assert.Equal(t, []uint32{1, 2}, spec.Config.PromptTokens)
	assert.Equal(t, 3, spec.Config.MaxRetries)
	assert.Equal(t, 1500*time.Millisecond, spec.Config.PolicyTimeout)
	assert.Equal(t, 4, spec.Config.Search.Budget)
	assert.Equal(t, prepare.DefaultRewardConfig(), spec.Config.Reward)
	assert.Equal(t, session.Part{Kind: "native", Handle: 7}, spec.Policy)
	assert.Equal(t, "4", spec.Env.Label)
	assert.Nil(t, spec.Critic)
	require.NotNil(t, spec.Turn)
	assert.Equal(t, "hermes", spec.Turn.Parser)

	// A chat message is the caller's content: its keys are not checked.
	var msgs []openai.Message
	require.NoError(t, binding.Decode("messages", []byte(`[{"role": "user", "content": "hi", "extra": 1}]`), &msgs))
	assert.Equal(t, "user", msgs[0].Role)
	// A map's keys are free; its values are checked.
	var render binding.RenderRequest
	require.NoError(t, binding.Decode("render request", []byte(`{"messages": [], "kwargs": {"enable_thinking": true}}`), &render))
	assert.Contains(t, render.Kwargs, "enable_thinking")
}

// TestDecodeRefusesValues: every refusal names the input, the value's path, what was
// wrong and what is allowed, for each kind of input the library reads.
func TestDecodeRefusesValues(t *testing.T) {
	tests := []struct {
		name, input, data string
		into              any
		message, field    string
	}{
		{"NaN in a critic rule state", "critic rule request", `{"state": {"fit": {"nodes": 8, "variance": NaN, "squared_error": 1, "inverse_count": 1}}}`,
			&binding.CriticRuleRequest{}, "critic rule request: state.fit.variance is NaN; a finite number is required", "state.fit.variance"},
		{"Infinity in a batch fit", "critic rule request", `{"batch": [{"nodes": 1}, {"nodes": Infinity}]}`,
			&binding.CriticRuleRequest{}, "critic rule request: batch[1].nodes is Infinity; a finite number is required", "batch[1].nodes"},
		{"NaN setting", "critic rule request", `{"threshold": NaN}`, &binding.CriticRuleRequest{},
			"critic rule request: threshold is NaN; a finite number or null is required", "threshold"},
		{"a timeout of 1e999 seconds", "collection spec", `{"policy_timeout": 1e999}`, &session.Spec{},
			"collection spec: policy_timeout is 1e999, beyond the range of a 64-bit float; a finite number is required", "policy_timeout"},
		{"a negative prompt token", "collection spec", `{"prompt_tokens": [1, -2]}`, &session.Spec{},
			"collection spec: prompt_tokens[1] is -2; an integer in [0, 4294967295] is required", "prompt_tokens[1]"},
		{"a string budget", "collection spec", `{"search": {"budget": "8"}}`, &session.Spec{},
			`collection spec: search.budget is the string "8"; an integer is required`, "search.budget"},
		{"a list for the search", "collection spec", `{"search": [1], "policy": "remote"}`, &session.Spec{},
			"collection spec: search is a list; an object is required", "search"},
		{"NaN in a resumed tree", "collection spec", `{"resume": {"nodes": [{"id": 0, "reward": NaN}]}}`, &session.Spec{},
			"collection spec: resume.nodes[0].reward is NaN; a finite number is required", "resume.nodes[0].reward"},
		{"a key in another case in a resumed tree", "collection spec", `{"resume": {"nodes": [{"id": 0, "parent": -1, "depth": 0, "reward": 0, "Reward": 1}]}}`, &session.Spec{},
			`collection spec: resume: tree: unknown key "Reward" in nodes[0] (keys are case-sensitive), did you mean "reward"?`, ""},
		{"a string in a resumed tree", "collection spec", `{"resume": {"nodes": [{"id": 0, "parent": -1, "depth": 0, "reward": "x"}]}}`, &session.Spec{},
			`collection spec: resume: tree: nodes[0].reward is the string "x"; a finite number is required`, "nodes[0].reward"},
		{"a key twice", "collection spec", `{"max_retries": 3, "max_retries": 0}`, &session.Spec{},
			"collection spec: max_retries is given twice; one value per key is required", "max_retries"},
		{"NaN temperature", "sampling params", `{"temperature": NaN}`, &generate.SamplingParams{},
			"sampling params: temperature is NaN; a finite number", "temperature"},
		{"NaN actor weight", "batch", `{"actor": [{"node_id": 1, "weight": NaN}]}`, &prepare.Batch{},
			"batch: actor[0].weight is NaN; a finite number is required", "actor[0].weight"},
		{"NaN diagnostic", "batch", `{"critic": [{"node_id": 1, "diagnostics": {"kappa_hat": NaN}}]}`, &prepare.Batch{},
			"batch: critic[0].diagnostics.kappa_hat is NaN; a finite number is required", "critic[0].diagnostics.kappa_hat"},
		{"a string diagnostic", "batch", `{"critic": [{"node_id": 1, "diagnostics": {"n": "1"}}]}`, &prepare.Batch{},
			`batch: critic[0].diagnostics.n is the string "1"; a finite number is required`, "critic[0].diagnostics.n"},
		{"a fractional token", "batch", `{"actor": [{"spans": [{"tokens": [1.5]}]}]}`, &prepare.Batch{},
			"batch: actor[0].spans[0].tokens[0] is 1.5; an integer in [0, 4294967295] is required", "actor[0].spans[0].tokens[0]"},
		{"a cut-off batch", "batch", `{"actor": [{"node_id": 1, "spans": [{"tokens": [1, 2`, &prepare.Batch{},
			"batch: bad JSON at byte 52 (in actor[0].spans[0].tokens): the input ends before the value is complete", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := binding.Decode(tt.input, []byte(tt.data), tt.into)
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tt.message)
			assert.Equal(t, tt.field, status.FieldOf(err))
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	var spec session.Spec
	err := binding.Decode("collection spec", []byte(`{"prompt_tokens":`), &spec)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.Contains(t, err.Error(), "collection spec: bad JSON")

	// A published input decoded into another type is a bug in the caller.
	err = binding.Decode("collection spec", []byte(`{}`), &generate.SamplingParams{})
	assert.Equal(t, status.Internal, status.CodeOf(err))
	assert.Contains(t, err.Error(), "the schema declares session.Spec")
}

// TestDecodeUnpublishedInput: an input outside the schema (capi's simulated server config)
// is checked against its own type's keys.
func TestDecodeUnpublishedInput(t *testing.T) {
	type latency struct {
		FirstToken float64 `json:"first_token"`
	}
	type server struct {
		Seed    int64     `json:"seed"`
		Latency latency   `json:"latency"`
		Faults  []latency `json:"faults,omitempty"`
		Skipped int       `json:"-"`
		Plain   string
	}
	var s server
	require.NoError(t, binding.Decode("server config", []byte(`{"seed": 2, "latency": {"first_token": 0.5}, "Plain": "x"}`), &s))
	assert.Equal(t, server{Seed: 2, Latency: latency{0.5}, Plain: "x"}, s)
	err := binding.Decode("server config", []byte(`{"latency": {"first_tokens": 1}}`), &s)
	assert.EqualError(t, err, `server config: unknown key "first_tokens" in latency, did you mean "first_token"? (allowed: first_token)`)
	err = binding.Decode("server config", []byte(`{"Skipped": 1}`), &s)
	assert.EqualError(t, err, `server config: unknown key "Skipped" (allowed: Plain, faults, latency, seed)`)
	err = binding.Decode("server config", []byte(`[{"seed": 1}, {"sed": 2}]`), &[]server{})
	assert.EqualError(t, err, `server config: unknown key "sed" in [1], did you mean "seed"? (allowed: Plain, faults, latency, seed)`)
}

func BenchmarkDecodeSpec(b *testing.B) {
	data := []byte(`{"problem_id": "p", "prompt_tokens": [` + tokens(2000) + `], "prompt_text": "x", "segments": 256,
		"max_segments": 64, "max_total_tokens": 8192, "sampling": {"temperature": 1, "logprobs": 0},
		"search": {"budget": 32, "warmup": 16, "per_pass": 4, "max_children": 4, "min_remaining": 0, "score": "value_refinement_per_token", "seed": 0, "stop_alike": true, "independent": false},
		"reward": {"gamma": 1, "critic_weight": 1, "reward_min": 0, "reward_max": 1, "truncated_reward": 0, "truncation": "terminal"},
		"allow_partial": false, "codec": 1, "policy": {"kind": "native", "handle": 2}, "env": {"kind": "math", "label": "4"},
		"critic": null, "policy_timeout": 0, "env_timeout": 0, "critic_timeout": 0, "turn": null}`)
	b.ReportAllocs()
	for b.Loop() {
		var spec session.Spec
		if err := binding.Decode("collection spec", data, &spec); err != nil {
			b.Fatal(err)
		}
	}
}

func tokens(n int) string {
	out := make([]byte, 0, n*6)
	for i := range n {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, []byte("151643")...)
	}
	return string(out)
}

// FuzzDecode: whatever the bytes, every published input decodes to a value or an
// InvalidArgument error, never a panic; and what Decode accepts, the plain decoder reads
// to the same value (the check only ever refuses).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{``, `{}`, `null`, `[]`, `{"prompt_tokens": [1], "max_retriez": 3}`, `{"search": {"budget": 4}}`,
		`{"result": {"native_tool_calls": [{"name": "f", "args": 1}]}}`, `{"kwargs": {"a": {"b": 1}}}`, `[{"role": "user", "x": 1}]`,
		`{"policy": {"kind": "remote", "object": 1}, "critic": null, "turn": {"messages": [{}]}}`, `{"a":`, `{"\u0041": 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range binding.Inputs {
			strict := reflect.New(in.Type)
			err := binding.Decode(in.Name, data, strict.Interface())
			if err != nil {
				if status.CodeOf(err) != status.InvalidArgument {
					t.Fatalf("%s: %v", in.Name, err)
				}
				continue
			}
			plain := reflect.New(in.Type)
			require.NoError(t, jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal(data, plain.Interface()), in.Name)
			assert.Equal(t, plain.Interface(), strict.Interface(), in.Name)
		}
	})
}

// TestConcurrentDecode: the key sets are built on first use from many goroutines at once
// (run with -race).
func TestConcurrentDecode(t *testing.T) {
	type fresh struct {
		A int `json:"a"`
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			var v fresh
			assert.NoError(t, binding.Decode("fresh", []byte(`{"a": 1}`), &v))
			assert.Error(t, binding.Decode("fresh", []byte(`{"b": 1}`), &v))
			var spec session.Spec
			assert.Error(t, binding.Decode("collection spec", []byte(`{"max_retriez": 1}`), &spec))
		})
	}
	wg.Wait()
}
