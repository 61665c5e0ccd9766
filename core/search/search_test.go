package search_test

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

func ptr(v float64) *float64 { return &v }

// gen is an edge of n generated tokens, cond one of n conditioning tokens.
func gen(n int) []tree.PackedSequence {
	s := treetest.Conditioning(make([]uint32, n)...)
	for i := range s.Trainable {
		s.Trainable[i], s.Logprobs[i] = true, -0.5
	}
	return []tree.PackedSequence{s}
}

func cond(n int) tree.PackedSequence { return treetest.Conditioning(make([]uint32, n)...) }

func add(t *testing.T, tr *tree.Tree, parent int, nd tree.Node) int {
	t.Helper()
	id, err := tr.AddChild(parent, nd)
	require.NoError(t, err)
	return id
}

// chainTree builds ALGORITHM.md §6.2's shape: a root with V_phi rootPhi and one
// chain root -> c_i -> terminal per entry, c_i with prediction phis[i] (nil:
// none) and 256 generated tokens, the terminal edge with reward rewards[i].
// interleave adds each c_i's terminal child right after it; otherwise all c_i
// come first, so the same tree gets different node ids. It returns the c_i ids.
func chainTree(t *testing.T, rootPhi *float64, phis []*float64, rewards []float64, interleave bool) (*tree.Tree, []int) {
	tr := tree.New("p-62", cond(16), "Q")
	tr.Root().Critic = rootPhi
	cs := make([]int, len(phis))
	leaf := func(i int) {
		add(t, tr, cs[i], tree.Node{Spans: gen(40), Done: true, Reward: rewards[i]})
	}
	for i, phi := range phis {
		cs[i] = add(t, tr, 0, tree.Node{Spans: gen(256), Critic: phi})
		if interleave {
			leaf(i)
		}
	}
	if !interleave {
		for i := range cs {
			leaf(i)
		}
	}
	return tr, cs
}

// fig62 is the scheduler vector's tree; ids: root 0, c1..c4 = 1..4.
func fig62(t *testing.T) (*tree.Tree, []int) {
	return chainTree(t, ptr(0.5), []*float64{ptr(0.9), ptr(0.2), ptr(0.5), ptr(0.45)}, []float64{1, 0, 1, 0}, false)
}

// valueRefinement is Selective(budget, warmup) with score "value_refinement":
// the rule ALGORITHM.md §6.2's scheduler vector, and the tests built on its
// gains, are for (the default score is critic_adaptive since 2026-12-02).
func valueRefinement(budget, warmup int) search.Config {
	c := search.Selective(budget, warmup)
	c.Score = search.ScoreValueRefinement
	c.StopAlike = false // ALGORITHM.md's rule has no stop
	return c
}

var (
	kappa1 = prepare.DefaultRewardConfig()
	limits = search.DefaultLimits()
)

func TestScheduler62(t *testing.T) {
	tr, cs := fig62(t)
	cfg := valueRefinement(32, 4)
	scores, err := search.Scores(tr, cfg, kappa1, limits)
	require.NoError(t, err)
	require.Len(t, scores, 5)

	want := []struct {
		node        int
		vStar, gain float64
	}{
		{0, 0.505, 0.0066664},
		{cs[0], 0.95, 0.0045833},
		{cs[1], 0.10, 0.0100000},
		{cs[2], 0.75, 0.0312500},
		{cs[3], 0.225, 0.0271875},
	}
	for i, w := range want {
		assert.Equal(t, w.node, scores[i].Node)
		assert.InDelta(t, w.vStar, scores[i].VStarSel, 1e-7, "V*_sel(%d)", w.node)
		assert.InDelta(t, w.gain, scores[i].Gain, 1e-7, "gain(%d)", w.node)
	}
	assert.Equal(t, 4, scores[0].Count)

	picks, err := search.Plan(tr, cfg, kappa1, limits, 1, 28)
	require.NoError(t, err)
	wantPicks := []search.Pick{{cs[2], 0.0312500}, {cs[3], 0.0271875}, {cs[2], 0.0150463}, {cs[3], 0.0134375}}
	require.Len(t, picks, len(wantPicks))
	for i, w := range wantPicks {
		assert.Equal(t, w.Node, picks[i].Node, "pick %d", i)
		assert.InDelta(t, w.Gain, picks[i].Gain, 1e-7, "pick %d", i)
	}
}

func TestSelectionKappaAtLeastOne(t *testing.T) {
	// kappa = 0 for preparation still selects with kappa_sel = 1; kappa = 2
	// selects with 2.
	tr, cs := fig62(t)
	for _, tc := range []struct {
		kappa, vStarC3 float64
	}{{0, 0.75}, {1, 0.75}, {2, (2*0.5 + 1) / 3.0}} {
		rc := prepare.DefaultRewardConfig()
		rc.CriticWeight = tc.kappa
		scores, err := search.Scores(tr, search.Selective(8, 4), rc, limits)
		require.NoError(t, err)
		assert.InDelta(t, tc.vStarC3, scores[cs[2]].VStarSel, 1e-12, "kappa %g", tc.kappa)
	}
}

