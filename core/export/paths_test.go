package export_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

// TestPathLayoutFigure61 is the path layout on the hand-built tree: one record
// per leaf (3, 4, 5 under a; 6 under b), each trained edge owned by the first
// leaf below it, the others' edges kept as context (mask false, advantage 0).
func TestPathLayoutFigure61(t *testing.T) {
	b := mustPrepare(t, treetest.Figure61(), prepare.DirectBranchTd{})
	w := map[int]float64{}
	for _, a := range b.Actor {
		w[a.NodeID] = a.Weight
	}
	f := mustEncode(t, b, 4, export.Options{Layout: export.LayoutPaths})
	require.Equal(t, export.LayoutPaths, f.Layout)
	require.Equal(t, 4, f.NumActor())
	require.Equal(t, 3, f.NumCritic(), "critic records do not depend on the layout")
	assert.Equal(t, []int64{3, 4, 5, 6}, f.Actor.NodeID)
	assert.Equal(t, []int64{0, 6, 12, 18, 23}, f.Actor.Offsets, "6+6+6+5 tokens: the sum of the leaf paths")
	assert.Equal(t, []int64{3, 5, 5, 3}, f.Actor.SpanStart)

	first := f.PathRecord(0)
	assert.Equal(t, export.PathRecord{
		ActorRecord: export.ActorRecord{
			Tokens:           []uint32{1, 2, 3, 10, 11, 30},
			LossMask:         []bool{false, false, false, true, true, true},
			BehaviorLogprobs: []float64{0, 0, 0, -0.25, -0.5, -0.25},
			Advantage:        w[3],
			Lane:             "actor",
			GroupIndex:       4,
			Estimator:        "DirectBranchTd",
			NodeID:           3,
			SearchPass:       intPtr(0),
			ProblemID:        "fig61",
			ResponseStart:    3,
			Return:           1,
			Finished:         true,
			WeightVersions:   []string{},
		},
		Advantages: []float64{0, 0, 0, w[1], w[1], w[3]},
	}, first)
	second := f.PathRecord(1)
	assert.Equal(t, []uint32{1, 2, 3, 10, 11, 30}, second.Tokens)
	assert.Equal(t, []bool{false, false, false, false, false, true}, second.LossMask, "edge a is owned by leaf 3's record")
	assert.Equal(t, 5, second.ResponseStart, "its response is its own trained suffix")
	assert.Equal(t, []float64{0, 0, 0, 0, 0, w[4]}, second.Advantages)
	last := f.PathRecord(3)
	assert.Equal(t, []uint32{1, 2, 3, 20, 40}, last.Tokens)
	assert.Equal(t, []float64{0, 0, 0, w[2], w[6]}, last.Advantages)

	// The per-span layout stays the default.
	def := mustEncode(t, b, 4, export.Options{})
	assert.Equal(t, export.LayoutSpans, def.Layout)
	assert.Equal(t, 6, def.NumActor())
	assert.Nil(t, def.Actor.SpanAdvantages)
}

// term is one trained token as a loss sees it: the full prefix before it, the
// token, its behaviour log-probability and its advantage.
func term(prefix []uint32, token uint32, logprob, advantage float64) string {
	return fmt.Sprintf("%v|%d|%x|%x", prefix, token, math.Float64bits(logprob), math.Float64bits(advantage))
}

// trainedTerms is the multiset of trained-token terms of f's actor records.
func trainedTerms(t *testing.T, f *export.Flat) map[string]int {
	out := map[string]int{}
	for i := range f.NumActor() {
		r := f.PathRecord(i)
		require.Len(t, r.LossMask, len(r.Tokens))
		require.Len(t, r.BehaviorLogprobs, len(r.Tokens))
		require.Len(t, r.Advantages, len(r.Tokens))
		for j, m := range r.LossMask {
			if !m {
				require.Zero(t, r.BehaviorLogprobs[j], "record %d position %d", i, j)
				require.Zero(t, r.Advantages[j], "context carries advantage 0 (record %d position %d)", i, j)
				continue
			}
			out[term(r.Tokens[:j], r.Tokens[j], r.BehaviorLogprobs[j], r.Advantages[j])]++
		}
	}
	return out
}

// pathLen is the length of id's context up to its edge's last generated token.
func pathLen(tr *tree.Tree, id int) int {
	n, last := 0, 0
	for _, s := range tr.Nodes[id].Spans {
		for j, m := range s.Trainable {
			if m {
				last = n + j + 1
			}
		}
		n += s.Len()
	}
	return tr.ContextLen(tr.Nodes[id].Parent) + last
}

// floorTokens is the sum of the leaf path lengths of tr, and the tokens of one
// path per lowest trained node (trained: the nodes with per-span records).
func floorTokens(tr *tree.Tree, trained map[int]bool) (floor, minimal int) {
	below := make([]bool, len(tr.Nodes)) // a trained edge strictly below
	order := tr.BreadthFirst()
	for _, id := range slices.Backward(order) {
		if p := tr.Nodes[id].Parent; p >= 0 && (trained[id] || below[id]) {
			below[p] = true
		}
	}
	for _, id := range order {
		nd := &tr.Nodes[id]
		if len(nd.Children) == 0 {
			floor += tr.ContextLen(id)
		}
		if trained[id] && !below[id] {
			minimal += pathLen(tr, id)
		}
	}
	return floor, minimal
}

