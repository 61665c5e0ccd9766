package rules_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/rules"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		kind, config string
		want         any    // the normalised form, when valid
		message      string // the error message, when not
	}{
		{rules.KindSelective, `{}`, search.Selective(32, 16), ""},
		{rules.KindSelective, `{"budget": 8, "warmup": 4, "per_pass": 2, "max_children": 3, "min_remaining": null, "score": "uniform", "seed": 7}`,
			search.Config{Budget: 8, Warmup: 4, PerPass: 2, MaxChildren: 3, Score: "uniform", Seed: 7}, ""},
		{rules.KindSelective, `{"min_remaining": 128}`, search.Config{Budget: 32, Warmup: 16, PerPass: 4, MaxChildren: 4, MinRemaining: 128, Score: "critic_adaptive"}, ""},
		{rules.KindSelective, `{"budget": 4, "warmup": 8}`, nil, "Selective: warmup is 8, must be in [1, budget=4]: warmup (8) must not exceed budget (4)"},
		{rules.KindSelective, `{"budget": 0, "warmup": 0}`, nil, "Selective: budget is 0, must be >= 1"},
		{rules.KindSelective, `{"per_pass": 0}`, nil, "Selective: per_pass is 0, must be >= 1"},
		{rules.KindSelective, `{"max_children": -1}`, nil, "Selective: max_children is -1, must be >= 1"},
		{rules.KindSelective, `{"min_remaining": -1}`, nil, "Selective: min_remaining is -1, must be >= 0"},
		{rules.KindSelective, `{"score": "ucb"}`, nil, `Selective: score is "ucb", must be "value_refinement", "posterior_variance", "uniform", "gradient_variance", "shallow_first" or "critic_adaptive"`},
		{rules.KindSelective, `{"budget": 2.5}`, nil, "Selective: budget must be an integer, got 2.5"},
		{rules.KindSelective, `{"budget": "8"}`, nil, `Selective: budget must be an integer, got "8"`},
		{rules.KindSelective, `{"budget": true}`, nil, "Selective: budget must be an integer, got true"},
		{rules.KindSelective, `{"seed": -1}`, nil, "Selective: seed must be an integer in [0, 2**64), got -1"},
		{rules.KindSelective, `{"budgte": 8}`, nil, `Selective: unknown field "budgte" (allowed: budget, max_children, min_remaining, per_pass, score, seed, warmup)`},
		{rules.KindSelective, `[1]`, nil, "Selective: bad JSON"},
		// Independent(n) is search.Independent(n): the round fields keep Selective's defaults.
		{rules.KindIndependent, `{"n": 8, "seed": 3}`, func() search.Config { c := search.Independent(8); c.Seed = 3; return c }(), ""},
		{rules.KindIndependent, `{}`, search.Independent(16), ""},
		{rules.KindIndependent, `{"n": 0}`, nil, "Independent: n is 0, must be >= 1"},
		{rules.KindSegments, `{"tokens": 64}`, rules.SegmentsDefaults{Tokens: 64}, ""},
		{rules.KindSegments, `{"tokens": 0}`, nil, "Segments: tokens is 0, must be >= 1"},
		{rules.KindAgent, `{"max_segments": 2, "max_total_tokens": 100}`, rules.AgentDefaults{MaxSegments: 2, MaxTotalTokens: 100}, ""},
		{rules.KindAgent, `{"max_segments": 0}`, nil, "Agent: max_segments is 0, must be >= 1"},
		{rules.KindAgent, `{"max_total_tokens": -5}`, nil, "Agent: max_total_tokens is -5, must be >= 1"},
		{rules.KindConstantCritic, `{"value": 0.5}`, struct {
			Value float64 `json:"value"`
		}{0.5}, ""},
		{rules.KindConstantCritic, `{"value": "NaN"}`, nil, "Critic.constant: value is NaN, must be a finite number"},
		{rules.KindConstantCritic, `{"value": "-Infinity"}`, nil, "Critic.constant: value is -Inf, must be a finite number"},
		{rules.KindConstantCritic, `{"value": "0.5"}`, nil, `Critic.constant: value must be a number, got "0.5"`},
		{rules.KindMinAbsAdvantage, `{"value": null}`, nil, ""},
		{rules.KindMinAbsAdvantage, `{"value": 0.25}`, nil, ""},
		{rules.KindMinAbsAdvantage, `{"value": -1}`, nil, "min_abs_advantage is -1, must be >= 0"},
		{rules.KindMinAbsAdvantage, `{"value": "NaN"}`, nil, "min_abs_advantage is NaN, must be >= 0"},
		{rules.KindRecordLayout, `{"value": "paths"}`, nil, ""},
		{rules.KindRecordLayout, `{"value": "leaves"}`, nil, `layout is "leaves", must be "spans" or "paths"`},
		{rules.KindSampling, `{}`, nil, ""},
		{rules.KindSampling, `{"temperature": null, "max_tokens": null, "top_p": null, "top_k": null, "stop": null, "logprobs": null, "prompt_logprobs": null, "repetition_penalty": null, "seed": null}`, nil, ""},
		{rules.KindSampling, `{"temperature": 0, "max_tokens": 16, "top_p": 0.9, "top_k": 5, "stop": ["</answer>"], "logprobs": 2, "prompt_logprobs": 0, "repetition_penalty": 1.1, "seed": -3}`, nil, ""},
		{rules.KindSampling, `{"temperature": -1}`, nil, "sampling: temperature -1 must be ≥ 0"},
		{rules.KindSampling, `{"temperature": "NaN"}`, nil, "sampling: temperature NaN must be ≥ 0"},
		{rules.KindSampling, `{"top_p": 2}`, nil, "sampling: top_p 2 must be in (0, 1]"},
		{rules.KindSampling, `{"max_tokens": 0}`, nil, "sampling: max_tokens 0 must be ≥ 1"},
		{rules.KindSampling, `{"top_k": -2}`, nil, "sampling: top_k -2 must be"},
		{rules.KindSampling, `{"logprobs": -1}`, nil, "sampling: logprobs -1 must be ≥ 0"},
		{rules.KindSampling, `{"prompt_logprobs": -1}`, nil, "sampling: prompt_logprobs -1 must be ≥ 0"},
		{rules.KindSampling, `{"repetition_penalty": 3}`, nil, "sampling: repetition_penalty 3 must be in (0, 2]"},
		{rules.KindSampling, `{"stop": ["a", ""]}`, nil, "sampling: stop[1] is empty"},
		{rules.KindSampling, `{"stop": "a"}`, nil, `sampling: stop must be a list of strings, got "a"`},
		{rules.KindSampling, `{"max_tokens": 1.5}`, nil, "sampling: max_tokens must be an integer, got 1.5"},
		{rules.KindSampling, `{"temprature": 1}`, nil, `sampling: unknown field "temprature" (allowed: logprobs, max_tokens, prompt_logprobs, repetition_penalty, seed, stop, stop_token_ids, temperature, top_k, top_p)`},
		{rules.KindSampling, `{"stop_token_ids": [151645, 0]}`, generate.SamplingParams{StopTokenIDs: []uint32{151645, 0}}, ""},
		{rules.KindSampling, `{"stop_token_ids": [-1]}`, nil, "sampling: stop_token_ids must be a list of token ids (integers in [0, 2**32)), got [-1]"},
		{rules.KindReward, `{}`, prepare.DefaultRewardConfig(), ""},
		{rules.KindReward, `{"gamma": 0.9, "critic_weight": 4, "reward_min": -1, "reward_max": 2, "truncated_reward": -1, "truncation": "bootstrap"}`,
			prepare.RewardConfig{Gamma: 0.9, CriticWeight: 4, RewardMin: -1, RewardMax: 2, TruncatedReward: -1, Truncation: "bootstrap"}, ""},
		{rules.KindReward, `{"gamma": 2}`, nil, "reward: gamma is 2, must be in (0, 1]"},
		{rules.KindReward, `{"gamma": 0}`, nil, "reward: gamma is 0, must be in (0, 1]"},
		{rules.KindReward, `{"critic_weight": -1}`, nil, "reward: critic_weight is -1, must be in [0, 64]"},
		{rules.KindReward, `{"reward_min": 1, "reward_max": 0}`, nil, "reward: reward_min is 1, must be below reward_max 0"},
		{rules.KindReward, `{"truncated_reward": "Infinity"}`, nil, "reward: truncated_reward is +Inf, must be finite"},
		{rules.KindReward, `{"truncation": "cut"}`, nil, `reward: truncation is "cut", must be "terminal" or "bootstrap"`},
		{rules.KindReward, `{"gamma": "1"}`, nil, `reward: gamma must be a number, got "1"`},
		{rules.KindReward, `{"kappa": 1}`, nil, `reward: unknown field "kappa" (allowed: critic_weight, gamma, reward_max, reward_min, truncated_reward, truncation)`},
		{"Collector", `{}`, nil, `rules: unknown kind "Collector"`},
	}
	for _, tc := range tests {
		t.Run(tc.kind+" "+tc.config, func(t *testing.T) {
			got, err := rules.Check(tc.kind, []byte(tc.config))
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

func TestDefaultsAreTheLibrarys(t *testing.T) {
	d := rules.DefaultValues()
	sel := search.Selective(search.DefaultBudget, search.DefaultWarmup)
	assert.Equal(t, rules.SelectiveDefaults{Budget: 32, Warmup: 16, PerPass: 4, MaxChildren: 4, Score: "critic_adaptive"}, d.Selective,
		"ALGORITHM.md §5.8: Selective(budget=32, warmup=16, per_pass=4, max_children=4); "+
			"the score is critic_adaptive since 2026-12-02 (docs/learning-signal.md, \"The defaults and the old behaviour\")")
	assert.Equal(t, rules.RecordsDefaults{Layout: "spans", VisitationWeights: true}, d.Records,
		"per-span records (docs/records.md), visitation-weighted since 2026-12-02")
	assert.Equal(t, sel.PerPass, d.Selective.PerPass)
	assert.Equal(t, rules.IndependentDefaults{N: 16}, d.Independent)
	assert.Equal(t, rules.SegmentsDefaults{Tokens: collect.DefaultSegments}, d.Segments)
	assert.Equal(t, rules.AgentDefaults{MaxSegments: collect.DefaultMaxSegments, MaxTotalTokens: collect.DefaultMaxTotalTokens}, d.Agent)
	assert.Equal(t, prepare.DefaultRewardConfig(), d.Reward)
	for _, score := range d.Scores {
		c := sel
		c.Score = score
		assert.NoError(t, c.Validate(), "every listed score validates")
	}
	// The defaults are themselves valid.
	data, err := json.Marshal(d.Selective)
	require.NoError(t, err)
	_, err = rules.Check(rules.KindSelective, data)
	assert.NoError(t, err)
	data, err = json.Marshal(d.Sampling)
	require.NoError(t, err)
	_, err = rules.Check(rules.KindSampling, data)
	assert.NoError(t, err)
	data, err = json.Marshal(d.Reward)
	require.NoError(t, err)
	reward, err := rules.Check(rules.KindReward, data)
	require.NoError(t, err)
	assert.Equal(t, d.Reward, reward)
}
