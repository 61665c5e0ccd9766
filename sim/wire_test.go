package sim

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The simulator's wire formats follow the real servers' code (sglang 0.5.23, vllm 0.33.0);
// each case names the peer file its shape comes from.

// sseEvents splits a text/event-stream body into its data payloads; the last must be [DONE].
func sseEvents(t *testing.T, body []byte) [][]byte {
	t.Helper()
	var out [][]byte
	parts := bytes.Split(bytes.TrimSuffix(body, []byte("\n\n")), []byte("\n\n"))
	for i, p := range parts {
		require.True(t, bytes.HasPrefix(p, []byte("data: ")), "event %d: %q", i, p)
		p = bytes.TrimPrefix(p, []byte("data: "))
		if i == len(parts)-1 {
			require.Equal(t, "[DONE]", string(p), "the stream ends with data: [DONE]")
			break
		}
		out = append(out, p)
	}
	return out
}

func decodeJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal(b, &v), "%s", b)
	return v
}

// sglang 0.5.23 scheduler_components/logprob_result_processor.py: input_token_logprobs
// start at logprob_start_len, the first with a null logprob; input_top_logprobs start
// with null.
func TestSGLangInputTokenLogprobs(t *testing.T) {
	s := startSim(t, Config{Seed: 1})
	prompt := chatPrompt(t, s, Problems()[0].Prompt)
	for _, start := range []int{0, 3} {
		code, v := postJSON(t, s.URL()+"/generate", map[string]any{"input_ids": prompt, "return_logprob": true,
			"logprob_start_len": start, "top_logprobs_num": 2, "sampling_params": map[string]any{"max_new_tokens": 4, "temperature": 0}})
		require.Equal(t, 200, code, "%v", v)
		meta := obj(obj(v)["meta_info"])
		in := arr(meta["input_token_logprobs"])
		require.Len(t, in, len(prompt)-start)
		for j, e := range in {
			tr := arr(e)
			require.Len(t, tr, 3)
			assert.Equal(t, float64(prompt[start+j]), tr[1], "entry %d names the prompt token", j)
			if j == 0 {
				assert.Nil(t, tr[0], "the first scored position has no logprob")
			} else if tr[0] != nil {
				assert.LessOrEqual(t, tr[0].(float64), 0.0)
			}
		}
		top := arr(meta["input_top_logprobs"])
		require.Len(t, top, len(in))
		assert.Nil(t, top[0])
		for _, row := range top[1:] {
			assert.LessOrEqual(t, len(arr(row)), 2)
		}
	}
	// Without logprob_start_len (or -1), no input logprobs.
	code, v := postJSON(t, s.URL()+"/generate", map[string]any{"input_ids": prompt, "return_logprob": true, "logprob_start_len": -1,
		"sampling_params": map[string]any{"max_new_tokens": 2}})
	require.Equal(t, 200, code)
	assert.NotContains(t, obj(obj(v)["meta_info"]), "input_token_logprobs")
}

// SGLang's orjson writes -inf as null (sglang 0.5.23 srt/utils/json_response.py); the
// simulated SGLang never writes the -9999 floor the vLLM shapes use.
func TestSGLangWritesNullForMinusInf(t *testing.T) {
	s := startSim(t, Config{Seed: 1})
	prompt := chatPrompt(t, s, Problems()[0].Prompt)
	_, _, body := call(t, "POST", s.URL()+"/generate", map[string]any{"input_ids": prompt, "return_logprob": true,
		"top_logprobs_num": 3, "logprob_start_len": 0, "sampling_params": map[string]any{"max_new_tokens": 24, "temperature": 0.7, "top_k": 1}})
	assert.NotContains(t, string(body), "-9999")
	assert.Contains(t, string(body), "[null,", "alternatives outside top_k have probability 0: null")
}

