package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/focus-go/focus-go/backends/openai"
	"github.com/focus-go/focus-go/core/generate"
)

func Example() {
	// A loopback stand-in for the Chat Completions endpoint, answering with a tool call.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls",
 "message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a1","type":"function",
   "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}}]}`)
	}))
	defer srv.Close()

	client, err := openai.New(openai.Config{API: openai.Chat, Model: "gpt-4.1", BaseURL: srv.URL + "/v1"})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	res, err := client.Generate(context.Background(), openai.Request{
		Messages: []openai.Message{{Role: "user", Content: json.RawMessage(`"Weather in Paris?"`)}},
		Params:   generate.SamplingParams{MaxTokens: generate.Int(64)},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.StopReason, res.FinishReason, res.ToolCalls[0].CallID, res.ToolCalls[0].Name, res.ToolCalls[0].Arguments)
	fmt.Println(len(res.Tokens), "estimated tokens")
	// Output:
	// stop tool_calls call_a1 get_weather {"city":"Paris"}
	// 15 estimated tokens
}
