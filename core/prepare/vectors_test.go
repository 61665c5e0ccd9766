package prepare_test

import (
	"math"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

var (
	gen  = treetest.Generated
	cond = treetest.Conditioning
)

func ptr(v float64) *float64 { return &v }

func TestFigure61Vectors(t *testing.T) {
	const s, a, b, aLeaf, bLeaf = 0, 1, 2, 3, 6
	tests := []struct {
		kappa                                      float64
		vA, vB, gS, vS, advSA, advSB, advAL, advBL float64
	}{
		{0, 1.000000, 0.000000, 0.500000, 0.500000, 0.500000, -0.500000, 0.000000, 0.000000},
		{1, 0.875000, 0.250000, 0.562500, 0.541667, 0.333333, -0.291667, 0.125000, -0.250000},
		{2, 0.800000, 0.333333, 0.566667, 0.533333, 0.266667, -0.200000, 0.200000, -0.333333},
	}
	for _, tc := range tests {
		t.Run(fmtKappa(tc.kappa), func(t *testing.T) {
			cfg := prepare.DefaultRewardConfig()
			cfg.CriticWeight = tc.kappa
			tr := treetest.Figure61()
			v, err := prepare.Values(tr, cfg)
			require.NoError(t, err)
			const tol = 1e-6
			assert.InDelta(t, tc.vA, v.Refined[a], tol)
			assert.InDelta(t, tc.vB, v.Refined[b], tol)
			assert.InDelta(t, tc.gS, v.Backup[s], tol)
			assert.InDelta(t, tc.vS, v.Refined[s], tol)
			assert.Equal(t, []int{2, 3, 1, 0, 0, 0, 0}, v.Count)
			for id := 3; id <= 6; id++ {
				assert.Zero(t, v.Refined[id], "terminal V* = 0")
			}

			batch, err := prepare.Prepare(tr, cfg, prepare.DirectBranchTd{})
			require.NoError(t, err)
			adv := map[int]float64{}
			for _, x := range batch.Actor {
				adv[x.NodeID] = x.Weight
				assert.Equal(t, "DirectBranchTd", x.Estimator)
				assert.Equal(t, tr.Nodes[x.NodeID].Parent, x.GroupID)
			}
			require.Len(t, adv, 6, "one sample per edge")
			assert.InDelta(t, tc.advSA, adv[a], tol)
			assert.InDelta(t, tc.advSB, adv[b], tol)
			for id := aLeaf; id < bLeaf; id++ {
				assert.InDelta(t, tc.advAL, adv[id], tol)
			}
			assert.InDelta(t, tc.advBL, adv[bLeaf], tol)

			targets := map[int]float64{}
			for _, c := range batch.Critic {
				targets[c.NodeID] = c.Target
			}
			assert.Equal(t, map[int]float64{a: 1, b: 0, s: v.Backup[s]}, targets)
			assert.Equal(t, "s", batch.Critic[0].Context())
			assert.Equal(t, "sa", batch.Critic[1].Context())

			// U1 on the example path s -> a -> leaf, U2 at the root.
			assert.InDelta(t, 1-v.Refined[s], adv[a]+adv[aLeaf], 1e-9)
			assert.InDelta(t, 2*tc.kappa*(v.Backup[s]-0.5)/(tc.kappa+2), adv[a]+adv[b], 1e-9)
		})
	}
}

func fmtKappa(k float64) string { return "kappa=" + string(rune('0'+int(k))) }

// TestDirectVersusLeafAverage is U4: the leaf average of the §6.1 tree is
// 0.75, while the direct-branch value of the root at kappa = 0 is 0.5.
func TestDirectVersusLeafAverage(t *testing.T) {
	cfg := prepare.DefaultRewardConfig()
	cfg.CriticWeight = 0
	v, err := prepare.Values(treetest.Figure61(), cfg)
	require.NoError(t, err)
	leafSum, leaves := 0.0, 0
	for id, nd := range v.Tree.Nodes {
		if nd.Terminal() {
			leafSum += v.Reward[id]
			leaves++
		}
	}
	assert.Equal(t, 0.75, leafSum/float64(leaves))
	assert.Equal(t, 0.5, v.Refined[0])
}

func TestKappaHat(t *testing.T) {
	v, err := prepare.Values(treetest.Figure61(), prepare.DefaultRewardConfig())
	require.NoError(t, err)
	// Targets: a (G=1, n=3), b (G=0, n=1), s (G=0.5625, n=2); p(1-p) is 0 at a
	// and b, 0.24609375 at s.
	sigma2 := 0.24609375 / 3
	tau2 := (0.25 - sigma2/3 + 0.25 - sigma2 + 0.0625*0.0625 - sigma2/2) / 3
	k, ok := v.KappaHat()
	require.True(t, ok)
	assert.InDelta(t, sigma2/tau2, k, 1e-12)
}

// TestLargeKappaLimit is the other end of U3: as kappa grows, A(s->c)
// approaches the PPO TD(0) error r + V_phi(c) - V_phi(s) (V_phi(leaf) = 0).
func TestLargeKappaLimit(t *testing.T) {
	prev := map[int]float64{}
	for _, kappa := range []float64{1, 4, 16, 64} {
		cfg := prepare.DefaultRewardConfig()
		cfg.CriticWeight = kappa
		tr := treetest.Figure61()
		b, err := prepare.Prepare(tr, cfg, prepare.DirectBranchTd{})
		require.NoError(t, err)
		for _, a := range b.Actor {
			nd := tr.Nodes[a.NodeID]
			vc := 0.0
			if nd.Critic != nil {
				vc = *nd.Critic
			}
			gap := math.Abs(a.Weight - (nd.Reward + vc - *tr.Nodes[nd.Parent].Critic))
			if p, ok := prev[a.NodeID]; ok {
				assert.Less(t, gap, p, "kappa %g node %d", kappa, a.NodeID)
			}
			prev[a.NodeID] = gap
		}
	}
	for id, gap := range prev {
		assert.Less(t, gap, 0.05, "node %d at kappa 64", id)
	}
}
