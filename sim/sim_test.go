package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/focus-go/focus-go/backends/tokenizer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestModelDirLoadsWithTokenizer(t *testing.T) {
	s := startSim(t, Config{})
	tk, err := tokenizer.Load(s.ModelDir())
	require.NoError(t, err)
	defer tk.Close()
	assert.Greater(t, tk.VocabSize(), 256+300, "a few hundred merges at least")
	tests := []struct{ name, text string }{
		{"solution", "Subtract 7 from both sides: 3x = 22 - 7 = 15.\n"},
		{"chat", "<|im_start|>user\nSolve 3x + 7 = 22.<|im_end|>\n<|im_start|>assistant\n"},
		{"tool call", "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"(22 - 7) / 3\"}}\n</tool_call>"},
		{"think", "<think>\nplan\n</think>\n\nok"},
		{"unicode", "18°C in Paris — naïve café, x² ≥ 0 😀"},
		{"whitespace", "  two  spaces\n\n\ttab \r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tk.Encode(tt.text, false)
			require.NoError(t, err)
			back, err := tk.Decode(got, false)
			require.NoError(t, err)
			assert.Equal(t, tt.text, back)
			// the server's own byte table agrees with the Rust decoder
			assert.Equal(t, tt.text, s.decode(got, false))
		})
	}
	words, _ := tk.Encode(" both sides", false)
	assert.Len(t, words, 2, "common words are single tokens")
	specials, _ := tk.Encode("<|im_start|><|im_end|><|endoftext|>", false)
	assert.Equal(t, []uint32{s.model.v.names["<|im_start|>"], s.EOS(), s.model.v.names["<|endoftext|>"]}, specials)

	raw, err := os.ReadFile(filepath.Join(s.ModelDir(), "tokenizer_config.json"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(raw, &cfg))
	assert.Equal(t, "<|im_end|>", cfg["eos_token"])
	assert.Equal(t, ChatTemplate(), cfg["chat_template"])
	skipped, _ := tk.Decode(specials, true)
	assert.Equal(t, "", skipped, "ChatML markers are special")
}

func TestGeneratedTokenizerIsDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	s1 := startSim(t, Config{ModelDir: a})
	s2 := startSim(t, Config{ModelDir: b, Seed: 9})
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		x, err := os.ReadFile(filepath.Join(s1.ModelDir(), name))
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(s2.ModelDir(), name))
		require.NoError(t, err)
		assert.Equal(t, x, y, name)
	}
	var tok struct {
		Model struct{ Merges []string } `json:"model"`
	}
	raw, _ := os.ReadFile(filepath.Join(a, "tokenizer.json"))
	require.NoError(t, json.Unmarshal(raw, &tok))
	assert.GreaterOrEqual(t, len(tok.Model.Merges), 300)
	assert.LessOrEqual(t, len(tok.Model.Merges), maxMerges)
}

