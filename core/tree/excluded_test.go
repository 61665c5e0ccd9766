package tree

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExcluded(t *testing.T) {
	tr := New("p", PackedSequence{Tokens: []uint32{1}, Trainable: []bool{false}, Logprobs: []float64{0}}, "q")
	edge := func() Node {
		return Node{Spans: []PackedSequence{{Tokens: []uint32{2}, Trainable: []bool{true}, Logprobs: []float64{-0.1}}}}
	}
	a, err := tr.AddChild(0, edge()) // 1: ok
	require.NoError(t, err)
	failed := Node{Spans: []PackedSequence{}, Failed: "policy: boom"}
	f, err := tr.AddChild(0, failed) // 2: failed
	require.NoError(t, err)
	b, err := tr.AddChild(a, edge()) // 3: ok, under an ok node
	require.NoError(t, err)
	assert.Equal(t, []bool{false, false, true, false}, tr.Excluded(nil))
	assert.Equal(t, []int{1, 2, 3}, []int{a, f, b})

	// Under a failed node (an invalid tree: failed nodes have no children, but a tree read
	// from JSON may say otherwise) every descendant is excluded.
	tr.Nodes[f].Children = []int{4}
	tr.Nodes = append(tr.Nodes, Node{ID: 4, Parent: f, Depth: 2})
	tr.Nodes = append(tr.Nodes, Node{ID: 5, Parent: 99}) // unreachable, bad parent
	assert.Equal(t, []bool{false, false, true, false, true, false}, tr.Excluded(nil))
	assert.Equal(t, tr.Excluded(nil), tr.Excluded(tr.BreadthFirst()), "a caller's own order gives the same answer")
	assert.Empty(t, (&Tree{}).Excluded(nil))
}
