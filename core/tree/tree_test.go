package tree_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

func seq(tokens []uint32, trainable ...bool) tree.PackedSequence {
	s := tree.PackedSequence{Tokens: tokens, Trainable: make([]bool, len(tokens)), Logprobs: make([]float64, len(tokens))}
	for i := range trainable {
		s.Trainable[i] = trainable[i]
		if trainable[i] {
			s.Logprobs[i] = -0.5
		}
	}
	return s
}

// small builds root(prompt 1,2) -> a(glue 3, gen 4 5) -> b(gen 6, done).
func small(t *testing.T) *tree.Tree {
	t.Helper()
	tr := tree.New("p1", seq([]uint32{1, 2}), "Q:")
	a, err := tr.AddChild(0, tree.Node{Spans: []tree.PackedSequence{seq([]uint32{3}), seq([]uint32{4, 5}, true, true)}, Text: " step"})
	require.NoError(t, err)
	b, err := tr.AddChild(a, tree.Node{Spans: []tree.PackedSequence{seq([]uint32{6}, true)}, Text: " end", Done: true, Reward: 1})
	require.NoError(t, err)
	_, err = tr.AddChild(0, tree.Node{Spans: []tree.PackedSequence{seq([]uint32{7}, true)}, Text: " other", Done: true})
	require.NoError(t, err)
	require.Equal(t, 2, b)
	return tr
}

func TestAccessors(t *testing.T) {
	tr := small(t)
	require.NoError(t, tr.Validate())
	tests := []struct {
		id      int
		path    []int
		key     []int
		tokens  []uint32
		text    string
		ctxLen  int
		genToks int
	}{
		{0, []int{0}, []int{}, []uint32{1, 2}, "Q:", 2, 0},
		{1, []int{0, 1}, []int{0}, []uint32{1, 2, 3, 4, 5}, "Q: step", 5, 2},
		{2, []int{0, 1, 2}, []int{0, 0}, []uint32{1, 2, 3, 4, 5, 6}, "Q: step end", 6, 1},
		{3, []int{0, 3}, []int{1}, []uint32{1, 2, 7}, "Q: other", 3, 1},
	}
	for _, tc := range tests {
		t.Run(tr.Nodes[tc.id].Text, func(t *testing.T) {
			assert.Equal(t, tc.path, tr.Path(tc.id))
			assert.Equal(t, tc.key, tr.PathKey(tc.id))
			assert.Equal(t, tc.tokens, tr.ContextTokens(tc.id))
			assert.Equal(t, tc.text, tr.ContextText(tc.id))
			assert.Equal(t, tc.ctxLen, tr.ContextLen(tc.id))
			assert.Equal(t, tc.genToks, tr.Nodes[tc.id].GeneratedTokens())
			assert.Equal(t, tc.id, tr.Nodes[tc.id].ID)
		})
	}
	ctx := tr.AppendContext(tree.PackedSequence{}, 2)
	assert.Equal(t, []uint32{1, 2, 3, 4, 5, 6}, ctx.Tokens)
	assert.Equal(t, make([]bool, 6), ctx.Trainable, "context is conditioning only")
	assert.Equal(t, make([]float64, 6), ctx.Logprobs)
	assert.Equal(t, []int{0, 1, 3, 2}, tr.BreadthFirst())
	assert.Equal(t, []int{1, 3}, tr.Root().Children)
	assert.Nil(t, tr.Node(4))
}

func TestAddChildRejects(t *testing.T) {
	tr := small(t)
	tests := []struct {
		name   string
		parent int
		node   tree.Node
		field  string
	}{
		{"unknown parent", 9, tree.Node{}, "parent"},
		{"terminal parent", 2, tree.Node{}, "children"},
		{"short mask", 1, tree.Node{Spans: []tree.PackedSequence{{Tokens: []uint32{1}, Logprobs: []float64{0}}}}, "spans[0].trainable"},
		{"nan reward", 1, tree.Node{Reward: math.NaN()}, "reward"},
		{"inf critic", 1, tree.Node{Critic: ptr(math.Inf(1))}, "critic"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tr.Len()
			_, err := tr.AddChild(tc.parent, tc.node)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			var ve *tree.ValidationError
			require.True(t, errors.As(err, &ve), "got %v", err)
			assert.Equal(t, tc.field, ve.Field)
			assert.Equal(t, n, tr.Len(), "a rejected child leaves the tree unchanged")
		})
	}
	id, err := tr.AddChild(1, tree.Node{Text: "bad \xff utf8"})
	require.NoError(t, err)
	assert.Equal(t, "bad \uFFFD utf8", tr.Nodes[id].Text)
}

func ptr(v float64) *float64 { return &v }