// TestPathLayoutSameGradient is the layout's contract, on many random trees and
// thresholds: every trained token term (prefix, token, behaviour log-prob,
// advantage) appears exactly as often in the path records as in the per-span
// records, and the path records hold the fewest tokens a sequence trainer can
// be sent: one path per lowest trained edge (every leaf path when every leaf
// trains, the floor).
func TestPathLayoutSameGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 26))
	for i := range 600 {
		tr := treetest.Random(r, treetest.Options{Rollouts: 1 + r.IntN(24), MaxSpans: 4, PFailed: 0.15, PTruncated: 0.2, PCancelled: 0.1, PNoCritic: 0.3, PShaping: 0.2})
		b := mustPrepare(t, tr, prepare.DirectBranchTd{})
		opts := export.Options{}
		if r.IntN(3) == 0 {
			opts.MinAbsAdvantage = r.Float64() * 0.3
		}
		spans := mustEncode(t, b, i, opts)
		opts.Layout = export.LayoutPaths
		paths := mustEncode(t, b, i, opts)

		want, got := trainedTerms(t, spans), trainedTerms(t, paths)
		require.Equal(t, want, got, "tree %d: trained token terms differ between layouts", i)

		trained := map[int]bool{}
		for _, id := range spans.Actor.NodeID {
			trained[int(id)] = true
		}
		floor, minimal := floorTokens(tr, trained)
		total := len(paths.Actor.Tokens)
		require.Equal(t, minimal, total, "tree %d: one path per lowest trained edge", i)
		require.LessOrEqual(t, total, floor, "tree %d", i)
		require.LessOrEqual(t, total, len(spans.Actor.Tokens), "tree %d", i)
		for k := range paths.NumActor() {
			id := int(paths.Actor.NodeID[k])
			require.Equal(t, tr.ContextTokens(id)[:pathLen(tr, id)], paths.PathRecord(k).Tokens, "tree %d record %d is node %d's path", i, k, id)
		}

		// The shared-token form (what crosses the C boundary) holds the same records.
		sf, st, err := export.EncodeShared(b, i, opts)
		require.NoError(t, err)
		full := unshare(t, st)
		require.Len(t, full, paths.NumActor())
		for k := range full {
			require.Equal(t, paths.PathRecord(k).Tokens, full[k])
		}
		require.Equal(t, paths.Actor.SpanAdvantages, sf.Actor.SpanAdvantages)
		require.Equal(t, paths.Actor.SpanStart, sf.Actor.SpanStart)
	}
}

// Every leaf edge trained: the path layout sends exactly the floor.
func TestPathLayoutAtTheFloor(t *testing.T) {
	for seed := range uint64(8) {
		tr := treetest.Search(32, 8, 16, seed)
		b := mustPrepare(t, tr, prepare.DirectBranchTd{})
		paths := mustEncode(t, b, 0, export.Options{Layout: export.LayoutPaths})
		floor := 0
		for id := range tr.Nodes {
			if len(tr.Nodes[id].Children) == 0 {
				floor += tr.ContextLen(id)
			}
		}
		assert.Equal(t, floor, len(paths.Actor.Tokens), "seed %d", seed)
	}
}

func TestPathLayoutRefusals(t *testing.T) {
	span := tree.PackedSequence{Tokens: []uint32{10, 20}, Trainable: []bool{false, true}, Logprobs: []float64{0, -0.5}}
	explicit := &prepare.Batch{Actor: []prepare.ActorSample{prepare.NewActorSample(1, 0, "DirectBranchTd", 0.4, []tree.PackedSequence{span})}}
	_, err := export.Encode(explicit, 0, export.Options{Layout: export.LayoutPaths})
	require.Error(t, err)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.Contains(t, err.Error(), "layout \"paths\"")

	tr := treetest.Figure61()
	twice := &prepare.Batch{Actor: []prepare.ActorSample{
		prepare.EdgeSample(tr, 3, "DirectBranchTd", 0.5, prepare.Diagnostics{}), prepare.EdgeSample(tr, 3, "DirectBranchTd", 0.25, prepare.Diagnostics{}),
	}}
	_, err = export.Encode(twice, 0, export.Options{Layout: export.LayoutPaths})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "samples 0 and 1 are both for node 3")
	outside := &prepare.Batch{Actor: []prepare.ActorSample{prepare.EdgeSample(tr, 3, "DirectBranchTd", 0.5, prepare.Diagnostics{})}}
	outside.Actor[0].NodeID = 99
	_, err = export.Encode(outside, 0, export.Options{Layout: export.LayoutPaths})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "node 99, not an edge of the tree")

	_, err = export.Encode(mustPrepare(t, treetest.Figure61(), prepare.DirectBranchTd{}), 0, export.Options{Layout: "leaves"})
	require.Error(t, err)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.Contains(t, err.Error(), `layout is "leaves", must be "spans" or "paths"`)
}

// The records blob of the path layout names its keys (the actor keys plus
// "advantages") and carries the per-token advantages of each record's own part.
func TestPathRecordsBlob(t *testing.T) {
	b := mustPrepare(t, treetest.Figure61(), prepare.DirectBranchTd{})
	w, err := export.ExportBatch(b, 0, export.Options{Layout: export.LayoutPaths})
	require.NoError(t, err)
	layout := w.Layout()
	assert.Equal(t, "paths", layout["layout"])
	assert.Equal(t, append(slices.Clone(export.ActorKeys), "advantages"), layout["actor_keys"])
	s := sections(w)
	f := mustEncode(t, b, 0, export.Options{Layout: export.LayoutPaths})
	assert.Equal(t, f.Actor.SpanAdvantages, f64s(s["span_advantages"]))
	require.Len(t, f.Actor.SpanAdvantages, len(f.Actor.SpanMask))

	w, err = export.ExportBatch(b, 0, export.Options{})
	require.NoError(t, err)
	assert.Equal(t, "spans", w.Layout()["layout"])
	assert.Equal(t, export.ActorKeys, w.Layout()["actor_keys"])
	_, has := sections(w)["span_advantages"]
	assert.False(t, has, "the per-span layout has no per-token advantages section")
}