// vllm 0.33.0 completion/protocol.py CompletionResponseChoice.prompt_logprobs:
// list[dict[int, Logprob] | None], null first; -inf floored at -9999.0.
func TestVLLMPromptLogprobs(t *testing.T) {
	s := startSim(t, Config{Seed: 1})
	prompt := chatPrompt(t, s, Problems()[0].Prompt)
	for _, k := range []int{0, 2} {
		code, v := postJSON(t, s.URL()+"/v1/completions", map[string]any{"model": s.ModelName(), "prompt": prompt,
			"max_tokens": 2, "prompt_logprobs": k, "logprobs": 0})
		require.Equal(t, 200, code, "%v", v)
		pl := arr(obj(arr(obj(v)["choices"])[0])["prompt_logprobs"])
		require.Len(t, pl, len(prompt))
		assert.Nil(t, pl[0])
		for i, e := range pl[1:] {
			m := obj(e)
			own, ok := m[itoa(int(prompt[i+1]))]
			require.True(t, ok, "position %d lists the prompt token", i+1)
			lp := obj(own)["logprob"].(float64)
			assert.True(t, lp <= 0 && lp >= -9999, "logprob %v", lp)
			assert.GreaterOrEqual(t, obj(own)["rank"].(float64), 1.0)
			assert.LessOrEqual(t, len(m), k+1)
		}
	}
	code, v := postJSON(t, s.URL()+"/v1/completions", map[string]any{"model": s.ModelName(), "prompt": prompt, "max_tokens": 2, "prompt_logprobs": -2})
	assert.Equal(t, 400, code)
	assert.Contains(t, obj(v)["error"].(map[string]any)["message"], "`prompt_logprobs` must be a positive value or -1.")
	code, v = postJSON(t, s.URL()+"/v1/completions", map[string]any{"model": s.ModelName(), "prompt": prompt, "max_tokens": 2, "prompt_logprobs": 1, "stream": true})
	assert.Equal(t, 400, code)
	assert.Contains(t, obj(v)["error"].(map[string]any)["message"], "`prompt_logprobs` are not available when `stream=True`.")
}

// SGLang 0.5.23 /generate streaming (entrypoints/http_server.py, managers/tokenizer_manager.py
// without --incremental-streaming-output): every event is the reply so far, cumulative;
// finish_reason null until the last event, which is the non-streaming reply.
func TestSGLangGenerateStream(t *testing.T) {
	s := startSim(t, Config{Seed: 1})
	prompt := chatPrompt(t, s, Problems()[1].Prompt)
	req := map[string]any{"input_ids": prompt, "return_logprob": true, "rid": "r1",
		"sampling_params": map[string]any{"max_new_tokens": 20, "temperature": 1, "sampling_seed": 5}}
	_, _, whole := call(t, "POST", s.URL()+"/generate", req)
	req["stream"] = true
	code, hdr, body := call(t, "POST", s.URL()+"/generate", req)
	require.Equal(t, 200, code, "%s", body)
	assert.Equal(t, "text/event-stream", hdr.Get("Content-Type"))
	events := sseEvents(t, body)
	w := decodeJSON(t, whole)
	n := len(arr(w["output_ids"]))
	require.Len(t, events, n)
	last := decodeJSON(t, events[n-1])
	for _, m := range []map[string]any{obj(last["meta_info"]), obj(w["meta_info"])} {
		delete(m, "e2e_latency")
		delete(m, "cached_tokens") // the second request reuses the first one's prefix
	}
	assert.Equal(t, w, last, "the last event is the whole reply")
	text := w["text"].(string)
	for k, e := range events[:n-1] {
		ev := decodeJSON(t, e)
		meta := obj(ev["meta_info"])
		assert.Nil(t, meta["finish_reason"], "event %d", k)
		assert.Equal(t, float64(k+1), meta["completion_tokens"])
		assert.Len(t, arr(ev["output_ids"]), k+1)
		assert.Len(t, arr(meta["output_token_logprobs"]), k+1)
		assert.True(t, strings.HasPrefix(text, ev["text"].(string)), "event %d text is a prefix of the reply", k)
	}
}

