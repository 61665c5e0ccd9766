package generate_test

import (
	"fmt"

	"github.com/focus-go/focus-go/core/generate"
)

func Example() {
	// Unset fields take the documented defaults; backends send every field explicitly.
	p, err := generate.SamplingParams{MaxTokens: generate.Int(256), Logprobs: generate.Int(0)}.Resolve()
	fmt.Println(p.Temperature, p.MaxTokens, p.TopP, p.TopK, err)

	res := generate.Result{
		Tokens: []uint32{17, 522}, StopReason: generate.StopReasonStop,
		MatchedStop: generate.StopMatch{Kind: generate.MatchString, String: "</answer>"},
		Logprobs:    []float64{-0.01, -0.4},
	}
	fmt.Println(res.Validate("sglang", 256))
	fmt.Println(res.Validate("sglang", 1))
	fmt.Printf("%q\n", res.MatchedStop.Value())
	// Output:
	// 0.7 256 1 -1 <nil>
	// <nil>
	// sglang: response has 2 tokens, max_tokens was 1
	// "</answer>"
}
