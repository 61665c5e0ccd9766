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

// TestReturnsAndRollouts: a path's return adds the rewards from the root down
// (shaping rewards on inner edges included); the finished rollouts are the
// terminal nodes that did not fail, with their outcome, how they ended and
// their length in segments. Node ids need not follow parents.
func TestReturnsAndRollouts(t *testing.T) {
	tr := &tree.Tree{Nodes: []tree.Node{
		{ID: 0, Parent: -1, Children: []int{3}},
		{ID: 1, Parent: 3, Depth: 2, Reward: 1, Done: true},
		{ID: 2, Parent: 3, Depth: 2, Reward: 0.5, Truncated: true},
		{ID: 3, Parent: 0, Depth: 1, Reward: 0.25, Children: []int{1, 2, 4, 5}},
		{ID: 4, Parent: 3, Depth: 2, Reward: 1, Done: true, Failed: "env: boom"},
		{ID: 5, Parent: 3, Depth: 2}, // cancelled: not terminal
	}}
	assert.Equal(t, []float64{0, 1.25, 0.75, 0.25, 1.25, 0.25}, tr.Returns())
	finished := []bool{}
	for id := range tr.Nodes {
		finished = append(finished, tr.Finished(id))
	}
	assert.Equal(t, []bool{false, true, true, false, false, false}, finished)
	assert.Equal(t, []tree.Rollout{
		{NodeID: 1, Return: 1.25, Done: true, Segments: 2},
		{NodeID: 2, Return: 0.75, Done: false, Segments: 2},
	}, tr.Rollouts())
	n, _ := tr.Outcomes(1)
	assert.Equal(t, len(tr.Rollouts()), n, "Outcomes counts the rollouts Rollouts lists")
	assert.Equal(t, []tree.Rollout{}, (&tree.Tree{Nodes: []tree.Node{{Parent: -1}}}).Rollouts())
}

// TestRecordOutcomesTruncationSpreadAndLengths: the finished rollouts cut at the
// length limit, whether their returns differ, and each one's generated tokens
// from the root (conditioning tokens not counted; failed leaves not listed).
func TestRecordOutcomesTruncationSpreadAndLengths(t *testing.T) {
	gen := func(n int) []tree.PackedSequence {
		return []tree.PackedSequence{{Tokens: make([]uint32, n+1), Trainable: append([]bool{false}, trues(n)...), Logprobs: make([]float64, n+1)}}
	}
	tr := &tree.Tree{Nodes: []tree.Node{
		{ID: 0, Parent: -1, Children: []int{1}, Spans: gen(0)},
		{ID: 1, Parent: 0, Depth: 1, Spans: gen(3), Children: []int{2, 3, 4}},
		{ID: 2, Parent: 1, Depth: 2, Spans: gen(2), Reward: 1, Done: true},
		{ID: 3, Parent: 1, Depth: 2, Spans: gen(5), Truncated: true},
		{ID: 4, Parent: 1, Depth: 2, Spans: gen(1), Reward: 1, Done: true, Failed: "env: boom"},
	}}
	tr.Stats.Rollouts = 3
	tr.RecordOutcomes(1)
	assert.Equal(t, 1, tr.Stats.TruncatedRollouts)
	assert.True(t, tr.Stats.OutcomesDiffer)
	assert.Equal(t, []int{5, 8}, tr.Stats.RolloutTokens)

	tr.Nodes[3].Reward = 1 // both finished rollouts return 1
	tr.RecordOutcomes(1)
	assert.False(t, tr.Stats.OutcomesDiffer)
	assert.Equal(t, 2, tr.Stats.FinishedRollouts)

	empty := &tree.Tree{Nodes: []tree.Node{{Parent: -1}}}
	empty.RecordOutcomes(1)
	assert.False(t, empty.Stats.OutcomesDiffer)
	assert.Nil(t, empty.Stats.RolloutTokens)
}

func trues(n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = true
	}
	return out
}
