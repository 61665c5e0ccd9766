package export_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

// unshare rebuilds every actor record's tokens from SharedTokens, the way
// python/focus_go/export.py does.
func unshare(t *testing.T, st *export.SharedTokens) [][]uint32 {
	out := make([][]uint32, len(st.Base))
	for i, b := range st.Base {
		require.Less(t, b, int64(i), "record %d's base must come before it", i)
		own := st.Tokens[st.Offsets[i]:st.Offsets[i+1]]
		if b >= 0 {
			out[i] = append(slices.Clone(out[b]), own...)
		} else {
			out[i] = slices.Clone(own)
		}
	}
	return out
}

// requireSameRecords checks that EncodeShared describes exactly Encode's
// records, and returns its tokens and the number Encode stores.
func requireSameRecords(t *testing.T, b *prepare.Batch, opts export.Options) (*export.SharedTokens, int) {
	full, err := export.Encode(b, 3, opts)
	require.NoError(t, err)
	shared, st, err := export.EncodeShared(b, 3, opts)
	require.NoError(t, err)
	require.Len(t, st.Offsets, full.NumActor()+1)
	got := unshare(t, st)
	for i := range full.NumActor() {
		require.Equal(t, full.Actor.Tokens[full.Actor.Offsets[i]:full.Actor.Offsets[i+1]], got[i], "record %d", i)
	}
	require.Nil(t, shared.Actor.Tokens)
	total := len(full.Actor.Tokens)
	full.Actor.Tokens, full.Actor.Offsets = nil, nil
	require.Equal(t, full, shared, "every other column is Encode's")
	return st, total
}

func TestEncodeSharedMatchesEncode(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 2))
	for i := range 60 {
		tr := treetest.Random(r, treetest.Options{Rollouts: 1 + r.IntN(16), MaxSpans: 4, PFailed: 0.2, PTruncated: 0.2, PCancelled: 0.1, PNoCritic: 0.3})
		for _, est := range []prepare.Estimator{prepare.DirectBranchTd{}, prepare.GroupBaseline{}} {
			b, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), est)
			require.NoError(t, err, "tree %d", i)
			for _, minAbs := range []float64{0, 0.05, 0.3} {
				requireSameRecords(t, b, export.Options{MinAbsAdvantage: minAbs})
			}
		}
	}
}

func TestEncodeSharedStoresTheTreeOnce(t *testing.T) {
	tr := treetest.Search(64, 4, 16, 3)
	b, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	st, total := requireSameRecords(t, b, export.Options{})
	treeTokens := 0
	for id := range tr.Nodes {
		treeTokens += tr.Nodes[id].EdgeLen()
	}
	// Only the root's children repeat the prompt; everything else is stored once.
	assert.Less(t, len(st.Tokens), treeTokens+len(tr.Nodes[0].Children)*tr.Nodes[0].EdgeLen()+1)
	assert.Less(t, 4*len(st.Tokens), total, "contexts must not be repeated per record")
}

func TestEncodeSharedExplicitSamples(t *testing.T) {
	span := func(tokens ...uint32) tree.PackedSequence {
		return tree.PackedSequence{Tokens: tokens, Trainable: make([]bool, len(tokens)), Logprobs: make([]float64, len(tokens))}
	}
	// Python-made samples: node ids and groups that say nothing true about prefixes.
	b := &prepare.Batch{Actor: []prepare.ActorSample{
		prepare.NewActorSample(1, 0, "x", 0.5, []tree.PackedSequence{span(1, 2, 3)}),
		prepare.NewActorSample(2, 1, "x", 0.5, []tree.PackedSequence{span(9, 9)}),                   // node 1's record is no prefix
		prepare.NewActorSample(3, 1, "x", 0.5, []tree.PackedSequence{span(1, 2, 3, 4), span(1, 2)}), // the first is; its second span is not
		prepare.NewActorSample(1, 0, "x", 0.5, []tree.PackedSequence{span()}),
	}}
	st, _ := requireSameRecords(t, b, export.Options{})
	assert.Equal(t, []int64{-1, -1, 0, -1, -1}, st.Base)
	assert.Equal(t, []uint32{1, 2, 3, 9, 9, 4, 1, 2}, st.Tokens)
}
