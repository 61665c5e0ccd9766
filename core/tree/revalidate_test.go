package tree_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

// spanChecks runs f and returns how many nodes' span contents it read.
func spanChecks(f func()) int64 {
	before := tree.SpanChecks()
	f()
	return tree.SpanChecks() - before
}

// literal rebuilds tr the way a Go caller can without AddChild: same nodes,
// no record of any entry check.
func literal(tr *tree.Tree) *tree.Tree {
	return &tree.Tree{ProblemID: tr.ProblemID, Nodes: tr.Nodes, Stats: tr.Stats}
}

// TestRevalidateSpanChecks counts the nodes whose tokens each check reads:
// only the root once a tree was grown by AddChild or decoded, every node of a
// literal tree, and every node for Validate.
func TestRevalidateSpanChecks(t *testing.T) {
	grown := treetest.Search(16, 4, 8, 1)
	data, err := tree.Marshal(grown)
	require.NoError(t, err)
	decoded, err := tree.Unmarshal(data)
	require.NoError(t, err)
	cloned := *grown // search's copy-on-write: same span arrays, new node slice
	cloned.Nodes = slices.Clone(grown.Nodes)
	cloned.Nodes[3].Failed = "marked by a copy"
	mixed := literal(treetest.Search(16, 4, 8, 1))
	literalLen := mixed.Len()
	_, err = mixed.AddChild(0, tree.Node{Spans: []tree.PackedSequence{seq([]uint32{9}, true)}, Done: true})
	require.NoError(t, err)
	n := int64(grown.Len())
	tests := []struct {
		name  string
		check func() error
		want  int64
	}{
		{"AddChild tree", grown.Revalidate, 1},
		{"decoded tree", decoded.Revalidate, 1},
		{"copied node slice", cloned.Revalidate, 1},
		{"literal tree", literal(grown).Revalidate, n},
		{"literal tree then AddChild", mixed.Revalidate, int64(literalLen)},
		{"Validate", grown.Validate, n},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			got := spanChecks(func() { err = tc.check() })
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestRevalidateBadSpans breaks spans after insertion. Replacing or resizing
// a span slice is caught as by Validate, on grown and literal trees alike;
// writing into a checked array is caught on a literal tree only, which is
// the rule the package doc states.
func TestRevalidateBadSpans(t *testing.T) {
	tests := []struct {
		name    string
		break_  func(tr *tree.Tree)
		inPlace bool
		node    int
		field   string
	}{
		{"replaced trainable", func(tr *tree.Tree) { tr.Nodes[1].Spans[1].Trainable = []bool{true} }, false, 1, "spans[1].trainable"},
		{"replaced logprobs", func(tr *tree.Tree) { tr.Nodes[2].Spans[0].Logprobs = []float64{0, 0} }, false, 2, "spans[0].logprobs"},
		{"replaced span", func(tr *tree.Tree) {
			tr.Nodes[3].Spans = []tree.PackedSequence{{Tokens: []uint32{7}, Trainable: []bool{true}, Logprobs: []float64{math.Inf(1)}}}
		}, false, 3, "spans[0].logprobs[0]"},
		{"resliced span", func(tr *tree.Tree) { tr.Nodes[1].Spans[1].Tokens = tr.Nodes[1].Spans[1].Tokens[:1] }, false, 1, "spans[1].trainable"},
		{"added span", func(tr *tree.Tree) {
			tr.Nodes[2].Spans = append(tr.Nodes[2].Spans, tree.PackedSequence{Tokens: []uint32{1}})
		}, false, 2, "spans[1].trainable"},
		{"trainable prompt", func(tr *tree.Tree) { tr.Nodes[0].Spans[0].Trainable[0] = true }, false, 0, "spans[0].trainable"},
		{"nan logprob in place", func(tr *tree.Tree) { tr.Nodes[2].Spans[0].Logprobs[0] = math.NaN() }, true, 2, "spans[0].logprobs[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, build := range []struct {
				name    string
				tree    func() *tree.Tree
				trusted bool
			}{
				{"grown", func() *tree.Tree { return small(t) }, true},
				{"literal", func() *tree.Tree { return literal(small(t)) }, false},
			} {
				t.Run(build.name, func(t *testing.T) {
					tr := build.tree()
					tc.break_(tr)
					require.Error(t, tr.Validate())
					err := tr.Revalidate()
					if tc.inPlace && build.trusted {
						assert.NoError(t, err, "a checked array is not read again")
						return
					}
					assert.Equal(t, tr.Validate(), err, "Revalidate reports what Validate reports")
					var ve *tree.ValidationError
					require.True(t, errors.As(err, &ve), "got %v", err)
					assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
					assert.Equal(t, tc.node, ve.NodeID, err.Error())
					assert.Equal(t, tc.field, ve.Field, err.Error())
				})
			}
		})
	}
}

