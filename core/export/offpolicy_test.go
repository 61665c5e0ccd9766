package export_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree"
)

// resumedTree is responseTree as a resume leaves it (core/collect.WithResume):
// the nodes an earlier collection generated, a (1), b (2), a's leaves 3 and 4,
// marked OffPolicy; b's leaf 6 generated after the resume (leaf 5 failed).
func resumedTree() *tree.Tree {
	tr := responseTree()
	for _, id := range []int{1, 2, 3, 4} {
		tr.Nodes[id].OffPolicy = true
	}
	return tr
}

// TestOffPolicyTokens: each actor record's off_policy_tokens counts the tokens
// of its response (from response_start on) that off-policy edges of its path
// hold, in both layouts, plain, with shared tokens and in the records blob; a
// tree never resumed and explicit spans have none.
func TestOffPolicyTokens(t *testing.T) {
	tr := resumedTree()
	require.NoError(t, tr.Validate())
	b := mustPrepare(t, tr, prepare.DirectBranchTd{})
	type want struct{ node, start, off int }
	cases := map[export.Layout][]want{
		export.LayoutSpans: {
			{1, 3, 2}, // [10 11]: all of it
			{2, 3, 1},
			{3, 6, 2},  // [31 32]
			{3, 10, 1}, // [33]
			{4, 5, 1},
			{6, 4, 0}, // generated after the resume
		},
		export.LayoutPaths: {
			{3, 3, 8}, // 10 11 7 31 32 8 9 33: every edge off-policy
			{4, 5, 1},
			{6, 3, 1}, // 20 (b's edge, off-policy) then 40 (new)
		},
	}
	for layout, wants := range cases {
		t.Run(string(layout), func(t *testing.T) {
			opts := export.Options{Layout: layout}
			f := mustEncode(t, b, 0, opts)
			require.Equal(t, len(wants), f.NumActor())
			offs := make([]int64, len(wants))
			for i, w := range wants {
				r := f.ActorRecord(i)
				assert.Equal(t, w.node, r.NodeID, "record %d", i)
				assert.Equal(t, w.start, r.ResponseStart, "record %d", i)
				assert.Equal(t, w.off, r.OffPolicyTokens, "record %d", i)
				offs[i] = int64(w.off)
			}
			assert.Equal(t, offs, f.Actor.OffPolicyTokens)

			fs, st, err := export.EncodeShared(b, 0, opts)
			require.NoError(t, err)
			assert.Equal(t, offs, fs.Actor.OffPolicyTokens)
			blob := export.RecordsBlob(fs, st)
			sec, ok := blob.Sections()["off_policy_tokens"]
			require.True(t, ok, "the records blob has an off_policy_tokens section")
			assert.Equal(t, offs, i64s(blob.Buffer()[sec.Offset:sec.Offset+8*sec.Count]))

			fresh := mustEncode(t, mustPrepare(t, responseTree(), prepare.DirectBranchTd{}), 0, opts)
			assert.Equal(t, make([]int64, fresh.NumActor()), fresh.Actor.OffPolicyTokens, "a tree never resumed")
		})
	}
	assert.Contains(t, export.ActorKeys, "off_policy_tokens")
}

// A record with explicit spans has no tree, so nothing off-policy.
func TestOffPolicyTokensExplicitSpans(t *testing.T) {
	span := tree.PackedSequence{Tokens: []uint32{10, 20, 30}, Trainable: []bool{false, true, true}, Logprobs: []float64{0, -0.5, -1}}
	b := &prepare.Batch{Actor: []prepare.ActorSample{prepare.NewActorSample(1, 0, "DirectBranchTd", 0.4, []tree.PackedSequence{span})}}
	assert.Zero(t, mustEncode(t, b, 0, export.Options{}).ActorRecord(0).OffPolicyTokens)
}