func TestGain(t *testing.T) {
	tests := []struct {
		name              string
		score             string
		vStar, vPhi       float64
		hasPhi            bool
		n                 int
		kappa, rMin, rMax float64
		want              float64
	}{
		{"c3", search.ScoreValueRefinement, 0.75, 0.5, true, 1, 1, 0, 1, 0.03125},
		{"c3 second branch", search.ScoreValueRefinement, 0.75, 0.5, true, 2, 1, 0, 1, 0.40625 / 27},
		{"unmeasured at kappa 1 is exactly 0", search.ScoreValueRefinement, 0.37, 0.37, true, 0, 1, 0, 1, 0},
		{"no prediction drops the bias", search.ScoreValueRefinement, 0.75, 0, false, 1, 1, 0, 1, 2 * (0.1875 / 3) / 8},
		{"certain value", search.ScoreValueRefinement, 1, 1, true, 3, 1, 0, 1, 0},
		{"rescaled rewards", search.ScoreValueRefinement, 2, 1, true, 1, 1, -1, 3, 0.03125},
		{"clipped p", search.ScoreValueRefinement, 1.2, 1, true, 2, 1, 0, 1, 0},
		{"kappa 2", search.ScoreValueRefinement, 0.6, 0.5, true, 1, 2, 0, 1, (2*4*(0.24/4+0.01) + (1-2)*0.24) / 27},
		{"posterior variance", search.ScorePosteriorVariance, 0.75, 0.1, true, 1, 1, 0, 1, 0.1875 / 6},
		{"posterior variance n 0", search.ScorePosteriorVariance, 0.5, 0.5, true, 0, 1, 0, 1, 0.125},
		{"uniform n 0", search.ScoreUniform, 0.1, 0.9, true, 0, 1, 0, 1, 1},
		{"uniform n 3", search.ScoreUniform, 0.1, 0.9, true, 3, 1, 0, 1, 0.25},
		{"unknown score", "bogus", 0.75, 0.5, true, 1, 1, 0, 1, 0},
		{"no prior weight and no branches", search.ScoreValueRefinement, 0.5, 0.5, true, 0, 0, 0, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := search.Gain(tc.score, tc.vStar, tc.vPhi, tc.hasPhi, tc.n, tc.kappa, tc.rMin, tc.rMax)
			assert.InDelta(t, tc.want, got, 1e-15)
		})
	}
}

// mixedTree has one node of every kind Candidates must tell apart. T_max 8192,
// L 256.
func mixedTree(t *testing.T) (*tree.Tree, map[string]int) {
	tr := tree.New("mixed", cond(500), "Q")
	tr.Root().Critic = ptr(0.5)
	ids := map[string]int{}
	node := func(name string, parent int, nd tree.Node) int {
		ids[name] = add(t, tr, parent, nd)
		return ids[name]
	}
	a := node("open", 0, tree.Node{Spans: gen(256), Critic: ptr(0.5)})
	add(t, tr, a, tree.Node{Spans: gen(10), Done: true, Reward: 1})
	node("done", 0, tree.Node{Spans: gen(100), Done: true, Reward: 1})
	node("truncated", 0, tree.Node{Spans: gen(100), Truncated: true})
	f := node("failed", 0, tree.Node{Spans: gen(256), Failed: "tool crashed", Critic: ptr(0.5)})
	node("under failed", f, tree.Node{Spans: gen(256), Critic: ptr(0.5)})
	e := node("three children", 0, tree.Node{Spans: gen(256), Critic: ptr(0.5)})
	for _, r := range []float64{1, 0, 1} {
		add(t, tr, e, tree.Node{Spans: gen(10), Done: true, Reward: r})
	}
	add(t, tr, e, tree.Node{Spans: gen(10), Failed: "timeout"}) // does not count
	full := node("four children", 0, tree.Node{Spans: gen(256), Critic: ptr(0.5)})
	for range 4 {
		add(t, tr, full, tree.Node{Spans: gen(10), Done: true, Reward: 1})
	}
	g := node("392 left", 0, tree.Node{Spans: gen(7800), Critic: ptr(0.5)})
	node("192 left", g, tree.Node{Spans: gen(200), Critic: ptr(0.5)})
	// 5000 conditioning tokens (tool output) do not count: 8092 left.
	node("tool output", 0, tree.Node{Spans: []tree.PackedSequence{cond(5000), gen(100)[0]}, Critic: ptr(0.5)})
	node("cancelled", 0, tree.Node{Spans: gen(256), Critic: ptr(0.5)})
	return tr, ids
}

