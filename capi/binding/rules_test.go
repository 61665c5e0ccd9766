package binding_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/capi/binding"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		kind, config string
		want         any    // the normalised form, when valid
		message      string // the error message, when not
	}{
		{binding.KindSelective, `{}`, search.Selective(search.DefaultBudget, search.DefaultWarmup), ""},
		{binding.KindSelective, `{"budget": 8, "warmup": 4, "per_pass": 2, "max_children": 3, "min_remaining": null, "score": "uniform", "seed": 7}`,
			search.Config{Budget: 8, Warmup: 4, PerPass: 2, MaxChildren: 3, Score: "uniform", Seed: 7, StopAlike: true}, ""},
		{binding.KindSelective, `{"min_remaining": 128, "stop_alike": false}`, search.Config{Budget: 8, Warmup: 4, PerPass: 4, MaxChildren: 4, MinRemaining: 128, Score: "value_refinement_per_token"}, ""},
		{binding.KindSelective, `{"stop_alike": 1}`, nil, "Selective: stop_alike must be true or false, got 1"},
		{binding.KindSelective, `{"budget": 4, "warmup": 8}`, nil, "Selective: warmup is 8, must be in [1, budget=4]: warmup (8) must not exceed budget (4)"},
		{binding.KindSelective, `{"budget": 0, "warmup": 0}`, nil, "Selective: budget is 0, must be >= 1"},
		{binding.KindSelective, `{"per_pass": 0}`, nil, "Selective: per_pass is 0, must be >= 1"},
		{binding.KindSelective, `{"max_children": -1}`, nil, "Selective: max_children is -1, must be >= 1"},
		{binding.KindSelective, `{"min_remaining": -1}`, nil, "Selective: min_remaining is -1, must be >= 0"},
		{binding.KindSelective, `{"score": "ucb"}`, nil, `Selective: score is "ucb", must be "value_refinement", "posterior_variance", "uniform", "gradient_variance", "shallow_first", "critic_adaptive" or "value_refinement_per_token"`},
		{binding.KindSelective, `{"budget": 2.5}`, nil, "Selective: budget must be an integer, got 2.5"},
		{binding.KindSelective, `{"budget": "8"}`, nil, `Selective: budget must be an integer, got "8"`},
		{binding.KindSelective, `{"budget": true}`, nil, "Selective: budget must be an integer, got true"},
		{binding.KindSelective, `{"seed": -1}`, nil, "Selective: seed must be an integer in [0, 2**64), got -1"},
		{binding.KindSelective, `{"budgte": 8}`, nil, `Selective: unknown field "budgte" (allowed: budget, max_children, min_remaining, per_pass, score, seed, stop_alike, warmup)`},
		{binding.KindSelective, `[1]`, nil, "Selective: bad JSON"},
		// Independent(n) is search.Independent(n): the round fields keep Selective's defaults.
		{binding.KindIndependent, `{"n": 8, "seed": 3}`, func() search.Config { c := search.Independent(8); c.Seed = 3; return c }(), ""},
		{binding.KindIndependent, `{}`, search.Independent(16), ""},
		{binding.KindIndependent, `{"n": 0}`, nil, "Independent: n is 0, must be >= 1"},
		{binding.KindSegments, `{"tokens": 64}`, binding.SegmentsDefaults{Tokens: 64}, ""},
		{binding.KindSegments, `{"tokens": 0}`, nil, "Segments: tokens is 0, must be >= 1"},
		{binding.KindAgent, `{"max_segments": 2, "max_total_tokens": 100}`, binding.AgentDefaults{MaxSegments: 2, MaxTotalTokens: 100}, ""},
		{binding.KindAgent, `{"max_segments": 0}`, nil, "Agent: max_segments is 0, must be >= 1"},
		{binding.KindAgent, `{"max_total_tokens": -5}`, nil, "Agent: max_total_tokens is -5, must be >= 1"},
		{binding.KindConstantCritic, `{"value": 0.5}`, struct {
			Value float64 `json:"value"`
		}{0.5}, ""},
		{binding.KindConstantCritic, `{"value": "NaN"}`, nil, "Critic.constant: value is NaN, must be a finite number"},
		{binding.KindConstantCritic, `{"value": "-Infinity"}`, nil, "Critic.constant: value is -Inf, must be a finite number"},
		{binding.KindConstantCritic, `{"value": "0.5"}`, nil, `Critic.constant: value must be a number, got "0.5"`},
		{binding.KindMinAbsAdvantage, `{"value": null}`, nil, ""},
		{binding.KindMinAbsAdvantage, `{"value": 0.25}`, nil, ""},
		{binding.KindMinAbsAdvantage, `{"value": -1}`, nil, "min_abs_advantage is -1, must be >= 0"},
		{binding.KindMinAbsAdvantage, `{"value": "NaN"}`, nil, "min_abs_advantage is NaN, must be >= 0"},
		{binding.KindRecordLayout, `{"value": "paths"}`, nil, ""},
		{binding.KindRecordLayout, `{"value": "leaves"}`, nil, `layout is "leaves", must be "spans" or "paths"`},
		{binding.KindSampling, `{}`, nil, ""},
		{binding.KindSampling, `{"temperature": null, "max_tokens": null, "top_p": null, "top_k": null, "stop": null, "logprobs": null, "prompt_logprobs": null, "repetition_penalty": null, "seed": null}`, nil, ""},
		{binding.KindSampling, `{"temperature": 0, "max_tokens": 16, "top_p": 0.9, "top_k": 5, "stop": ["</answer>"], "logprobs": 2, "prompt_logprobs": 0, "repetition_penalty": 1.1, "seed": -3}`, nil, ""},
		{binding.KindSampling, `{"temperature": -1}`, nil, "sampling: temperature -1 must be ≥ 0"},
		{binding.KindSampling, `{"temperature": "NaN"}`, nil, "sampling: temperature NaN must be ≥ 0"},
		{binding.KindSampling, `{"top_p": 2}`, nil, "sampling: top_p 2 must be in (0, 1]"},
		{binding.KindSampling, `{"max_tokens": 0}`, nil, "sampling: max_tokens 0 must be ≥ 1"},
		{binding.KindSampling, `{"top_k": -2}`, nil, "sampling: top_k -2 must be"},
		{binding.KindSampling, `{"logprobs": -1}`, nil, "sampling: logprobs -1 must be ≥ 0"},
		{binding.KindSampling, `{"prompt_logprobs": -1}`, nil, "sampling: prompt_logprobs -1 must be ≥ 0"},
		{binding.KindSampling, `{"repetition_penalty": 3}`, nil, "sampling: repetition_penalty 3 must be in (0, 2]"},
		{binding.KindSampling, `{"stop": ["a", ""]}`, nil, "sampling: stop[1] is empty"},
		{binding.KindSampling, `{"stop": "a"}`, nil, `sampling: stop must be a list of strings, got "a"`},
		{binding.KindSampling, `{"max_tokens": 1.5}`, nil, "sampling: max_tokens must be an integer, got 1.5"},
		{binding.KindSampling, `{"temprature": 1}`, nil, `sampling: unknown field "temprature" (allowed: logprobs, max_tokens, prompt_logprobs, repetition_penalty, seed, stop, stop_token_ids, temperature, top_k, top_p)`},
		{binding.KindSampling, `{"stop_token_ids": [151645, 0]}`, generate.SamplingParams{StopTokenIDs: []uint32{151645, 0}}, ""},
		{binding.KindSampling, `{"stop_token_ids": [-1]}`, nil, "sampling: stop_token_ids must be a list of token ids (integers in [0, 2**32)), got [-1]"},
		{binding.KindReward, `{}`, prepare.DefaultRewardConfig(), ""},
		{binding.KindReward, `{"gamma": 0.9, "critic_weight": 4, "reward_min": -1, "reward_max": 2, "truncated_reward": -1, "truncation": "bootstrap"}`,
			prepare.RewardConfig{Gamma: 0.9, CriticWeight: 4, RewardMin: -1, RewardMax: 2, TruncatedReward: -1, Truncation: "bootstrap"}, ""},
		{binding.KindReward, `{"gamma": 2}`, nil, "reward: gamma is 2, must be in (0, 1]"},
		{binding.KindReward, `{"gamma": 0}`, nil, "reward: gamma is 0, must be in (0, 1]"},
		{binding.KindReward, `{"critic_weight": -1}`, nil, "reward: critic_weight is -1, must be in [0, 64]"},
		{binding.KindReward, `{"reward_min": 1, "reward_max": 0}`, nil, "reward: reward_min is 1, must be below reward_max 0"},
		{binding.KindReward, `{"truncated_reward": "Infinity"}`, nil, "reward: truncated_reward is +Inf, must be finite"},
		{binding.KindReward, `{"truncation": "cut"}`, nil, `reward: truncation is "cut", must be "terminal" or "bootstrap"`},
		{binding.KindReward, `{"gamma": "1"}`, nil, `reward: gamma must be a number, got "1"`},
		{binding.KindReward, `{"kappa": 1}`, nil, `reward: unknown field "kappa" (allowed: critic_weight, gamma, reward_max, reward_min, truncated_reward, truncation)`},
		{"Collector", `{}`, nil, `rules: unknown kind "Collector"`},
	}
	for _, tc := range tests {
		t.Run(tc.kind+" "+tc.config, func(t *testing.T) {
			got, err := binding.Check(tc.kind, []byte(tc.config))
			if tc.message != "" {
				require.Error(t, err)
				assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
				assert.Contains(t, err.Error(), tc.message)
				return
			}
			require.NoError(t, err)
			if tc.want != nil {
				assert.Equal(t, tc.want, got)
			}
		})
	}
}

