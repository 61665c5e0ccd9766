package vllm_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/focus-go/focus-go/backends/vllm"
	"github.com/focus-go/focus-go/core/generate"
)

func Example() {
	// A loopback stand-in for a vLLM server, replying with the documented wire formats.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/health":
		case "/version":
			_, _ = io.WriteString(w, `{"version":"0.10.2"}`)
		case "/v1/models":
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"qwen3-8b","object":"model","created":1760000000,"owned_by":"vllm","root":"Qwen/Qwen3-8B","parent":null,"max_model_len":32768,"permission":[{}]}]}`)
		case "/v1/completions":
			_, _ = io.WriteString(w, `{"id":"cmpl-8f2c","object":"text_completion","created":1760000001,"model":"qwen3-8b",
 "choices":[{"index":0,"text":"2+2=4.</answer>",
   "logprobs":{"tokens":["token_id:17","token_id:10","token_id:17","token_id:28","token_id:19","token_id:13","token_id:522"],
               "token_logprobs":[-0.01,-0.2,-0.003,-0.05,-0.0001,-1.3,-0.4],
               "top_logprobs":[{"token_id:17":-0.01},{"token_id:10":-0.2},{"token_id:17":-0.003},{"token_id:28":-0.05},
                               {"token_id:19":-0.0001},{"token_id:13":-1.3},{"token_id:522":-0.4}],
               "text_offset":[0,11,22,33,44,55,66]},
   "finish_reason":"stop","stop_reason":"</answer>",
   "token_ids":[17,10,17,28,19,13,522],"prompt_token_ids":[151644,872,198],"prompt_logprobs":null}],
 "usage":{"prompt_tokens":15,"completion_tokens":7,"total_tokens":22,"prompt_tokens_details":null}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	client, err := vllm.New(vllm.Config{BaseURL: srv.URL + "/v1", Model: "Qwen/Qwen3-8B", APIKey: "EMPTY"})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	info, err := client.StartupCheck(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println(info.ServedModel, info.MaxModelLen, info.Version)

	res, err := client.Generate(context.Background(), generate.Request{
		Tokens: []uint32{151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198},
		Params: generate.SamplingParams{MaxTokens: generate.Int(256), Seed: generate.Int64(7), Stop: []string{"</answer>"}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Tokens, res.StopReason, res.MatchedStop.Value(), res.Logprobs[len(res.Logprobs)-1])
	// Output:
	// qwen3-8b 32768 0.10.2
	// [17 10 17 28 19 13 522] stop </answer> -0.4
}
