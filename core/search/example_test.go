package search_test

import (
	"fmt"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/tree"
)

// The scheduler vector of ALGORITHM.md §6.2: after a warmup of four chains,
// one round of Selective(budget=32, warmup=4, score="value_refinement")
// branches twice from each of the two chains whose critic was furthest from
// their outcome. (gradient_variance, and the default critic_adaptive, pick the root first
// on this tree: docs/signal.md §S.3.)
func Example() {
	generated := func(n int) []tree.PackedSequence {
		s := tree.PackedSequence{Tokens: make([]uint32, n), Trainable: make([]bool, n), Logprobs: make([]float64, n)}
		for i := range s.Trainable {
			s.Trainable[i] = true
		}
		return []tree.PackedSequence{s}
	}
	value := func(v float64) *float64 { return &v }
	prompt := tree.PackedSequence{Tokens: []uint32{1, 2}, Trainable: []bool{false, false}, Logprobs: []float64{0, 0}}
	t := tree.New("vector-6.2", prompt, "Q")
	t.Root().Critic = value(0.5)
	for _, chain := range []struct{ critic, reward float64 }{{0.9, 1}, {0.2, 0}, {0.5, 1}, {0.45, 0}} {
		c, _ := t.AddChild(0, tree.Node{Spans: generated(256), Critic: value(chain.critic)})
		t.AddChild(c, tree.Node{Spans: generated(30), Done: true, Reward: chain.reward})
	}

	cfg := search.Selective(32, 4)
	cfg.Score = search.ScoreValueRefinement
	reward := prepare.DefaultRewardConfig()
	limits := search.DefaultLimits()
	scores, _ := search.Scores(t, cfg, reward, limits)
	for _, s := range scores {
		fmt.Printf("node %d: V*_sel %.3f, gain %.7f\n", s.Node, s.VStarSel, s.Gain)
	}
	picks, err := search.Plan(t, cfg, reward, limits, 1, cfg.Budget-cfg.Warmup)
	if err != nil {
		panic(err)
	}
	for j, p := range picks {
		fmt.Printf("pick %d: node %d (gain %.7f), seed %#x\n", j, p.Node, p.Gain, search.BranchSeed(cfg.Seed, t.ProblemID, 1, j))
	}
	// Output:
	// node 0: V*_sel 0.505, gain 0.0066664
	// node 1: V*_sel 0.950, gain 0.0045833
	// node 3: V*_sel 0.100, gain 0.0100000
	// node 5: V*_sel 0.750, gain 0.0312500
	// node 7: V*_sel 0.225, gain 0.0271875
	// pick 0: node 5 (gain 0.0312500), seed 0x8a740a05e2609fac
	// pick 1: node 7 (gain 0.0271875), seed 0x7575cc237d627858
	// pick 2: node 5 (gain 0.0150463), seed 0x81f07d2e78a723c3
	// pick 3: node 7 (gain 0.0134375), seed 0x5775fd588e1409a0
}
