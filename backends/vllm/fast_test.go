package vllm

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/generate"
)

// sameAsGeneral checks that the one-pass reader gives what json-iterator gives: the same
// result or the same error. It reports whether the one-pass reader took the reply.
func sameAsGeneral(t *testing.T, body []byte, p generate.Resolved) bool {
	t.Helper()
	prompt := []uint32{5, 6}
	want, wantErr := parse(body, prompt, p, false)
	got, gotErr := parse(body, prompt, p, true)
	if wantErr != nil {
		require.Error(t, gotErr)
		assert.Equal(t, wantErr.Error(), gotErr.Error())
	} else {
		require.NoError(t, gotErr)
		// %#v prints NaN as NaN (equal to itself here) and map keys in order.
		assert.Equal(t, fmt.Sprintf("%#v", *want), fmt.Sprintf("%#v", *got))
	}
	c, u := choice{wantTop: p.TopLogprobs, wantPromptN: p.PromptLogprobs, prompt: prompt}, usage{completionTokens: -1}
	_, ok := readFast(body, &c, &u)
	return ok
}

func params(t *testing.T, sp generate.SamplingParams) generate.Resolved {
	t.Helper()
	p, err := sp.Resolve()
	require.NoError(t, err)
	return p
}

func TestReadFastMatchesTheGeneralReader(t *testing.T) {
	plain := params(t, generate.SamplingParams{MaxTokens: generate.Int(256)})
	top := params(t, generate.SamplingParams{MaxTokens: generate.Int(256), Logprobs: generate.Int(2), PromptLogprobs: generate.Int(1)})
	tests := []struct {
		name string
		body string
		p    generate.Resolved
		fast bool // false: the one-pass reader declines and json-iterator decides
	}{
		{"256 tokens", string(bodyOf256()), plain, true},
		{"reference reply", referenceResponse, plain, true},
		{"top logprobs asked for", completion(lp3+`,`+stopNull+`,`+ids3+`,"prompt_logprobs":[null,{"6":{"logprob":-3.1}}]`, usage3), top, true},
		{"stop string", completion(lp3+`,"finish_reason":"stop","stop_reason":"</a>",`+ids3, usage3), plain, true},
		{"null logprob and no ids", completion(`"logprobs":{"tokens":["token_id:1"],"token_logprobs":[null],"top_logprobs":null},`+stopNull, `null`), plain, true},
		{"escaped text", `{"choices":[{"text":"a\"b\u00e9","logprobs":{"tokens":[],"token_logprobs":[]},"finish_reason":"stop"}]}`, plain, true},
		{"text tokens", completion(`"logprobs":{"tokens":["Hi"],"token_logprobs":[-1]},`+stopNull, usage3), plain, true},
		{"escaped token", completion(`"logprobs":{"tokens":["token_id:\u0031"],"token_logprobs":[-1]},`+stopNull, usage3), plain, false},
		{"string logprob", completion(`"logprobs":{"tokens":["token_id:1"],"token_logprobs":["x"]},`+stopNull, usage3), plain, false},
		{"leading zero id", completion(lp3+`,`+stopNull+`,"token_ids":[01,2,3]`, usage3), plain, false},
		{"two choices", `{"choices":[{"text":"a","finish_reason":"stop"},{"text":"b"}]}`, plain, true},
		{"not an object", `[1]`, plain, false},
		{"truncated", referenceResponse[:len(referenceResponse)/2], plain, false},
		{"trailing garbage", referenceResponse + `x`, plain, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.fast, sameAsGeneral(t, []byte(tt.body), tt.p))
		})
	}
}

func FuzzReadFast(f *testing.F) {
	f.Add(string(bodyOf256()))
	f.Add(referenceResponse)
	f.Add(completion(lp3+`,`+stopNull+`,`+ids3+`,"prompt_logprobs":[null,{"6":{"logprob":-3.1}}]`, usage3))
	f.Add(completion(`"logprobs":{"tokens":["token_id:1",7],"token_logprobs":[null,"x"],"top_logprobs":[null]},"text":5,`+stopNull, `{"x":[true,false]}`))
	top, _ := generate.SamplingParams{MaxTokens: generate.Int(8), Logprobs: generate.Int(2), PromptLogprobs: generate.Int(1)}.Resolve()
	plain, _ := generate.SamplingParams{MaxTokens: generate.Int(8)}.Resolve()
	f.Fuzz(func(t *testing.T, body string) {
		sameAsGeneral(t, []byte(body), plain)
		sameAsGeneral(t, []byte(body), top)
	})
}
