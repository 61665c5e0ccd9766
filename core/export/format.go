package export

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// textExcerpt is how many runes of an edge's text FormatTree shows.
const textExcerpt = 40

// num renders a value compactly with 6 significant digits.
func num(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }

// signed renders an advantage with an explicit sign.
func signed(x float64) string {
	if x >= 0 {
		return "+" + num(x)
	}
	return num(x)
}

// batchIndex finds a batch's samples by node id.
type batchIndex struct {
	actor  map[int]*prepare.ActorSample
	critic map[int]*prepare.CriticSample
}

func indexBatch(b *prepare.Batch) batchIndex {
	ix := batchIndex{actor: map[int]*prepare.ActorSample{}, critic: map[int]*prepare.CriticSample{}}
	if b == nil {
		return ix
	}
	for i := range b.Actor {
		ix.actor[b.Actor[i].NodeID] = &b.Actor[i]
	}
	for i := range b.Critic {
		ix.critic[b.Critic[i].NodeID] = &b.Critic[i]
	}
	return ix
}

// nodeState names a node's state for display.
func nodeState(t *tree.Tree, id int) string {
	nd := &t.Nodes[id]
	switch {
	case id == 0:
		return "root"
	case nd.Failed != "":
		return "failed: " + strconv.Quote(nd.Failed)
	case nd.Truncated:
		return "truncated"
	case nd.Done:
		return "done"
	case len(nd.Children) == 0:
		return "open"
	}
	return ""
}

// FormatTree renders t as an indented tree, one node per line: id, state
// (root, done, truncated, failed, open for a childless checkpoint), edge
// reward r, critic prediction v_hat, and, given a batch, the actor weight A of
// the edge into the node and the node's critic target; then the start of the
// edge text.
func FormatTree(t *tree.Tree, b *prepare.Batch) string {
	ix := indexBatch(b)
	var sb strings.Builder
	var walk func(id int, prefix, branch string)
	walk = func(id int, prefix, branch string) {
		nd := &t.Nodes[id]
		sb.WriteString(prefix + branch + strconv.Itoa(id))
		if s := nodeState(t, id); s != "" {
			sb.WriteString(" " + s)
		}
		if id != 0 {
			sb.WriteString(" r=" + num(nd.Reward))
		}
		if nd.Critic != nil {
			sb.WriteString(" v_hat=" + num(*nd.Critic))
		}
		if a := ix.actor[id]; a != nil {
			sb.WriteString(" A=" + signed(a.Weight))
		}
		if c := ix.critic[id]; c != nil {
			sb.WriteString(" target=" + num(c.Target))
		}
		if nd.Text != "" {
			sb.WriteString(" " + excerpt(nd.Text))
		}
		sb.WriteByte('\n')
		switch branch {
		case "├── ":
			prefix += "│   "
		case "└── ":
			prefix += "    "
		}
		for i, c := range nd.Children {
			if i == len(nd.Children)-1 {
				walk(c, prefix, "└── ")
			} else {
				walk(c, prefix, "├── ")
			}
		}
	}
	if len(t.Nodes) > 0 {
		walk(0, "", "")
	}
	return sb.String()
}

// excerpt quotes the first textExcerpt runes of s.
func excerpt(s string) string {
	n := 0
	for i := range s {
		if n == textExcerpt {
			return strconv.Quote(s[:i]) + "…"
		}
		n++
	}
	return strconv.Quote(s)
}

// tail quotes the last textExcerpt runes of s: where a checkpoint context
// differs from its siblings'.
func tail(s string) string {
	n := utf8.RuneCountInString(s)
	if n <= textExcerpt {
		return strconv.Quote(s)
	}
	for i := range s {
		if n == textExcerpt {
			return "…" + strconv.Quote(s[i:])
		}
		n--
	}
	return strconv.Quote(s)
}

// The text views of a batch BatchText renders, by the name the binding asks for.
const (
	ViewDescribe = "describe" // Describe (Batch.describe)
	ViewEdges    = "edges"    // FormatEdges (the export's edge table)
)

// BatchText renders b as the named view (ViewDescribe or ViewEdges); another name is a
// status.InvalidArgument error naming the views.
func BatchText(b *prepare.Batch, view string) (string, error) {
	switch view {
	case ViewDescribe:
		return Describe(b), nil
	case ViewEdges:
		return FormatEdges(b), nil
	}
	return "", status.Errorf(status.InvalidArgument, "batch text: unknown kind %q, expected %s or %s", view, ViewDescribe, ViewEdges)
}

// FormatEdges renders a batch as two tables: each actor edge's weight and
// trainable token count, then each critic target.
func FormatEdges(b *prepare.Batch) string {
	var sb strings.Builder
	w := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "actor edges (%d)\nnode\tgroup\tweight\ttokens\n", len(b.Actor))
	for i := range b.Actor {
		a := &b.Actor[i]
		fmt.Fprintf(w, "%d\t%d\t%s\t%d\n", a.NodeID, a.GroupID, signed(a.Weight), a.EdgeTokens())
	}
	w.Flush()
	fmt.Fprintf(w, "critic targets (%d)\nnode\ttarget\n", len(b.Critic))
	for i := range b.Critic {
		c := &b.Critic[i]
		fmt.Fprintf(w, "%d\t%s\n", c.NodeID, num(c.Target))
	}
	w.Flush()
	return sb.String()
}

// Describe renders each actor edge with its advantage and diagnostics, then
// each critic target with its diagnostics and context, one per line
// (Batch.describe).
func Describe(b *prepare.Batch) string {
	var sb strings.Builder
	for i := range b.Actor {
		a := &b.Actor[i]
		fmt.Fprintf(&sb, "actor node=%d group=%d estimator=%s advantage=%s edge_tokens=%d", a.NodeID, a.GroupID, a.Estimator, signed(a.Weight), a.EdgeTokens())
		if a.SearchPass != prepare.NoSearchPass {
			fmt.Fprintf(&sb, " search_pass=%d", a.SearchPass)
		}
		writeDiagnostics(&sb, a.Diagnostics)
		sb.WriteByte('\n')
	}
	for i := range b.Critic {
		c := &b.Critic[i]
		fmt.Fprintf(&sb, "critic node=%d target=%s", c.NodeID, num(c.Target))
		writeDiagnostics(&sb, c.Diagnostics)
		sb.WriteString(" context=" + tail(c.Context()) + "\n")
	}
	return sb.String()
}

func writeDiagnostics(sb *strings.Builder, d prepare.Diagnostics) {
	for i := range d.Len() {
		x := d.At(i)
		sb.WriteString(" " + x.Name + "=" + num(x.Value))
	}
}
