package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var calculator = map[string]any{"type": "function", "function": map[string]any{"name": "calculator",
	"description": "Evaluate an arithmetic expression.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string"}},
		"required": []string{"expression"}}}}

func TestChatCompletionsToolFlow(t *testing.T) {
	s := startSim(t, Config{})
	url := s.URL() + "/v1/chat/completions"
	user := map[string]any{"role": "user", "content": "Solve 3x + 7 = 22."}
	code, v := postJSON(t, url, map[string]any{"model": s.ModelName(), "messages": []any{user}, "tools": []any{calculator},
		"logprobs": true, "top_logprobs": 2, "seed": 1})
	require.Equal(t, 200, code, "%v", v)
	resp := obj(v)
	assert.Equal(t, "chat.completion", resp["object"])
	c := obj(arr(resp["choices"])[0])
	assert.Equal(t, "tool_calls", c["finish_reason"])
	msg := obj(c["message"])
	assert.Nil(t, msg["content"])
	call := obj(arr(msg["tool_calls"])[0])
	assert.Equal(t, "function", call["type"])
	assert.True(t, strings.HasPrefix(call["id"].(string), "call_"))
	fn := obj(call["function"])
	assert.Equal(t, "calculator", fn["name"])
	var args map[string]string
	require.NoError(t, json.Unmarshal([]byte(fn["arguments"].(string)), &args), "arguments is a JSON string")
	assert.Equal(t, "(22 - 7) / 3", args["expression"])
	content := arr(obj(c["logprobs"])["content"])
	require.NotEmpty(t, content)
	first := obj(content[0])
	assert.NotEmpty(t, first["bytes"])
	assert.LessOrEqual(t, len(arr(first["top_logprobs"])), 2)
	u := obj(resp["usage"])
	assert.Contains(t, obj(u["prompt_tokens_details"]), "cached_tokens")
	assert.Contains(t, obj(u["completion_tokens_details"]), "reasoning_tokens")

	// the tool answer comes back: now the model solves
	assistant := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call}}
	toolMsg := map[string]any{"role": "tool", "tool_call_id": call["id"], "content": "5"}
	code, v = postJSON(t, url, map[string]any{"messages": []any{user, assistant, toolMsg}, "tools": []any{calculator}, "temperature": 0})
	require.Equal(t, 200, code, "%v", v)
	c = obj(arr(obj(v)["choices"])[0])
	assert.Equal(t, "stop", c["finish_reason"])
	assert.Contains(t, obj(c["message"])["content"], `\boxed{5}`)

	code, v = postJSON(t, url, map[string]any{"messages": []any{user, assistant,
		map[string]any{"role": "tool", "tool_call_id": "call_unknown", "content": "5"}}})
	assert.Equal(t, 400, code)
	e := obj(obj(v)["error"])
	assert.Equal(t, "invalid_request_error", e["type"])
	assert.Contains(t, e["message"], "call_unknown")

	code, v = postJSON(t, url, map[string]any{"model": "gpt-nope", "messages": []any{user}})
	assert.Equal(t, 404, code)
	assert.Equal(t, "model_not_found", obj(obj(v)["error"])["code"])

	code, v = postJSON(t, url, map[string]any{"messages": []any{user}, "max_completion_tokens": 5})
	require.Equal(t, 200, code)
	assert.Equal(t, "length", obj(arr(obj(v)["choices"])[0])["finish_reason"])

	small := startSim(t, Config{MaxModelLen: 32})
	code, v = postJSON(t, small.URL()+"/v1/chat/completions", map[string]any{"messages": []any{user}, "max_completion_tokens": 30})
	assert.Equal(t, 400, code)
	assert.Equal(t, "context_length_exceeded", obj(obj(v)["error"])["code"])
}

