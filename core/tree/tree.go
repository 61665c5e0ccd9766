package tree

import (
	"strings"
	"unicode/utf8"

	"github.com/focus-go/focus-go/core/status"
)

// PackedSequence is a run of exact token ids with a per-token trainable mask
// (true only on tokens the behaviour policy generated) and the behaviour
// log-probabilities of those tokens (0.0 where not generated). The three
// slices always have the same length.
type PackedSequence struct {
	Tokens    []uint32  `json:"tokens"`
	Trainable []bool    `json:"trainable"`
	Logprobs  []float64 `json:"logprobs"`
}

// Len is the number of tokens.
func (p PackedSequence) Len() int { return len(p.Tokens) }

// TrainableCount is the number of generated (trainable) tokens.
func (p PackedSequence) TrainableCount() int { return countTrue(p.Trainable) }

// HasTrainable reports whether at least one token is generated.
func (p PackedSequence) HasTrainable() bool {
	for _, t := range p.Trainable {
		if t {
			return true
		}
	}
	return false
}

// AppendConditioning appends s to p as conditioning tokens: same ids, trainable
// false and log-probability 0.0, as a generated span looks from a later turn.
func (p PackedSequence) AppendConditioning(s PackedSequence) PackedSequence {
	n := len(s.Tokens)
	p.Tokens = append(p.Tokens, s.Tokens...)
	p.Trainable = append(p.Trainable, make([]bool, n)...)
	p.Logprobs = append(p.Logprobs, make([]float64, n)...)
	return p
}

// AppendGenerated appends s keeping its trainable mask; log-probabilities are
// copied only where s is trainable, so they are 0.0 wherever the mask is false.
func (p PackedSequence) AppendGenerated(s PackedSequence) PackedSequence {
	p.Tokens = append(p.Tokens, s.Tokens...)
	p.Trainable = append(p.Trainable, s.Trainable...)
	start := len(p.Logprobs)
	p.Logprobs = append(p.Logprobs, make([]float64, len(s.Tokens))...)
	for i, t := range s.Trainable {
		if t {
			p.Logprobs[start+i] = s.Logprobs[i]
		}
	}
	return p
}

// Node is one checkpoint of the search and the edge that reached it from its
// parent. The root's edge is the prompt (conditioning tokens only).
type Node struct {
	ID       int   `json:"id"`
	Parent   int   `json:"parent"`   // -1 for the root
	Children []int `json:"children"` // launch order, never completion order
	Depth    int   `json:"depth"`
	// Spans is the edge: conditioning tokens (chat glue, tool results) and the
	// generated tokens, trainable only on the latter.
	Spans       []PackedSequence `json:"spans"`
	Reward      float64          `json:"reward"` // env reward r on the incoming edge
	Text        string           `json:"text"`   // decoded display text of the edge
	Observation string           `json:"observation"`
	Done        bool             `json:"done"`
	Truncated   bool             `json:"truncated"`
	Failed      string           `json:"failed"` // failure message; "" = ok
	Critic      *float64         `json:"critic"` // V_phi prediction; nil = not scored
	SearchPass  int              `json:"search_pass"`
	// Inexact, when not "", says why the edge's generated tokens cannot train the actor:
	// the policy did not preserve exact token ids (Policy(exact=False), an API backend,
	// exact_generation False) or the server gave no finite logprob for one of them. Such
	// an edge keeps its tokens as conditioning only (no trainable token, logprobs 0.0),
	// so its values and critic target are computed as usual, but preparation emits no
	// actor sample for it and lists it in the batch's failures with this reason.
	Inexact string `json:"inexact,omitempty"`
}

// Terminal reports whether the node ends its path (done or truncated).
func (n *Node) Terminal() bool { return n.Done || n.Truncated }

// EdgeLen is the number of tokens on the incoming edge.
func (n *Node) EdgeLen() int {
	l := 0
	for _, s := range n.Spans {
		l += len(s.Tokens)
	}
	return l
}

// GeneratedTokens is the number of trainable tokens on the incoming edge.
func (n *Node) GeneratedTokens() int {
	c := 0
	for _, s := range n.Spans {
		c += s.TrainableCount()
	}
	return c
}

