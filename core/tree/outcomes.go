package tree

// SuccessTolerance is how far below the top reward a done leaf may be and still
// count as a success.
const SuccessTolerance = 1e-9

// Outcomes counts the tree's finished rollouts, the terminal nodes (done or
// truncated) that did not fail, and its successes, the done ones among them whose
// reward reaches rewardMax (within SuccessTolerance): for MathEnv, the correct
// answers. The engine records both in Stats when a collection ends.
func (t *Tree) Outcomes(rewardMax float64) (finished, successes int) {
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if !n.Terminal() || n.Failed != "" {
			continue
		}
		finished++
		if n.Done && n.Reward >= rewardMax-SuccessTolerance {
			successes++
		}
	}
	return finished, successes
}

// RecordOutcomes sets Stats.FinishedRollouts, Stats.Successes and Stats.AllFailed
// (rollouts ran and none finished) from Outcomes(rewardMax) and Stats.Rollouts.
func (t *Tree) RecordOutcomes(rewardMax float64) {
	st := &t.Stats
	st.FinishedRollouts, st.Successes = t.Outcomes(rewardMax)
	st.AllFailed = st.Rollouts > 0 && st.FinishedRollouts == 0
}
