package tree

import "math"

// SuccessTolerance is how far below the top reward a done leaf may be and still
// count as a success.
const SuccessTolerance = 1e-9

// Finished reports whether the rollout that reached node id finished there: the
// node is terminal (done or truncated) and did not fail. The one definition of a
// finished rollout: Outcomes counts them, Rollouts lists them, and every actor
// record says whether its path ends one (core/export).
func (t *Tree) Finished(id int) bool {
	n := &t.Nodes[id]
	return n.Terminal() && n.Failed == ""
}

// Returns is the return of the path from the root to every node, indexed by node
// id: the sum of the environment rewards on its edges (as the environment scored
// them, undiscounted), added from the root down; 0 at the root. A finished
// rollout's return is its outcome.
func (t *Tree) Returns() []float64 {
	ret := make([]float64, len(t.Nodes))
	known := make([]bool, len(t.Nodes))
	var up []int // the nodes above id whose return is not known yet, id first
	for id := range t.Nodes {
		up = up[:0]
		c := id
		for c > 0 && !known[c] {
			up = append(up, c)
			c = t.Nodes[c].Parent
		}
		sum := 0.0
		if c > 0 {
			sum = ret[c]
		}
		for k := len(up) - 1; k >= 0; k-- {
			sum += t.Nodes[up[k]].Reward
			ret[up[k]], known[up[k]] = sum, true
		}
	}
	return ret
}

// Rollout is one finished rollout of a tree (Rollouts).
type Rollout struct {
	// NodeID is the node the rollout finished at.
	NodeID int `json:"node_id"`
	// Return is its outcome: the sum of the rewards on its root-to-leaf path.
	Return float64 `json:"return"`
	// Done is true when the environment ended it, false when it was truncated.
	Done bool `json:"done"`
	// Segments is the number of edges on its path (the leaf's depth).
	Segments int `json:"segments"`
}

// Rollouts lists the tree's finished rollouts (Finished) in node order.
func (t *Tree) Rollouts() []Rollout {
	var ret []float64
	out := []Rollout{}
	for id := range t.Nodes {
		if !t.Finished(id) {
			continue
		}
		if ret == nil {
			ret = t.Returns()
		}
		n := &t.Nodes[id]
		out = append(out, Rollout{NodeID: id, Return: ret[id], Done: n.Done, Segments: n.Depth})
	}
	return out
}

// Outcomes counts the tree's finished rollouts (Finished: the terminal nodes that
// did not fail) and its successes, the done ones among them whose reward reaches
// rewardMax (within SuccessTolerance): for MathEnv, the correct answers. The
// engine records both in Stats when a collection ends.
func (t *Tree) Outcomes(rewardMax float64) (finished, successes int) {
	for i := range t.Nodes {
		if !t.Finished(i) {
			continue
		}
		finished++
		if n := &t.Nodes[i]; n.Done && n.Reward >= rewardMax-SuccessTolerance {
			successes++
		}
	}
	return finished, successes
}

// RecordOutcomes sets Stats.FinishedRollouts, Stats.Successes and Stats.AllFailed
// (rollouts ran and none finished) from Outcomes(rewardMax) and Stats.Rollouts,
// and Stats.TruncatedRollouts, Stats.OutcomesDiffer and Stats.RolloutTokens from
// the finished rollouts (Rollouts).
func (t *Tree) RecordOutcomes(rewardMax float64) {
	st := &t.Stats
	st.FinishedRollouts, st.Successes = t.Outcomes(rewardMax)
	st.AllFailed = st.Rollouts > 0 && st.FinishedRollouts == 0
	rollouts := t.Rollouts()
	st.TruncatedRollouts, st.OutcomesDiffer, st.RolloutTokens = 0, !ReturnsAlike(rollouts), nil
	for _, r := range rollouts {
		if !r.Done {
			st.TruncatedRollouts++
		}
		st.RolloutTokens = append(st.RolloutTokens, t.PathGeneratedTokens(r.NodeID))
	}
}

// ReturnsAlike reports whether every rollout of rs has the same return as the
// first (within SuccessTolerance); true for none or one.
func ReturnsAlike(rs []Rollout) bool {
	for _, r := range rs {
		if math.Abs(r.Return-rs[0].Return) > SuccessTolerance {
			return false
		}
	}
	return true
}

// PathGeneratedTokens is the number of generated (trainable) tokens on the
// edges from the root to node id (each edge's count as EdgeTrainable gives it).
func (t *Tree) PathGeneratedTokens(id int) int {
	c := 0
	for ; id > 0; id = t.Nodes[id].Parent {
		n, _ := t.EdgeTrainable(id)
		c += n
	}
	return c
}
