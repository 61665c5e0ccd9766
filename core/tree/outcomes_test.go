package tree_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/focus-go/focus-go/core/tree"
)

func TestOutcomes(t *testing.T) {
	leaf := func(reward float64, done, truncated bool, failed string) tree.Node {
		return tree.Node{Parent: 0, Reward: reward, Done: done, Truncated: truncated, Failed: failed}
	}
	tests := []struct {
		name                string
		leaves              []tree.Node
		rewardMax           float64
		rollouts            int
		finished, successes int
		allFailed           bool
	}{
		{"correct and wrong", []tree.Node{leaf(1, true, false, ""), leaf(0, true, false, "")}, 1, 2, 2, 1, false},
		{"truncated finishes, never succeeds", []tree.Node{leaf(1, false, true, "")}, 1, 1, 1, 0, false},
		{"failed leaves do not finish", []tree.Node{leaf(0, false, false, "policy: boom"), leaf(1, true, false, "env: boom")}, 1, 2, 0, 0, true},
		{"top reward within tolerance", []tree.Node{leaf(1-1e-10, true, false, ""), leaf(1-1e-6, true, false, "")}, 1, 2, 2, 1, false},
		{"another reward range", []tree.Node{leaf(5, true, false, ""), leaf(1, true, false, "")}, 5, 2, 2, 1, false},
		{"no rollout ran", nil, 1, 0, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &tree.Tree{Nodes: append([]tree.Node{{Parent: -1}}, tc.leaves...)}
			tr.Stats.Rollouts = tc.rollouts
			finished, successes := tr.Outcomes(tc.rewardMax)
			assert.Equal(t, tc.finished, finished)
			assert.Equal(t, tc.successes, successes)
			tr.RecordOutcomes(tc.rewardMax)
			assert.Equal(t, tc.finished, tr.Stats.FinishedRollouts)
			assert.Equal(t, tc.successes, tr.Stats.Successes)
			assert.Equal(t, tc.allFailed, tr.Stats.AllFailed)
		})
	}
}