func TestChatMalformedToolCall(t *testing.T) {
	s := startSim(t, Config{ToolCallErrorRate: 1})
	code, v := postJSON(t, s.URL()+"/v1/chat/completions", map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": "Compute 8 * 9 + 6."}}, "tools": []any{calculator}, "seed": 2})
	require.Equal(t, 200, code)
	c := obj(arr(obj(v)["choices"])[0])
	fn := obj(obj(arr(obj(c["message"])["tool_calls"])[0])["function"])
	assert.Equal(t, "calculator", fn["name"])
	assert.False(t, json.Valid([]byte(fn["arguments"].(string))), "arguments %q", fn["arguments"])
}

func TestChatToolChoice(t *testing.T) {
	s := startSim(t, Config{})
	user := map[string]any{"role": "user", "content": "Compute 8 * 9 + 6."}
	code, v := postJSON(t, s.URL()+"/v1/chat/completions", map[string]any{"messages": []any{user}, "tools": []any{calculator}, "tool_choice": "none"})
	require.Equal(t, 200, code)
	c := obj(arr(obj(v)["choices"])[0])
	assert.Equal(t, "stop", c["finish_reason"])
	assert.Contains(t, obj(c["message"])["content"], `\boxed{78}`)
}

func TestResponsesToolFlow(t *testing.T) {
	s := startSim(t, Config{Think: true})
	url := s.URL() + "/v1/responses"
	flat := map[string]any{"type": "function", "name": "calculator", "parameters": calculator["function"].(map[string]any)["parameters"]}
	user := map[string]any{"type": "message", "role": "user", "content": "Solve 3x + 7 = 22."}
	code, v := postJSON(t, url, map[string]any{"model": s.ModelName(), "input": []any{user}, "tools": []any{flat}, "seed": 1})
	require.Equal(t, 200, code, "%v", v)
	resp := obj(v)
	assert.Equal(t, "response", resp["object"])
	assert.Equal(t, "completed", resp["status"])
	out := arr(resp["output"])
	call := obj(out[len(out)-1])
	assert.Equal(t, "function_call", call["type"])
	assert.Equal(t, "calculator", call["name"])
	assert.True(t, json.Valid([]byte(call["arguments"].(string))))
	u := obj(resp["usage"])
	for _, k := range []string{"input_tokens", "output_tokens", "total_tokens"} {
		assert.Contains(t, u, k)
	}

	followUp := []any{user, map[string]any{"type": "function_call", "call_id": call["call_id"], "name": "calculator", "arguments": call["arguments"]},
		map[string]any{"type": "function_call_output", "call_id": call["call_id"], "output": "5"}}
	code, v = postJSON(t, url, map[string]any{"input": followUp, "tools": []any{flat}, "temperature": 0,
		"include": []string{"message.output_text.logprobs"}})
	require.Equal(t, 200, code, "%v", v)
	out = arr(obj(v)["output"])
	require.Len(t, out, 2)
	assert.Equal(t, "reasoning", obj(out[0])["type"], "reasoning comes first")
	msg := obj(out[1])
	assert.Equal(t, "message", msg["type"])
	part := obj(arr(msg["content"])[0])
	assert.Equal(t, "output_text", part["type"])
	assert.Contains(t, part["text"], `\boxed{5}`)
	assert.NotEmpty(t, part["logprobs"])
	assert.Greater(t, obj(obj(obj(v)["usage"])["output_tokens_details"])["reasoning_tokens"], 0.0)

	code, v = postJSON(t, url, map[string]any{"input": []any{user, map[string]any{"type": "function_call_output", "call_id": "call_x", "output": "5"}}})
	assert.Equal(t, 400, code)
	assert.Contains(t, obj(obj(v)["error"])["message"], "call_x")

	code, v = postJSON(t, url, map[string]any{"input": "Solve 3x + 7 = 22.", "max_output_tokens": 4})
	require.Equal(t, 200, code)
	assert.Equal(t, "incomplete", obj(v)["status"])
	assert.Equal(t, map[string]any{"reason": "max_output_tokens"}, obj(v)["incomplete_details"])
}
