package export_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	jsoniter "github.com/json-iterator/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

func mustPrepare(t testing.TB, tr *tree.Tree, est prepare.Estimator) *prepare.Batch {
	t.Helper()
	b, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), est)
	require.NoError(t, err)
	return b
}

func mustEncode(t testing.TB, b *prepare.Batch, group int, opts export.Options) *export.Flat {
	t.Helper()
	f, err := export.Encode(b, group, opts)
	require.NoError(t, err)
	return f
}

func TestRecordLayout(t *testing.T) {
	tr := treetest.Figure61()
	// Leaf 3's edge: glue, a generated span, a tool result, another generated span.
	tr.Nodes[3].Spans = []tree.PackedSequence{
		treetest.Conditioning(7), treetest.Generated(31, 32), treetest.Conditioning(8, 9), treetest.Generated(33),
	}
	tr.Nodes[3].SearchPass = 2
	b := mustPrepare(t, tr, prepare.DirectBranchTd{})
	f := mustEncode(t, b, 5, export.Options{})

	require.Equal(t, 7, f.NumActor(), "six edges, one of them with two generated spans")
	require.Equal(t, 3, f.NumCritic())
	assert.Equal(t, []string{"DirectBranchTd"}, f.Estimators)
	assert.Equal(t, []int64{1, 2, 3, 3, 4, 5, 6}, f.Actor.NodeID)
	assert.Equal(t, []int64{0, 1, 2, 2, 3, 4, 5}, f.Actor.Sample)
	assert.Equal(t, []int64{0, 0, 0, 1, 0, 0, 0}, f.Actor.Span)
	assert.Equal(t, []int64{0, 5, 9, 17, 28, 34, 40, 45}, f.Actor.Offsets)
	assert.Equal(t, []int64{3, 3, 6, 10, 5, 5, 4}, f.Actor.SpanStart)
	assert.Equal(t, []int64{0, 2, 3, 5, 6, 7, 8, 9}, f.Actor.SpanOffsets)
	assert.Equal(t, []float64{-0.25, -0.5, -0.25, -0.25, -0.5, -0.25, -0.25, -0.25, -0.25}, f.Actor.SpanLogprobs)

	first := f.ActorRecord(2)
	assert.Equal(t, export.ActorRecord{
		Tokens:           []uint32{1, 2, 3, 10, 11, 7, 31, 32},
		LossMask:         []bool{false, false, false, false, false, false, true, true},
		BehaviorLogprobs: []float64{0, 0, 0, 0, 0, 0, -0.25, -0.5},
		Advantage:        b.Actor[2].Weight,
		Lane:             "actor",
		GroupIndex:       5,
		Estimator:        "DirectBranchTd",
		NodeID:           3,
		SearchPass:       intPtr(2),
		ProblemID:        "fig61",
		ResponseStart:    6,
		Return:           1,
		Finished:         true,
		WeightVersions:   []string{},
	}, first)
	second := f.ActorRecord(3)
	assert.Equal(t, []uint32{1, 2, 3, 10, 11, 7, 31, 32, 8, 9, 33}, second.Tokens)
	assert.Equal(t, []bool{false, false, false, false, false, false, false, false, false, false, true}, second.LossMask)
	assert.Equal(t, []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -0.25}, second.BehaviorLogprobs)
	assert.Equal(t, 10, second.ResponseStart)
	assert.Equal(t, first.Advantage, second.Advantage, "the edge's advantage is broadcast to all its spans")

	assert.Equal(t, export.CriticRecord{Context: "sa", Target: 1, Lane: "critic", GroupIndex: 5, NodeID: 1, ProblemID: "fig61"}, f.CriticRecord(1))
	recs := f.Records()
	require.Len(t, recs, 10)
	assert.IsType(t, export.ActorRecord{}, recs[6])
	assert.IsType(t, export.CriticRecord{}, recs[7])
}

func intPtr(i int) *int { return &i }

