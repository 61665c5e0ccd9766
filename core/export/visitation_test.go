package export_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

// VisitationWeights multiplies each record's advantage by its sample's
// visitation factor; off, the advantage is the weight itself. The threshold
// keeps comparing the unweighted weight, so both exports keep the same edges.
func TestVisitationWeightsOption(t *testing.T) {
	tr := treetest.Figure61()
	b := mustPrepare(t, tr, prepare.DirectBranchTd{})
	for _, minAbs := range []float64{0, 0.2} {
		plain := mustEncode(t, b, 0, export.Options{MinAbsAdvantage: minAbs})
		weighted := mustEncode(t, b, 0, export.Options{MinAbsAdvantage: minAbs, VisitationWeights: true})
		require.Equal(t, plain.NumActor(), weighted.NumActor())
		assert.Equal(t, plain.Actor.NodeID, weighted.Actor.NodeID)
		for i := range plain.NumActor() {
			a := b.Actor[plain.Actor.Sample[i]]
			assert.Equal(t, a.Weight, plain.Actor.Advantage[i])
			assert.InDelta(t, a.Weight*a.Visitation, weighted.Actor.Advantage[i], 1e-15)
		}
	}
	// The §6.1 numbers at kappa = 1: A(s->a) = 1/3 with w = 2, A(a->leaf) = 1/8 with w = 2/3.
	f := mustEncode(t, b, 0, export.Options{VisitationWeights: true})
	adv := map[int64]float64{}
	for i, id := range f.Actor.NodeID {
		adv[id] = f.Actor.Advantage[i]
	}
	assert.InDelta(t, 2.0/3, adv[1], 1e-9)
	assert.InDelta(t, 0.125*2/3, adv[4], 1e-9)
	assert.InDelta(t, -0.5, adv[6], 1e-9)

	r, err := export.FromTree(tr, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{}, 0, export.Options{VisitationWeights: true})
	require.NoError(t, err)
	assert.Equal(t, f.Actor.Advantage, r.Flat.Actor.Advantage)
}

func TestBatchColumnsVisitation(t *testing.T) {
	b := mustPrepare(t, treetest.Figure61(), prepare.DirectBranchTd{})
	w, err := export.BatchColumns(b)
	require.NoError(t, err)
	got := f64s(sections(w)["actor_visitation"])
	require.Len(t, got, len(b.Actor))
	for i := range b.Actor {
		assert.Equal(t, b.Actor[i].Visitation, got[i])
	}
	assert.InDeltaSlice(t, []float64{2, 2, 2.0 / 3, 2.0 / 3, 2.0 / 3, 2}, got, 1e-12)
}
