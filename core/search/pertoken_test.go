package search_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/tree"
)

// docs/signal.md §P's vectors: ALGORITHM.md §6.2's tree (root, four depth-1
// checkpoints of 256 generated tokens, each with one 40-token leaf).
func TestValueRefinementPerToken(t *testing.T) {
	fig, cs := fig62(t)
	want := []float64{296, 40, 40, 40, 40}
	got := search.ExpectedRolloutTokens(fig)
	assert.Equal(t, want, got[:5])
	for _, leaf := range []int{5, 6, 7, 8} {
		assert.Equal(t, 1.0, got[leaf], "a leaf: nothing left to generate, floored at 1")
	}

	scores := func(score string) []search.Score {
		cfg := search.Selective(32, 4)
		cfg.Score = score
		out, err := search.Scores(fig, cfg, kappa1, limits)
		require.NoError(t, err)
		return out
	}
	vr, pt := scores(search.ScoreValueRefinement), scores(search.ScoreValueRefinementPerToken)
	require.Len(t, pt, len(vr))
	for i := range vr {
		assert.Equal(t, vr[i].Node, pt[i].Node)
		assert.InDelta(t, vr[i].Gain/want[vr[i].Node], pt[i].Gain, 1e-15, "node %d", vr[i].Node)
		assert.Equal(t, want[vr[i].Node], pt[i].Tokens)
	}
	// The hand-computed vector: the root at kappa_sel 1 and n = 4, children
	// V* 0.95, 0.1, 0.75, 0.225, V*(root) = (0.5 + 2.025)/5 = 0.505:
	// sigma2 = 0.249975, e2 = sigma2/6 + 0.005^2,
	// gain = (2 e2 + 3 sigma2)/125 = 0.0066664; per token /296 = 0.0000225.
	s2 := 0.505 * 0.495
	assert.InDelta(t, (2*(s2/6+0.000025)+3*s2)/125, vr[0].Gain, 1e-12)
	assert.InDelta(t, (2*(s2/6+0.000025)+3*s2)/125/296, pt[0].Gain, 1e-15)
	// c1 (φ 0.9, one return 1): V* = 0.95, e2 = 0.0475/3 + 0.0025,
	// gain = (2 e2 + 0)/8 = 0.0045833; per token /40 = 0.00011458, above the
	// root's 0.0000225: the per-token score branches below the root first.
	assert.InDelta(t, 2*(0.0475/3+0.0025)/8, vr[1].Gain, 1e-12)
	plan, err := search.Plan(fig, func() search.Config {
		c := search.Selective(32, 4)
		c.Score = search.ScoreValueRefinementPerToken
		return c
	}(), kappa1, limits, 1, 28)
	require.NoError(t, err)
	require.NotEmpty(t, plan)
	assert.Contains(t, cs, plan[0].Node)
}

// StopAlike: a tree whose finished warmup rollouts all returned the same gets
// an empty plan (the engine records the unspent budget); one whose outcomes
// differ plans as without it.
func TestStopAlike(t *testing.T) {
	cfg := search.Selective(32, 4)
	cfg.Score, cfg.StopAlike = search.ScoreValueRefinement, false
	stop := cfg
	stop.StopAlike = true
	plan := func(tr *tree.Tree, c search.Config) []search.Pick {
		picks, err := search.Plan(tr, c, kappa1, limits, 1, 28)
		require.NoError(t, err)
		return picks
	}

	mixed, _ := fig62(t)
	assert.False(t, search.WarmupAlike(mixed))
	assert.Equal(t, plan(mixed, cfg), plan(mixed, stop))

	for _, r := range []float64{0, 1} {
		alike, _ := chainTree(t, ptr(0.5), []*float64{ptr(0.9), ptr(0.2), ptr(0.5), ptr(0.45)}, []float64{r, r, r, r}, false)
		assert.True(t, search.WarmupAlike(alike))
		assert.NotEmpty(t, plan(alike, cfg), "without stop_alike the critic's bias still scores")
		assert.Empty(t, plan(alike, stop))
	}

	// One finished warmup rollout is not "all alike"; branches (search pass
	// >= 1) do not count.
	one, _ := chainTree(t, ptr(0.5), []*float64{ptr(0.9)}, []float64{1}, false)
	assert.False(t, search.WarmupAlike(one))
	branched, cs := chainTree(t, ptr(0.5), []*float64{ptr(0.9), ptr(0.2)}, []float64{1, 1}, false)
	add(t, branched, cs[0], tree.Node{Spans: gen(40), Done: true, Reward: 0, SearchPass: 1})
	assert.True(t, search.WarmupAlike(branched))
	assert.False(t, search.WarmupAlike(nil))

	// Independent never branches; stop_alike changes nothing there.
	ind := search.Independent(4)
	ind.StopAlike = true
	assert.Empty(t, plan(mixed, ind))
}

// docs/signal.md §D: the default rule in force, Selective() =
// Selective(8, 4, score="value_refinement_per_token", stop_alike=True), and
// its plan on ALGORITHM.md §6.2's tree (W = 4 chains, the default warmup).
func TestDefaultRule(t *testing.T) {
	cfg := search.Selective(search.DefaultBudget, search.DefaultWarmup)
	assert.Equal(t, search.Config{Budget: 8, Warmup: 4, PerPass: 4, MaxChildren: 4, Score: "value_refinement_per_token", StopAlike: true}, cfg)
	fig, cs := fig62(t)
	picks, err := search.Plan(fig, cfg, kappa1, limits, 1, cfg.Budget-cfg.Warmup)
	require.NoError(t, err)
	// c3 (V* 0.75, bias 0.25²): e2 = 0.1875/3 + 0.0625 = 0.125, gain 0.25/8/40;
	// c4 (V* 0.225, bias 0.225²): e2 = 0.174375/3 + 0.050625 = 0.10875,
	// gain 0.2175/8/40; then each again at n = 2: (2 e2 + σ²)/27/40.
	want := []search.Pick{
		{Node: cs[2], Gain: 0.25 / 8 / 40},
		{Node: cs[3], Gain: 0.2175 / 8 / 40},
		{Node: cs[2], Gain: (2*(0.1875/4+0.0625) + 0.1875) / 27 / 40},
		{Node: cs[3], Gain: (2*(0.174375/4+0.050625) + 0.174375) / 27 / 40},
	}
	require.Len(t, picks, len(want))
	for i := range want {
		assert.Equal(t, want[i].Node, picks[i].Node, "pick %d", i)
		assert.InDelta(t, want[i].Gain, picks[i].Gain, 1e-15, "pick %d", i)
	}
	// The same tree with every warmup return 1: the default stops after warmup.
	alike, _ := chainTree(t, ptr(0.5), []*float64{ptr(0.9), ptr(0.2), ptr(0.5), ptr(0.45)}, []float64{1, 1, 1, 1}, false)
	picks, err = search.Plan(alike, cfg, kappa1, limits, 1, cfg.Budget-cfg.Warmup)
	require.NoError(t, err)
	assert.Empty(t, picks)
	assert.Equal(t, 16, search.DefaultIndependent, "Independent(n=16) is unchanged")
	assert.False(t, search.Independent(8).StopAlike)
}