func TestChatTemplateRendering(t *testing.T) {
	s := startSim(t, Config{})
	tool := map[string]any{"type": "function", "function": map[string]any{"name": "calculator",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string"}}}}}
	tests := []struct {
		name  string
		msgs  []any
		tools []any
		want  string
	}{
		{"plain", []any{
			map[string]any{"role": "system", "content": "Be brief."},
			map[string]any{"role": "user", "content": "Hi"},
			map[string]any{"role": "assistant", "content": "Hello"},
			map[string]any{"role": "user", "content": "Bye"}}, nil,
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n" +
				"<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"},
		{"tools", []any{
			map[string]any{"role": "user", "content": "Q"},
			map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
				"function": map[string]any{"name": "calculator", "arguments": `{"expression": "1 + 1"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "c1", "content": "2"}}, []any{tool},
			"<|im_start|>system\nYou are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
				"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
				`{"function": {"name": "calculator", "parameters": {"properties": {"expression": {"type": "string"}}, "type": "object"}}, "type": "function"}` +
				"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
				"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1 + 1\"}}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\n2\n</tool_response><|im_end|>\n<|im_start|>assistant\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := map[string]any{"messages": tt.msgs, "add_generation_prompt": true}
			if tt.tools != nil {
				data["tools"] = tt.tools
			}
			got, err := s.tmpl.Render(data)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestProblems(t *testing.T) {
	ps := Problems()
	require.GreaterOrEqual(t, len(ps), 20)
	require.LessOrEqual(t, len(ps), 50)
	seen := map[string]bool{}
	for _, p := range ps {
		assert.False(t, seen[p.ID], "duplicate id %s", p.ID)
		seen[p.ID] = true
		assert.Equal(t, `\boxed{`+p.Answer+`}`, p.Label)
		assert.True(t, p.Difficulty > 0 && p.Difficulty < 1, p.ID)
		assert.NotEmpty(t, p.Expression)
	}
	assert.Equal(t, Problem{ID: "linear-3-7-22", Prompt: "Solve 3x + 7 = 22.", Label: `\boxed{5}`, Answer: "5", Kind: "linear",
		Difficulty: 0.12, Steps: 2, Expression: "(22 - 7) / 3"}, ps[0])
}

func TestGenerateWireFormat(t *testing.T) {
	s := startSim(t, Config{})
	prompt := chatPrompt(t, s, "Solve 3x + 7 = 22.")
	eos := float64(s.EOS())
	t.Run("eos", func(t *testing.T) {
		r := generate(t, s, prompt, map[string]any{"max_new_tokens": 512, "temperature": 0, "sampling_seed": 1})
		meta := obj(r["meta_info"])
		out := ids(r["output_ids"])
		assert.Equal(t, map[string]any{"type": "stop", "matched": eos}, meta["finish_reason"])
		assert.Equal(t, float64(len(prompt)), meta["prompt_tokens"])
		assert.Equal(t, float64(len(out)), meta["completion_tokens"])
		triples := arr(meta["output_token_logprobs"])
		require.Len(t, triples, len(out))
		for i, tr := range triples {
			tr := arr(tr)
			require.Len(t, tr, 3)
			assert.LessOrEqual(t, tr[0].(float64), 0.0)
			assert.Equal(t, float64(out[i]), tr[1])
			assert.Nil(t, tr[2])
		}
		assert.Equal(t, eos, float64(out[len(out)-1]), "the EOS id is part of the output")
		assert.Contains(t, r["text"], `\boxed{5}`)
		assert.NotContains(t, r["text"], "<|im_end|>", "EOS trimmed from text")
		assert.Len(t, arr(meta["output_top_logprobs"]), len(out))
		assert.NotEmpty(t, meta["id"])
	})
	t.Run("length", func(t *testing.T) {
		r := generate(t, s, prompt, map[string]any{"max_new_tokens": 7, "sampling_seed": 1})
		meta := obj(r["meta_info"])
		assert.Equal(t, map[string]any{"type": "length", "length": 7.0}, meta["finish_reason"])
		assert.Len(t, arr(r["output_ids"]), 7)
	})
	t.Run("stop string", func(t *testing.T) {
		r := generate(t, s, prompt, map[string]any{"max_new_tokens": 300, "temperature": 0, "stop": []string{"both sides"}})
		meta := obj(r["meta_info"])
		assert.Equal(t, map[string]any{"type": "stop", "matched": "both sides"}, meta["finish_reason"])
		assert.True(t, strings.HasSuffix(r["text"].(string), "Subtract 7 from "), "%q", r["text"])
		kept := generate(t, s, prompt, map[string]any{"max_new_tokens": 300, "temperature": 0, "stop": "both sides", "no_stop_trim": true})
		assert.True(t, strings.HasSuffix(kept["text"].(string), "both sides"), "%q", kept["text"])
	})
	t.Run("stop token", func(t *testing.T) {
		nl := s.model.v.index[".\n"]
		r := generate(t, s, prompt, map[string]any{"max_new_tokens": 300, "temperature": 0, "stop_token_ids": []uint32{nl}})
		meta := obj(r["meta_info"])
		assert.Equal(t, map[string]any{"type": "stop", "matched": float64(nl)}, meta["finish_reason"])
		out := ids(r["output_ids"])
		assert.Equal(t, nl, out[len(out)-1])
	})
	t.Run("batch and n", func(t *testing.T) {
		code, v := postJSON(t, s.URL()+"/generate", map[string]any{"input_ids": [][]uint32{prompt, prompt[:len(prompt)-1]},
			"rid": []string{"a", "b"}, "sampling_params": map[string]any{"max_new_tokens": 4, "n": 2, "sampling_seed": 3}})
		require.Equal(t, 200, code)
		items := arr(v)
		require.Len(t, items, 4)
		var rids []string
		for _, it := range items {
			meta := obj(obj(it)["meta_info"])
			rids = append(rids, meta["id"].(string))
			assert.Nil(t, meta["output_token_logprobs"], "absent without return_logprob")
		}
		assert.Equal(t, []string{"a_0", "a_1", "b_0", "b_1"}, rids)
	})
	t.Run("text input and top logprobs", func(t *testing.T) {
		code, v := postJSON(t, s.URL()+"/generate", map[string]any{"text": "Compute 17 * 23 + 45.", "return_logprob": true,
			"top_logprobs_num": 2, "return_text_in_logprobs": true, "sampling_params": map[string]any{"max_new_tokens": 5}})
		require.Equal(t, 200, code)
		meta := obj(obj(v)["meta_info"])
		for _, pos := range arr(meta["output_top_logprobs"]) {
			tops := arr(pos)
			assert.NotEmpty(t, tops)
			assert.LessOrEqual(t, len(tops), 2)
			assert.IsType(t, "", arr(tops[0])[2])
		}
		assert.IsType(t, "", arr(arr(meta["output_token_logprobs"])[0])[2])
	})
}

func TestGenerateErrors(t *testing.T) {
	s := startSim(t, Config{MaxModelLen: 64})
	long := make([]uint32, 70)
	tests := []struct {
		name string
		body any
		code int
		want string
	}{
		{"prompt too long", map[string]any{"input_ids": long}, 400, "The input (70 tokens) is longer than the model's context length (64 tokens)."},
		{"prompt plus output too long", map[string]any{"input_ids": long[:40], "sampling_params": map[string]any{"max_new_tokens": 30}}, 400,
			"Requested token count exceeds the model's maximum context length of 64 tokens. You requested a total of 70 tokens: 40 tokens"},
		{"no input", map[string]any{"sampling_params": map[string]any{}}, 400, "Either text, input_ids or input_embeds should be provided."},
		{"bad temperature", map[string]any{"input_ids": []int{1}, "sampling_params": map[string]any{"temperature": -1}}, 400, "temperature must be non-negative"},
		{"bad top_p", map[string]any{"input_ids": []int{1}, "sampling_params": map[string]any{"top_p": 0}}, 400, "top_p must be in (0, 1]"},
		{"out of vocabulary", map[string]any{"input_ids": []int{1 << 20}}, 400, "out of vocabulary"},
		{"wrong type", map[string]any{"input_ids": "abc"}, 422, "input_ids must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, raw := call(t, "POST", s.URL()+"/generate", tt.body)
			assert.Equal(t, tt.code, code)
			var v map[string]any
			require.NoError(t, json.Unmarshal(raw, &v))
			if tt.code == 422 {
				assert.Contains(t, obj(arr(v["detail"])[0])["msg"], tt.want)
				return
			}
			assert.Contains(t, obj(v["error"])["message"], tt.want)
		})
	}
}

func TestCompletionsWireFormat(t *testing.T) {
	s := startSim(t, Config{})
	prompt := chatPrompt(t, s, "Solve 3x + 7 = 22.")
	url := s.URL() + "/v1/completions"
	t.Run("defaults to 16 tokens", func(t *testing.T) {
		code, v := postJSON(t, url, map[string]any{"model": s.ModelName(), "prompt": prompt})
		require.Equal(t, 200, code)
		c := obj(arr(obj(v)["choices"])[0])
		assert.Equal(t, "length", c["finish_reason"])
		assert.Nil(t, c["stop_reason"])
		assert.Nil(t, c["logprobs"])
		assert.Contains(t, c, "token_ids", "unrequested extensions are null, not absent")
		assert.Nil(t, c["token_ids"])
		assert.Equal(t, 16.0, obj(obj(v)["usage"])["completion_tokens"])
	})
	t.Run("token ids and logprobs", func(t *testing.T) {
		code, v := postJSON(t, url, map[string]any{"model": s.ModelName(), "prompt": prompt, "max_tokens": 256, "temperature": 0,
			"logprobs": 0, "return_tokens_as_token_ids": true, "return_token_ids": true, "skip_special_tokens": false})
		require.Equal(t, 200, code)
		resp := obj(v)
		assert.Equal(t, "text_completion", resp["object"])
		c := obj(arr(resp["choices"])[0])
		assert.Equal(t, "stop", c["finish_reason"])
		assert.Nil(t, c["stop_reason"], "EOS gives a null stop_reason")
		tok := ids(c["token_ids"])
		assert.Equal(t, prompt, ids(c["prompt_token_ids"]))
		lp := obj(c["logprobs"])
		tokens, lps, tops := arr(lp["tokens"]), arr(lp["token_logprobs"]), arr(lp["top_logprobs"])
		require.Len(t, tokens, len(tok))
		require.Len(t, lps, len(tok))
		require.Len(t, tops, len(tok))
		for i, id := range tok {
			name := fmt.Sprintf("token_id:%d", id)
			assert.Equal(t, name, tokens[i])
			assert.Equal(t, map[string]any{name: lps[i]}, tops[i], "logprobs=0 keeps only the sampled token")
			assert.LessOrEqual(t, lps[i].(float64), 0.0)
		}
		assert.Equal(t, s.EOS(), tok[len(tok)-1])
		u := obj(resp["usage"])
		assert.Equal(t, float64(len(tok)), u["completion_tokens"])
		assert.Equal(t, float64(len(prompt)), u["prompt_tokens"])
		assert.Equal(t, float64(len(prompt)+len(tok)), u["total_tokens"])
		assert.Contains(t, obj(u["prompt_tokens_details"]), "cached_tokens")
	})
	t.Run("stop reasons", func(t *testing.T) {
		nl := s.model.v.index[".\n"]
		code, v := postJSON(t, url, map[string]any{"prompt": prompt, "max_tokens": 200, "temperature": 0, "stop_token_ids": []uint32{nl}})
		require.Equal(t, 200, code)
		c := obj(arr(obj(v)["choices"])[0])
		assert.Equal(t, "stop", c["finish_reason"])
		assert.Equal(t, float64(nl), c["stop_reason"], "int for a stop token")
		code, v = postJSON(t, url, map[string]any{"prompt": prompt, "max_tokens": 200, "temperature": 0, "stop": []string{"sides"}})
		require.Equal(t, 200, code)
		c = obj(arr(obj(v)["choices"])[0])
		assert.Equal(t, "sides", c["stop_reason"], "string for a stop string")
		assert.False(t, strings.Contains(c["text"].(string), "sides"), "text is trimmed")
	})
	t.Run("top logprobs and string tokens", func(t *testing.T) {
		code, v := postJSON(t, url, map[string]any{"prompt": prompt, "max_tokens": 12, "logprobs": 3, "seed": 4})
		require.Equal(t, 200, code)
		lp := obj(obj(arr(obj(v)["choices"])[0])["logprobs"])
		for i, top := range arr(lp["top_logprobs"]) {
			m := obj(top)
			assert.Contains(t, m, arr(lp["tokens"])[i])
			assert.LessOrEqual(t, len(m), 4)
		}
		assert.Len(t, arr(lp["text_offset"]), 12)
	})
	t.Run("batch with n", func(t *testing.T) {
		code, v := postJSON(t, url, map[string]any{"prompt": [][]uint32{prompt, prompt}, "max_tokens": 3, "n": 2})
		require.Equal(t, 200, code)
		choices := arr(obj(v)["choices"])
		require.Len(t, choices, 4)
		for i, c := range choices {
			assert.Equal(t, float64(i), obj(c)["index"])
		}
		assert.Equal(t, float64(4*len(prompt)), obj(obj(v)["usage"])["prompt_tokens"])
	})
	t.Run("cached tokens are whole blocks", func(t *testing.T) {
		body := map[string]any{"prompt": prompt, "max_tokens": 1, "seed": 1}
		postJSON(t, url, body)
		_, v := postJSON(t, url, body)
		cached := obj(obj(obj(v)["usage"])["prompt_tokens_details"])["cached_tokens"].(float64)
		assert.Equal(t, float64((len(prompt)-1)/16*16), cached)
	})
}

func TestCompletionsErrorsByVersion(t *testing.T) {
	tests := []struct {
		version string
		nested  bool
		message string
		tokenID bool
	}{
		{"0.7.3", false, "This model's maximum context length is 64 tokens. However, you requested 1010 tokens (10 in the messages, 1000 in the completion).", false},
		{"0.10.2", true, "'max_tokens' or 'max_completion_tokens' is too large: 1000. This model's maximum context length is 64 tokens and your request has 10 input tokens (1000 > 64 - 10).", true},
		{"0.12.0", true, "This model's maximum context length is 64 tokens. However, you requested 1000 output tokens and your prompt contains 10 input tokens, for a total of 1010 tokens.", true},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			s := startSim(t, Config{VLLMVersion: tt.version, MaxModelLen: 64})
			code, v := postJSON(t, s.URL()+"/v1/completions", map[string]any{"prompt": make([]int, 10), "max_tokens": 1000})
			require.Equal(t, 400, code)
			e := obj(v)
			if tt.nested {
				e = obj(e["error"])
			} else {
				assert.Equal(t, "error", e["object"])
			}
			assert.Contains(t, e["message"], tt.message)
			assert.Equal(t, "BadRequestError", e["type"])
			assert.Equal(t, 400.0, e["code"])
			code, v = postJSON(t, s.URL()+"/v1/completions", map[string]any{"model": "nope", "prompt": []int{1}})
			assert.Equal(t, 404, code)
			code, v = postJSON(t, s.URL()+"/v1/completions", map[string]any{"prompt": []int{1}, "max_tokens": 2, "return_token_ids": true})
			require.Equal(t, 200, code)
			_, has := obj(arr(obj(v)["choices"])[0])["token_ids"]
			assert.Equal(t, tt.tokenID, has)
			_, _, raw := call(t, "GET", s.URL()+"/version", nil)
			assert.JSONEq(t, fmt.Sprintf(`{"version":%q}`, tt.version), string(raw))
		})
	}
}

func TestMetadataEndpoints(t *testing.T) {
	s := startSim(t, Config{ModelName: "sim-model", MaxModelLen: 4096})
	code, _, body := call(t, "GET", s.URL()+"/health", nil)
	assert.Equal(t, 200, code)
	assert.Empty(t, body)
	code, v := getJSON(t, s.URL()+"/v1/models")
	require.Equal(t, 200, code)
	m := obj(arr(obj(v)["data"])[0])
	assert.Equal(t, "sim-model", m["id"])
	assert.Equal(t, "vllm", m["owned_by"])
	assert.Equal(t, 4096.0, m["max_model_len"])
	for _, path := range []string{"/get_model_info", "/model_info"} {
		code, v = getJSON(t, s.URL()+path)
		require.Equal(t, 200, code)
		assert.Equal(t, s.ModelDir(), obj(v)["model_path"])
		assert.Equal(t, true, obj(v)["is_generation"])
	}
	for _, path := range []string{"/get_server_info", "/server_info"} {
		code, v = getJSON(t, s.URL()+path)
		require.Equal(t, 200, code)
		assert.Equal(t, 4096.0, obj(v)["context_length"])
		assert.Equal(t, "0.5.2", obj(v)["version"])
	}
	code, _, _ = call(t, "GET", s.URL()+"/nope", nil)
	assert.Equal(t, 404, code)
	code, _, _ = call(t, "GET", s.URL()+"/generate", nil)
	assert.Equal(t, 405, code)
	st := s.Stats()
	assert.Equal(t, int64(1), st.Requests["/health"])
	assert.Equal(t, int64(1), st.Requests["/nope"])
}

func getJSON(t testing.TB, url string) (int, any) {
	t.Helper()
	code, _, raw := call(t, "GET", url, nil)
	var v any
	require.NoError(t, json.Unmarshal(raw, &v), "%s", raw)
	return code, v
}

func TestDeterminism(t *testing.T) {
	s := startSim(t, Config{})
	prompt := chatPrompt(t, s, "Compute 34 * 56 + 78.")
	run := func(seed int) ([]uint32, []any) {
		r := generate(t, s, prompt, map[string]any{"max_new_tokens": 200, "sampling_seed": seed})
		return ids(r["output_ids"]), arr(obj(r["meta_info"])["output_token_logprobs"])
	}
	a, la := run(11)
	b, lb := run(11)
	assert.Equal(t, a, b)
	assert.Equal(t, la, lb)
	distinct := map[string]bool{}
	for seed := 0; seed < 12; seed++ {
		x, _ := run(seed)
		distinct[fmt.Sprint(x)] = true
	}
	assert.Greater(t, len(distinct), 3, "different seeds sample different solutions")
	// without a seed: server seed + request counter, so two fresh servers with one seed agree
	s = startSim(t, Config{Seed: 5})
	other := startSim(t, Config{Seed: 5})
	_, v1 := postJSON(t, s.URL()+"/generate", map[string]any{"input_ids": prompt})
	_, v2 := postJSON(t, other.URL()+"/generate", map[string]any{"input_ids": prompt})
	assert.Equal(t, obj(v1)["output_ids"], obj(v2)["output_ids"])
}

func TestContinuationIsConsistent(t *testing.T) {
	s := startSim(t, Config{})
	prompt := chatPrompt(t, s, "What is the average of 120, 345, 567 and 968?")
	for _, seg := range []int{1, 5, 13, 64} {
		t.Run(fmt.Sprintf("segments of %d", seg), func(t *testing.T) {
			whole := generate(t, s, prompt, map[string]any{"max_new_tokens": 1024, "sampling_seed": 77})
			want := ids(whole["output_ids"])
			var got []uint32
			ctx := prompt
			for i := 0; i < 2000; i++ {
				r := generate(t, s, ctx, map[string]any{"max_new_tokens": seg, "sampling_seed": 77})
				out := ids(r["output_ids"])
				require.LessOrEqual(t, len(out), seg)
				got = append(got, out...)
				ctx = concat(ctx, out)
				if obj(obj(r["meta_info"])["finish_reason"])["type"] == "stop" {
					break
				}
			}
			assert.Equal(t, want, got, "segments compose into the one-shot answer")
			assert.Equal(t, s.EOS(), got[len(got)-1], "the solution completes")
			assert.Contains(t, s.decode(got, true), `\boxed{`)
		})
	}
}

// solveRate samples n answers from prompt (one batch request) and counts correct labels.
func solveRate(t *testing.T, s *Server, prompt []uint32, label string, n int, seed int) float64 {
	t.Helper()
	prompts := make([][]uint32, n)
	params := make([]map[string]any, n)
	for i := range prompts {
		prompts[i] = prompt
		params[i] = map[string]any{"max_new_tokens": 400, "sampling_seed": seed*100000 + i}
	}
	code, v := postJSON(t, s.URL()+"/generate", map[string]any{"input_ids": prompts, "sampling_params": params})
	require.Equal(t, 200, code)
	ok := 0
	for _, it := range arr(v) {
		if strings.Contains(obj(it)["text"].(string), label) {
			ok++
		}
	}
	return float64(ok) / float64(n)
}

func TestSuccessDependsOnProblemAndPath(t *testing.T) {
	s := startSim(t, Config{})
	byID := map[string]Problem{}
	for _, p := range s.Problems() {
		byID[p.ID] = p
	}
	easy, hard := byID["perimeter-12-7"], byID["series-365"]
	pe := solveRate(t, s, chatPrompt(t, s, easy.Prompt), easy.Label, 200, 1)
	ph := solveRate(t, s, chatPrompt(t, s, hard.Prompt), hard.Label, 200, 2)
	assert.Greater(t, pe, 0.8, "easy problem")
	assert.Less(t, ph, 0.7, "hard problem")
	assert.Greater(t, pe-ph, 0.2)

	// Checkpoints inside one solution: after a correct first step, after a wrong one.
	p := byID["linear-3-7-22"]
	base := chatPrompt(t, s, p.Prompt)
	enc := func(text string) []uint32 {
		x, err := s.encode(text)
		require.NoError(t, err)
		return concat(base, x)
	}
	intro := "We are asked: Solve 3x + 7 = 22. Let me solve it step by step.\n"
	good := solveRate(t, s, enc(intro+"Subtract 7 from both sides: 3x = 22 - 7 = 15.\n"), p.Label, 200, 3)
	bad := solveRate(t, s, enc(intro+"Subtract 7 from both sides: 3x = 22 - 7 = 14.\n"), p.Label, 200, 4)
	late := solveRate(t, s, enc(intro+"Subtract 7 from both sides: 3x = 22 - 7 = 14.\nDivide both sides by 3: x = 14 / 3 = 4.67.\n"), p.Label, 100, 5)
	assert.Greater(t, good, 0.75)
	assert.InDelta(t, recoverProb, bad, 0.15, "only a caught slip recovers")
	assert.Equal(t, 0.0, late, "a slip carried through is never fixed")
}

func TestMaxTokensAndStopTokens(t *testing.T) {
	s := startSim(t, Config{})
	prompt := chatPrompt(t, s, "Find the sum of the integers from 1 to 365.")
	for _, max := range []int{0, 1, 2, 3, 17, 60} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			for seed := 0; seed < 10; seed++ {
				r := generate(t, s, prompt, map[string]any{"max_new_tokens": max, "sampling_seed": seed, "temperature": 1.5})
				assert.LessOrEqual(t, len(arr(r["output_ids"])), max)
			}
		})
	}
	digits := []uint32{}
	for _, d := range "0123456789" {
		digits = append(digits, s.model.v.index[string(d)])
	}
	r := generate(t, s, prompt, map[string]any{"max_new_tokens": 200, "stop_token_ids": digits, "sampling_seed": 1})
	out := ids(r["output_ids"])
	assert.Contains(t, digits, out[len(out)-1])
	for _, id := range out[:len(out)-1] {
		assert.NotContains(t, digits, id)
	}
}

func TestSamplingControls(t *testing.T) {
	s := startSim(t, Config{})
	p := Problems()[0]
	prompt := chatPrompt(t, s, p.Prompt)
	t.Run("greedy is the likeliest path", func(t *testing.T) {
		for seed := 0; seed < 5; seed++ {
			r := generate(t, s, prompt, map[string]any{"max_new_tokens": 300, "temperature": 0, "sampling_seed": seed})
			assert.Contains(t, r["text"], p.Label)
			assert.NotContains(t, r["text"], "carefully")
		}
	})
	t.Run("top_k 1 equals greedy", func(t *testing.T) {
		a := generate(t, s, prompt, map[string]any{"max_new_tokens": 300, "temperature": 0})
		b := generate(t, s, prompt, map[string]any{"max_new_tokens": 300, "top_k": 1, "sampling_seed": 3})
		assert.Equal(t, a["output_ids"], b["output_ids"])
		for _, tr := range arr(obj(b["meta_info"])["output_token_logprobs"]) {
			assert.Equal(t, 0.0, arr(tr)[0], "processed logprobs after top-k 1 are certain")
		}
	})
	t.Run("raw logprobs ignore truncation", func(t *testing.T) {
		raw := startSim(t, Config{LogprobMode: "raw"})
		b := generate(t, raw, prompt, map[string]any{"max_new_tokens": 50, "top_k": 1})
		neg := 0
		for _, tr := range arr(obj(b["meta_info"])["output_token_logprobs"]) {
			if arr(tr)[0].(float64) < 0 {
				neg++
			}
		}
		assert.Greater(t, neg, 0)
	})
	t.Run("logprobs are log-probabilities", func(t *testing.T) {
		cur, _ := s.model.start([]byte(s.decode(prompt, false)), toolMode{})
		c := cur.candidates(s.model.v, nil)
		total := 0.0
		for _, x := range c {
			total += x.p
		}
		assert.InDelta(t, 1, total, 1e-9)
		probs, report := distribution(c, sampling{temperature: 0.5, topP: 1}, nil, nil, &mathMemo{})
		assert.InDelta(t, 1, sum(probs), 1e-9)
		assert.Equal(t, probs, report)
		if len(c) == 2 {
			ratio := math.Log(c[0].p/c[1].p) / 0.5
			assert.InDelta(t, ratio, math.Log(probs[0]/probs[1]), 1e-9, "temperature divides logits")
		}
	})
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

func TestUnknownAndOffScriptPrompts(t *testing.T) {
	s := startSim(t, Config{})
	greedy := map[string]any{"max_new_tokens": 400, "temperature": 0}
	tests := []struct {
		name   string
		prompt []uint32
		want   []string
	}{
		{"unknown problem", chatPrompt(t, s, "How many marbles are in the jar?"), []string{"Let me set up the computation:", `\boxed{`}},
		{"raw prompt with a bundled problem", mustEncode(t, s, "Question: Solve 3x + 7 = 22.\nAnswer:"), []string{`\boxed{5}`}},
		{"raw prompt without one", mustEncode(t, s, "Once upon a time"), []string{"\n\nTherefore, the answer is \\boxed{"}},
		{"assistant text off the script", concat(chatPrompt(t, s, "Solve 3x + 7 = 22."), mustEncode(t, s, "Honestly I am not sure")),
			[]string{"\n\nTherefore, the answer is \\boxed{5}."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := generate(t, s, tt.prompt, greedy)
			for _, w := range tt.want {
				assert.Contains(t, r["text"], w)
			}
			assert.Equal(t, "stop", obj(obj(r["meta_info"])["finish_reason"])["type"])
			// continuing from any cut of the answer gives the same answer
			out := ids(r["output_ids"])
			cut := len(out) / 2
			rest := generate(t, s, concat(tt.prompt, out[:cut]), greedy)
			assert.Equal(t, out[cut:], ids(rest["output_ids"]))
		})
	}
}

func mustEncode(t testing.TB, s *Server, text string) []uint32 {
	t.Helper()
	x, err := s.encode(text)
	require.NoError(t, err)
	return x
}
