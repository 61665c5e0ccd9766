package prepare

// Visitation weights (docs/signal.md §V). A searched tree is not an on-policy
// sample: a checkpoint the search branched from has more outgoing edges than
// the policy would have sent through it. With R the tree's completed rollouts
// (its completed leaves), R on-policy rollouts would visit checkpoint s about
// R·π(s) times, where π(s) is the probability that the policy reaches s; the
// tree took n_s edges from it. The visitation factor of edge s -> c is the
// inverse of that over-sampling,
//
//	w(s->c) = R · π̂(s) / n_s = R · π̂(c),   π̂(root) = 1,  π̂(c) = π̂(s) / n_s,
//
// where π̂ is the tree's own nested Monte Carlo estimate of π: each of the n_s
// sampled children of s stands for 1/n_s of s's probability mass. Then
// (1/R) · Σ_edges w(s->c) · A(s->c) · ∇log π(c|s) estimates the on-policy
// policy gradient Σ_s π(s) E_c[A ∇log π] without bias for fixed branch
// counts, in the same units as R independent rollouts: on Independent chains
// every factor is exactly 1, and on any tree the factors of the edges at one
// depth sum to R times the estimated probability of reaching that depth.

// Visitation returns w(s->c) for every node c of the tree (the factor of the
// edge into c), indexed by node id: 0 for the root and for excluded (failed)
// nodes. n_s is v.Count (completed children) and R the number of completed
// nodes with no completed child, the root excluded. A tree without such
// leaves gets all zeros.
func Visitation(v *TreeValues) []float64 {
	t := v.Tree
	n := len(t.Nodes)
	w := make([]float64, n)
	if n == 0 {
		return w
	}
	order := t.BreadthFirst()
	leaves := 0
	for _, id := range order[1:] {
		if !v.Excluded[id] && v.Count[id] == 0 {
			leaves++
		}
	}
	if leaves == 0 {
		return w
	}
	// w holds π̂ first, then is scaled by R.
	w[0] = 1
	for _, id := range order[1:] {
		if v.Excluded[id] {
			continue
		}
		p := t.Nodes[id].Parent
		w[id] = w[p] / float64(v.Count[p]) // Count[p] >= 1: id is a completed child of p
	}
	w[0] = 0
	r := float64(leaves)
	for id := 1; id < n; id++ {
		w[id] *= r
	}
	return w
}
