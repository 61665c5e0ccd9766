package openai

import (
	"testing"

	"github.com/focus-go/focus-go/core/status"
)

// The response decoders take whatever a server (or a proxy in front of it) sends: any
// body gives a result or a Backend error, never a panic.

func FuzzParseChat(f *testing.F) {
	f.Add([]byte(chatReply))
	f.Add([]byte(`{"choices":[{"finish_reason":"tool_calls","message":{"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{"}}]}}]}`))
	f.Add([]byte(`{"choices":[{"finish_reason":"length","message":{"content":null},"logprobs":{"content":[{"token":"a","logprob":"x"}]}}]}`))
	f.Add([]byte(`{"choices":[]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := parseChat(body); err != nil && status.CodeOf(err) != status.Backend {
			t.Fatalf("error %v has code %v, expected Backend", err, status.CodeOf(err))
		}
	})
}

func FuzzParseResponses(f *testing.F) {
	f.Add([]byte(`{"id":"resp_9","object":"response","status":"completed","output":[{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"t"}]},{"type":"function_call","id":"fc_1","call_id":"call_b2","name":"get_weather","arguments":"{\"city\":\"Lyon\"}","status":"completed"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"18°C","logprobs":[]}]}],"usage":{"input_tokens":1,"output_tokens":2}}`))
	f.Add([]byte(`{"id":"r","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message","content":[{"type":"output_text","text":"x"}]}]}`))
	f.Add([]byte(`{"id":"r","status":"failed","error":{"message":"boom"},"output":null}`))
	f.Add([]byte(`{"status":"completed","output":[{"type":"function_call","name":"f","arguments":"{}","call_id":""}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := parseResponses(body); err != nil && status.CodeOf(err) != status.Backend {
			t.Fatalf("error %v has code %v, expected Backend", err, status.CodeOf(err))
		}
	})
}
