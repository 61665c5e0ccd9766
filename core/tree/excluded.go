package tree

// Excluded reports, per node id, whether the node failed or lies under a failed node:
// the subtrees that preparation's counts and sums, the search's candidate set and the
// engine's scoring set all leave out. It walks the tree breadth-first from the root
// (BreadthFirst) with bounds checks, so an invalid tree cannot make it panic; a node not
// reachable from the root is reported as not excluded (validation reports such a tree).
func (t *Tree) Excluded() []bool {
	n := len(t.Nodes)
	excluded := make([]bool, n)
	for _, id := range t.BreadthFirst() {
		nd := &t.Nodes[id]
		excluded[id] = nd.Failed != ""
		if p := nd.Parent; id != 0 && p >= 0 && p < n {
			excluded[id] = excluded[id] || excluded[p]
		}
	}
	return excluded
}
