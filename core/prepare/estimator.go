package prepare

import "github.com/focus-go/focus-go/core/status"

// Estimator turns a tree's values into one ActorSample per completed edge.
type Estimator interface {
	// Name is recorded on every sample and record ("estimator").
	Name() string
	Estimate(v *TreeValues) ([]ActorSample, error)
}

// Estimator names.
const (
	DirectBranchTdName    = "DirectBranchTd"
	GroupBaselineName     = "GroupBaseline"
	TreeGroupBaselineName = "TreeGroupBaseline"
)

// DirectBranchTd is the FOCUS recipe (ALGORITHM.md §5.6): the advantage of
// edge s -> c is the segment TD error over refined values,
// A = r(s->c) + gamma*V*(c) - V*(s).
type DirectBranchTd struct{}

// Name implements Estimator.
func (DirectBranchTd) Name() string { return DirectBranchTdName }

// Estimate implements Estimator. Diagnostics per sample: reward, v_star_parent,
// v_star_child, n_s (of the parent).
func (DirectBranchTd) Estimate(v *TreeValues) ([]ActorSample, error) {
	t := v.Tree
	edges := edgeCount(v)
	diag := newDiagMatrix(directBranchTdDiagnostics, edges)
	out := make([]ActorSample, 0, edges)
	for id := 1; id < len(t.Nodes); id++ {
		if v.Excluded[id] {
			continue
		}
		p := t.Nodes[id].Parent
		out = append(out, EdgeSample(t, id, DirectBranchTdName, v.Advantage(id),
			diag.row(v.Reward[id], v.Refined[p], v.Refined[id], float64(v.Count[p]))))
	}
	return out, nil
}

// GroupBaseline is the GRPO-style baseline on a tree: with R the sum of
// rewards along a root-to-leaf path, the advantage of an edge is the mean over
// the completed terminal leaves under it of R_leaf - mean_all R. On
// Independent chains this is exactly R_i - mean R for every edge of chain i.
// An edge with no terminal leaf under it (a cancelled continuation) gets 0.
// The critic plays no part.
type GroupBaseline struct{}

// Name implements Estimator.
func (GroupBaseline) Name() string { return GroupBaselineName }

// Estimate implements Estimator. Diagnostics per sample: leaf_mean (mean R
// under the edge), group_mean (mean R over all leaves), leaves (under the edge).
func (GroupBaseline) Estimate(v *TreeValues) ([]ActorSample, error) {
	return leafMeanBaseline(v, GroupBaselineName, nil), nil
}

// TreeGroupBaseline is the group baseline of the published tree methods
// (TreeRL, TreePO) with the tree's visitation weights (docs/signal.md §T):
// with R_l the sum of rewards along the path to terminal leaf l and π̂ the
// tree's reach estimate (Reach), each node's value is the reach-weighted mean
// of the leaf returns under it,
//
//	V̂(s) = Σ_{l under s} π̂(l) R_l / Σ_{l under s} π̂(l),
//
// and the advantage of edge s -> c is V̂(c) - V̂(root). Since the leaves of
// a completed subtree carry its reach, V̂(s) is the mean of the children's
// V̂ (each child once, as the direct-branch backup at kappa 0), so branching
// one subtree does not pull the group mean towards it, as GroupBaseline's
// plain leaf mean does. On Independent chains every π̂(l) is 1/n and this is
// exactly GroupBaseline (GRPO). An edge with no terminal leaf under it (a
// cancelled continuation) gets 0. The critic plays no part.
type TreeGroupBaseline struct{}

// Name implements Estimator.
func (TreeGroupBaseline) Name() string { return TreeGroupBaselineName }

// Estimate implements Estimator. Diagnostics per sample, as GroupBaseline's:
// leaf_mean (V̂ of the edge's child), group_mean (V̂ of the root), leaves
// (terminal leaves under the edge).
func (TreeGroupBaseline) Estimate(v *TreeValues) ([]ActorSample, error) {
	return leafMeanBaseline(v, TreeGroupBaselineName, Reach(v)), nil
}

// leafMeanBaseline gives each completed edge s -> c the advantage V(c) - V(root),
// V(s) the weighted mean of the returns R_l (rewards summed from the root) of
// the completed terminal leaves l under s, leaf l weighing weight[l] (nil: 1
// each); an edge with no such leaf under it gets 0. Diagnostics: leaf_mean
// (V(c)), group_mean (V(root)), leaves (terminal leaves under the edge).
func leafMeanBaseline(v *TreeValues, name string, weight []float64) []ActorSample {
	t := v.Tree
	n := len(t.Nodes)
	ret := make([]float64, n)  // R from the root to each node
	sum := make([]float64, n)  // Σ weight(l) R_l over terminal leaves l under each node
	mass := make([]float64, n) // Σ weight(l) over the same leaves
	leaves := make([]int, n)
	order := t.BreadthFirst()
	for _, id := range order[1:] {
		ret[id] = ret[t.Nodes[id].Parent] + v.Reward[id]
	}
	for i := len(order) - 1; i >= 1; i-- {
		id := order[i]
		if v.Excluded[id] {
			continue
		}
		if t.Nodes[id].Terminal() {
			w := 1.0
			if weight != nil {
				w = weight[id]
			}
			sum[id], mass[id], leaves[id] = w*ret[id], w, 1
		}
		p := t.Nodes[id].Parent
		sum[p] += sum[id]
		mass[p] += mass[id]
		leaves[p] += leaves[id]
	}
	mean := func(id int) float64 {
		if leaves[id] == 0 {
			return 0
		}
		return sum[id] / mass[id]
	}
	groupMean := mean(0)
	edges := edgeCount(v)
	diag := newDiagMatrix(groupBaselineDiagnostics, edges)
	out := make([]ActorSample, 0, edges)
	for id := 1; id < n; id++ {
		if v.Excluded[id] {
			continue
		}
		leafMean, adv := mean(id), 0.0
		if leaves[id] > 0 {
			adv = leafMean - groupMean
		}
		out = append(out, EdgeSample(t, id, name, adv, diag.row(leafMean, groupMean, float64(leaves[id]))))
	}
	return out
}

// edgeCount is the number of completed edges (completed non-root nodes).
func edgeCount(v *TreeValues) int {
	n := 0
	for id := 1; id < len(v.Excluded); id++ {
		if !v.Excluded[id] {
			n++
		}
	}
	return n
}

// Diagnostic names per estimator and for critic samples, shared by every
// sample (never modified).
var (
	directBranchTdDiagnostics = []string{"reward", "v_star_parent", "v_star_child", "n_s"}
	groupBaselineDiagnostics  = []string{"leaf_mean", "group_mean", "leaves"}
	criticDiagnostics         = []string{"v_hat", "v_star", "n_s"}
)

var (
	_ Estimator = DirectBranchTd{}
	_ Estimator = GroupBaseline{}
	_ Estimator = TreeGroupBaseline{}
)

// EstimatorByName returns the estimator a name selects ("DirectBranchTd",
// "GroupBaseline" or "TreeGroupBaseline"); "" selects none (critic targets
// only), returned as nil.
func EstimatorByName(name string) (Estimator, error) {
	switch name {
	case "":
		return nil, nil
	case DirectBranchTdName:
		return DirectBranchTd{}, nil
	case GroupBaselineName:
		return GroupBaseline{}, nil
	case TreeGroupBaselineName:
		return TreeGroupBaseline{}, nil
	}
	return nil, status.Errorf(status.InvalidArgument, "prepare: unknown estimator %q, expected %s, %s or %s",
		name, DirectBranchTdName, GroupBaselineName, TreeGroupBaselineName)
}
