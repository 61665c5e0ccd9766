package export_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

// idsText is a Decoder that writes the ids it is given, and whether it was
// asked to skip special tokens.
type idsText struct{ calls int }

func (d *idsText) Decode(ids []uint32, skipSpecial bool) (string, error) {
	d.calls++
	if skipSpecial {
		return fmt.Sprint(ids, " skip"), nil
	}
	return fmt.Sprint(ids), nil
}

type failingText struct{}

func (failingText) Decode([]uint32, bool) (string, error) {
	return "", status.Errorf(status.Backend, "tokenizer: boom")
}

// responseTree is Figure61 with what the trainer-ready fields must see through:
// a shaping reward 0.25 on a's edge, leaf 3's edge a mixed span (glue 7, then
// generated 31 32), a tool result (8 9) and a generated 33, leaf 4 truncated and
// leaf 5 failed.
func responseTree() *tree.Tree {
	tr := treetest.Figure61()
	tr.Nodes[1].Reward = 0.25
	tr.Nodes[3].Spans = []tree.PackedSequence{
		treetest.Conditioning(7).AppendGenerated(treetest.Generated(31, 32)), treetest.Conditioning(8, 9), treetest.Generated(33),
	}
	tr.Nodes[4].Done, tr.Nodes[4].Truncated, tr.Nodes[4].Reward = false, true, 0
	tr.Nodes[5].Done, tr.Nodes[5].Failed = false, "env: boom"
	return tr
}

// TestTrainerReadyFields: each actor record's response start (its first trained
// token), response text (the tokens from there, decoded once with the given
// codec and skip flag), return (the rewards from the root through its edge) and
// finished flag, on a hand-built tree, in both layouts, plain and with shared
// tokens.
func TestTrainerReadyFields(t *testing.T) {
	tr := responseTree()
	require.NoError(t, tr.Validate())
	b := mustPrepare(t, tr, prepare.DirectBranchTd{})
	str := func(s string) *string { return &s }

	type want struct {
		node     int
		start    int
		text     string
		ret      float64
		finished bool
	}
	cases := map[export.Layout][]want{
		export.LayoutSpans: {
			{1, 3, "[10 11] skip", 0.25, false},
			{2, 3, "[20] skip", 0, false},
			{3, 6, "[31 32] skip", 1.25, true}, // after the glue token 7
			{3, 10, "[33] skip", 1.25, true},   // the edge's second generated span
			{4, 5, "[30] skip", 0.25, true},    // truncated: finished
			{6, 4, "[40] skip", 0, true},
		},
		export.LayoutPaths: {
			{3, 3, "[10 11 7 31 32 8 9 33] skip", 1.25, true},
			{4, 5, "[30] skip", 0.25, true},
			{6, 3, "[20 40] skip", 0, true},
		},
	}
	for layout, wants := range cases {
		t.Run(string(layout), func(t *testing.T) {
			dec := &idsText{}
			opts := export.Options{Layout: layout, Text: dec, SkipSpecialTokens: true}
			f := mustEncode(t, b, 0, opts)
			require.Equal(t, len(wants), f.NumActor())
			assert.Equal(t, f.NumActor(), dec.calls, "one decode per record")
			for i, w := range wants {
				r := f.ActorRecord(i)
				assert.Equal(t, w.node, r.NodeID, "record %d", i)
				assert.Equal(t, w.start, r.ResponseStart, "record %d", i)
				assert.Equal(t, slices.Index(r.LossMask, true), r.ResponseStart, "record %d: the first trained token", i)
				assert.Equal(t, str(w.text), r.ResponseText, "record %d", i)
				assert.Equal(t, fmt.Sprint(r.Tokens[r.ResponseStart:], " skip"), *r.ResponseText, "record %d: its tokens from the start", i)
				assert.Equal(t, w.ret, r.Return, "record %d", i)
				assert.Equal(t, w.finished, r.Finished, "record %d", i)
			}

			// The shared-token encoding carries the same columns.
			fs, _, err := export.EncodeShared(b, 0, opts)
			require.NoError(t, err)
			assert.Equal(t, f.Actor.ResponseStart, fs.Actor.ResponseStart)
			assert.Equal(t, f.Actor.Return, fs.Actor.Return)
			assert.Equal(t, f.Actor.Finished, fs.Actor.Finished)
			assert.Equal(t, f.Actor.TextOffsets, fs.Actor.TextOffsets)
			assert.Equal(t, string(f.Actor.Text), string(fs.Actor.Text))

			// Without a codec: no text, the rest unchanged.
			plain := mustEncode(t, b, 0, export.Options{Layout: layout})
			assert.Nil(t, plain.Actor.TextOffsets)
			assert.Equal(t, f.Actor.ResponseStart, plain.Actor.ResponseStart)
			assert.Equal(t, f.Actor.Return, plain.Actor.Return)
			assert.Nil(t, plain.ActorRecord(0).ResponseText)
			kept := mustEncode(t, b, 0, export.Options{Layout: layout, Text: &idsText{}})
			assert.Equal(t, str(strings.TrimSuffix(wants[0].text, " skip")), kept.ActorRecord(0).ResponseText, "special tokens kept")
		})
	}
}

// A record with explicit spans has no tree: return 0, not finished; its
// response still starts at its first trained token.
func TestTrainerReadyFieldsExplicitSpans(t *testing.T) {
	span := tree.PackedSequence{Tokens: []uint32{10, 20, 30}, Trainable: []bool{false, true, true}, Logprobs: []float64{0, -0.5, -1}}
	b := &prepare.Batch{Actor: []prepare.ActorSample{prepare.NewActorSample(1, 0, "DirectBranchTd", 0.4, []tree.PackedSequence{span})}}
	r := mustEncode(t, b, 0, export.Options{Text: &idsText{}}).ActorRecord(0)
	assert.Equal(t, 1, r.ResponseStart)
	assert.Equal(t, "[20 30]", *r.ResponseText)
	assert.Equal(t, 0.0, r.Return)
	assert.False(t, r.Finished)
}

// A codec that fails fails the export, naming the record.
func TestTrainerReadyTextError(t *testing.T) {
	b := mustPrepare(t, responseTree(), prepare.DirectBranchTd{})
	for _, layout := range []export.Layout{export.LayoutSpans, export.LayoutPaths} {
		_, err := export.Encode(b, 0, export.Options{Layout: layout, Text: failingText{}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "export: decode the response text of actor record 0")
		assert.Contains(t, err.Error(), "tokenizer: boom")
	}
}

// The tree export names the finished rollouts (whatever records min_abs_advantage
// drops) and the tree's generated tokens beside the records.
func TestTreeRecordsRollouts(t *testing.T) {
	tr := responseTree()
	r, err := export.FromTree(tr, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{}, 0, export.Options{MinAbsAdvantage: 1e9})
	require.NoError(t, err)
	require.Zero(t, r.Flat.NumActor())
	meta := r.Blob().Meta
	assert.Equal(t, []tree.Rollout{
		{NodeID: 3, Return: 1.25, Done: true, Segments: 2},
		{NodeID: 4, Return: 0.25, Done: false, Segments: 2},
		{NodeID: 6, Return: 0, Done: true, Segments: 2},
	}, meta["rollouts"])
	assert.Equal(t, 2+1+3+1+1+1, meta["sampled_tokens"], "every trainable token of every edge, the failed one's included")
}
