package export_test

import (
	"bytes"
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

// figureWithStates is the §6.1 tree plus a failed branch under b (id 7), a
// truncated one under a (id 8) and an unfinished checkpoint under b (id 9).
func figureWithStates(t *testing.T) *tree.Tree {
	tr := treetest.Figure61()
	half := 0.5
	for _, c := range []struct {
		parent int
		node   tree.Node
	}{
		{2, tree.Node{Failed: "tool timeout", Text: "x"}},
		{1, tree.Node{Truncated: true, Text: "a very long text that goes on and on and on beyond forty runes", Spans: []tree.PackedSequence{treetest.Generated(50, 51, 52)}}},
		{2, tree.Node{Critic: &half, Text: "c"}},
	} {
		_, err := tr.AddChild(c.parent, c.node)
		require.NoError(t, err)
	}
	return tr
}

func TestFormatTree(t *testing.T) {
	tr := figureWithStates(t)
	b := mustPrepare(t, tr, prepare.DirectBranchTd{})
	tests := []struct {
		name  string
		batch *prepare.Batch
		want  string
	}{
		{"with batch", b, `0 root v_hat=0.5 target=0.516667 "s"
├── 1 r=0 v_hat=0.5 A=+0.188889 target=0.75 "a"
│   ├── 3 done r=1 A=+0.3 "+"
│   ├── 4 done r=1 A=+0.3 "+"
│   ├── 5 done r=1 A=+0.3 "+"
│   └── 8 truncated r=0 A=-0.7 "a very long text that goes on and on and"…
└── 2 r=0 v_hat=0.5 A=-0.177778 target=0.25 "b"
    ├── 6 done r=0 A=-0.333333 "-"
    ├── 7 failed: "tool timeout" r=0 "x"
    └── 9 open r=0 v_hat=0.5 A=+0.166667 "c"
`},
		{"tree only", nil, `0 root v_hat=0.5 "s"
├── 1 r=0 v_hat=0.5 "a"
│   ├── 3 done r=1 "+"
│   ├── 4 done r=1 "+"
│   ├── 5 done r=1 "+"
│   └── 8 truncated r=0 "a very long text that goes on and on and"…
└── 2 r=0 v_hat=0.5 "b"
    ├── 6 done r=0 "-"
    ├── 7 failed: "tool timeout" r=0 "x"
    └── 9 open r=0 v_hat=0.5 "c"
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, export.FormatTree(tr, tc.batch))
		})
	}
}

func TestFormatEdgesAndDescribe(t *testing.T) {
	b := mustPrepare(t, treetest.Figure61(), prepare.DirectBranchTd{})
	assert.Equal(t, `actor edges (6)
node  group  weight     tokens
1     0      +0.333333  2
2     0      -0.291667  1
3     1      +0.125     1
4     1      +0.125     1
5     1      +0.125     1
6     2      -0.25      1
critic targets (3)
node  target
0     0.5625
1     1
2     0
`, export.FormatEdges(b))
	assert.Equal(t, `actor node=1 group=0 estimator=DirectBranchTd advantage=+0.333333 edge_tokens=2 search_pass=0 reward=0 v_star_parent=0.541667 v_star_child=0.875 n_s=2
actor node=2 group=0 estimator=DirectBranchTd advantage=-0.291667 edge_tokens=1 search_pass=0 reward=0 v_star_parent=0.541667 v_star_child=0.25 n_s=2
actor node=3 group=1 estimator=DirectBranchTd advantage=+0.125 edge_tokens=1 search_pass=0 reward=1 v_star_parent=0.875 v_star_child=0 n_s=3
actor node=4 group=1 estimator=DirectBranchTd advantage=+0.125 edge_tokens=1 search_pass=0 reward=1 v_star_parent=0.875 v_star_child=0 n_s=3
actor node=5 group=1 estimator=DirectBranchTd advantage=+0.125 edge_tokens=1 search_pass=0 reward=1 v_star_parent=0.875 v_star_child=0 n_s=3
actor node=6 group=2 estimator=DirectBranchTd advantage=-0.25 edge_tokens=1 search_pass=0 reward=0 v_star_parent=0.25 v_star_child=0 n_s=1
critic node=0 target=0.5625 v_hat=0.5 v_star=0.541667 n_s=2 context="s"
critic node=1 target=1 v_hat=0.5 v_star=0.875 n_s=3 context="sa"
critic node=2 target=0 v_hat=0.5 v_star=0.25 n_s=1 context="sb"
`, export.Describe(b))

	explicit := &prepare.Batch{Actor: []prepare.ActorSample{prepare.NewActorSample(4, 1, "Custom", -0.5, nil)},
		Critic: []prepare.CriticSample{prepare.NewCriticSample(1, strings.Repeat("ab", 30), 0.25, prepare.Diagnostics{})}}
	assert.Equal(t, "actor node=4 group=1 estimator=Custom advantage=-0.5 edge_tokens=0\n"+
		`critic node=1 target=0.25 context=…"abababababababababababababababababababab"`+"\n", export.Describe(explicit))
}

func TestBatchText(t *testing.T) {
	b := mustPrepare(t, treetest.Figure61(), prepare.DirectBranchTd{})
	tests := []struct {
		view string
		want string // the text, or the error
	}{
		{export.ViewDescribe, export.Describe(b)},
		{export.ViewEdges, export.FormatEdges(b)},
		{"tree", `batch text: unknown kind "tree", expected describe or edges`},
		{"", `batch text: unknown kind "", expected describe or edges`},
	}
	for _, tt := range tests {
		t.Run(tt.view, func(t *testing.T) {
			text, err := export.BatchText(b, tt.view)
			if err != nil {
				assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
				assert.Equal(t, tt.want, err.Error())
				return
			}
			assert.Equal(t, tt.want, text)
		})
	}
}

func TestWriteHTML(t *testing.T) {
	tr := figureWithStates(t)
	tr.Nodes[3].Text = `</script><script>alert("x")</script>`
	b := mustPrepare(t, tr, prepare.DirectBranchTd{})
	v, err := prepare.Values(tr, prepare.DefaultRewardConfig())
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		v    *prepare.TreeValues
		b    *prepare.Batch
	}{{"values and batch", v, b}, {"tree only", nil, nil}} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, export.WriteHTML(&buf, tr, tc.v, tc.b))
			page := buf.String()
			assert.True(t, strings.HasPrefix(page, "<!doctype html>"))
			assert.Equal(t, 1, strings.Count(page, "<svg"))
			assert.Equal(t, tr.Len(), strings.Count(page, "data-id=\""), "one shape per node")
			assert.Equal(t, tr.Len()-1, strings.Count(page, "<line "), "one line per edge")
			assert.Equal(t, 1, strings.Count(page, "<script>"), "node text cannot open a script")
			assert.False(t, strings.Contains(page, `alert("x")`), "text is escaped")
			assert.Equal(t, 1, strings.Count(page, "http"), "self-contained: the SVG namespace is the only URL")
			assert.Contains(t, page, "location.hash", "#node-N selects a node on load")
			assert.Contains(t, page, "document.body.dataset.nodes", "the rendered page reports its node count")
			if tc.v != nil {
				for _, want := range []string{`"v_star":0.7,`, `"target":0.75,`, `"advantage":-0.7,`, `"state":"failed: \"tool timeout\""`} {
					assert.True(t, strings.Contains(page, want), want)
				}
			}
		})
	}
	tr.Nodes[1].Parent = 5
	assert.Error(t, export.WriteHTML(&bytes.Buffer{}, tr, nil, nil))
}
