package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/sim"
)

var calculator = map[string]any{"type": "function", "function": map[string]any{"name": "calculator",
	"description": "Evaluate an arithmetic expression.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string"}},
		"required": []string{"expression"}}}}

func msg(role, content string) Message {
	return Message{Role: role, Content: mustJSON(content)}
}

func call(id, name, args string) ToolCallMessage {
	var c ToolCallMessage
	c.ID, c.Type, c.Function.Name, c.Function.Arguments = id, "function", name, mustJSON(args)
	return c
}

func assistantCalls(calls ...ToolCallMessage) Message {
	return Message{Role: "assistant", Content: json.RawMessage("null"), ToolCalls: calls}
}

func toolReply(id, content string) Message {
	return Message{Role: "tool", ToolCallID: id, Content: mustJSON(content)}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name     string
		messages []Message
		wantErr  string // "" = valid
	}{
		{"plain conversation", []Message{msg("system", "s"), msg("user", "u"), msg("assistant", "a")}, ""},
		{"tool round trip", []Message{msg("user", "u"), assistantCalls(call("c1", "f", "{}"), call("c2", "g", "{}")),
			toolReply("c2", "2"), toolReply("c1", "1"), msg("assistant", "done")}, ""},
		{"calls awaiting replies at the end", []Message{msg("user", "u"), assistantCalls(call("c1", "f", "{}"))}, ""},
		{"unknown role", []Message{msg("user", "u"), msg("robot", "x")}, `message 1 has role "robot"`},
		{"orphan tool reply", []Message{msg("user", "u"), toolReply("c9", "x")}, `message 1 is a tool reply to "c9", which no earlier assistant message called`},
		{"reply after another turn", []Message{msg("user", "u"), assistantCalls(call("c1", "f", "{}")), msg("user", "again"), toolReply("c1", "x")},
			`message 2 (user) comes before the tool call(s) "c1" of message 1 are answered`},
		{"second reply", []Message{msg("user", "u"), assistantCalls(call("c1", "f", "{}")), toolReply("c1", "x"), toolReply("c1", "y")},
			`message 3 answers tool call "c1" of message 1 a second time`},
		{"assistant before replies", []Message{msg("user", "u"), assistantCalls(call("c1", "f", "{}")), msg("assistant", "hm")},
			`message 2 (assistant) comes before`},
		{"call without id", []Message{msg("user", "u"), assistantCalls(call("", "f", "{}"))}, "message 1 tool_calls[0] has no id"},
		{"call without name", []Message{msg("user", "u"), assistantCalls(call("c1", "", "{}"))}, `message 1 tool_calls[0] (id "c1") has no function name`},
		{"repeated id", []Message{msg("user", "u"), assistantCalls(call("c1", "f", "{}")), toolReply("c1", "x"),
			assistantCalls(call("c1", "f", "{}"))}, `message 3 repeats tool call id "c1" of message 1`},
		{"reply without id", []Message{msg("user", "u"), {Role: "tool", Content: mustJSON("x")}}, "message 1 is a tool reply without tool_call_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.messages)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestNewConfig(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	tests := []struct {
		name    string
		cfg     Config
		env     map[string]string
		wantErr string
		wantURL string
	}{
		{"default URL needs a key", Config{API: Chat, Model: "gpt-4.1"}, nil, "no API key for https://api.openai.com/v1: pass api_key or set OPENAI_API_KEY", ""},
		{"key from the environment", Config{API: Chat, Model: "gpt-4.1"}, map[string]string{EnvAPIKey: "sk-env"}, "", DefaultBaseURL},
		{"base URL from the environment, keyless", Config{API: Responses, Model: "m"}, map[string]string{EnvBaseURL: "http://127.0.0.1:9/v1"}, "", "http://127.0.0.1:9/v1"},
		{"explicit values win", Config{API: Chat, Model: "m", BaseURL: "http://127.0.0.1:8/v1"}, map[string]string{EnvBaseURL: "http://x/v1"}, "", "http://127.0.0.1:8/v1"},
		{"unknown api", Config{API: "completions", Model: "m", BaseURL: "http://127.0.0.1:8"}, nil, `api "completions"`, ""},
		{"no model", Config{API: Chat, BaseURL: "http://127.0.0.1:8"}, nil, "model is empty", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg.WithEnv(env(tt.env)))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			defer c.Close()
			assert.Equal(t, tt.wantURL, c.Transport().BaseURL())
		})
	}
}

// capture is a loopback server that records request bodies and answers with body.
func capture(t *testing.T, body string) (*httptest.Server, func() map[string]any) {
	var mu sync.Mutex
	var last []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		last = b
		mu.Unlock()
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, func() map[string]any {
		mu.Lock()
		defer mu.Unlock()
		var v map[string]any
		require.NoError(t, json.Unmarshal(last, &v))
		return v
	}
}