// vLLM 0.33.0 /v1/completions streaming (completion/serving.py): one event per token,
// deltas that concatenate to the text, finish_reason on the last, usage event last.
func TestVLLMCompletionStream(t *testing.T) {
	s := startSim(t, Config{Seed: 1})
	prompt := chatPrompt(t, s, Problems()[1].Prompt)
	req := map[string]any{"model": s.ModelName(), "prompt": prompt, "max_tokens": 20, "seed": 3, "logprobs": 1, "return_token_ids": true}
	_, whole := postJSON(t, s.URL()+"/v1/completions", req)
	wc := obj(arr(obj(whole)["choices"])[0])
	req["stream"] = true
	req["stream_options"] = map[string]any{"include_usage": true}
	code, _, body := call(t, "POST", s.URL()+"/v1/completions", req)
	require.Equal(t, 200, code, "%s", body)
	events := sseEvents(t, body)
	var text strings.Builder
	var lps []any
	var toks []any
	finishes := 0
	for i, e := range events[:len(events)-1] {
		ev := decodeJSON(t, e)
		assert.Equal(t, "text_completion", ev["object"])
		assert.NotContains(t, ev, "usage")
		c := obj(arr(ev["choices"])[0])
		for _, key := range []string{"index", "text", "logprobs", "finish_reason", "stop_reason", "prompt_token_ids", "token_ids"} {
			assert.Contains(t, c, key, "event %d", i)
		}
		text.WriteString(c["text"].(string))
		lps = append(lps, arr(obj(c["logprobs"])["token_logprobs"])...)
		toks = append(toks, arr(c["token_ids"])...)
		if c["finish_reason"] != nil {
			finishes++
			assert.Equal(t, wc["finish_reason"], c["finish_reason"])
			assert.Equal(t, len(events)-2, i, "finish_reason is on the last token's event")
		}
	}
	assert.Equal(t, 1, finishes)
	assert.Equal(t, wc["text"], text.String())
	assert.Equal(t, arr(obj(wc["logprobs"])["token_logprobs"]), lps)
	assert.Equal(t, arr(wc["token_ids"]), toks)
	u := decodeJSON(t, events[len(events)-1])
	assert.Empty(t, arr(u["choices"]))
	assert.Equal(t, obj(obj(whole)["usage"])["completion_tokens"], obj(u["usage"])["completion_tokens"])

	code, v := postJSON(t, s.URL()+"/v1/completions", map[string]any{"model": s.ModelName(), "prompt": prompt, "stream_options": map[string]any{"include_usage": true}})
	assert.Equal(t, 400, code)
	assert.Contains(t, obj(obj(v)["error"])["message"], "Stream options can only be defined when `stream=True`.")
}

// vLLM 0.33.0 /v1/chat/completions streaming: a role event, content deltas with each
// token's logprobs, finish_reason on the last, then the usage event.
func TestChatCompletionStream(t *testing.T) {
	s := startSim(t, Config{Seed: 1})
	req := map[string]any{"model": s.ModelName(), "messages": []any{map[string]any{"role": "user", "content": Problems()[2].Prompt}},
		"max_tokens": 30, "seed": 9, "logprobs": true}
	_, whole := postJSON(t, s.URL()+"/v1/chat/completions", req)
	wc := obj(arr(obj(whole)["choices"])[0])
	req["stream"] = true
	req["stream_options"] = map[string]any{"include_usage": true}
	code, _, body := call(t, "POST", s.URL()+"/v1/chat/completions", req)
	require.Equal(t, 200, code, "%s", body)
	events := sseEvents(t, body)
	first := obj(arr(decodeJSON(t, events[0])["choices"])[0])
	assert.Equal(t, map[string]any{"role": "assistant", "content": ""}, first["delta"])
	var text strings.Builder
	var lps []any
	for _, e := range events[1 : len(events)-1] {
		c := obj(arr(decodeJSON(t, e)["choices"])[0])
		if d, ok := obj(c["delta"])["content"].(string); ok {
			text.WriteString(d)
		}
		if c["logprobs"] != nil {
			lps = append(lps, arr(obj(c["logprobs"])["content"])...)
		}
	}
	assert.Equal(t, obj(wc["message"])["content"], text.String())
	assert.Equal(t, arr(obj(wc["logprobs"])["content"]), lps)
	lastChoice := obj(arr(decodeJSON(t, events[len(events)-2])["choices"])[0])
	assert.Equal(t, wc["finish_reason"], lastChoice["finish_reason"])
	u := decodeJSON(t, events[len(events)-1])
	assert.Empty(t, arr(u["choices"]))
	assert.Equal(t, obj(obj(whole)["usage"])["completion_tokens"], obj(u["usage"])["completion_tokens"])
}

// openai 3.57.0 types/responses/response_usage.py: InputTokensDetails.cache_write_tokens
// is required.
func TestResponsesUsageHasCacheWriteTokens(t *testing.T) {
	s := startSim(t, Config{Seed: 1})
	code, v := postJSON(t, s.URL()+"/v1/responses", map[string]any{"model": s.ModelName(), "input": Problems()[0].Prompt, "max_output_tokens": 8})
	require.Equal(t, 200, code, "%v", v)
	u := obj(obj(v)["usage"])
	d := obj(u["input_tokens_details"])
	require.Contains(t, d, "cache_write_tokens")
	assert.Equal(t, u["input_tokens"].(float64)-d["cached_tokens"].(float64), d["cache_write_tokens"])
}
