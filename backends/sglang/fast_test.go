package sglang

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/generate"
)

// comparable replaces floats by their bits so that NaN (a null logprob) compares equal,
// and empty generated lists by nil (parseResponse treats both alike; the prompt logprobs'
// nil means absent and is kept).
func comparable(r response) any {
	emptyIDs := func(xs []uint32) []uint32 {
		if len(xs) == 0 {
			return nil
		}
		return xs
	}
	r.outputIDs, r.meta.outIDs = emptyIDs(r.outputIDs), emptyIDs(r.meta.outIDs)
	if len(r.meta.outLogprobs) == 0 {
		r.meta.outLogprobs = nil
	}
	bits := func(xs []float64) []uint64 {
		if xs == nil {
			return nil
		}
		out := make([]uint64, len(xs))
		for i, x := range xs {
			out[i] = math.Float64bits(x)
		}
		return out
	}
	m := r.meta
	out := map[string]any{
		"text": r.text, "outputIDs": r.outputIDs, "hasOutputIDs": r.hasOutputIDs, "hasMeta": r.hasMeta,
		"finish": [3]any{m.finishType, m.abortMessage, m.hasFinish}, "matched": m.matched,
		"counts": [3]int{m.promptTokens, m.completionTokens, m.cachedTokens},
		"out":    [2]any{bits(m.outLogprobs), m.outIDs}, "hasOut": m.hasOut, "outTop": fmt.Sprint(m.outTop),
		"in": bits(m.inLogprobs), "inTop": fmt.Sprint(m.inTop),
	}
	return out
}

// sameAsGeneral checks that when readFast accepts body, readGeneral accepts it and reads
// the same response, and that readFast skipping the text accepts the same bodies and reads
// the same but for an empty text; it reports whether readFast accepted.
func sameAsGeneral(t *testing.T, body []byte, p generate.Resolved) bool {
	t.Helper()
	var fast, general, skipped response
	accepted := readFast(body, &fast, p, false)
	require.Equal(t, accepted, readFast(body, &skipped, p, true), "readFast with and without the text, %q", body)
	if !accepted {
		return false
	}
	require.NoError(t, readGeneral(body, &general, p), "readFast accepted %q", body)
	require.Equal(t, comparable(general), comparable(fast), "%q", body)
	general.text = ""
	require.Equal(t, comparable(general), comparable(skipped), "%q with the text skipped", body)
	return true
}

func TestReadFastMatchesTheGeneralReader(t *testing.T) {
	plain, _ := generate.SamplingParams{MaxTokens: generate.Int(256)}.Resolve()
	withTop, _ := generate.SamplingParams{MaxTokens: generate.Int(4), Logprobs: generate.Int(2), PromptLogprobs: generate.Int(1)}.Resolve()
	lps := `[[-0.5,5,null],[null,6,"b"],[-1e-3,7,null]]`
	tests := []struct {
		name string
		body string
		p    generate.Resolved
		fast bool
	}{
		{"server reply", string(bodyOf256()), plain, true},
		{"matched stop token", reply(`[5,6,7]`, `{"type":"stop","matched":151645}`, `,"completion_tokens":3`, lps), plain, true},
		{"matched stop string", reply("", `{"type":"stop","matched":"</answer>"}`, "", lps), plain, true},
		{"abort", reply("", `{"type":"abort","message":"client \"gone\""}`, "", `[]`), plain, true},
		{"weight version", `{"text":"t","meta_info":{"finish_reason":{"type":"length"},"weight_version":"step-20","output_token_logprobs":[[-1,2,null]]}}`, plain, true},
		{"weight version not a string", `{"text":"t","meta_info":{"finish_reason":{"type":"length"},"weight_version":7,"output_token_logprobs":[[-1,2,null]]}}`, plain, true},
		{"escaped text", `{"text":"a\n\"b\"\u00e9","meta_info":{"finish_reason":{"type":"length"},"output_token_logprobs":[]}}`, plain, true},
		{"null output_ids and logprobs", reply(`null`, `null`, "", `null`), plain, true},
		{"unknown fields of every kind", `{"x":[1,{"a":[true,false,null,"s",-2.5e3]}],"text":"t","meta_info":{"y":{},"z":[],"finish_reason":"stop","output_token_logprobs":[[-1,2,null]]}}`, plain, true},
		{"white space", " {\n \"text\" : \"t\" ,\t\"meta_info\" : { \"finish_reason\" : { \"type\" : \"length\" } , \"output_token_logprobs\" : [ [ -1 , 2 , null ] ] } } ", plain, true},
		{"top and prompt logprobs asked", `{"text":"t","meta_info":{"finish_reason":{"type":"length"},"output_token_logprobs":[[-1,2,null]],"output_top_logprobs":[[[-1,2,null],[-2,3,null]]],"input_token_logprobs":[[null,1,null],[-0.25,2,null]],"input_top_logprobs":[null,[[-0.25,2,null]]]}}`, withTop, true},
		{"top logprobs not asked", `{"text":"t","meta_info":{"finish_reason":{"type":"length"},"output_token_logprobs":[[-1,2,null]],"output_top_logprobs":[null]}}`, plain, true},
		{"batch array", "[" + string(bodyOf256()) + "]", plain, false},
		{"escaped key", `{"te\u0078t":"t","meta_info":{}}`, plain, false},
		{"truncated", string(bodyOf256()[:500]), plain, false},
		{"trailing garbage", string(bodyOf256()) + "x", plain, false},
		{"four-element entries", reply("", `{"type":"length"}`, "", `[[-1,2,null,0]]`), plain, false},
		{"control byte in a string", "{\"text\":\"a\x01\",\"meta_info\":{}}", plain, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.fast, sameAsGeneral(t, []byte(tt.body), tt.p))
		})
	}
}

// FuzzReadFast: whatever readFast accepts, the general reader accepts and reads the same.
func FuzzReadFast(f *testing.F) {
	f.Add(string(bodyOf256()))
	f.Add(reply(`[5,6]`, `{"type":"stop","matched":"</a>"}`, `,"completion_tokens":2`, `[[-0.5,5,null],[null,6,"x"]]`))
	f.Add(`{"text":"a\n\u00e9","meta_info":{"finish_reason":"stop","output_token_logprobs":[],"output_top_logprobs":[null]}}`)
	f.Add(`{"x":[1,{"a":[true,false,null,-2.5e3]}],"meta_info":null}`)
	top, _ := generate.SamplingParams{MaxTokens: generate.Int(8), Logprobs: generate.Int(2), PromptLogprobs: generate.Int(1)}.Resolve()
	plain, _ := generate.SamplingParams{MaxTokens: generate.Int(8)}.Resolve()
	f.Fuzz(func(t *testing.T, body string) {
		sameAsGeneral(t, []byte(body), plain)
		sameAsGeneral(t, []byte(body), top)
	})
}
