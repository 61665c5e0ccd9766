package sglang

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

func TestRequestBodyIsGeneratesBody(t *testing.T) {
	req := generate.Request{Tokens: referencePrompt, Params: referenceParams(), ID: "tree7-node3"}
	body, err := RequestBody(req)
	require.NoError(t, err)
	assert.JSONEq(t, referenceRequest, string(body))

	_, err = RequestBody(generate.Request{Params: referenceParams()})
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	_, err = RequestBody(generate.Request{Tokens: referencePrompt, Params: generate.SamplingParams{MaxTokens: generate.Int(0)}})
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
}

func TestParseResponseValidates(t *testing.T) {
	tests := []struct {
		name      string
		maxTokens int
		body      string
		wantErr   string
	}{
		{"reference reply", 256, referenceResponse, ""},
		{"more tokens than asked for", 5, referenceResponse, "response has 7 tokens, max_tokens was 5"},
		{"no logprobs", 256, `{"text":"x","meta_info":{"finish_reason":{"type":"stop"}}}`, "no meta_info.output_token_logprobs"},
		{"not JSON", 256, `Internal Server Error`, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := referenceParams()
			params.MaxTokens = generate.Int(tt.maxTokens)
			res, err := ParseResponse([]byte(tt.body), generate.Request{Tokens: referencePrompt, Params: params})
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, status.Backend, status.CodeOf(err))
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []uint32{17, 10, 17, 28, 19, 13, 522}, res.Tokens)
			assert.Equal(t, referencePrompt, res.PrefixTokens)
			assert.Equal(t, "</answer>", res.MatchedStop.Value())
		})
	}
}
