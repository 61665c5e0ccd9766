package sglang_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/focus-go/focus-go/backends/sglang"
	"github.com/focus-go/focus-go/core/generate"
)

func Example() {
	// A loopback stand-in for an SGLang server, replying with the documented wire format.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"text":"2+2=4.</answer>","output_ids":[17,10,17,28,19,13,522],
 "meta_info":{"id":"tree7-node3","finish_reason":{"type":"stop","matched":"</answer>"},
   "prompt_tokens":5,"completion_tokens":7,"cached_tokens":3,"e2e_latency":0.41,
   "output_token_logprobs":[[-0.01,17,null],[-0.2,10,null],[-0.003,17,null],[-0.05,28,null],[-0.0001,19,null],[-1.3,13,null],[-0.4,522,null]],
   "output_top_logprobs":[null,null,null,null,null,null,null]}}`)
	}))
	defer srv.Close()

	client, err := sglang.New(sglang.Config{BaseURL: srv.URL, MaxConcurrency: 16})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	res, err := client.Generate(context.Background(), generate.Request{
		Tokens:     []uint32{151644, 872, 198, 3838, 374},
		Params:     generate.SamplingParams{MaxTokens: generate.Int(256), Stop: []string{"</answer>"}},
		ID:         "tree7-node3",
		RoutingKey: "tree7",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Tokens, res.StopReason, res.MatchedStop.Value())
	fmt.Println(res.Logprobs[:2], res.CachedTokens, "of", res.PromptTokens, "prompt tokens cached")
	// Output:
	// [17 10 17 28 19 13 522] stop </answer>
	// [-0.01 -0.2] 3 of 5 prompt tokens cached
}
