package prepare_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

// treeBaselineVector is docs/signal.md §T.3's second tree: the root has
// children a, b and c; a has terminal children with rewards 1 and 0; b has a
// terminal child with reward 1 and a cancelled continuation x (a nonterminal
// node with no child); c is terminal with reward 1.
func treeBaselineVector() *tree.Tree {
	t := tree.New("tgb", cond(1, 2), "s")
	t.Root().Critic = ptr(0.5)
	node := func(parent int, text string, done bool, reward float64) int {
		id, err := t.AddChild(parent, tree.Node{Spans: []tree.PackedSequence{gen(uint32(10 + len(t.Nodes)))}, Text: text,
			Done: done, Reward: reward, Critic: map[bool]*float64{false: ptr(0.5), true: nil}[done]})
		if err != nil {
			panic(err)
		}
		return id
	}
	a := node(0, "a", false, 0)
	b := node(0, "b", false, 0)
	node(0, "c", true, 1)
	node(a, "a1", true, 1)
	node(a, "a2", true, 0)
	node(b, "b1", true, 1)
	node(b, "x", false, 0)
	return t
}

// The test vectors of docs/signal.md §T.3, by hand: V̂(s) is the reach-weighted
// mean of the leaf returns under s, and A(s->c) = V̂(c) - V̂(root).
func TestTreeGroupBaselineVectors(t *testing.T) {
	tests := []struct {
		name      string
		tree      *tree.Tree
		adv       []float64 // by node id, the root's entry unused
		leafMean  []float64
		groupMean float64
		leaves    []int
	}{
		{
			// §6.1: π̂(a) = π̂(b) = 1/2, a's leaves 1/6 each, b's leaf 1/2, so
			// V̂(root) = (3·1/6·1 + 1/2·0) / 1 = 1/2 (GroupBaseline's plain
			// leaf mean is 3/4).
			name:      "figure61",
			tree:      treetest.Figure61(),
			adv:       []float64{0, 0.5, -0.5, 0.5, 0.5, 0.5, -0.5},
			leafMean:  []float64{0, 1, 0, 1, 1, 1, 0},
			groupMean: 0.5,
			leaves:    []int{0, 3, 1, 1, 1, 1, 1},
		},
		{
			// π̂: a, b, c 1/3; a1, a2, b1, x 1/6. The terminal leaves carry
			// mass 1/6 + 1/6 + 1/6 + 1/3 = 5/6 (x has no return), so
			// V̂(root) = (1/6 + 1/6 + 1/3) / (5/6) = 0.8; V̂(a) = 0.5, V̂(b) = 1.
			name:      "uneven with a cancelled continuation",
			tree:      treeBaselineVector(),
			adv:       []float64{0, -0.3, 0.2, 0.2, 0.2, -0.8, 0.2, 0},
			leafMean:  []float64{0, 0.5, 1, 1, 1, 0, 1, 0},
			groupMean: 0.8,
			leaves:    []int{0, 2, 1, 1, 1, 1, 1, 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			batch, err := prepare.Prepare(tc.tree, prepare.DefaultRewardConfig(), prepare.TreeGroupBaseline{})
			require.NoError(t, err)
			require.Len(t, batch.Actor, len(tc.adv)-1, "one sample per edge")
			for _, a := range batch.Actor {
				assert.Equal(t, "TreeGroupBaseline", a.Estimator)
				assert.InDelta(t, tc.adv[a.NodeID], a.Weight, 1e-12, "advantage of node %d", a.NodeID)
				d := a.Diagnostics.Map()
				assert.InDelta(t, tc.leafMean[a.NodeID], d["leaf_mean"], 1e-12, "leaf_mean of node %d", a.NodeID)
				assert.InDelta(t, tc.groupMean, d["group_mean"], 1e-12)
				assert.Equal(t, float64(tc.leaves[a.NodeID]), d["leaves"], "leaves of node %d", a.NodeID)
			}
		})
	}
}

// On Independent chains every leaf has reach 1/n: the tree baseline is
// GroupBaseline (GRPO) exactly, whatever the critic and kappa.
func TestTreeGroupBaselineIsGRPOOnChains(t *testing.T) {
	tr := treetest.Chains([]float64{1, 0, 1, 1, 0, 0.25}, 3, 2, 0.7)
	cfg := prepare.DefaultRewardConfig()
	cfg.CriticWeight = 3
	gb, err := prepare.Prepare(tr, cfg, prepare.GroupBaseline{})
	require.NoError(t, err)
	tgb, err := prepare.Prepare(tr, cfg, prepare.TreeGroupBaseline{})
	require.NoError(t, err)
	require.Len(t, tgb.Actor, len(gb.Actor))
	for i := range gb.Actor {
		assert.InDelta(t, gb.Actor[i].Weight, tgb.Actor[i].Weight, 1e-12, "node %d", gb.Actor[i].NodeID)
	}
}

func TestEstimatorByNameTreeGroupBaseline(t *testing.T) {
	est, err := prepare.EstimatorByName("TreeGroupBaseline")
	require.NoError(t, err)
	assert.Equal(t, prepare.TreeGroupBaseline{}, est)
	_, err = prepare.EstimatorByName("TreeBaseline")
	require.ErrorContains(t, err, "TreeGroupBaseline")
}