// GeneratedTokens is the number of trainable tokens on every edge of the tree:
// what the policy generated for the rollouts the tree kept.
func (t *Tree) GeneratedTokens() int {
	c := 0
	for i := range t.Nodes {
		c += t.Nodes[i].GeneratedTokens()
	}
	return c
}

// Tokens returns the incoming edge's token ids as one new slice.
func (n *Node) Tokens() []uint32 {
	out := make([]uint32, 0, n.EdgeLen())
	for _, s := range n.Spans {
		out = append(out, s.Tokens...)
	}
	return out
}

// Stats are the collection statistics the engine records on a tree.
type Stats struct {
	Rollouts           int     `json:"rollouts"`
	BudgetUnspent      int     `json:"budget_unspent"`
	GeneratedTokens    int     `json:"generated_tokens"`
	PrefixTokensReused int     `json:"prefix_tokens_reused"`
	WallSeconds        float64 `json:"wall_seconds"`
	PolicySeconds      float64 `json:"policy_seconds"`
	// FinishedRollouts, Successes and AllFailed are the tree's outcomes
	// (Tree.Outcomes) as the engine counted them when the collection ended,
	// so a caller reads them here instead of walking the nodes.
	FinishedRollouts int  `json:"finished_rollouts"`
	Successes        int  `json:"successes"`
	AllFailed        bool `json:"all_failed"`
	// TruncatedRollouts counts the finished rollouts cut at the length limit
	// (truncated, not done); OutcomesDiffer is true when the finished rollouts'
	// returns are not all equal (within SuccessTolerance), so the tree has an
	// outcome to learn from; RolloutTokens is the generated tokens on each
	// finished rollout's root-to-leaf path, in node order. RecordOutcomes sets
	// them with the counts above.
	TruncatedRollouts int   `json:"truncated_rollouts"`
	OutcomesDiffer    bool  `json:"outcomes_differ"`
	RolloutTokens     []int `json:"rollout_tokens,omitempty"`
}

// Tree is the whole mutable search state of one problem (SchedulerState in the
// Python API). Nodes[i].ID == i, and Nodes[0] is the root. Besides the exported
// fields a tree holds the record of the span checks made as nodes entered it
// (see the package doc); copying a Tree value shares that record, which is
// safe, and reflect.DeepEqual sees it, so compare a literal tree with a grown
// one by content (Marshal) rather than DeepEqual.
type Tree struct {
	ProblemID string `json:"problem_id"`
	Nodes     []Node `json:"nodes"`
	Stats     Stats  `json:"stats"`

	// nodeStamps[id] and spanStamps record the span arrays checked when node
	// id entered the tree (stamp.go); a tree built as a literal has none, so
	// Revalidate checks all its spans.
	nodeStamps []nodeStamp
	spanStamps []spanStamp
}

// New returns a tree holding only the root, whose edge is the prompt. Invalid
// UTF-8 in problemID and text is replaced as in AddChild.
func New(problemID string, prompt PackedSequence, text string) *Tree {
	return &Tree{
		ProblemID: validUTF8(problemID),
		Nodes: []Node{{
			ID:     0,
			Parent: -1,
			Spans:  []PackedSequence{prompt},
			Text:   validUTF8(text),
		}},
	}
}

// Len is the number of nodes, failed ones included.
func (t *Tree) Len() int { return len(t.Nodes) }

// Root returns the root node.
func (t *Tree) Root() *Node { return &t.Nodes[0] }

// Node returns node id, or nil if there is no such node.
func (t *Tree) Node(id int) *Node {
	if id < 0 || id >= len(t.Nodes) {
		return nil
	}
	return &t.Nodes[id]
}

