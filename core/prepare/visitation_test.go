package prepare_test

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

// The visitation test vector of docs/signal.md: the §6.1 tree (s -> a, b; a
// has 3 terminal children, b has 1) has R = 4 leaves, π̂(a) = π̂(b) = 1/2,
// π̂(a's leaves) = 1/6, π̂(b's leaf) = 1/2, so w = R·π̂ is 2, 2, 2/3 (x3), 2.
func TestVisitationFigure61(t *testing.T) {
	tr := treetest.Figure61()
	v, err := prepare.Values(tr, prepare.DefaultRewardConfig())
	require.NoError(t, err)
	w := prepare.Visitation(v)
	want := []float64{0, 2, 2, 2.0 / 3, 2.0 / 3, 2.0 / 3, 2}
	assert.InDeltaSlice(t, want, w, 1e-12)

	batch, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	require.Len(t, batch.Actor, 6)
	for _, a := range batch.Actor {
		assert.InDelta(t, want[a.NodeID], a.Visitation, 1e-12, "node %d", a.NodeID)
	}
	// Weight keeps its meaning (the advantage of §6.1, kappa = 1).
	assert.InDelta(t, 0.333333, batch.Actor[0].Weight, 1e-6)
	// The weighted gradient sum at each depth: the factors of the edges at
	// depth 1 and at depth 2 each sum to R = 4.
	assert.InDelta(t, 4, w[1]+w[2], 1e-12)
	assert.InDelta(t, 4, w[3]+w[4]+w[5]+w[6], 1e-12)

	gb, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), prepare.GroupBaseline{})
	require.NoError(t, err)
	for _, a := range gb.Actor {
		assert.InDelta(t, want[a.NodeID], a.Visitation, 1e-12, "GroupBaseline node %d", a.NodeID)
	}
}

func TestVisitationIndependentChainsAreOne(t *testing.T) {
	tr := treetest.Chains([]float64{1, 0, 1, 1, 0}, 3, 2, 0.5)
	batch, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	require.Len(t, batch.Actor, 15)
	for _, a := range batch.Actor {
		assert.Equal(t, 1.0, a.Visitation, "node %d", a.NodeID)
	}
}

// On any tree (failures, truncation, cancellation included), the factors of a
// node's completed children sum to the node's own factor (R at the root):
// each level of the tree carries the probability mass that reached it.
func TestVisitationConservesMass(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 21))
		tr := treetest.Random(r, treetest.Options{Rollouts: 3 + int(seed%10), PFailed: 0.15, PTruncated: 0.1, PCancelled: 0.1})
		v, err := prepare.Values(tr, prepare.DefaultRewardConfig())
		require.NoError(t, err)
		w := prepare.Visitation(v)
		leaves := 0
		for id := 1; id < len(tr.Nodes); id++ {
			if !v.Excluded[id] && v.Count[id] == 0 {
				leaves++
			}
		}
		for id := range tr.Nodes {
			if v.Excluded[id] {
				assert.Zero(t, w[id])
				continue
			}
			if v.Count[id] == 0 {
				continue
			}
			sum := 0.0
			for _, c := range tr.Nodes[id].Children {
				if !v.Excluded[c] {
					assert.Positive(t, w[c])
					sum += w[c]
				}
			}
			own := w[id]
			if id == 0 {
				own = float64(leaves)
			}
			assert.InDelta(t, own, sum, 1e-9, "seed %d node %d", seed, id)
		}
	}
}

func TestVisitationJSON(t *testing.T) {
	b, err := prepare.DecodeBatch([]byte(`{"actor": [
		{"node_id": 1, "group_id": 0, "estimator": "Custom", "weight": 0.5, "spans": []},
		{"node_id": 2, "group_id": 0, "estimator": "Custom", "weight": 0.5, "visitation": 0.25, "spans": []}]}`))
	require.NoError(t, err)
	assert.Equal(t, 1.0, b.Actor[0].Visitation, "absent: 1")
	assert.Equal(t, 0.25, b.Actor[1].Visitation)
	data, err := json.Marshal(b.Actor[1])
	require.NoError(t, err)
	assert.Contains(t, string(data), `"visitation":0.25`)

	for _, bad := range []string{`-1`, `"x"`} {
		_, err := prepare.DecodeBatch([]byte(`{"actor": [{"node_id": 1, "group_id": 0, "estimator": "C", "weight": 0, "visitation": ` + bad + `, "spans": []}]}`))
		assert.Error(t, err, bad)
	}
}