const chatReply = `{"id":"chatcmpl-x","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop",
 "message":{"role":"assistant","content":"18°C.","refusal":null,"tool_calls":null},
 "logprobs":{"content":[{"token":"18","logprob":-0.02,"bytes":[49,56],"top_logprobs":[{"token":"18","logprob":-0.02,"bytes":[49,56]},{"token":"It","logprob":-4.1,"bytes":[73,116]}]}],"refusal":null}}],
 "usage":{"prompt_tokens":88,"completion_tokens":4,"total_tokens":92,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},
 "completion_tokens_details":{"reasoning_tokens":0}}}`

// The conversation of inference-apis.md §3/§4: a tool call, its reply, then the answer.
func weatherConversation() []Message {
	return []Message{msg("user", "Weather in Paris?"), assistantCalls(call("call_a1", "get_weather", `{"city":"Paris"}`)),
		toolReply("call_a1", `{"temp_c":18}`)}
}

func TestChatRequestAndReply(t *testing.T) {
	srv, last := capture(t, chatReply)
	c, err := New(Config{API: Chat, Model: "gpt-4.1", BaseURL: srv.URL + "/v1", APIKey: "sk-secret",
		SystemPrompt: "You are terse.", ReasoningEffort: "low"})
	require.NoError(t, err)
	defer c.Close()
	res, err := c.Generate(context.Background(), Request{Messages: weatherConversation(), Tools: []map[string]any{calculator},
		ToolChoice: "auto", Params: generate.SamplingParams{MaxTokens: generate.Int(512), Temperature: generate.Float64(0.7), Logprobs: generate.Int(2)}})
	require.NoError(t, err)
	body := last()
	assert.Equal(t, "gpt-4.1", body["model"])
	assert.EqualValues(t, 512, body["max_completion_tokens"])
	assert.NotContains(t, body, "max_tokens")
	assert.Equal(t, true, body["logprobs"])
	assert.EqualValues(t, 2, body["top_logprobs"])
	assert.Equal(t, "low", body["reasoning_effort"])
	assert.Equal(t, "auto", body["tool_choice"])
	msgs := body["messages"].([]any)
	require.Len(t, msgs, 4)
	assert.Equal(t, map[string]any{"role": "system", "content": "You are terse."}, msgs[0])
	asst := msgs[2].(map[string]any)
	assert.Nil(t, asst["content"])
	fn := asst["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
	assert.Equal(t, `{"city":"Paris"}`, fn["arguments"], "arguments travel as a JSON string")
	assert.Equal(t, "call_a1", msgs[3].(map[string]any)["tool_call_id"])

	assert.Equal(t, "18°C.", res.Text)
	assert.Equal(t, "stop", res.StopReason)
	assert.Equal(t, []float64{-0.02}, res.Logprobs)
	assert.Equal(t, []map[string]float64{{"18": -0.02, "It": -4.1}}, res.TopLogprobs)
	assert.Equal(t, EstimateTokens("18°C."), res.Tokens)
	assert.Equal(t, 64, res.CachedTokens)
	require.Len(t, res.Native, 1)
	assert.Contains(t, string(res.Native[0]), `"refusal":null`)
}

func TestResponsesRequestAndReply(t *testing.T) {
	reply := `{"id":"resp_9","object":"response","status":"completed","incomplete_details":null,"error":null,
 "output":[{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"Use tool result."}]},
   {"type":"function_call","id":"fc_1","call_id":"call_b2","name":"get_weather","arguments":"{\"city\":\"Lyon\"","status":"completed"},
   {"type":"message","id":"msg_3","role":"assistant","status":"completed",
    "content":[{"type":"output_text","text":"18°C in Paris.","annotations":[],"logprobs":[]}]}],
 "usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":0},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":24},"total_tokens":160}}`
	srv, last := capture(t, reply)
	c, err := New(Config{API: Responses, Model: "o4-mini", BaseURL: srv.URL + "/v1", SystemPrompt: "Be brief.", ReasoningEffort: "low"})
	require.NoError(t, err)
	defer c.Close()
	res, err := c.Generate(context.Background(), Request{Messages: weatherConversation(), Tools: []map[string]any{calculator},
		ToolChoice: map[string]any{"type": "function", "function": map[string]any{"name": "calculator"}},
		Params:     generate.SamplingParams{MaxTokens: generate.Int(2048)}})
	require.NoError(t, err)
	body := last()
	assert.Equal(t, "Be brief.", body["instructions"])
	assert.Equal(t, map[string]any{"effort": "low"}, body["reasoning"])
	assert.EqualValues(t, 2048, body["max_output_tokens"])
	assert.Equal(t, map[string]any{"type": "function", "name": "calculator"}, body["tool_choice"])
	tool := body["tools"].([]any)[0].(map[string]any)
	assert.Equal(t, "calculator", tool["name"], "function tools are flat in the Responses API")
	assert.Equal(t, []any{
		map[string]any{"type": "message", "role": "user", "content": "Weather in Paris?"},
		map[string]any{"type": "function_call", "call_id": "call_a1", "name": "get_weather", "arguments": `{"city":"Paris"}`},
		map[string]any{"type": "function_call_output", "call_id": "call_a1", "output": `{"temp_c":18}`},
	}, body["input"])

	assert.Equal(t, "18°C in Paris.", res.Text)
	assert.Equal(t, "Use tool result.", res.Reasoning)
	assert.Equal(t, []ToolCall{{Name: "get_weather", Arguments: `{"city":"Lyon"`, CallID: "call_b2"}}, res.ToolCalls, "malformed arguments pass through")
	assert.Equal(t, "stop", res.StopReason)
	assert.Len(t, res.Native, 3)
	assert.Equal(t, 24, res.ReasoningTokens)
}

func TestStopReasons(t *testing.T) {
	tests := []struct {
		name, body, want, wantErr string
	}{
		{"chat tool_calls is a stop", `{"choices":[{"finish_reason":"tool_calls","message":{"content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`, "stop", ""},
		{"chat length", `{"choices":[{"finish_reason":"length","message":{"content":"abc"}}]}`, "length", ""},
		{"chat content filter is an abort", `{"choices":[{"finish_reason":"content_filter","message":{"content":""}}]}`, "abort", ""},
		{"chat unknown finish", `{"choices":[{"finish_reason":"eos","message":{"content":""}}]}`, "", `unknown finish_reason "eos"`},
		{"chat no choices", `{"id":"x","choices":[]}`, "", "has no choices"},
		{"chat not JSON", `{"choices":`, "", "not the expected JSON object"},
		{"responses max tokens", `{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}`, "length", ""},
		{"responses filter", `{"status":"incomplete","incomplete_details":{"reason":"content_filter"},"output":[]}`, "abort", ""},
		{"responses failed", `{"id":"r","status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`, "", `response "r" failed: server_error: boom`},
		{"responses queued", `{"id":"r","status":"queued","output":[]}`, "", `status "queued"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parse := parseChat
			if strings.HasPrefix(tt.name, "responses") {
				parse = parseResponses
			}
			res, err := parse([]byte(tt.body))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, status.Backend, status.CodeOf(err))
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.StopReason)
		})
	}
}

func TestSamplingRefusals(t *testing.T) {
	srv, _ := capture(t, chatReply)
	tests := []struct {
		name    string
		api     API
		params  generate.SamplingParams
		wantErr string
	}{
		{"top_k", Chat, generate.SamplingParams{TopK: generate.Int(5)}, "top_k is not supported"},
		{"stop on responses", Responses, generate.SamplingParams{Stop: []string{"x"}}, "stop is not supported"},
		{"seed on responses", Responses, generate.SamplingParams{Seed: generate.Int64(1)}, "seed is not supported"},
		{"prompt logprobs", Chat, generate.SamplingParams{PromptLogprobs: generate.Int(0)}, "prompt_logprobs is not supported"},
		{"range", Chat, generate.SamplingParams{TopP: generate.Float64(2)}, "top_p 2 must be in (0, 1]"},
		{"too many alternatives", Chat, generate.SamplingParams{Logprobs: generate.Int(21)}, "at most 20"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(Config{API: tt.api, Model: "m", BaseURL: srv.URL})
			require.NoError(t, err)
			defer c.Close()
			_, err = c.Generate(context.Background(), Request{Messages: []Message{msg("user", "hi")}, Params: tt.params})
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestUnansweredCallsAreRefused(t *testing.T) {
	srv, _ := capture(t, chatReply)
	c, err := New(Config{API: Chat, Model: "m", BaseURL: srv.URL})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Generate(context.Background(), Request{Messages: []Message{msg("user", "u"), assistantCalls(call("c1", "f", "{}"))}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `ends with tool call(s) "c1" of message 1 unanswered`)
	assert.Zero(t, c.Transport().Stats().Requests, "no request was sent")
}

func startSim(t *testing.T, cfg sim.Config) *sim.Server {
	t.Helper()
	s, err := sim.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A ToolEnv-shaped conversation against the simulated server: the model calls the
// calculator, the tool answers, the model finishes with the boxed answer. Both APIs.
func TestToolRoundTripAgainstSim(t *testing.T) {
	s := startSim(t, sim.Config{Seed: 3})
	problem := sim.Problems()[0]
	for _, api := range []API{Chat, Responses} {
		t.Run(string(api), func(t *testing.T) {
			c, err := New(Config{API: api, Model: s.ModelName(), BaseURL: s.URL() + "/v1"})
			require.NoError(t, err)
			defer c.Close()
			conv := []Message{msg("user", problem.Prompt)}
			params := generate.SamplingParams{Temperature: generate.Float64(0), MaxTokens: generate.Int(400), Logprobs: generate.Int(0)}
			first, err := c.Generate(context.Background(), Request{Messages: conv, Tools: []map[string]any{calculator}, Params: params})
			require.NoError(t, err)
			require.Len(t, first.ToolCalls, 1)
			tc := first.ToolCalls[0]
			assert.Equal(t, "calculator", tc.Name)
			assert.NotEmpty(t, tc.CallID)
			assert.True(t, json.Valid([]byte(tc.Arguments)), tc.Arguments)
			assert.Equal(t, "stop", first.StopReason)
			assert.Equal(t, first.estimateText(), DecodeEstimate(first.Tokens))

			conv = append(conv, assistantCalls(call(tc.CallID, tc.Name, tc.Arguments)), toolReply(tc.CallID, problem.Answer))
			final, err := c.Generate(context.Background(), Request{Messages: conv, Tools: []map[string]any{calculator}, Params: params})
			require.NoError(t, err)
			assert.Empty(t, final.ToolCalls)
			assert.Contains(t, final.Text, problem.Label)
			assert.Equal(t, "stop", final.StopReason)
			assert.NotEmpty(t, final.Logprobs, "logprobs were asked for and offered")
			assert.Greater(t, final.PromptTokens, 0)
		})
	}
}

func TestMalformedToolArgumentsPassThrough(t *testing.T) {
	s := startSim(t, sim.Config{Seed: 1, ToolCallErrorRate: 1})
	c, err := New(Config{API: Chat, Model: s.ModelName(), BaseURL: s.URL() + "/v1"})
	require.NoError(t, err)
	defer c.Close()
	res, err := c.Generate(context.Background(), Request{Messages: []Message{msg("user", sim.Problems()[0].Prompt)},
		Tools: []map[string]any{calculator}, Params: generate.SamplingParams{Temperature: generate.Float64(0)}})
	require.NoError(t, err)
	require.Len(t, res.ToolCalls, 1)
	assert.False(t, json.Valid([]byte(res.ToolCalls[0].Arguments)), res.ToolCalls[0].Arguments)
}

func TestServerErrors(t *testing.T) {
	s := startSim(t, sim.Config{})
	req := Request{Messages: []Message{msg("user", "hi")}, Params: generate.SamplingParams{MaxTokens: generate.Int(8)}}
	t.Run("401 is an auth error that hides the key", func(t *testing.T) {
		require.NoError(t, s.SetFaults(sim.Fault{Kind: sim.FaultHTTPError, Status: 401, Count: 1}))
		c, err := New(Config{API: Chat, Model: s.ModelName(), BaseURL: s.URL() + "/v1", APIKey: "sk-do-not-print"})
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Generate(context.Background(), req)
		require.Error(t, err)
		assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
		assert.Contains(t, err.Error(), "authentication failed (HTTP 401)")
		assert.NotContains(t, err.Error(), "sk-do-not-print")
		var re *transport.RequestError
		require.True(t, errors.As(err, &re))
		assert.Zero(t, re.Retries, "a rejected key is not retried")
	})
	t.Run("429 is retried", func(t *testing.T) {
		require.NoError(t, s.SetFaults(sim.Fault{Kind: sim.FaultHTTPError, Status: 429, Count: 1}))
		c, err := New(Config{API: Responses, Model: s.ModelName(), BaseURL: s.URL() + "/v1",
			Retry: transport.RetryPolicy{BaseDelay: time.Millisecond}})
		require.NoError(t, err)
		defer c.Close()
		res, err := c.Generate(context.Background(), req)
		require.NoError(t, err)
		assert.NotEmpty(t, res.Text)
		assert.EqualValues(t, 1, c.Transport().Stats().Retries)
	})
}

func TestEstimate(t *testing.T) {
	for _, text := range []string{"", "a", "abcd", "abcde", "18°C in Paris — ok", "日本語のテキスト"} {
		ids := EstimateTokens(text)
		assert.Len(t, ids, (len(text)+3)/4, text)
		assert.Equal(t, text, DecodeEstimate(ids))
	}
	assert.Equal(t, "user: hi\nassistant: \n{\"arguments\":\"{}\",\"name\":\"f\"}\n",
		RenderEstimate([]Message{msg("user", "hi"), assistantCalls(call("c", "f", "{}"))}, nil))
}
