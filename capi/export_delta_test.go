package main

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

// undelta rebuilds every actor record's tokens from deltaTokens' encoding, the way
// python/focus_go/export.py does.
func undelta(base, offsets []int64, delta []uint32) [][]uint32 {
	out := make([][]uint32, len(base))
	for i := range base {
		own := delta[offsets[i]:offsets[i+1]]
		if base[i] >= 0 {
			out[i] = append(slices.Clone(out[base[i]]), own...)
		} else {
			out[i] = slices.Clone(own)
		}
	}
	return out
}

func TestDeltaTokensRoundTrip(t *testing.T) {
	searched, err := prepare.Prepare(treetest.Search(64, 4, 16, 3), prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	span := func(tokens ...uint32) tree.PackedSequence {
		return tree.PackedSequence{Tokens: tokens, Trainable: make([]bool, len(tokens)), Logprobs: make([]float64, len(tokens))}
	}
	// Python-made samples: node ids and groups that say nothing true about prefixes.
	explicit := &prepare.Batch{Actor: []prepare.ActorSample{
		prepare.NewActorSample(1, 0, "x", 0.5, []tree.PackedSequence{span(1, 2, 3)}),
		prepare.NewActorSample(2, 1, "x", 0.5, []tree.PackedSequence{span(9, 9)}),       // parent's record is no prefix
		prepare.NewActorSample(3, 1, "x", 0.5, []tree.PackedSequence{span(1, 2, 3, 4)}), // it is
		prepare.NewActorSample(1, 0, "x", 0.5, []tree.PackedSequence{span()}),
	}}
	tests := []struct {
		name      string
		batch     *prepare.Batch
		minAbs    float64
		wantDelta bool // the encoding must be smaller than the full contexts
	}{
		{"searched tree", searched, 0, true},
		{"filtered by min_abs_advantage", searched, 0.05, false},
		{"explicit samples", explicit, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := export.Encode(tt.batch, 0, export.Options{MinAbsAdvantage: tt.minAbs})
			require.NoError(t, err)
			base, offsets, delta := deltaTokens(tt.batch, &f.Actor)
			require.Len(t, offsets, f.NumActor()+1)
			got := undelta(base, offsets, delta)
			for i := range f.NumActor() {
				want := f.Actor.Tokens[f.Actor.Offsets[i]:f.Actor.Offsets[i+1]]
				assert.Equal(t, []uint32(want), got[i], "record %d", i)
			}
			if tt.wantDelta {
				assert.Less(t, len(delta)*4, len(f.Actor.Tokens), "a searched tree's contexts should cross once")
			}
		})
	}
}