// AddChild appends child under parent and returns its id. It fills ID, Parent
// and Depth, clears Children, and replaces invalid UTF-8 in the display
// strings with U+FFFD so that the tree always serialises losslessly. It checks
// the child's spans token by token and records them as checked (see the
// package doc), so later Revalidate calls do not read them again.
func (t *Tree) AddChild(parent int, child Node) (int, error) {
	p := t.Node(parent)
	if p == nil {
		return -1, status.Wrap(status.InvalidArgument, invalid(len(t.Nodes), "parent", "unknown node %d", parent), "tree: add child")
	}
	if p.Terminal() {
		return -1, status.Wrap(status.InvalidArgument, invalid(parent, "children", "cannot branch from a terminal node"), "tree: add child")
	}
	id := len(t.Nodes)
	child.ID, child.Parent, child.Depth, child.Children = id, parent, p.Depth+1, nil
	child.Text = validUTF8(child.Text)
	child.Observation = validUTF8(child.Observation)
	child.Failed = validUTF8(child.Failed)
	if err := child.validateFields(id, id+1, true); err != nil {
		return -1, status.Wrap(status.InvalidArgument, err, "tree: add child")
	}
	t.Nodes = append(t.Nodes, child)
	t.Nodes[parent].Children = append(t.Nodes[parent].Children, id)
	t.stamp(id)
	return id, nil
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Path returns the node ids from the root to id, both included.
func (t *Tree) Path(id int) []int {
	path := make([]int, t.Nodes[id].Depth+1)
	for i := len(path) - 1; i >= 0; i-- {
		path[i] = id
		id = t.Nodes[id].Parent
	}
	return path
}

// PathKey is the canonical tuple of child indices from the root to id (the
// root's key is empty); search uses it to break ties reproducibly.
func (t *Tree) PathKey(id int) []int {
	key := make([]int, t.Nodes[id].Depth)
	for i := len(key) - 1; i >= 0; i-- {
		key[i] = t.ChildIndex(id)
		id = t.Nodes[id].Parent
	}
	return key
}

// ChildIndex is id's position among its parent's children (launch order), or
// -1 for the root.
func (t *Tree) ChildIndex(id int) int {
	p := t.Nodes[id].Parent
	if p < 0 {
		return -1
	}
	for i, c := range t.Nodes[p].Children {
		if c == id {
			return i
		}
	}
	return -1
}

// ContextLen is the number of tokens in id's context (root prompt to id's edge).
func (t *Tree) ContextLen(id int) int {
	l := 0
	for ; id >= 0; id = t.Nodes[id].Parent {
		l += t.Nodes[id].EdgeLen()
	}
	return l
}

// AppendContextTokens appends the exact token prefix from the root prompt up
// to and including id's edge.
func (t *Tree) AppendContextTokens(dst []uint32, id int) []uint32 {
	if id < 0 {
		return dst
	}
	dst = t.AppendContextTokens(dst, t.Nodes[id].Parent)
	for _, s := range t.Nodes[id].Spans {
		dst = append(dst, s.Tokens...)
	}
	return dst
}

// ContextTokens returns id's exact token context as a new slice.
func (t *Tree) ContextTokens(id int) []uint32 {
	return t.AppendContextTokens(make([]uint32, 0, t.ContextLen(id)), id)
}

// AppendContext appends id's context as conditioning: every token untrainable
// with log-probability 0.0. An id of -1 appends nothing.
func (t *Tree) AppendContext(dst PackedSequence, id int) PackedSequence {
	if id < 0 {
		return dst
	}
	dst = t.AppendContext(dst, t.Nodes[id].Parent)
	for _, s := range t.Nodes[id].Spans {
		dst = dst.AppendConditioning(s)
	}
	return dst
}

// ContextText is the concatenation of the edge texts from the root prompt to
// id: the checkpoint as the critic reads it.
func (t *Tree) ContextText(id int) string {
	n := 0
	for c := id; c >= 0; c = t.Nodes[c].Parent {
		n += len(t.Nodes[c].Text)
	}
	var b strings.Builder
	b.Grow(n)
	t.AppendContextText(&b, id)
	return b.String()
}

// AppendContextText writes id's context text to b.
func (t *Tree) AppendContextText(b *strings.Builder, id int) {
	if id < 0 {
		return
	}
	t.AppendContextText(b, t.Nodes[id].Parent)
	b.WriteString(t.Nodes[id].Text)
}

// BreadthFirst returns every node id reachable from the root, each after its
// parent, siblings in launch order. On a valid tree it lists all nodes; its
// reverse visits children before parents.
func (t *Tree) BreadthFirst() []int {
	if len(t.Nodes) == 0 {
		return nil
	}
	order := make([]int, 1, len(t.Nodes))
	for head := 0; head < len(order); head++ {
		for _, c := range t.Nodes[order[head]].Children {
			if c > 0 && c < len(t.Nodes) && len(order) < len(t.Nodes) {
				order = append(order, c)
			}
		}
	}
	return order
}