// TestRecordsMatchTree checks every record of many random trees against the
// tree itself: full context of the parent, then the edge's spans up to the
// record's span, mask and log-probabilities only on that span's generated
// tokens.
func TestRecordsMatchTree(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 1))
	for i := range 400 {
		tr := treetest.Random(r, treetest.Options{Rollouts: 1 + r.IntN(16), MaxSpans: 4, PFailed: 0.2, PTruncated: 0.2, PCancelled: 0.1, PNoCritic: 0.3})
		b := mustPrepare(t, tr, prepare.DirectBranchTd{})
		f := mustEncode(t, b, i, export.Options{})
		rec := 0
		for si, a := range b.Actor {
			nd := tr.Nodes[a.NodeID]
			prefix := tr.ContextTokens(nd.Parent)
			for k, s := range nd.Spans {
				if !s.HasTrainable() {
					prefix = append(prefix, s.Tokens...)
					continue
				}
				got := f.ActorRecord(rec)
				want := append(slices.Clone(prefix), s.Tokens...)
				require.Equal(t, want, got.Tokens, "tree %d node %d span %d", i, a.NodeID, k)
				for j := range got.Tokens {
					inSpan := j >= len(prefix)
					require.Equal(t, inSpan && s.Trainable[j-len(prefix)], got.LossMask[j])
					if got.LossMask[j] {
						require.Equal(t, s.Logprobs[j-len(prefix)], got.BehaviorLogprobs[j])
					} else {
						require.Zero(t, got.BehaviorLogprobs[j])
					}
				}
				require.Equal(t, int64(len(prefix)), f.Actor.SpanStart[rec], "own span starts after the context")
				require.Equal(t, s.Trainable, f.Actor.SpanMask[f.Actor.SpanOffsets[rec]:f.Actor.SpanOffsets[rec+1]])
				require.Equal(t, int64(si), f.Actor.Sample[rec])
				require.Equal(t, a.Weight, got.Advantage)
				prefix = want
				rec++
			}
		}
		require.Equal(t, rec, f.NumActor())
		ac := f.Actor
		require.Len(t, ac.SpanMask, int(ac.SpanOffsets[rec]))
		require.Len(t, ac.SpanLogprobs, len(ac.SpanMask))
		require.Len(t, ac.Tokens, int(ac.Offsets[rec]))
	}
}

func TestMinAbsAdvantage(t *testing.T) {
	cfg := prepare.DefaultRewardConfig()
	cfg.CriticWeight = 0 // leaf edges get exactly 0, root edges ±0.5
	b, err := prepare.Prepare(treetest.Figure61(), cfg, prepare.DirectBranchTd{})
	require.NoError(t, err)
	tests := []struct {
		threshold float64
		nodes     []int64
	}{
		{0, []int64{1, 2, 3, 4, 5, 6}},
		{1e-12, []int64{1, 2}},
		{0.5, []int64{1, 2}},
		{0.5000001, []int64{}},
	}
	for _, tc := range tests {
		f := mustEncode(t, b, 0, export.Options{MinAbsAdvantage: tc.threshold})
		assert.Equal(t, tc.nodes, f.Actor.NodeID, "threshold %g", tc.threshold)
		assert.Equal(t, 3, f.NumCritic(), "critic records are never dropped")
	}
	for _, bad := range []float64{-1, math.NaN()} {
		_, err := export.Encode(b, 0, export.Options{MinAbsAdvantage: bad})
		assert.ErrorContains(t, err, "min_abs_advantage")
		assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	}
}

func TestGroupBaselineChainsExport(t *testing.T) {
	rewards := []float64{1, 0, 0, 1, 1}
	b := mustPrepare(t, treetest.Chains(rewards, 3, 4, 0.5), prepare.GroupBaseline{})
	f := mustEncode(t, b, 2, export.Options{})
	require.Equal(t, 15, f.NumActor())
	for i := range f.NumActor() {
		rec := f.ActorRecord(i)
		chain := (rec.NodeID - 1) / 3
		assert.Equal(t, rewards[chain]-0.6, rec.Advantage, "record %d", i)
		assert.Equal(t, "GroupBaseline", rec.Estimator)
		assert.Len(t, rec.Tokens, 4*(1+1+(rec.NodeID-1)%3))
	}
}

// TestExplicitSamples is the spec's SampleFactory example: a batch built from
// an ActorSample with explicit spans.
func TestExplicitSamples(t *testing.T) {
	span := tree.PackedSequence{Tokens: []uint32{10, 20}, Trainable: []bool{false, true}, Logprobs: []float64{0, -0.5}}
	b := &prepare.Batch{Actor: []prepare.ActorSample{prepare.NewActorSample(1, 0, "DirectBranchTd", 0.4, []tree.PackedSequence{span})}}
	f := mustEncode(t, b, 0, export.Options{})
	require.Equal(t, 1, f.Len())
	rec := f.ActorRecord(0)
	assert.Equal(t, export.ActorRecord{
		Tokens: []uint32{10, 20}, LossMask: []bool{false, true}, BehaviorLogprobs: []float64{0, -0.5},
		Advantage: 0.4, Lane: "actor", Estimator: "DirectBranchTd", NodeID: 1, ResponseStart: 1,
		WeightVersions: []string{},
	}, rec)
	buf := recordsJSONL(t, f)
	assert.Equal(t, `{"tokens":[10,20],"loss_mask":[false,true],"behavior_logprobs":[0,-0.5],"advantage":0.4,"lane":"actor","group_index":0,"estimator":"DirectBranchTd","node_id":1,"search_pass":null,"problem_id":"","response_start":1,"response_text":null,"return":0,"finished":false,"off_policy_tokens":0,"weight_versions":[]}`+"\n", buf.String())
}

