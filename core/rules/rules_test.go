package rules_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/collect"
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
		{rules.KindSelective, `{"min_remaining": 128}`, search.Config{Budget: 32, Warmup: 16, PerPass: 4, MaxChildren: 4, MinRemaining: 128, Score: "value_refinement"}, ""},
		{rules.KindSelective, `{"budget": 4, "warmup": 8}`, nil, "Selective: warmup is 8, must be in [1, budget=4]: warmup (8) must not exceed budget (4)"},
		{rules.KindSelective, `{"budget": 0, "warmup": 0}`, nil, "Selective: budget is 0, must be >= 1"},
		{rules.KindSelective, `{"per_pass": 0}`, nil, "Selective: per_pass is 0, must be >= 1"},
		{rules.KindSelective, `{"max_children": -1}`, nil, "Selective: max_children is -1, must be >= 1"},
		{rules.KindSelective, `{"min_remaining": -1}`, nil, "Selective: min_remaining is -1, must be >= 0"},
		{rules.KindSelective, `{"score": "ucb"}`, nil, `Selective: score is "ucb", must be "value_refinement", "posterior_variance" or "uniform"`},
		{rules.KindSelective, `{"budget": 2.5}`, nil, "Selective: budget must be an integer, got 2.5"},
		{rules.KindSelective, `{"budget": "8"}`, nil, `Selective: budget must be an integer, got "8"`},
		{rules.KindSelective, `{"budget": true}`, nil, "Selective: budget must be an integer, got true"},
		{rules.KindSelective, `{"seed": -1}`, nil, "Selective: seed must be an integer in [0, 2**64), got -1"},
		{rules.KindSelective, `{"budgte": 8}`, nil, `Selective: unknown field "budgte"`},
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
	assert.Equal(t, rules.SelectiveDefaults{Budget: 32, Warmup: 16, PerPass: 4, MaxChildren: 4, Score: "value_refinement"}, d.Selective,
		"DESIGN.md §8 / ALGORITHM.md §5.8: Selective(budget=32, warmup=16, per_pass=4, max_children=4)")
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
}
