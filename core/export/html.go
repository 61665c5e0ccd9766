package export

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree"
)

// Layout of the HTML rendering, in SVG pixels.
const (
	htmlDX     = 26 // between neighbouring leaves
	htmlDY     = 64 // between depths
	htmlMargin = 24
	htmlRadius = 7
)

// htmlNode is what the page's script shows when a node is clicked.
type htmlNode struct {
	ID       int      `json:"id"`
	State    string   `json:"state"`
	Depth    int      `json:"depth"`
	Pass     int      `json:"search_pass"`
	Reward   *float64 `json:"reward"`
	Critic   *float64 `json:"critic"`
	Refined  *float64 `json:"v_star"`
	Target   *float64 `json:"target"`
	Weight   *float64 `json:"advantage"`
	Children int      `json:"n_s"`
	Tokens   int      `json:"edge_tokens"`
	Text     string   `json:"text"`
}

// WriteHTML writes a self-contained page (inline SVG, CSS and a little
// script) drawing t: checkpoints coloured by refined value V* and terminal
// nodes (squares) by their reward, red to green over [reward_min,
// reward_max], grey where there is none, hollow when failed; edges coloured and thickened by their actor weight
// (blue positive, red negative). Clicking a node shows its segment text,
// reward, critic prediction, V*, critic target and advantage; the URL fragment
// #node-N opens the page with node N shown, and once the script has run the
// body carries data-nodes (the number of node shapes). v and b may be nil;
// without v nodes are coloured by their critic prediction.
func WriteHTML(w io.Writer, t *tree.Tree, v *prepare.TreeValues, b *prepare.Batch) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("export: html: %w", err)
	}
	ix := indexBatch(b)
	n := len(t.Nodes)
	xs := layout(t)
	lo, hi := 0.0, 1.0
	if v != nil {
		lo, hi = v.Config.RewardMin, v.Config.RewardMax
	} else if b != nil && b.RewardConfig != nil {
		lo, hi = b.RewardConfig.RewardMin, b.RewardConfig.RewardMax
	}
	maxAbs := 0.0
	for _, a := range ix.actor {
		maxAbs = max(maxAbs, math.Abs(a.Weight))
	}

	nodes := make([]htmlNode, n)
	for id := range t.Nodes {
		nd := &t.Nodes[id]
		hn := htmlNode{ID: id, State: nodeState(t, id), Depth: nd.Depth, Pass: nd.SearchPass, Critic: nd.Critic, Children: len(nd.Children), Tokens: nd.EdgeLen(), Text: nd.Text}
		if id != 0 {
			hn.Reward = &nd.Reward
		}
		if v != nil && v.HasRefined(id) {
			hn.Refined = &v.Refined[id]
			hn.Children = v.Count[id]
		}
		if c := ix.critic[id]; c != nil {
			hn.Target = &c.Target
		}
		if a := ix.actor[id]; a != nil {
			hn.Weight = &a.Weight
		}
		nodes[id] = hn
	}
	data, err := jsoniter.ConfigCompatibleWithStandardLibrary.Marshal(nodes) // escapes '<': safe inside <script>
	if err != nil {
		return fmt.Errorf("export: html: %w", err)
	}

	maxDepth, maxX := 0, 0.0
	for id := range t.Nodes {
		maxDepth = max(maxDepth, t.Nodes[id].Depth)
		maxX = max(maxX, xs[id])
	}
	width := int(maxX)*htmlDX + 2*htmlMargin
	height := maxDepth*htmlDY + 2*htmlMargin
	px := func(id int) (float64, float64) {
		return htmlMargin + xs[id]*htmlDX, float64(htmlMargin + t.Nodes[id].Depth*htmlDY)
	}

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, htmlHead, html.EscapeString(t.ProblemID), html.EscapeString(t.ProblemID), n)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">`+"\n", width, height)
	for id := 1; id < n; id++ {
		x1, y1 := px(t.Nodes[id].Parent)
		x2, y2 := px(id)
		stroke, sw := "#bbb", 1.0
		if a := ix.actor[id]; a != nil && maxAbs > 0 {
			stroke, sw = advantageColour(a.Weight/maxAbs), 1+4*math.Abs(a.Weight)/maxAbs
		}
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.2f"/>`+"\n", x1, y1, x2, y2, stroke, sw)
	}
	for id := range t.Nodes {
		nd := &t.Nodes[id]
		x, y := px(id)
		fill := "#999"
		switch {
		case v != nil && !v.Excluded[id] && nd.Terminal():
			// V* of a terminal node is 0 by definition; its reward says more.
			fill = valueColour((v.Reward[id] - lo) / (hi - lo))
		case v != nil && v.HasRefined(id):
			fill = valueColour((v.Refined[id] - lo) / (hi - lo))
		case v == nil && nd.Critic != nil:
			fill = valueColour((*nd.Critic - lo) / (hi - lo))
		}
		style := fmt.Sprintf(`fill="%s" stroke="#333"`, fill)
		if nd.Failed != "" || (v != nil && v.Excluded[id]) {
			style = `fill="#fff" stroke="#000" stroke-dasharray="2,2"`
		}
		if nd.Terminal() {
			fmt.Fprintf(bw, `<rect data-id="%d" x="%.1f" y="%.1f" width="%d" height="%d" %s/>`+"\n", id, x-htmlRadius, y-htmlRadius, 2*htmlRadius, 2*htmlRadius, style)
		} else {
			fmt.Fprintf(bw, `<circle data-id="%d" cx="%.1f" cy="%.1f" r="%d" %s/>`+"\n", id, x, y, htmlRadius, style)
		}
	}
	bw.WriteString("</svg>\n")
	fmt.Fprintf(bw, htmlTail, data)
	return bw.Flush()
}

