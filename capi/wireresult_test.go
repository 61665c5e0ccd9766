package main

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/generate"
)

// A Result whose top or prompt logprobs hold NaN (SGLang's null) or -Inf (vLLM's -9999
// floor) reaches Python as the float it is: the JSON uses Python's NaN / -Infinity
// literals, which json.loads reads; a missing prompt logprob stays null (None).
func TestWireResultCarriesNonFiniteLogprobs(t *testing.T) {
	r := &generate.Result{
		StopReason:        "length",
		TopLogprobs:       []map[uint32]float64{{5: -0.5, 9: math.NaN()}, {7: math.Inf(-1)}},
		PromptLogprobs:    []float64{math.NaN(), -1.5, math.Inf(-1)},
		PromptTopLogprobs: []map[uint32]float64{nil, {3: -1.5}, {4: math.NaN()}},
	}
	data, err := jsonAPI.Marshal(toWireResult(r))
	require.NoError(t, err)
	s := string(data)
	assert.Contains(t, s, `"top_logprobs":[{"5":-0.5,"9":NaN},{"7":-Infinity}]`)
	assert.Contains(t, s, `"prompt_logprobs":[null,-1.5,-Infinity]`)
	assert.Contains(t, s, `"prompt_top_logprobs":[null,{"3":-1.5},{"4":NaN}]`)
}