// recordsJSONL is every record of f as JSON, one per line (what a Go caller
// gets from encoding/json; the Python wrapper has the one JSONL writer).
func recordsJSONL(t *testing.T, f *export.Flat) *bytes.Buffer {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, r := range f.Records() {
		require.NoError(t, enc.Encode(r))
	}
	return &buf
}

// TestRecordJSON checks the one record definition: the keys (in order) the
// record types encode with are ActorKeys and CriticKeys, the binding keys,
// and every record round-trips exactly.
func TestRecordJSON(t *testing.T) {
	tr := treetest.Random(rand.New(rand.NewPCG(9, 9)), treetest.Options{Rollouts: 40, MaxSpans: 3, PFailed: 0.1, PTruncated: 0.1})
	tr.Nodes[0].Text = "prompt with \"quotes\", <tags> & a newline\n"
	b := mustPrepare(t, tr, prepare.DirectBranchTd{})
	f := mustEncode(t, b, 3, export.Options{})
	buf := recordsJSONL(t, f)

	actorKeys := []string{"tokens", "loss_mask", "behavior_logprobs", "advantage", "lane", "group_index", "estimator", "node_id", "search_pass", "problem_id",
		"response_start", "response_text", "return", "finished", "off_policy_tokens", "weight_versions"}
	criticKeys := []string{"context", "target", "lane", "group_index", "node_id", "problem_id"}
	require.Equal(t, actorKeys, export.ActorKeys)
	require.Equal(t, criticKeys, export.CriticKeys)
	assert.Contains(t, export.ActorKeys, export.LaneKey)
	assert.Contains(t, export.ActorKeys, export.EstimatorKey)
	assert.Contains(t, export.CriticKeys, export.LaneKey)
	sc := bufio.NewScanner(buf)
	sc.Buffer(nil, 1<<24)
	i := 0
	for ; sc.Scan(); i++ {
		line := sc.Bytes()
		keys := []string{}
		iter := jsoniter.ConfigDefault.BorrowIterator(line)
		iter.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
			keys = append(keys, k)
			it.Skip()
			return true
		})
		require.NoError(t, iter.Error)
		jsoniter.ConfigDefault.ReturnIterator(iter)
		if i < f.NumActor() {
			require.Equal(t, actorKeys, keys)
			var got export.ActorRecord
			require.NoError(t, jsoniter.Unmarshal(line, &got))
			require.Equal(t, f.ActorRecord(i), got, "record %d round-trips exactly", i)
		} else {
			require.Equal(t, criticKeys, keys)
			var got export.CriticRecord
			require.NoError(t, jsoniter.Unmarshal(line, &got))
			require.Equal(t, f.CriticRecord(i-f.NumActor()), got)
			require.True(t, strings.HasPrefix(got.Context, tr.Nodes[0].Text))
		}
	}
	require.NoError(t, sc.Err())
	require.Equal(t, f.Len(), i)
}

// An actor sample for an inexact edge (one built by hand: Prepare makes none) is refused.
func TestEncodeRefusesInexactEdges(t *testing.T) {
	tr := &tree.Tree{ProblemID: "p", Nodes: []tree.Node{
		{ID: 0, Parent: -1, Children: []int{1}, Spans: []tree.PackedSequence{{Tokens: []uint32{1}, Trainable: []bool{false}, Logprobs: []float64{0}}}},
		{ID: 1, Parent: 0, Depth: 1, Done: true, Reward: 1, Inexact: "the policy's response is not token-exact",
			Spans: []tree.PackedSequence{{Tokens: []uint32{2, 3}, Trainable: []bool{false, false}, Logprobs: []float64{0, 0}}}},
	}}
	require.NoError(t, tr.Validate())
	b := &prepare.Batch{ProblemID: "p", Actor: []prepare.ActorSample{prepare.EdgeSample(tr, 1, "DirectBranchTd", 0.5, prepare.Diagnostics{})}}
	_, err := export.Encode(b, 0, export.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "export: actor sample 0 is for node 1, an inexact edge (the policy's response is not token-exact)")
}
