package sglang

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/sim"
)

// Prompt logprobs end to end against the simulator, which sends input_token_logprobs as
// SGLang 0.5.23 does (first entry null, -inf as null).
func TestPromptLogprobsFromTheSimulator(t *testing.T) {
	srv, err := sim.Start(sim.Config{Seed: 2})
	require.NoError(t, err)
	defer srv.Close()
	c, err := New(Config{BaseURL: srv.URL()})
	require.NoError(t, err)
	prompt, err := srv.Tokenizer().Encode(sim.Problems()[0].Prompt, false)
	require.NoError(t, err)
	for _, k := range []int{0, 2} {
		res, err := c.Generate(context.Background(), generate.Request{Tokens: prompt,
			Params: generate.SamplingParams{MaxTokens: generate.Int(4), PromptLogprobs: generate.Int(k), Temperature: generate.Float64(0)}})
		require.NoError(t, err)
		require.Len(t, res.PromptLogprobs, len(prompt))
		assert.True(t, math.IsNaN(res.PromptLogprobs[0]), "the first prompt token has no logprob")
		for i, lp := range res.PromptLogprobs[1:] {
			assert.True(t, math.IsNaN(lp) || lp <= 0, "position %d: %v", i+1, lp)
		}
		if k > 0 {
			require.Len(t, res.PromptTopLogprobs, len(prompt))
			assert.Nil(t, res.PromptTopLogprobs[0])
		}
	}
}
