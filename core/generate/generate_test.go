package generate

import (
	"encoding/json"
	"math"
	"testing"

	jsoniter "github.com/json-iterator/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
)

func TestResolveDefaults(t *testing.T) {
	r, err := SamplingParams{}.Resolve()
	require.NoError(t, err)
	assert.Equal(t, Resolved{
		Temperature: 0.7, MaxTokens: 512, TopP: 1.0, TopK: -1, Stop: []string{}, StopTokenIDs: []uint32{},
		TopLogprobs: 0, PromptLogprobs: -1, RepetitionPenalty: 1.0,
	}, r)
}

func TestResolveSetFields(t *testing.T) {
	r, err := SamplingParams{
		Temperature: Float64(0), MaxTokens: Int(256), TopP: Float64(0.9), TopK: Int(20), Stop: []string{"</answer>"},
		StopTokenIDs: []uint32{151645}, Logprobs: Int(5), PromptLogprobs: Int(0), RepetitionPenalty: Float64(1.1), Seed: Int64(-3),
	}.Resolve()
	require.NoError(t, err)
	assert.Equal(t, Resolved{
		Temperature: 0, MaxTokens: 256, TopP: 0.9, TopK: 20, Stop: []string{"</answer>"}, StopTokenIDs: []uint32{151645},
		TopLogprobs: 5, PromptLogprobs: 0, RepetitionPenalty: 1.1, Seed: -3, HasSeed: true,
	}, r)
}

func TestResolveRejects(t *testing.T) {
	tests := []struct {
		name string
		p    SamplingParams
		want string
	}{
		{"negative temperature", SamplingParams{Temperature: Float64(-0.1)}, "sampling: temperature -0.1 must be ≥ 0"},
		{"NaN temperature", SamplingParams{Temperature: Float64(math.NaN())}, "sampling: temperature NaN must be ≥ 0"},
		{"zero max tokens", SamplingParams{MaxTokens: Int(0)}, "sampling: max_tokens 0 must be ≥ 1"},
		{"top_p zero", SamplingParams{TopP: Float64(0)}, "sampling: top_p 0 must be in (0, 1]"},
		{"top_p above one", SamplingParams{TopP: Float64(1.5)}, "sampling: top_p 1.5 must be in (0, 1]"},
		{"top_k", SamplingParams{TopK: Int(-2)}, "sampling: top_k -2 must be -1 (off), 0 (off) or ≥ 1"},
		{"logprobs", SamplingParams{Logprobs: Int(-1)}, "sampling: logprobs -1 must be ≥ 0"},
		{"prompt logprobs", SamplingParams{PromptLogprobs: Int(-1)}, "sampling: prompt_logprobs -1 must be ≥ 0"},
		{"repetition penalty", SamplingParams{RepetitionPenalty: Float64(0)}, "sampling: repetition_penalty 0 must be in (0, 2]"},
		{"empty stop", SamplingParams{Stop: []string{"a", ""}}, "sampling: stop[1] is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.p.Resolve()
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.EqualError(t, err, tt.want)
		})
	}
}

func TestWithDefaults(t *testing.T) {
	defaults := SamplingParams{MaxTokens: Int(512), Logprobs: Int(0), Stop: []string{"x"}, Seed: Int64(1)}
	got := SamplingParams{MaxTokens: Int(256), Temperature: Float64(1)}.WithDefaults(defaults)
	assert.Equal(t, 256, *got.MaxTokens)
	assert.Equal(t, 1.0, *got.Temperature)
	assert.Equal(t, 0, *got.Logprobs)
	assert.Equal(t, []string{"x"}, got.Stop)
	assert.Equal(t, int64(1), *got.Seed)
	assert.Nil(t, got.TopP)
}