// layout places leaves at consecutive x in depth-first order and each parent
// midway between its first and last child, so no edges cross.
func layout(t *tree.Tree) []float64 {
	xs := make([]float64, len(t.Nodes))
	next := 0.0
	var place func(id int)
	place = func(id int) {
		ch := t.Nodes[id].Children
		if len(ch) == 0 {
			xs[id] = next
			next++
			return
		}
		for _, c := range ch {
			place(c)
		}
		xs[id] = (xs[ch[0]] + xs[ch[len(ch)-1]]) / 2
	}
	place(0)
	return xs
}

// valueColour maps p in [0, 1] from red through yellow to green.
func valueColour(p float64) string {
	p = min(max(p, 0), 1)
	return fmt.Sprintf("hsl(%.0f,70%%,50%%)", 120*p)
}

// advantageColour maps a in [-1, 1] to red (negative) or blue (positive),
// saturated with |a|.
func advantageColour(a float64) string {
	hue := 215
	if a < 0 {
		hue = 0
	}
	return fmt.Sprintf("hsl(%d,%.0f%%,%.0f%%)", hue, 30+60*math.Abs(a), 70-30*math.Abs(a))
}

const htmlHead = `<!doctype html>
<html><head><meta charset="utf-8"><title>focus tree %s</title>
<style>
body{font:14px system-ui,sans-serif;margin:0;display:flex;flex-direction:column;height:100vh}
header{padding:8px 12px;border-bottom:1px solid #ddd}
#main{flex:1;display:flex;min-height:0}
#view{flex:1;overflow:auto}
#panel{width:360px;overflow:auto;border-left:1px solid #ddd;padding:8px 12px}
#panel pre{white-space:pre-wrap;background:#f6f6f6;padding:6px}
[data-id]{cursor:pointer}
.sel{stroke:#000;stroke-width:3}
td{padding:1px 8px 1px 0}
</style></head><body>
<header><b>%s</b> &middot; %d nodes &middot; node colour: refined value V*, or reward for terminal squares (red low, green high, grey none, dashed failed); edge colour and width: advantage (blue +, red &minus;)</header>
<div id="main"><div id="view">
`

const htmlTail = `</div><aside id="panel">Click a node.</aside></div>
<script>
const nodes = %s;
const show = v => v === null || v === undefined ? "—" : (typeof v === "number" ? String(+v.toPrecision(6)) : String(v));
let sel = null;
const shapes = [...document.querySelectorAll("svg [data-id]")];
function select(el) {
  if (sel) sel.classList.remove("sel");
  sel = el; el.classList.add("sel");
  const n = nodes[+el.dataset.id];
  const rows = [["node", n.id], ["state", n.state || "checkpoint"], ["depth", n.depth], ["search pass", n.search_pass],
    ["reward r", n.reward], ["critic v_hat", n.critic], ["refined V*", n.v_star], ["critic target", n.target],
    ["advantage", n.advantage], ["children n_s", n.n_s], ["edge tokens", n.edge_tokens]];
  const table = document.createElement("table");
  for (const [k, v] of rows) {
    const tr = table.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = show(v);
  }
  const pre = document.createElement("pre");
  pre.textContent = n.text;
  document.getElementById("panel").replaceChildren(table, pre);
}
shapes.forEach(el => el.addEventListener("click", () => {
  select(el);
  try { history.replaceState(null, "", "#node-" + el.dataset.id); } catch (e) {}
}));
// #node-N opens the page with node N selected (links to a node; headless checks).
const m = /^#node-(\d+)$/.exec(location.hash);
const first = m && shapes.find(el => el.dataset.id === m[1]);
if (first) select(first);
// Set once the script has run: how many node shapes the page drew.
document.body.dataset.nodes = String(shapes.length);
</script></body></html>
`
