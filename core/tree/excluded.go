package tree

// Excluded reports, per node id, whether the node failed or lies under a failed node:
// the subtrees that preparation's counts and sums, the search's candidate set and the
// engine's scoring set all leave out. order is t.BreadthFirst(): a caller that walks the
// tree anyway passes its own, nil has Excluded compute it. The walk checks bounds, so an
// invalid tree cannot make it panic; a node not reachable from the root is reported as not
// excluded (validation reports such a tree).
func (t *Tree) Excluded(order []int) []bool {
	n := len(t.Nodes)
	excluded := make([]bool, n)
	if order == nil {
		order = t.BreadthFirst()
	}
	for _, id := range order {
		nd := &t.Nodes[id]
		excluded[id] = nd.Failed != ""
		if p := nd.Parent; id != 0 && p >= 0 && p < n {
			excluded[id] = excluded[id] || excluded[p]
		}
	}
	return excluded
}