// TestCheckNamesTheField: an error about one field carries it as data, in the binding's
// spelling (Independent's n, Segments' tokens), for Python's ConfigError.field.
func TestCheckNamesTheField(t *testing.T) {
	tests := []struct {
		kind, config string
		field        string // "": the error is about no one field
	}{
		{binding.KindSelective, `{"budget": 0, "warmup": 0}`, "budget"},
		{binding.KindSelective, `{"budget": 4, "warmup": 8}`, "warmup"},
		{binding.KindSelective, `{"score": "ucb"}`, "score"},
		{binding.KindSelective, `{"budget": "8"}`, "budget"},
		{binding.KindSelective, `{"seed": -1}`, "seed"},
		{binding.KindIndependent, `{"n": 0}`, "n"},
		{binding.KindSegments, `{"tokens": 0}`, "tokens"},
		{binding.KindAgent, `{"max_segments": 0}`, "max_segments"},
		{binding.KindAgent, `{"max_total_tokens": -5}`, "max_total_tokens"},
		{binding.KindConstantCritic, `{"value": "NaN"}`, "value"},
		{binding.KindConstantCritic, `{"value": "0.5"}`, "value"},
		{binding.KindMinAbsAdvantage, `{"value": -1}`, "min_abs_advantage"},
		{binding.KindRecordLayout, `{"value": "leaves"}`, "layout"},
		{binding.KindSampling, `{"temperature": -1}`, "temperature"},
		{binding.KindSampling, `{"top_p": 2}`, "top_p"},
		{binding.KindSampling, `{"max_tokens": 0}`, "max_tokens"},
		{binding.KindSampling, `{"top_k": -2}`, "top_k"},
		{binding.KindSampling, `{"logprobs": -1}`, "logprobs"},
		{binding.KindSampling, `{"prompt_logprobs": -1}`, "prompt_logprobs"},
		{binding.KindSampling, `{"repetition_penalty": 3}`, "repetition_penalty"},
		{binding.KindSampling, `{"max_tokens": 1.5}`, "max_tokens"},
		{binding.KindReward, `{"gamma": 2}`, "gamma"},
		{binding.KindReward, `{"reward_min": 1, "reward_max": 0}`, "reward_min"},
		{binding.KindReward, `{"truncation": "cut"}`, "truncation"},
		{binding.KindSelective, `[1]`, ""},
		{"Collector", `{}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.kind+" "+tc.config, func(t *testing.T) {
			_, err := binding.Check(tc.kind, []byte(tc.config))
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Equal(t, tc.field, status.FieldOf(err), err.Error())
		})
	}
}

func TestDefaultsAreTheLibrarys(t *testing.T) {
	d := binding.DefaultValues()
	sel := search.Selective(search.DefaultBudget, search.DefaultWarmup)
	assert.Equal(t, binding.SelectiveDefaults{Budget: 8, Warmup: 4, PerPass: 4, MaxChildren: 4, Score: "value_refinement_per_token", StopAlike: true}, d.Selective,
		"ALGORITHM.md §5.8's per_pass=4, max_children=4; since 2026-12-04 Selective(8, 4), "+
			"score value_refinement_per_token, stop_alike (docs/signal.md §D, docs/learning-signal.md)")
	assert.Equal(t, binding.RecordsDefaults{Layout: "spans", VisitationWeights: false}, d.Records,
		"per-span records (docs/records.md), unweighted since 2026-12-04 (docs/signal.md §D)")
	assert.Equal(t, sel.PerPass, d.Selective.PerPass)
	assert.Equal(t, binding.IndependentDefaults{N: 16}, d.Independent)
	assert.Equal(t, binding.SegmentsDefaults{Tokens: collect.DefaultSegments}, d.Segments)
	assert.Equal(t, binding.AgentDefaults{MaxSegments: collect.DefaultMaxSegments, MaxTotalTokens: collect.DefaultMaxTotalTokens}, d.Agent)
	assert.Equal(t, prepare.DefaultRewardConfig(), d.Reward)
	for _, score := range d.Scores {
		c := sel
		c.Score = score
		assert.NoError(t, c.Validate(), "every listed score validates")
	}
	// The defaults are themselves valid.
	data, err := json.Marshal(d.Selective)
	require.NoError(t, err)
	_, err = binding.Check(binding.KindSelective, data)
	assert.NoError(t, err)
	data, err = json.Marshal(d.Sampling)
	require.NoError(t, err)
	_, err = binding.Check(binding.KindSampling, data)
	assert.NoError(t, err)
	data, err = json.Marshal(d.Reward)
	require.NoError(t, err)
	reward, err := binding.Check(binding.KindReward, data)
	require.NoError(t, err)
	assert.Equal(t, d.Reward, reward)
}
