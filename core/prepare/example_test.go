package prepare_test

import (
	"fmt"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree"
)

// The tree of ALGORITHM.md §6.1 at the default kappa = 1: the root has a
// branch a with three correct answers and a branch b with one wrong one.
func Example() {
	one := func(tok uint32) []tree.PackedSequence {
		return []tree.PackedSequence{{Tokens: []uint32{tok}, Trainable: []bool{true}, Logprobs: []float64{-0.1}}}
	}
	half := 0.5
	prompt := tree.PackedSequence{Tokens: []uint32{1}, Trainable: []bool{false}, Logprobs: []float64{0}}
	t := tree.New("fig61", prompt, "Q")
	t.Root().Critic = &half
	a, _ := t.AddChild(0, tree.Node{Spans: one(10), Text: "a", Critic: &half})
	b, _ := t.AddChild(0, tree.Node{Spans: one(20), Text: "b", Critic: &half})
	for range 3 {
		t.AddChild(a, tree.Node{Spans: one(30), Done: true, Reward: 1})
	}
	t.AddChild(b, tree.Node{Spans: one(40), Done: true, Reward: 0})

	batch, err := prepare.Prepare(t, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	if err != nil {
		panic(err)
	}
	for _, s := range batch.Actor[:3] {
		fmt.Printf("A(%d->%d) = %+.6f\n", s.GroupID, s.NodeID, s.Weight)
	}
	for _, c := range batch.Critic {
		fmt.Printf("target %q = %.6f\n", c.Context(), c.Target)
	}
	// Output:
	// A(0->1) = +0.333333
	// A(0->2) = -0.291667
	// A(1->3) = +0.125000
	// target "Q" = 0.562500
	// target "Qa" = 1.000000
	// target "Qb" = 0.000000
}
