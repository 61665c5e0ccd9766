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
	w := Reach(v)
	if len(w) == 0 {
		return w
	}
	leaves := 0
	for id := 1; id < len(w); id++ {
		if !v.Excluded[id] && v.Count[id] == 0 {
			leaves++
		}
	}
	w[0] = 0
	r := float64(leaves)
	for id := 1; id < len(w); id++ {
		w[id] *= r
	}
	return w
}

// Reach returns π̂(s) for every node, indexed by node id: 1 at the root,
// π̂(c) = π̂(s)/n_s for a completed child c of s, 0 for excluded nodes. It is
// the tree's estimate of the probability that the policy reaches s.
func Reach(v *TreeValues) []float64 {
	t := v.Tree
	n := len(t.Nodes)
	w := make([]float64, n)
	if n == 0 {
		return w
	}
	w[0] = 1
	for _, id := range t.BreadthFirst()[1:] {
		if v.Excluded[id] {
			continue
		}
		p := t.Nodes[id].Parent
		w[id] = w[p] / float64(v.Count[p]) // Count[p] >= 1: id is a completed child of p
	}
	return w
}