// TestValidateBadInput breaks a valid tree in one way per case and checks that
// the error names the node and the field.
func TestValidateBadInput(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(tr *tree.Tree)
		node   int
		field  string
	}{
		{"cycle", func(tr *tree.Tree) {
			// 1 and 2 become each other's parents and leave the root.
			tr.Nodes[0].Children = []int{3}
			tr.Nodes[1].Parent = 2
			tr.Nodes[2].Children = []int{1}
			tr.Nodes[2].Done = false
		}, 1, "parent"},
		{"self parent", func(tr *tree.Tree) { tr.Nodes[3].Parent = 3 }, 3, "parent"},
		{"missing parent", func(tr *tree.Tree) { tr.Nodes[2].Parent = -1 }, 2, "parent"},
		{"unknown parent", func(tr *tree.Tree) { tr.Nodes[2].Parent = 17 }, 2, "parent"},
		{"parent does not list child", func(tr *tree.Tree) { tr.Nodes[1].Children = nil }, 2, "parent"},
		{"child lists wrong parent", func(tr *tree.Tree) { tr.Nodes[0].Children = []int{1, 3, 2} }, 0, "children[2]"},
		{"child listed twice", func(tr *tree.Tree) { tr.Nodes[1].Children = []int{2, 2} }, 1, "children[1]"},
		{"unknown child", func(tr *tree.Tree) { tr.Nodes[1].Children = []int{2, 8} }, 1, "children[1]"},
		{"bad id", func(tr *tree.Tree) { tr.Nodes[3].ID = 5 }, 3, "id"},
		{"bad depth", func(tr *tree.Tree) { tr.Nodes[2].Depth = 5 }, 2, "depth"},
		{"short trainable", func(tr *tree.Tree) { tr.Nodes[1].Spans[1].Trainable = []bool{true} }, 1, "spans[1].trainable"},
		{"long logprobs", func(tr *tree.Tree) { tr.Nodes[2].Spans[0].Logprobs = []float64{0, 0} }, 2, "spans[0].logprobs"},
		{"nan logprob", func(tr *tree.Tree) { tr.Nodes[2].Spans[0].Logprobs[0] = math.NaN() }, 2, "spans[0].logprobs[0]"},
		{"nan reward", func(tr *tree.Tree) { tr.Nodes[2].Reward = math.NaN() }, 2, "reward"},
		{"inf reward", func(tr *tree.Tree) { tr.Nodes[3].Reward = math.Inf(-1) }, 3, "reward"},
		{"nan critic", func(tr *tree.Tree) { tr.Nodes[1].Critic = ptr(math.NaN()) }, 1, "critic"},
		{"terminal with children", func(tr *tree.Tree) { tr.Nodes[1].Done = true }, 1, "children"},
		{"trainable prompt", func(tr *tree.Tree) { tr.Nodes[0].Spans[0].Trainable[0] = true }, 0, "spans[0].trainable"},
		{"root with parent", func(tr *tree.Tree) { tr.Nodes[0].Parent = 2 }, 0, "parent"},
		{"root reward", func(tr *tree.Tree) { tr.Nodes[0].Reward = 1 }, 0, "reward"},
		{"negative pass", func(tr *tree.Tree) { tr.Nodes[3].SearchPass = -1 }, 3, "search_pass"},
		{"invalid utf8", func(tr *tree.Tree) { tr.Nodes[3].Text = "\xff" }, 3, "text"},
		{"empty", func(tr *tree.Tree) { tr.Nodes = nil }, -1, "nodes"},
		{"negative stats", func(tr *tree.Tree) { tr.Stats.Rollouts = -1 }, -1, "stats.rollouts"},
		{"nan stats", func(tr *tree.Tree) { tr.Stats.WallSeconds = math.NaN() }, -1, "stats.wall_seconds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := small(t)
			tc.break_(tr)
			err := tr.Validate()
			var ve *tree.ValidationError
			require.True(t, errors.As(err, &ve), "got %v", err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Equal(t, tc.node, ve.NodeID, err.Error())
			assert.Equal(t, tc.field, ve.Field, err.Error())
			_, err = tree.Marshal(tr)
			assert.Error(t, err, "an invalid tree is not serialised")
		})
	}
}

func TestValidateCycleMessage(t *testing.T) {
	tr := small(t)
	tr.Nodes[0].Children = []int{3}
	tr.Nodes[1].Parent = 2
	tr.Nodes[2].Children = []int{1}
	tr.Nodes[2].Done = false
	assert.EqualError(t, tr.Validate(), "tree: node 1 parent: cycle 1 -> 2 -> 1 never reaches the root")
}

func TestRandomTreesValid(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		tr := treetest.Random(r, treetest.Options{Rollouts: 1 + i%20, PFailed: 0.2, PTruncated: 0.2, PCancelled: 0.1, PNoCritic: 0.3, PShaping: 0.2})
		require.NoError(t, tr.Validate())
	}
	require.NoError(t, treetest.Search(64, 8, 16, 1).Validate())
	require.NoError(t, treetest.Chains([]float64{1, 0}, 3, 4, 0.5).Validate())
}
