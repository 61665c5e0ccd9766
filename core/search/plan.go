package search

import (
	"math"
	"slices"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// TieTolerance is the gain difference below which two candidates tie and the
// seeded hash decides (ALGORITHM.md §5.7.5).
const TieTolerance = 1e-12

// scan is what the candidate rule reads off a tree, in breadth-first passes.
type scan struct {
	order    []int  // breadth-first, parents before children
	reached  []bool // on a path from the root (always, on a valid tree)
	excluded []bool // failed or under a failed node (tree.Excluded)
	live     []int  // |ch(s)|: children that did not fail
	tokens   []int  // generated policy tokens on the path root..s
	depth    []int  // edges on the path root..s (0 at the root)
}

func scanTree(t *tree.Tree) *scan {
	n := len(t.Nodes)
	s := &scan{
		order: t.BreadthFirst(), reached: make([]bool, n),
		live: make([]int, n), tokens: make([]int, n), depth: make([]int, n),
	}
	s.excluded = t.Excluded(s.order)
	for _, id := range s.order {
		nd := &t.Nodes[id]
		s.reached[id] = true
		s.tokens[id], _ = t.EdgeTrainable(id)
		// Bounds checks keep an invalid tree from panicking here; Plan
		// reports it through validation.
		if p := nd.Parent; id != 0 && p >= 0 && p < n {
			s.tokens[id] += s.tokens[p]
			s.depth[id] = s.depth[p] + 1
			if nd.Failed == "" {
				s.live[p]++
			}
		}
	}
	return s
}

// open reports whether id is in C given v_s = virtual (ALGORITHM.md §5.7.3).
func (s *scan) open(t *tree.Tree, id int, cfg Config, lim Limits, virtual int) bool {
	nd := &t.Nodes[id]
	switch {
	case !s.reached[id] || s.excluded[id] || nd.Terminal():
		return false
	case lim.MaxTotalTokens-s.tokens[id] < cfg.MinRemainingTokens(lim):
		return false
	case id != 0 && s.live[id]+virtual >= cfg.MaxChildren:
		return false
	}
	return true
}

// Candidates is C of ALGORITHM.md §5.7.3 at the start of a round, in
// ascending node id: the nodes that are nonterminal (neither done nor
// truncated), not failed nor under a failed node, have
// T_max - tokens(s) >= min_remaining, where tokens(s) counts the generated
// (trainable) policy tokens on the path root..s — not the prompt, chat glue or
// tool results — and have |ch(s)| + v_s < max_children, where |ch(s)| counts
// the children that did not fail and v_s = virtual[s] (nil means none). The
// root is exempt from max_children.
//
// Candidates does not look at critic predictions: the engine uses it to find
// the checkpoints to score before calling Plan.
func Candidates(t *tree.Tree, cfg Config, lim Limits, virtual map[int]int) []int {
	if t == nil {
		return nil
	}
	s := scanTree(t)
	var out []int
	for id := range t.Nodes {
		if s.open(t, id, cfg, lim, virtual[id]) {
			out = append(out, id)
		}
	}
	return out
}

// Pick is one planned branch: a rollout from checkpoint Node, chosen with
// score Gain (the node's score at pick time, virtual counts applied).
type Pick struct {
	Node int     `json:"node"`
	Gain float64 `json:"gain"`
}

// Score is one candidate's standing at the start of a round, before any
// virtual pick.
type Score struct {
	Node int `json:"node"`
	// VStarSel is V*_sel(s): the refined value of §5.4 at kappa_sel.
	VStarSel float64 `json:"v_star_sel"`
	// Critic is V_phi(s), nil when the node has no prediction.
	Critic *float64 `json:"critic"`
	// Count is n_s, the node's completed children that entered its backup.
	Count int `json:"count"`
	// Gain is the node's score at n = n_s; eligible iff > 0.
	Gain float64 `json:"gain"`
	// Reach is π̂(s), the tree's estimate of the probability that the policy
	// reaches s (prepare.Reach at kappa_sel; 1 at the root). Only the
	// "gradient_variance" and "shallow_first" scores read it.
	Reach float64 `json:"reach"`
	// Depth is the number of edges from the root to the node (0 at the root).
	Depth int `json:"depth"`
	// Tokens is the generated tokens a rollout from the node is expected to
	// produce (ExpectedRolloutTokens). Only "value_refinement_per_token"
	// reads it; 0 under the other scores.
	Tokens float64 `json:"tokens,omitempty"`
	// Tier ranks candidates before Gain: Plan picks among the eligible
	// candidates of the lowest tier only. It is 0 for every candidate except
	// under "shallow_first", and under "critic_adaptive" on a tree whose
	// critic looks noisy (ShallowTier).
	Tier int `json:"tier"`
}

// Scores scores every candidate of a round on the tree as it stands, in
// ascending node id, eligible or not; a candidate with no value at all (see
// Plan) is left out. Plan picks from exactly these scores; Scores is exported
// for diagnostics and logging.
func Scores(t *tree.Tree, cfg Config, reward prepare.RewardConfig, lim Limits) ([]Score, error) {
	if t == nil {
		return nil, status.Errorf(status.InvalidArgument, "search: scores: tree is nil")
	}
	_, out, err := scores(t, cfg, reward, lim)
	return out, err
}

func scores(t *tree.Tree, cfg Config, reward prepare.RewardConfig, lim Limits) (*scan, []Score, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if err := lim.Validate(); err != nil {
		return nil, nil, err
	}
	if err := reward.Validate(); err != nil {
		return nil, nil, err
	}
	// prepare.Values validates the tree; the scan before it tolerates an
	// invalid one, so the tree is validated once per round, not twice.
	s := scanTree(t)
	var cands []int
	for id := range t.Nodes {
		if s.open(t, id, cfg, lim, 0) {
			cands = append(cands, id)
		}
	}
	if len(cands) == 0 {
		if err := t.Validate(); err != nil {
			return nil, nil, status.Wrap(status.InvalidArgument, err, "search")
		}
		return s, nil, nil
	}
	sel := selectionConfig(reward)
	vals, err := prepare.Values(withoutValueless(t, s), sel)
	if err != nil {
		return nil, nil, status.Wrap(status.CodeOf(err), err, "search")
	}
	var reach []float64
	tiered := cfg.Score == ScoreShallowFirst
	if cfg.Score == ScoreCriticAdaptive {
		e, ok := CriticErrorAtDepthOne(vals)
		tiered = ok && e > CriticAdaptiveThreshold
	}
	if cfg.Score == ScoreGradientVariance || cfg.Score == ScoreShallowFirst || cfg.Score == ScoreCriticAdaptive {
		reach = prepare.Reach(vals)
	}
	var rollout []float64
	if cfg.Score == ScoreValueRefinementPerToken {
		rollout = expectedRolloutTokens(t, s)
	}
	out := make([]Score, 0, len(cands))
	for _, id := range cands {
		if !vals.HasRefined(id) {
			continue // no prediction and no completed child: see Plan
		}
		sc := Score{Node: id, VStarSel: vals.Refined[id], Critic: t.Nodes[id].Critic, Count: vals.Count[id], Depth: s.depth[id]}
		if reach != nil {
			sc.Reach = reach[id]
		}
		if tiered {
			sc.Tier = ShallowTier(sc.Depth)
		}
		if rollout != nil {
			sc.Tokens = rollout[id]
		}
		sc.Gain = sc.gain(cfg.Score, sel, 0)
		out = append(out, sc)
	}
	return s, out, nil
}

// selectionConfig is reward with kappa replaced by kappa_sel = max(kappa, 1).
func selectionConfig(reward prepare.RewardConfig) prepare.RewardConfig {
	reward.CriticWeight = max(reward.CriticWeight, 1)
	return reward
}

// gain scores sc with `virtual` planned picks added to n_s.
func (sc *Score) gain(score string, sel prepare.RewardConfig, virtual int) float64 {
	vphi, hasPhi := 0.0, sc.Critic != nil
	if hasPhi {
		vphi = *sc.Critic
	}
	if score == ScoreGradientVariance || score == ScoreShallowFirst || score == ScoreCriticAdaptive {
		return GradientGain(sc.VStarSel, vphi, hasPhi, sc.Count+virtual, sel.CriticWeight, sel.RewardMin, sel.RewardMax, sc.Reach, sc.Node == 0)
	}
	if score == ScoreValueRefinementPerToken {
		return Gain(ScoreValueRefinement, sc.VStarSel, vphi, hasPhi, sc.Count+virtual, sel.CriticWeight, sel.RewardMin, sel.RewardMax) / max(sc.Tokens, 1)
	}
	return Gain(score, sc.VStarSel, vphi, hasPhi, sc.Count+virtual, sel.CriticWeight, sel.RewardMin, sel.RewardMax)
}

// ExpectedRolloutTokens is, for every node of t, the generated tokens a
// rollout from it is expected to produce (docs/signal.md §P): the mean, over
// the finished rollouts below the node, of their generated tokens after it;
// for a node with no finished rollout below it, the mean over all of the
// tree's finished rollouts of their generated tokens, less the node's own
// prefix; never below 1. Generated tokens are the trainable policy tokens
// (tree.EdgeTrainable), the tokens a server decodes; a branch's prefix is
// reused, not generated.
func ExpectedRolloutTokens(t *tree.Tree) []float64 {
	if t == nil {
		return nil
	}
	return expectedRolloutTokens(t, scanTree(t))
}

func expectedRolloutTokens(t *tree.Tree, s *scan) []float64 {
	n := len(t.Nodes)
	sum, count := make([]float64, n), make([]int, n)
	for i := len(s.order) - 1; i >= 0; i-- {
		id := s.order[i]
		if t.Finished(id) && !s.excluded[id] {
			sum[id] += float64(s.tokens[id])
			count[id]++
		}
		if p := t.Nodes[id].Parent; id != 0 && p >= 0 && p < n {
			sum[p] += sum[id]
			count[p] += count[id]
		}
	}
	out := make([]float64, n)
	for id := range out {
		switch {
		case count[id] > 0:
			out[id] = sum[id]/float64(count[id]) - float64(s.tokens[id])
		case count[0] > 0:
			out[id] = sum[0]/float64(count[0]) - float64(s.tokens[id])
		}
		out[id] = max(out[id], 1)
	}
	return out
}

// WarmupAlike reports whether t's finished warmup rollouts (search pass 0),
// at least two of them, all have the same return (within
// tree.SuccessTolerance): the tree a StopAlike config stops after its warmup.
func WarmupAlike(t *tree.Tree) bool {
	if t == nil {
		return false
	}
	var warmup []tree.Rollout
	for _, r := range t.Rollouts() {
		if t.Nodes[r.NodeID].SearchPass == 0 {
			warmup = append(warmup, r)
		}
	}
	return len(warmup) >= 2 && tree.ReturnsAlike(warmup)
}

// Plan returns round `round`'s picks in launch order (ALGORITHM.md §5.7.3):
// m = min(PerPass, remaining) greedy picks over Candidates, scored on the tree
// as it stands (the state at the round's start). After each pick the node's
// virtual count v_s grows by one and only that node is rescored, with
// n = n_s + v_s; a node may be picked several times, until max_children. The
// best score wins: the lowest Tier among eligible candidates first (all 0
// except under "shallow_first"), then the highest gain within it; scores
// within TieTolerance of the best tie, and the tied
// node with the smallest Hash(seed, problemID, round, key(s)), key(s) =
// t.PathKey(s), wins, so the plan does not depend on node ids. Only scores
// > 0 are eligible. Fewer than m picks (down to none) means the round ran
// out of eligible candidates; an empty plan means stop and record the
// unspent budget. An Independent config never branches and gets an empty
// plan, and so does a StopAlike config on a tree whose warmup rollouts all
// returned the same (WarmupAlike).
//
// round is t of §5.7 and enters the tie-break hash; pass the same t to
// BranchSeed for the picks' sampler seeds. Numbering branching rounds 1, 2,
// ... matches the nodes' search_pass (0 is warmup).
//
// V*_sel is prepare.Values at kappa_sel = max(kappa, 1) with reward's other
// settings; r_min and r_max map values to p in [0, 1].
//
// Missing critic predictions: a node without one has no prior, so (as in
// prepare) V*_sel is its backup G_bar alone and the (p - p_phi)^2 bias term
// of value_refinement is 0. A node with neither a prediction nor a completed
// child has no value at all — in practice the root after every warmup
// rollout failed with no critic configured, or a cancelled checkpoint the
// critic never scored — and is skipped: it is never picked, and it is left
// out of its parent's backup and n_s (prepare.Values would refuse such a
// non-root node). Skipping rather than scoring it as p = 0.5, n = 0 agrees
// with value_refinement, which gives an unmeasured node exactly 0 at
// kappa_sel = 1, and keeps the other scores from spending budget on a prompt
// whose every rollout failed, which contributes nothing to training. A root
// the critic did score has a value: after a warmup that failed whole,
// value_refinement gains 0 there and the plan stops, while gradient_variance
// (the default) and posterior_variance keep its sampling term and branch from
// it again.
func Plan(t *tree.Tree, cfg Config, reward prepare.RewardConfig, lim Limits, round, remaining int) ([]Pick, error) {
	switch {
	case t == nil:
		return nil, status.Errorf(status.InvalidArgument, "search: plan: tree is nil")
	case round < 0:
		return nil, status.Errorf(status.InvalidArgument, "search: plan: round is %d, must be >= 0", round)
	case remaining < 0:
		return nil, status.Errorf(status.InvalidArgument, "search: plan: remaining budget is %d, must be >= 0", remaining)
	}
	// Reject bad settings even when there is nothing to plan.
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	if err := reward.Validate(); err != nil {
		return nil, err
	}
	if cfg.Independent || remaining == 0 || (cfg.StopAlike && WarmupAlike(t)) {
		return nil, nil
	}
	s, scored, err := scores(t, cfg, reward, lim)
	if err != nil {
		return nil, err
	}
	sel := selectionConfig(reward)
	type cand struct {
		Score
		virtual  int
		gain     float64 // at n = n_s + virtual
		eligible bool
		tie      uint64
		hasTie   bool
	}
	cs := make([]cand, len(scored))
	for i, sc := range scored {
		cs[i] = cand{Score: sc, gain: sc.Gain, eligible: sc.Gain > 0}
	}

	m := min(cfg.PerPass, remaining)
	picks := make([]Pick, 0, m)
	for range m {
		tier := math.MaxInt
		for i := range cs {
			if cs[i].eligible {
				tier = min(tier, cs[i].Tier)
			}
		}
		best := math.Inf(-1)
		for i := range cs {
			if cs[i].eligible && cs[i].Tier == tier && cs[i].gain > best {
				best = cs[i].gain
			}
		}
		if math.IsInf(best, -1) {
			break
		}
		// The tie set is every score within the tolerance of the maximum, so
		// the winner does not depend on the order candidates are visited in.
		win := -1
		for i := range cs {
			c := &cs[i]
			if !c.eligible || c.Tier != tier || best-c.gain > TieTolerance {
				continue
			}
			if !c.hasTie {
				c.tie, c.hasTie = tieKey(cfg.Seed, t.ProblemID, round, t.PathKey(c.Node)), true
			}
			if win < 0 || c.tie < cs[win].tie {
				win = i
			}
		}
		c := &cs[win]
		picks = append(picks, Pick{Node: c.Node, Gain: c.gain})
		c.virtual++
		if !s.open(t, c.Node, cfg, lim, c.virtual) {
			c.eligible = false
			continue
		}
		c.gain = c.Score.gain(cfg.Score, sel, c.virtual)
		c.eligible = c.gain > 0
	}
	if len(picks) == 0 {
		return nil, nil
	}
	return picks, nil
}

// withoutValueless returns t itself, or, when some non-root completed
// nonterminal node has neither a critic prediction nor a child with a value,
// a shallow copy in which those nodes are marked failed so that
// prepare.Values leaves them out instead of refusing the tree. Deepest first:
// a node whose only children are valueless is valueless too.
func withoutValueless(t *tree.Tree, s *scan) *tree.Tree {
	n := len(t.Nodes)
	var valueless []bool
	found := false
	for i := len(s.order) - 1; i > 0; i-- {
		id := s.order[i]
		nd := &t.Nodes[id]
		if s.excluded[id] || nd.Terminal() || nd.Critic != nil {
			continue
		}
		valued := false
		for _, c := range nd.Children {
			if c <= 0 || c >= n {
				continue // an invalid tree; prepare.Values reports it
			}
			if !s.excluded[c] && (valueless == nil || !valueless[c]) {
				valued = true
				break
			}
		}
		if !valued {
			if valueless == nil {
				valueless = make([]bool, n)
			}
			valueless[id], found = true, true
		}
	}
	if !found {
		return t
	}
	cp := *t
	cp.Nodes = slices.Clone(t.Nodes)
	for id, v := range valueless {
		if v {
			cp.Nodes[id].Failed = "search: no critic prediction and no completed child"
		}
	}
	return &cp
}

// Gain is ALGORITHM.md §5.7.4's score of one node, with n = n_s + v_s, p the
// clip to [0, 1] of (vStarSel - rMin)/(rMax - rMin) and p_phi the same map of
// vPhi:
//
//   - "value_refinement": e2 = p(1-p)/(kappa_sel+n+1) + (p-p_phi)^2,
//     sigma2 = p(1-p), gain = (2 kappa_sel^2 e2 + (n - kappa_sel) sigma2) /
//     (kappa_sel+n)^3 — the error one more branch removes from the critic
//     target. Without a prediction (hasPhi false) the bias term is 0.
//   - "posterior_variance": p(1-p)/((kappa_sel+n)(kappa_sel+n+1)).
//   - "uniform": 1/(1+n). Tree-GRPO expands uniformly chosen nodes; here
//     every candidate with the same number of real plus planned children
//     scores the same and the seeded hash tie-break draws among them, while
//     preferring fewer children spreads a round's picks over distinct nodes
//     instead of piling them onto one.
//
// A candidate is eligible iff its gain is > 0. An unknown score, or
// kappa_sel + n <= 0, gives 0 (never eligible); Config.Validate rejects
// unknown scores and Plan always passes kappa_sel >= 1.
func Gain(score string, vStarSel, vPhi float64, hasPhi bool, n int, kappaSel, rMin, rMax float64) float64 {
	nf := float64(n)
	k := kappaSel + nf
	if k <= 0 {
		return 0
	}
	p := unit(vStarSel, rMin, rMax)
	sigma2 := p * (1 - p)
	switch score {
	case ScoreValueRefinement:
		bias := 0.0
		if hasPhi {
			d := p - unit(vPhi, rMin, rMax)
			bias = d * d
		}
		e2 := sigma2/(k+1) + bias
		// At n = 0 with no bias and kappa_sel = 1 both terms cancel exactly:
		// an unmeasured node scores 0, as §5.7.4 says.
		return (2*kappaSel*kappaSel*e2 + (nf-kappaSel)*sigma2) / (k * k * k)
	case ScorePosteriorVariance:
		return sigma2 / (k * (k + 1))
	case ScoreUniform:
		return 1 / (1 + nf)
	}
	return 0
}

// GradientGain is the "gradient_variance" score (docs/signal.md §S): the
// expected reduction of the visitation-weighted policy gradient's variance
// that one more branch from s buys, with n = n_s + v_s and reach = π̂(s):
//
//	gain = π̂(s)^2 · [ PV(n) + (1[s is not the root] + 1/max(n, 1)) · max(0, VR(n)) ]
//
// where PV is "posterior_variance" (the sampling term: the edges out of s
// carry weight π̂(s)/n each, so their sampling noise falls like
// σ²/(κ_sel+n), and one more branch removes PV of it) and VR is
// "value_refinement" (the error V*(s) loses; V*(s) enters the advantage of
// the edge into s, weight π̂(s), and the baseline of the n edges out of it).
// Constant factors common to every node (the squared norm of ∇log π) are
// dropped. At the root π̂ = 1 and only the baseline share of VR counts.
func GradientGain(vStarSel, vPhi float64, hasPhi bool, n int, kappaSel, rMin, rMax, reach float64, root bool) float64 {
	if reach <= 0 || kappaSel+float64(n) <= 0 {
		return 0
	}
	pv := Gain(ScorePosteriorVariance, vStarSel, vPhi, hasPhi, n, kappaSel, rMin, rMax)
	vr := max(0, Gain(ScoreValueRefinement, vStarSel, vPhi, hasPhi, n, kappaSel, rMin, rMax))
	c := 1 / float64(max(n, 1))
	if !root {
		c++
	}
	return reach * reach * (pv + c*vr)
}

// ShallowTier is the "shallow_first" rank of a checkpoint at the given depth
// (docs/signal.md §F): depth-1 checkpoints first (0), then the root (1), then
// depth d >= 2 (d). The root edge into a depth-1 checkpoint c carries
// A = V*(c) - V*(root), where the critic's share of V*(c) is
// kappa/(kappa + n_c): only a branch from c shrinks it, while another root
// rollout adds one more edge with the same share. Deeper checkpoints reach
// the root edges only through 1/(kappa + n) of their parent's value.
func ShallowTier(depth int) int {
	switch depth {
	case 0:
		return 1
	case 1:
		return 0
	}
	return depth
}

// CriticAdaptiveThreshold is the critic-error variance, in [r_min, r_max]
// normalised units (a standard deviation of about 0.22), above which
// "critic_adaptive" branches shallow first. It was chosen on simulated
// bandit trees with other seeds than the benchmark's (docs/signal.md §F);
// gradient errors moved by at most 0.007 between 0.02 and 0.08.
const CriticAdaptiveThreshold = 0.05

// CriticErrorAtDepthOne estimates the variance of the critic's error over the
// root's children (docs/signal.md §F): with φ_c = V_phi(c) and G_c = G_bar(c)
// normalised to [0, 1], over the m >= 2 children c of the root that have a
// prediction and a backup,
//
//	tau_hat^2 = ( mean (φ_c - G_c)^2 + Var(φ_c) - Var(G_c) ) / 2
//
// (sample variances over the m children). If φ_c = V(c) + e_c with e_c
// independent of V(c) and G_c = V(c) + u_c with u_c the return noise, the
// first term is E[e^2] + E[u^2], the second Var(V) + E[e^2] and the third
// Var(V) + E[u^2], so the return noise cancels without a model of it. A
// constant critic φ reads as half its squared distance from the children's
// mean backup, (φ - mean G)^2 / 2 (less Var(G)/2m): reliable when it sits
// near the mean return, noisy when it is far off. ok is false with
// fewer than two such children.
func CriticErrorAtDepthOne(v *prepare.TreeValues) (tau2 float64, ok bool) {
	norm := func(x float64) float64 {
		return (x - v.Config.RewardMin) / (v.Config.RewardMax - v.Config.RewardMin)
	}
	var phi, g []float64
	for _, id := range v.Tree.Nodes[0].Children {
		if id <= 0 || id >= len(v.Tree.Nodes) || v.Tree.Nodes[id].Critic == nil || !v.HasBackup(id) {
			continue
		}
		phi = append(phi, norm(*v.Tree.Nodes[id].Critic))
		g = append(g, norm(v.Backup[id]))
	}
	m := len(phi)
	if m < 2 {
		return 0, false
	}
	d2 := 0.0
	for i := range phi {
		d2 += (phi[i] - g[i]) * (phi[i] - g[i])
	}
	return (d2/float64(m) + sampleVariance(phi) - sampleVariance(g)) / 2, true
}

func sampleVariance(x []float64) float64 {
	mean := 0.0
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	s := 0.0
	for _, v := range x {
		s += (v - mean) * (v - mean)
	}
	return s / float64(len(x)-1)
}

// unit maps a value to p = clip((v - rMin)/(rMax - rMin), 0, 1).
func unit(v, rMin, rMax float64) float64 {
	return min(max((v-rMin)/(rMax-rMin), 0), 1)
}