func TestCandidates(t *testing.T) {
	tr, ids := mixedTree(t)
	names := func(list ...string) []int {
		out := []int{0}
		for _, n := range list {
			out = append(out, ids[n])
		}
		slices.Sort(out)
		return out
	}
	base := search.Selective(32, 16)
	with := func(f func(*search.Config)) search.Config { c := base; f(&c); return c }
	tests := []struct {
		name    string
		cfg     search.Config
		lim     search.Limits
		virtual map[int]int
		want    []int
	}{
		{"defaults", base, limits, nil, names("open", "three children", "392 left", "tool output", "cancelled")},
		{"virtual pick fills three children", base, limits, map[int]int{ids["three children"]: 1, 0: 50},
			names("open", "392 left", "tool output", "cancelled")},
		{"max_children 5", with(func(c *search.Config) { c.MaxChildren = 5 }), limits, nil,
			names("open", "three children", "four children", "392 left", "tool output", "cancelled")},
		{"max_children 1 keeps the root", with(func(c *search.Config) { c.MaxChildren = 1 }), limits, nil,
			names("tool output", "cancelled")},
		{"min_remaining 392", with(func(c *search.Config) { c.MinRemaining = 392 }), limits, nil,
			names("open", "three children", "392 left", "tool output", "cancelled")},
		{"min_remaining 393", with(func(c *search.Config) { c.MinRemaining = 393 }), limits, nil,
			names("open", "three children", "tool output", "cancelled")},
		{"segment length 192 is the default min_remaining", base, search.Limits{MaxTotalTokens: 8192, SegmentTokens: 192}, nil,
			names("open", "three children", "392 left", "192 left", "tool output", "cancelled")},
		{"min_remaining above T_max empties C", with(func(c *search.Config) { c.MinRemaining = 9000 }), limits, nil, nil},
	}
	assert.Nil(t, search.Candidates(nil, base, limits, nil))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := search.Candidates(tr, tc.cfg, tc.lim, tc.virtual)
			if tc.want == nil {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPlanNeverPicksANonCandidate(t *testing.T) {
	tr, ids := mixedTree(t)
	for _, score := range []string{search.ScoreValueRefinement, search.ScorePosteriorVariance, search.ScoreUniform, search.ScoreGradientVariance, search.ScoreShallowFirst, search.ScoreCriticAdaptive} {
		cfg := search.Selective(64, 4)
		cfg.PerPass, cfg.Score = 32, score
		picks, err := search.Plan(tr, cfg, kappa1, limits, 3, 64)
		require.NoError(t, err)
		counts := map[int]int{}
		for _, p := range picks {
			counts[p.Node]++
		}
		for _, bad := range []string{"done", "truncated", "failed", "under failed", "four children", "192 left"} {
			assert.Zero(t, counts[ids[bad]], "%s: picked %q", score, bad)
		}
		assert.LessOrEqual(t, counts[ids["three children"]], 1, score)
		assert.LessOrEqual(t, counts[ids["open"]], 3, score)
	}
}

// Random trees: every pick is a candidate given the picks before it, gains are
// positive, and the same inputs give the same plan.
func TestPlanRandomTrees(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	lim := search.Limits{MaxTotalTokens: 60, SegmentTokens: 8}
	scoresTried := []string{search.ScoreValueRefinement, search.ScorePosteriorVariance, search.ScoreUniform, search.ScoreGradientVariance, search.ScoreShallowFirst, search.ScoreCriticAdaptive}
	for i := range 200 {
		tr := treetest.Random(r, treetest.Options{Rollouts: 1 + i%24, PFailed: 0.2, PTruncated: 0.2, PCancelled: 0.1, PNoCritic: 0.3, Binary: i%2 == 0})
		cfg := search.Selective(32, 1)
		cfg.PerPass, cfg.MaxChildren, cfg.Score, cfg.Seed = 1+i%6, 1+i%4, scoresTried[i%len(scoresTried)], uint64(i)
		rc := prepare.DefaultRewardConfig()
		rc.CriticWeight = float64(i % 3)
		picks, err := search.Plan(tr, cfg, rc, lim, i, 5)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(picks), min(cfg.PerPass, 5))
		virtual := map[int]int{}
		for k, p := range picks {
			assert.Contains(t, search.Candidates(tr, cfg, lim, virtual), p.Node, "tree %d pick %d", i, k)
			assert.Greater(t, p.Gain, 0.0)
			virtual[p.Node]++
		}
		again, err := search.Plan(tr, cfg, rc, lim, i, 5)
		require.NoError(t, err)
		assert.Equal(t, picks, again)
	}
}

func TestPlanStops(t *testing.T) {
	allFailed := func(critic *float64) *tree.Tree {
		tr := tree.New("p", cond(4), "Q")
		tr.Root().Critic = critic
		for range 3 {
			_, err := tr.AddChild(0, tree.Node{Spans: gen(5), Failed: "server error"})
			require.NoError(t, err)
		}
		return tr
	}
	certain, _ := chainTree(t, ptr(1), []*float64{ptr(1), ptr(1)}, []float64{1, 1}, false)
	fig, _ := fig62(t)
	tests := []struct {
		name      string
		tr        *tree.Tree
		cfg       search.Config
		remaining int
	}{
		{"empty C", fig, func() search.Config { c := search.Selective(32, 4); c.MinRemaining = 8193; return c }(), 28},
		{"every gain is 0", certain, search.Selective(32, 2), 30},
		{"all warmup failed, scored root gains 0", allFailed(ptr(0.5)), valueRefinement(32, 3), 29},
		{"all warmup failed, unscored root is skipped", allFailed(nil), search.Selective(32, 3), 29},
		{"all warmup failed, uniform skips the unscored root", allFailed(nil), func() search.Config { c := search.Selective(32, 3); c.Score = search.ScoreUniform; return c }(), 29},
		{"no budget left", fig, search.Selective(32, 4), 0},
		{"independent never branches", fig, search.Independent(4), 28},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			picks, err := search.Plan(tc.tr, tc.cfg, kappa1, limits, 1, tc.remaining)
			require.NoError(t, err)
			assert.Empty(t, picks)
		})
	}
}

func TestPlanRetriesAScoredRootAfterAFailedWarmup(t *testing.T) {
	// Every warmup rollout failed but the critic scored the root: V*_sel =
	// V_phi = 0.5 and n counts only the virtual picks, so the sampling term of
	// gradient_variance and posterior_variance stays positive
	// and the root takes every pick (value_refinement stops: TestPlanStops).
	gain := map[string]func(n int) float64{
		search.ScoreGradientVariance:  func(n int) float64 { return search.GradientGain(0.5, 0.5, true, n, 1, 0, 1, 1, true) },
		search.ScorePosteriorVariance: func(n int) float64 { return search.Gain(search.ScorePosteriorVariance, 0.5, 0.5, true, n, 1, 0, 1) },
	}
	assert.InDelta(t, 0.125, gain[search.ScoreGradientVariance](0), 1e-15, "PV = 0.25/(1*2), VR = 0 at n = 0")
	tr := tree.New("p", cond(4), "Q")
	tr.Root().Critic = ptr(0.5)
	for range 3 {
		add(t, tr, 0, tree.Node{Spans: gen(5), Failed: "server error"})
	}
	// critic_adaptive (the default) has no root children to estimate the
	// critic's error from, so it ranks as gradient_variance.
	gain[search.ScoreCriticAdaptive] = gain[search.ScoreGradientVariance]
	for _, score := range []string{search.ScoreGradientVariance, search.ScorePosteriorVariance, search.ScoreCriticAdaptive} {
		cfg := search.Selective(32, 3)
		cfg.Score = score
		picks, err := search.Plan(tr, cfg, kappa1, limits, 1, 29)
		require.NoError(t, err)
		require.Len(t, picks, 4, score)
		for i, p := range picks {
			assert.Equal(t, 0, p.Node, score)
			assert.InDelta(t, gain[score](i), p.Gain, 1e-15, "%s pick %d", score, i)
		}
	}
}