// TestRevalidateMatchesValidate breaks random grown trees in every way that
// does not write into a checked span array and requires the same verdict
// (nil or the identical first error) from both checks.
func TestRevalidateMatchesValidate(t *testing.T) {
	breaks := []func(r *rand.Rand, tr *tree.Tree){
		func(r *rand.Rand, tr *tree.Tree) { tr.Nodes[r.IntN(tr.Len())].Critic = ptr(math.NaN()) },
		func(r *rand.Rand, tr *tree.Tree) { tr.Nodes[r.IntN(tr.Len())].Reward = math.Inf(1) },
		func(r *rand.Rand, tr *tree.Tree) { tr.Nodes[r.IntN(tr.Len())].Parent = r.IntN(tr.Len()) },
		func(r *rand.Rand, tr *tree.Tree) { tr.Nodes[r.IntN(tr.Len())].Done = true },
		func(r *rand.Rand, tr *tree.Tree) { tr.Nodes[r.IntN(tr.Len())].Text = "\xfe" },
		func(r *rand.Rand, tr *tree.Tree) {
			nd := &tr.Nodes[r.IntN(tr.Len())]
			if len(nd.Spans) > 0 {
				k := r.IntN(len(nd.Spans))
				nd.Spans[k].Logprobs = slices.Clone(nd.Spans[k].Logprobs)
				if len(nd.Spans[k].Logprobs) > 0 {
					nd.Spans[k].Logprobs[0] = math.NaN()
				}
			}
		},
		func(r *rand.Rand, tr *tree.Tree) {
			nd := &tr.Nodes[r.IntN(tr.Len())]
			if len(nd.Spans) > 0 {
				nd.Spans[0].Trainable = append(nd.Spans[0].Trainable, false)
			}
		},
		func(r *rand.Rand, tr *tree.Tree) { tr.Nodes = tr.Nodes[:1+r.IntN(tr.Len())] },
		func(*rand.Rand, *tree.Tree) {},
	}
	r := rand.New(rand.NewPCG(11, 12))
	for i := range 400 {
		tr := treetest.Random(r, treetest.Options{Rollouts: 1 + i%12, PFailed: 0.2, PTruncated: 0.2, PCancelled: 0.1, PNoCritic: 0.3})
		breaks[i%len(breaks)](r, tr)
		require.Equal(t, tr.Validate(), tr.Revalidate(), "case %d", i)
	}
}

// TestEdgeTrainable checks the counts taken at entry against the masks, on
// grown, decoded and literal trees, and after a span slice is replaced.
func TestEdgeTrainable(t *testing.T) {
	grown := treetest.Search(16, 4, 8, 3)
	data, err := tree.Marshal(grown)
	require.NoError(t, err)
	decoded, err := tree.Unmarshal(data)
	require.NoError(t, err)
	replaced := treetest.Search(16, 4, 8, 3)
	replaced.Nodes[5].Spans = []tree.PackedSequence{seq([]uint32{1, 2, 3}, true, true, true), seq([]uint32{4}, false)}
	for name, tr := range map[string]*tree.Tree{"grown": grown, "decoded": decoded, "literal": literal(grown), "replaced span": replaced} {
		t.Run(name, func(t *testing.T) {
			for id := range tr.Nodes {
				wantTokens, wantSpans := 0, 0
				for _, s := range tr.Nodes[id].Spans {
					if c := s.TrainableCount(); c > 0 {
						wantTokens += c
						wantSpans++
					}
				}
				tokens, spans := tr.EdgeTrainable(id)
				assert.Equal(t, wantTokens, tokens, "node %d tokens", id)
				assert.Equal(t, wantSpans, spans, "node %d spans", id)
				assert.Equal(t, tr.Nodes[id].GeneratedTokens(), tokens, "node %d", id)
			}
		})
	}
	tokens, _ := replaced.EdgeTrainable(5)
	assert.Equal(t, 3, tokens, "a replaced span is counted again")
}