func TestStopMatch(t *testing.T) {
	tests := []struct {
		name  string
		m     StopMatch
		value any
		json  string
	}{
		{"none", StopMatch{}, nil, "null"},
		{"token", StopMatch{Kind: MatchToken, Token: 151645}, int64(151645), "151645"},
		{"string", StopMatch{Kind: MatchString, String: `</answer>"`}, `</answer>"`, `"\u003c/answer\u003e\""`},
		{"control bytes", StopMatch{Kind: MatchString, String: "\x00\a"}, "\x00\a", `"\u0000\u0007"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.value, tt.m.Value())
			b, err := json.Marshal(tt.m)
			require.NoError(t, err)
			assert.JSONEq(t, tt.json, string(b))
		})
	}
}

func TestValidate(t *testing.T) {
	good := func() *Result {
		return &Result{Tokens: []uint32{1, 2, 3}, PrefixTokens: []uint32{9}, StopReason: "length", Logprobs: []float64{-1, -0.5, 0}}
	}
	tests := []struct {
		name   string
		mutate func(r *Result)
		max    int
		want   string
	}{
		{name: "valid", max: 3},
		{name: "abort is a valid finish", max: 3, mutate: func(r *Result) { r.StopReason = "abort" }},
		{name: "too many tokens", max: 2, want: "sglang: response has 3 tokens, max_tokens was 2"},
		{name: "unknown finish", max: 3, mutate: func(r *Result) { r.StopReason = "eos" }, want: `sglang: unknown finish reason "eos", expected stop, length or abort`},
		{name: "empty finish", max: 3, mutate: func(r *Result) { r.StopReason = "" }, want: `sglang: unknown finish reason "", expected stop, length or abort`},
		{name: "missing logprobs", max: 3, mutate: func(r *Result) { r.Logprobs = nil }, want: "sglang: response has 3 tokens but 0 logprobs; expected one logprob per token"},
		{name: "positive infinite logprob", max: 3, mutate: func(r *Result) { r.Logprobs[1] = math.Inf(1) }, want: "sglang: logprob +Inf of token 1 (id 2) is positive; expected a value ≤ 0 (NaN for none)"},
		{name: "positive logprob", max: 3, mutate: func(r *Result) { r.Logprobs[1] = 0.5 }, want: "sglang: logprob 0.5 of token 1 (id 2) is positive; expected a value ≤ 0 (NaN for none)"},
		// SGLang sends null for -inf and NaN (orjson); the client reads it as NaN.
		{name: "missing logprob (server null) is valid", max: 3, mutate: func(r *Result) { r.Logprobs[1] = math.NaN() }},
		{name: "-Inf logprob is valid", max: 3, mutate: func(r *Result) { r.Logprobs[1] = math.Inf(-1) }},
		{name: "top misaligned", max: 3, mutate: func(r *Result) { r.TopLogprobs = []map[uint32]float64{{1: -1}} }, want: "sglang: response has 3 tokens but 1 top-logprob entries"},
		{name: "prompt logprobs misaligned", max: 3, mutate: func(r *Result) { r.PromptLogprobs = []float64{math.NaN(), -1} }, want: "sglang: prompt has 1 tokens but 2 prompt logprobs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good()
			if tt.mutate != nil {
				tt.mutate(r)
			}
			err := r.Validate("sglang", tt.max)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.Equal(t, status.Backend, status.CodeOf(err))
			assert.EqualError(t, err, tt.want)
		})
	}
}

func TestSampleEntropy(t *testing.T) {
	assert.Equal(t, 0.0, SampleEntropy(nil))
	assert.InDelta(t, 0.5, SampleEntropy([]float64{-1, 0}), 1e-12)
}

// TestReadStopMatch covers every shape of SGLang's finish_reason.matched in its
// schema (sglang 0.5.23 sglang/api/v1/api_types.py: Matched = Union[int, str,
// MatchedTokens], MatchedTokens = List[int]; schedule_batch.py FINISH_MATCHED_TOKEN,
// FINISH_MATCHED_STR, FINISHED_MATCHED_REGEX, and "NaN happened") and vLLM's
// stop_reason (int | str | None, vllm 0.33.0 completion/protocol.py).
func TestReadStopMatch(t *testing.T) {
	tests := []struct {
		json string
		want StopMatch
		err  string
	}{
		{json: `151645`, want: StopMatch{Kind: MatchToken, Token: 151645}},
		{json: `0`, want: StopMatch{Kind: MatchToken, Token: 0}},
		{json: `"</answer>"`, want: StopMatch{Kind: MatchString, String: "</answer>"}},
		{json: `"NaN happened"`, want: StopMatch{Kind: MatchString, String: "NaN happened"}},
		{json: `null`, want: StopMatch{}},
		{json: `[]`, want: StopMatch{}},
		{json: `[151645]`, want: StopMatch{Kind: MatchToken, Token: 151645}},
		{json: `[151645, 151643]`, err: "is a list of 2 token ids [151645 151643]; matched_stop holds one token id, a string or None"},
		{json: `[1, "a"]`, err: "list entry 1 is not a token id"},
		{json: `-1`, err: "token id -1 is not an integer in [0, 2^32)"},
		{json: `1.5`, err: "token id 1.5 is not an integer in [0, 2^32)"},
		{json: `4294967296`, err: "token id 4294967296 is not an integer in [0, 2^32)"},
		{json: `{"id": 1}`, err: `is {"id": 1}; expected a token id, a string, a list of token ids or null`},
		{json: `true`, err: "expected a token id, a string, a list of token ids or null"},
	}
	for _, tt := range tests {
		t.Run(tt.json, func(t *testing.T) {
			// Inside an object, as it is on the wire (a bare top-level number ends at EOF).
			iter := jsoniter.ConfigDefault.BorrowIterator([]byte(`{"matched": ` + tt.json + `}`))
			defer jsoniter.ConfigDefault.ReturnIterator(iter)
			require.Equal(t, "matched", iter.ReadObject())
			got, err := ReadStopMatch(iter)
			assert.Equal(t, "", iter.ReadObject(), "the value is consumed")
			require.NoError(t, iter.Error)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestEntropyAndNonFiniteLogprobs(t *testing.T) {
	r := &Result{Tokens: []uint32{1, 2, 3, 4}, Logprobs: []float64{-1, math.NaN(), -3, math.Inf(-1)}}
	n, first := r.NonFiniteLogprobs()
	assert.Equal(t, 2, n)
	assert.Equal(t, 1, first)
	assert.Equal(t, 2.0, SampleEntropy(r.Logprobs)) // mean over the two finite values
	assert.Equal(t, 0.0, SampleEntropy([]float64{math.NaN()}))
	n, first = (&Result{Logprobs: []float64{-1}}).NonFiniteLogprobs()
	assert.Equal(t, 0, n)
	assert.Equal(t, -1, first)
}