func TestPlanRemainingCapsPicks(t *testing.T) {
	tr, cs := fig62(t)
	for _, tc := range []struct {
		perPass, remaining int
		want               []int
	}{
		{4, 1, []int{cs[2]}},
		{4, 2, []int{cs[2], cs[3]}},
		{4, 3, []int{cs[2], cs[3], cs[2]}},
		{2, 10, []int{cs[2], cs[3]}},
		{6, 6, []int{cs[2], cs[3], cs[2], cs[3], cs[1], cs[2]}},
	} {
		t.Run(fmt.Sprintf("R=%d remaining=%d", tc.perPass, tc.remaining), func(t *testing.T) {
			cfg := valueRefinement(32, 4)
			cfg.PerPass = tc.perPass
			picks, err := search.Plan(tr, cfg, kappa1, limits, 1, tc.remaining)
			require.NoError(t, err)
			got := make([]int, len(picks))
			for i, p := range picks {
				got[i] = p.Node
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPlanMaxChildrenAndRootExemption(t *testing.T) {
	// c has 3 children and the best gain; with max_children 4 it takes one
	// pick and the root, exempt, takes the rest however many children it has.
	tr := tree.New("p", cond(4), "Q")
	tr.Root().Critic = ptr(0.5)
	c := add(t, tr, 0, tree.Node{Spans: gen(256), Critic: ptr(0.1)})
	for _, r := range []float64{1, 0, 1} {
		add(t, tr, c, tree.Node{Spans: gen(10), Done: true, Reward: r})
	}
	for range 6 {
		add(t, tr, 0, tree.Node{Spans: gen(10), Done: true, Reward: 1})
	}
	cfg := valueRefinement(32, 7)
	cfg.PerPass = 5
	picks, err := search.Plan(tr, cfg, kappa1, limits, 1, 25)
	require.NoError(t, err)
	require.Len(t, picks, 5)
	assert.Equal(t, c, picks[0].Node)
	for _, p := range picks[1:] {
		assert.Equal(t, 0, p.Node)
	}
	for i := 2; i < len(picks); i++ {
		assert.Less(t, picks[i].Gain, picks[i-1].Gain, "rescored after each virtual pick")
	}
}

// tieOrder is the expected tie-break order of path keys [0] .. [k-1]: by
// H(seed, problem, round, key), smallest first.
func tieOrder(seed uint64, problem string, round, k int) []int {
	keys := make([]int, k)
	for i := range keys {
		keys[i] = i
	}
	slices.SortFunc(keys, func(a, b int) int {
		return cmp.Compare(search.Hash(seed, problem, round, []int{a}), search.Hash(seed, problem, round, []int{b}))
	})
	return keys
}

func pickKeys(tr *tree.Tree, picks []search.Pick) []int {
	out := make([]int, len(picks))
	for i, p := range picks {
		k := tr.PathKey(p.Node)
		if len(k) != 1 {
			return nil
		}
		out[i] = k[0]
	}
	return out
}

func TestTieBreak(t *testing.T) {
	const k = 6
	same := make([]*float64, k)
	rewards := make([]float64, k)
	for i := range same {
		same[i], rewards[i] = ptr(0.5), 1
	}
	// Gains that differ by less than the tolerance still tie.
	near := slices.Clone(same)
	near[3] = ptr(0.5 + 1e-14)
	for _, seed := range []uint64{0, 1, 42} {
		for _, round := range []int{1, 2, 7} {
			t.Run(fmt.Sprintf("seed %d round %d", seed, round), func(t *testing.T) {
				want := tieOrder(seed, "p-62", round, k)
				for _, tc := range []struct {
					phis       []*float64
					interleave bool
				}{{same, false}, {same, true}, {near, false}, {near, true}} {
					tr, _ := chainTree(t, ptr(0.5), tc.phis, rewards, tc.interleave)
					cfg := valueRefinement(32, k)
					cfg.Seed, cfg.PerPass = seed, k
					picks, err := search.Plan(tr, cfg, kappa1, limits, round, 26)
					require.NoError(t, err)
					assert.Equal(t, want, pickKeys(tr, picks), "node ids differ, path keys decide")
				}
			})
		}
	}
	// The hash actually varies: not every (seed, round) gives one order.
	orders := map[string]bool{}
	for seed := range uint64(4) {
		orders[fmt.Sprint(tieOrder(seed, "p-62", 1, k))] = true
	}
	assert.Greater(t, len(orders), 1)

	// A gain difference above the tolerance beats the hash.
	clear := slices.Clone(same)
	last := tieOrder(0, "p-62", 1, k)[k-1]
	clear[last] = ptr(0.5 - 1e-6) // more bias: a larger gain
	tr, _ := chainTree(t, ptr(0.5), clear, rewards, false)
	picks, err := search.Plan(tr, valueRefinement(32, k), kappa1, limits, 1, 26)
	require.NoError(t, err)
	assert.Equal(t, last, pickKeys(tr, picks)[0])
}

func TestAlternativeScores(t *testing.T) {
	tr, cs := fig62(t)
	// The posterior_variance (PV) and value_refinement (VR) gains of the
	// root and c_1..c_4 on the §6.2 tree, which the gradient-aimed scores build on.
	pv := []float64{0.249975 / 30, 0.0475 / 6, 0.09 / 6, 0.1875 / 6, 0.174375 / 6}
	vr := []float64{0.0066664, 0.0045833, 0.0100000, 0.0312500, 0.0271875}
	t.Run("posterior_variance", func(t *testing.T) {
		cfg := search.Selective(32, 4)
		cfg.Score = search.ScorePosteriorVariance
		scores, err := search.Scores(tr, cfg, kappa1, limits)
		require.NoError(t, err)
		want := []float64{0.249975 / 30, 0.0475 / 6, 0.09 / 6, 0.1875 / 6, 0.174375 / 6}
		for i, w := range want {
			assert.InDelta(t, w, scores[i].Gain, 1e-12, "node %d", scores[i].Node)
		}
		picks, err := search.Plan(tr, cfg, kappa1, limits, 1, 28)
		require.NoError(t, err)
		wantPicks := []search.Pick{{cs[2], 0.03125}, {cs[3], 0.0290625}, {cs[2], 0.015625}, {cs[1], 0.015}}
		require.Len(t, picks, 4)
		for i, w := range wantPicks {
			assert.Equal(t, w.Node, picks[i].Node, "pick %d", i)
			assert.InDelta(t, w.Gain, picks[i].Gain, 1e-12, "pick %d", i)
		}
	})
	t.Run("gradient_variance", func(t *testing.T) {
		// docs/signal.md §S on the §6.2 tree: π̂(root) = 1, π̂(c_i) = 1/4;
		// gain = π̂² (PV + (1[non-root] + 1/n) VR) with PV and VR the
		// posterior_variance and value_refinement gains above and in §6.2.
		cfg := search.Selective(32, 4)
		cfg.Score = search.ScoreGradientVariance
		scores, err := search.Scores(tr, cfg, kappa1, limits)
		require.NoError(t, err)
		want := []float64{pv[0] + vr[0]/4}
		for i := 1; i < 5; i++ {
			want = append(want, (pv[i]+2*vr[i])/16)
		}
		require.Len(t, scores, 5)
		for i, w := range want {
			assert.InDelta(t, w, scores[i].Gain, 1e-7, "node %d", scores[i].Node)
		}
		assert.Equal(t, 1.0, scores[0].Reach)
		assert.Equal(t, 0.25, scores[1].Reach)
		// The root scores highest (0.0099991): shallow first, root included.
		picks, err := search.Plan(tr, cfg, kappa1, limits, 1, 28)
		require.NoError(t, err)
		require.Len(t, picks, 4)
		assert.Equal(t, 0, picks[0].Node)
		assert.InDelta(t, 0.0099991, picks[0].Gain, 1e-7)
		for i := 1; i < 4; i++ {
			assert.LessOrEqual(t, picks[i].Gain, picks[i-1].Gain+1e-15, "greedy: gains fall")
		}
	})
	t.Run("shallow_first", func(t *testing.T) {
		// docs/signal.md §F on the §6.2 tree: the gradient_variance gains,
		// but the depth-1 tier (the c_i) goes before the root (tier 1),
		// whose gain 0.0099991 is the highest.
		cfg := search.Selective(32, 4)
		cfg.Score = search.ScoreShallowFirst
		scores, err := search.Scores(tr, cfg, kappa1, limits)
		require.NoError(t, err)
		require.Len(t, scores, 5)
		assert.InDelta(t, pv[0]+vr[0]/4, scores[0].Gain, 1e-7)
		assert.Equal(t, 0, scores[0].Depth)
		assert.Equal(t, 1, scores[0].Tier)
		for i := 1; i < 5; i++ {
			assert.InDelta(t, (pv[i]+2*vr[i])/16, scores[i].Gain, 1e-7, "node %d", scores[i].Node)
			assert.Equal(t, 1, scores[i].Depth)
			assert.Equal(t, 0, scores[i].Tier)
		}
		// Greedy within the tier, rescored with virtual counts: c3 at n=2 has
		// PV 0.1875/12 and VR 0.0150463 (§6.2), gain (PV + 1.5 VR)/16.
		picks, err := search.Plan(tr, cfg, kappa1, limits, 1, 28)
		require.NoError(t, err)
		wantPicks := []search.Pick{{cs[2], 0.0058594}, {cs[3], 0.0052148}, {cs[2], 0.0023872}, {cs[1], 0.0021875}}
		require.Len(t, picks, len(wantPicks))
		for i, w := range wantPicks {
			assert.Equal(t, w.Node, picks[i].Node, "pick %d", i)
			assert.InDelta(t, w.Gain, picks[i].Gain, 1e-7, "pick %d", i)
		}
	})
	t.Run("uniform spreads a round over distinct nodes", func(t *testing.T) {
		cfg := search.Selective(32, 4)
		cfg.Score = search.ScoreUniform
		picks, err := search.Plan(tr, cfg, kappa1, limits, 5, 28)
		require.NoError(t, err)
		assert.Equal(t, tieOrder(0, "p-62", 5, 4), pickKeys(tr, picks))
		for _, p := range picks {
			assert.Equal(t, 0.5, p.Gain)
		}
		// With 8 picks the four chains get a second pick (1/3) before the
		// root's first (1/5).
		cfg.PerPass = 8
		picks, err = search.Plan(tr, cfg, kappa1, limits, 5, 28)
		require.NoError(t, err)
		require.Len(t, picks, 8)
		assert.Equal(t, tieOrder(0, "p-62", 5, 4), pickKeys(tr, picks[4:]))
	})
}

// TestShallowFirstTiers: with the depth-1 checkpoint at max_children, the
// root (tier 1) is picked before depth-2 checkpoints (tier 2), even though
// its gain is lower and gradient_variance picks a depth-2 one first.
func TestShallowFirstTiers(t *testing.T) {
	tr := tree.New("p-tiers", cond(16), "Q")
	tr.Root().Critic = ptr(1)
	c := add(t, tr, 0, tree.Node{Spans: gen(256), Critic: ptr(0.5)})
	d1 := add(t, tr, c, tree.Node{Spans: gen(256), Critic: ptr(0.9)})
	d2 := add(t, tr, c, tree.Node{Spans: gen(256), Critic: ptr(0.1)})
	add(t, tr, d1, tree.Node{Spans: gen(40), Done: true, Reward: 0})
	add(t, tr, d2, tree.Node{Spans: gen(40), Done: true, Reward: 1})
	// Twelve root rollouts that ended at once with reward 1 (and V_phi 1)
	// make the root nearly certain, so its gain is low.
	for range 12 {
		add(t, tr, 0, tree.Node{Spans: gen(40), Done: true, Reward: 1})
	}
	cfg := search.Selective(32, 1)
	cfg.MaxChildren = 2

	cfg.Score = search.ScoreGradientVariance
	picks, err := search.Plan(tr, cfg, kappa1, limits, 1, 28)
	require.NoError(t, err)
	require.NotEmpty(t, picks)
	assert.Contains(t, []int{d1, d2}, picks[0].Node, "gradient_variance: a depth-2 checkpoint first")

	cfg.Score = search.ScoreShallowFirst
	scores, err := search.Scores(tr, cfg, kappa1, limits)
	require.NoError(t, err)
	tiers := map[int]int{}
	for _, sc := range scores {
		tiers[sc.Node] = sc.Tier
	}
	assert.Equal(t, map[int]int{0: 1, d1: 2, d2: 2}, tiers, "c is at max_children")
	picks, err = search.Plan(tr, cfg, kappa1, limits, 1, 28)
	require.NoError(t, err)
	require.Len(t, picks, 4)
	for i, p := range picks {
		assert.Equal(t, 0, p.Node, "pick %d: the root before depth 2", i)
	}
	for _, sc := range scores {
		if sc.Node != 0 {
			assert.Greater(t, sc.Gain, scores[0].Gain, "node %d outscores the root within its tier", sc.Node)
		}
	}
	for i, want := range []int{1, 0, 2, 3, 4} {
		assert.Equal(t, want, search.ShallowTier(i), "depth %d", i)
	}
}

// TestCriticAdaptive: docs/signal.md §F's vectors. On the §6.2 tree the
// critic agrees with the returns well enough (tau_hat^2 < 0), so the score
// plans as gradient_variance does (the root first); on a tree whose critic is
// the returns' opposite it plans depth-1 checkpoints first.
func TestCriticAdaptive(t *testing.T) {
	plan := func(tr *tree.Tree, score string) []search.Pick {
		cfg := search.Selective(32, 4)
		cfg.Score = score
		picks, err := search.Plan(tr, cfg, kappa1, limits, 1, 28)
		require.NoError(t, err)
		return picks
	}
	tau2 := func(tr *tree.Tree) (float64, bool) {
		vals, err := prepare.Values(tr, kappa1)
		require.NoError(t, err)
		return search.CriticErrorAtDepthOne(vals)
	}

	// §6.2: mean (φ-G)^2 = 0.5025/4, Var(φ) = 0.251875/3, Var(G) = 1/3.
	fig, _ := fig62(t)
	e, ok := tau2(fig)
	require.True(t, ok)
	assert.InDelta(t, (0.5025/4+0.251875/3-1.0/3)/2, e, 1e-12)
	assert.InDelta(t, -0.0618750, e, 1e-7)
	assert.Equal(t, plan(fig, search.ScoreGradientVariance), plan(fig, search.ScoreCriticAdaptive))
	assert.Equal(t, 0, plan(fig, search.ScoreCriticAdaptive)[0].Node)

	// φ = 0.1, 0.9, 0.2, 0.8 against returns 1, 0, 1, 0: mean (φ-G)^2 =
	// 0.725, Var(φ) = 0.5/3, Var(G) = 1/3, tau_hat^2 = 0.2791667.
	noisy, cs := chainTree(t, ptr(0.5), []*float64{ptr(0.1), ptr(0.9), ptr(0.2), ptr(0.8)}, []float64{1, 0, 1, 0}, false)
	e, ok = tau2(noisy)
	require.True(t, ok)
	assert.InDelta(t, 0.2791667, e, 1e-7)
	assert.Greater(t, e, search.CriticAdaptiveThreshold)
	cfg := search.Selective(32, 4)
	cfg.Score = search.ScoreCriticAdaptive
	for _, tc := range []struct {
		tr    *tree.Tree
		tiers []int
	}{{fig, []int{0, 0, 0, 0, 0}}, {noisy, []int{1, 0, 0, 0, 0}}} {
		scores, err := search.Scores(tc.tr, cfg, kappa1, limits)
		require.NoError(t, err)
		var tiers []int
		for _, sc := range scores {
			tiers = append(tiers, sc.Tier)
		}
		assert.Equal(t, tc.tiers, tiers)
	}
	picks := plan(noisy, search.ScoreCriticAdaptive)
	require.Len(t, picks, 4)
	assert.Equal(t, plan(noisy, search.ScoreShallowFirst), picks)
	for i, p := range picks {
		assert.Contains(t, cs, p.Node, "pick %d: a depth-1 checkpoint", i)
	}

	// Fewer than two children with a prediction and a backup: no estimate,
	// gradient_variance's plan.
	one, _ := chainTree(t, ptr(0.5), []*float64{ptr(0.1)}, []float64{1}, false)
	_, ok = tau2(one)
	assert.False(t, ok)
	assert.Equal(t, plan(one, search.ScoreGradientVariance), plan(one, search.ScoreCriticAdaptive))
}

func TestMissingCritic(t *testing.T) {
	t.Run("no critic anywhere", func(t *testing.T) {
		tr, _ := chainTree(t, nil, []*float64{nil, nil, nil, nil}, []float64{1, 0, 1, 0}, false)
		scores, err := search.Scores(tr, valueRefinement(32, 4), kappa1, limits)
		require.NoError(t, err)
		require.Len(t, scores, 5)
		assert.InDelta(t, 0.5, scores[0].VStarSel, 1e-15, "V*_sel = G_bar without a prior")
		assert.InDelta(t, (2*0.25/6+3*0.25)/125, scores[0].Gain, 1e-15, "no bias term")
		for _, s := range scores[1:] {
			assert.Zero(t, s.Gain, "a certain chain gains nothing")
		}
		picks, err := search.Plan(tr, valueRefinement(32, 4), kappa1, limits, 1, 28)
		require.NoError(t, err)
		require.Len(t, picks, 4)
		for i, p := range picks {
			assert.Equal(t, 0, p.Node, "only the root is eligible, and it is exempt from max_children")
			assert.InDelta(t, search.Gain(search.ScoreValueRefinement, 0.5, 0, false, 4+i, 1, 0, 1), p.Gain, 1e-15)
		}
	})
	t.Run("unscored cancelled checkpoint is skipped", func(t *testing.T) {
		tr := tree.New("p", cond(4), "Q")
		tr.Root().Critic = ptr(0.5)
		cancelled := add(t, tr, 0, tree.Node{Spans: gen(30)})
		b := add(t, tr, 0, tree.Node{Spans: gen(30), Critic: ptr(0.5)})
		add(t, tr, b, tree.Node{Spans: gen(10), Done: true, Reward: 1})
		_, err := prepare.Values(tr, kappa1)
		require.Error(t, err, "prepare refuses this tree; search must not")

		assert.Contains(t, search.Candidates(tr, search.Selective(32, 2), limits, nil), cancelled, "the engine should score it")
		scores, err := search.Scores(tr, search.Selective(32, 2), kappa1, limits)
		require.NoError(t, err)
		require.Len(t, scores, 2)
		assert.Equal(t, []int{0, b}, []int{scores[0].Node, scores[1].Node})
		assert.Equal(t, 1, scores[0].Count, "the valueless child is out of the root's backup")
		assert.InDelta(t, (0.5+0.75)/2, scores[0].VStarSel, 1e-15)
		cfg := search.Selective(32, 2)
		cfg.Score = search.ScoreUniform
		cfg.PerPass = 8
		picks, err := search.Plan(tr, cfg, kappa1, limits, 1, 30)
		require.NoError(t, err)
		require.NotEmpty(t, picks)
		for _, p := range picks {
			assert.NotEqual(t, cancelled, p.Node)
		}
	})
}

func TestConfig(t *testing.T) {
	// The default score is value_refinement_per_token with stop_alike since
	// 2026-12-04 (docs/signal.md §D; docs/learning-signal.md).
	assert.Equal(t, search.Config{Budget: 32, Warmup: 16, PerPass: 4, MaxChildren: 4, Score: "value_refinement_per_token", StopAlike: true}, search.Selective(32, 16))
	assert.Equal(t, search.Config{Budget: 16, Warmup: 16, PerPass: 4, MaxChildren: 4, Score: "value_refinement_per_token", Independent: true}, search.Independent(16))
	assert.Equal(t, 256, search.Selective(32, 16).MinRemainingTokens(limits))
	c := search.Selective(32, 16)
	c.MinRemaining = 100
	assert.Equal(t, 100, c.MinRemainingTokens(limits))

	with := func(f func(*search.Config)) search.Config { c := search.Selective(32, 16); f(&c); return c }
	tests := []struct {
		name    string
		cfg     search.Config
		field   string
		message string
	}{
		{"defaults", search.Selective(32, 16), "", ""},
		{"budget 1", search.Selective(1, 1), "", ""},
		{"independent", search.Independent(8), "", ""},
		{"posterior variance", with(func(c *search.Config) { c.Score = "posterior_variance" }), "", ""},
		{"uniform", with(func(c *search.Config) { c.Score = "uniform" }), "", ""},
		{"budget 0", search.Selective(0, 0), "budget", "is 0, must be >= 1"},
		{"warmup 0", search.Selective(32, 0), "warmup", "is 0, must be in [1, budget=32]"},
		{"warmup above budget", search.Selective(8, 16), "warmup", "is 16, must be in [1, budget=8]"},
		{"independent budget != warmup", with(func(c *search.Config) { c.Independent = true }), "warmup", "must equal budget=32"},
		{"independent 0", search.Independent(0), "budget", "must be >= 1"},
		{"per_pass 0", with(func(c *search.Config) { c.PerPass = 0 }), "per_pass", "is 0, must be >= 1"},
		{"max_children 0", with(func(c *search.Config) { c.MaxChildren = 0 }), "max_children", "is 0, must be >= 1"},
		{"min_remaining negative", with(func(c *search.Config) { c.MinRemaining = -1 }), "min_remaining", "is -1, must be >= 0"},
		{"entropy", with(func(c *search.Config) { c.Score = "entropy" }), "score", "token entropies"},
		{"unknown score", with(func(c *search.Config) { c.Score = "ucb" }), "score", `is "ucb", must be "value_refinement", "posterior_variance", "uniform", "gradient_variance", "shallow_first", "critic_adaptive" or "value_refinement_per_token"`},
		{"empty score", with(func(c *search.Config) { c.Score = "" }), "score", `is ""`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			var ce *status.FieldError
			require.True(t, errors.As(err, &ce), err.Error())
			assert.Equal(t, tc.field, ce.Field)
			assert.Equal(t, tc.field, status.FieldOf(err))
			assert.Equal(t, "search config", ce.Config)
			assert.Contains(t, err.Error(), tc.message)
			assert.Contains(t, err.Error(), "search config "+tc.field)
		})
	}
}

func TestPlanBadInput(t *testing.T) {
	fig, _ := fig62(t)
	outOfRange, _ := chainTree(t, ptr(0.5), []*float64{ptr(0.5)}, []float64{2}, false)
	invalid, _ := fig62(t)
	invalid.Nodes[1].Parent = 3
	badReward := prepare.DefaultRewardConfig()
	badReward.RewardMax = -1
	good := search.Selective(32, 4)
	tests := []struct {
		name      string
		tr        *tree.Tree
		cfg       search.Config
		reward    prepare.RewardConfig
		lim       search.Limits
		round     int
		remaining int
		message   string
	}{
		{"nil tree", nil, good, kappa1, limits, 1, 4, "tree is nil"},
		{"negative round", fig, good, kappa1, limits, -1, 4, "round is -1"},
		{"negative remaining", fig, good, kappa1, limits, 1, -2, "remaining budget is -2"},
		{"bad config", fig, search.Selective(4, 8), kappa1, limits, 1, 4, "search config warmup"},
		{"bad config with nothing to plan", fig, search.Selective(4, 8), kappa1, limits, 1, 0, "search config warmup"},
		{"zero T_max", fig, good, kappa1, search.Limits{SegmentTokens: 256}, 1, 4, "max_total_tokens: is 0"},
		{"zero L", fig, good, kappa1, search.Limits{MaxTotalTokens: 8192}, 1, 4, "segment_tokens: is 0"},
		{"bad reward config", fig, good, badReward, limits, 1, 4, "reward_min"},
		{"reward out of range", outOfRange, good, kappa1, limits, 1, 4, "outside [reward_min, reward_max]"},
		{"invalid tree", invalid, good, kappa1, limits, 1, 4, "node 1"},
		{"invalid tree with empty C", invalid, func() search.Config { c := good; c.MinRemaining = 9000; return c }(), kappa1, limits, 1, 4, "node 1"},
		{"tree without nodes", &tree.Tree{}, good, kappa1, limits, 1, 4, "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			picks, err := search.Plan(tc.tr, tc.cfg, tc.reward, tc.lim, tc.round, tc.remaining)
			require.Error(t, err)
			assert.Nil(t, picks)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err), err.Error())
			assert.Contains(t, err.Error(), tc.message)
		})
	}
}

func TestHash(t *testing.T) {
	golden := []struct {
		name string
		got  uint64
		want uint64
	}{
		{"no parts", search.Hash(0, ""), 0x374708fff7719dd5},
		{"warmup 0", search.WarmupSeed(0, "gsm8k-17", 0), 0x3069fe8e5be7dc7a},
		{"warmup 15", search.WarmupSeed(7, "gsm8k-17", 15), 0xecf203885e57b849},
		{"branch", search.BranchSeed(0, "gsm8k-17", 3, 1), 0x7ac2611b66fba98c},
		{"tie key", search.Hash(0, "gsm8k-17", 2, []int{0, 3, 1}), 0xf7e283760493b0a},
		{"root key", search.Hash(1<<63, "ünïcode", 1, []int{}), 0xe372844904a20bf3},
	}
	// Golden values, also reproduced with Python's hashlib (see Hash).
	for _, g := range golden {
		t.Run(g.name, func(t *testing.T) { assert.Equal(t, g.want, g.got, "%#x", g.got) })
	}

	// The documented encoding, built by hand.
	minusTwo := int64(-2)
	var b []byte
	b = binary.BigEndian.AppendUint64(b, 7)
	b = binary.BigEndian.AppendUint64(b, 3)
	b = append(b, "abc"...)
	b = append(binary.BigEndian.AppendUint64(append(b, 's'), 1), 'b')
	b = binary.BigEndian.AppendUint64(append(b, 'i'), uint64(minusTwo))
	b = binary.BigEndian.AppendUint64(append(b, 'u'), 5)
	b = binary.BigEndian.AppendUint64(append(b, 'k'), 2)
	b = binary.BigEndian.AppendUint64(b, 4)
	b = binary.BigEndian.AppendUint64(b, 0)
	sum := sha256.Sum256(b)
	assert.Equal(t, binary.BigEndian.Uint64(sum[:8]), search.Hash(7, "abc", "b", -2, uint8(5), []int{4, 0}))

	assert.Equal(t, search.Hash(3, "p", "w", 1), search.WarmupSeed(3, "p", 1))
	assert.Equal(t, search.Hash(3, "p", "b", 2, 1), search.BranchSeed(3, "p", 2, 1))
	assert.Equal(t, search.Hash(3, "p", 9), search.Hash(3, "p", int8(9)), "every signed width encodes alike")
	assert.Equal(t, search.Hash(3, "p", uint(9)), search.Hash(3, "p", uint64(9)), "every unsigned width encodes alike")

	// Injective encoding: none of these collide.
	distinct := []uint64{
		search.Hash(0, "p", "w", 1), search.Hash(0, "p", "w1"), search.Hash(0, "p", "b", 1),
		search.Hash(0, "p", []int{1}), search.Hash(0, "p", 1), search.Hash(0, "p", uint(1)),
		search.Hash(0, "p", "1"), search.Hash(0, "p1"), search.Hash(0, "p", []int{1, 2}),
		search.Hash(0, "p", 1, 2), search.Hash(0, "p", []int{}), search.Hash(0, "p"),
		search.Hash(1, "p", "w", 1), search.Hash(0, "q", "w", 1), search.Hash(0, "p", "", ""),
		search.Hash(0, "p", ""),
	}
	seen := map[uint64]int{}
	for i, h := range distinct {
		j, dup := seen[h]
		assert.False(t, dup, "hash %d collides with %d", i, j)
		seen[h] = i
	}
	assert.PanicsWithValue(t, "search.Hash: part of type float64 is not encodable (want string, an integer or []int)",
		func() { search.Hash(0, "p", 1.5) })
}

func BenchmarkPlan(b *testing.B) {
	tr := treetest.Search(700, 8, 256, 1)
	cfg := search.Selective(1<<20, 350)
	b.ResetTimer()
	for range b.N {
		picks, err := search.Plan(tr, cfg, kappa1, limits, 1, 4)
		if err != nil || len(picks) != 4 {
			b.Fatal(err, picks)
		}
	}
	b.ReportMetric(float64(tr.Len()), "nodes")
}
