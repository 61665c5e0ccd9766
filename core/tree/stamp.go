package tree

import "sync/atomic"

// spanStamp identifies one span whose contents were checked: the first
// element of each of its three arrays (nil when empty) and their common
// length. A span whose slices still start at those elements with that length
// reads the very memory that was checked.
type spanStamp struct {
	tokens    *uint32
	trainable *bool
	logprobs  *float64
	n         int
	generated int // trainable tokens, counted once at the check
}

// nodeStamp locates a node's span stamps in Tree.spanStamps; n < 0 marks a
// node whose spans were not checked on entry (the root, or a node of a tree
// built without AddChild/Unmarshal).
type nodeStamp struct {
	first, n int
}

// spanChecks counts the nodes whose span contents validate has read (calls
// that fail on a node-level field are not counted), for tests that assert
// the per-token work is not repeated.
var spanChecks atomic.Int64

func stampOf(s *PackedSequence) spanStamp {
	n := len(s.Tokens)
	if n == 0 {
		return spanStamp{}
	}
	return spanStamp{tokens: &s.Tokens[0], trainable: &s.Trainable[0], logprobs: &s.Logprobs[0], n: n,
		generated: s.TrainableCount()}
}

// matches reports whether s is exactly the span st was taken from.
func (st *spanStamp) matches(s *PackedSequence) bool {
	n := st.n
	if len(s.Tokens) != n || len(s.Trainable) != n || len(s.Logprobs) != n {
		return false
	}
	return n == 0 || (&s.Tokens[0] == st.tokens && &s.Trainable[0] == st.trainable && &s.Logprobs[0] == st.logprobs)
}

// stamp records that the spans of node id >= 1 have just been checked. Nodes
// before id without a stamp get the "unchecked" mark. The root is never
// stamped: the engine extends the prompt after New, and its check is one span.
func (t *Tree) stamp(id int) {
	for len(t.nodeStamps) < id {
		t.nodeStamps = append(t.nodeStamps, nodeStamp{n: -1})
	}
	spans := t.Nodes[id].Spans
	ns := nodeStamp{first: len(t.spanStamps), n: len(spans)}
	for k := range spans {
		t.spanStamps = append(t.spanStamps, stampOf(&spans[k]))
	}
	t.nodeStamps = append(t.nodeStamps[:id], ns)
}

// stamped reports whether node id's spans are the ones checked when it
// entered the tree. Any doubt (no stamp, a span slice replaced or resized,
// stamps shared with a copy of the tree that has since grown differently)
// answers false, which only costs a re-check.
func (t *Tree) stamped(id int) bool {
	if id == 0 || id >= len(t.nodeStamps) {
		return false
	}
	ns := t.nodeStamps[id]
	spans := t.Nodes[id].Spans
	if ns.n != len(spans) || ns.first+ns.n > len(t.spanStamps) {
		return false
	}
	for k := range spans {
		if !t.spanStamps[ns.first+k].matches(&spans[k]) {
			return false
		}
	}
	return true
}

// EdgeTrainable is the number of trainable tokens on node id's incoming edge and the
// number of its spans that hold any. For a node whose spans are the ones checked as it
// entered the tree, both come from the counts taken then; otherwise the masks are read.
func (t *Tree) EdgeTrainable(id int) (tokens, spans int) {
	if t.stamped(id) {
		ns := t.nodeStamps[id]
		for _, st := range t.spanStamps[ns.first : ns.first+ns.n] {
			if st.generated > 0 {
				tokens += st.generated
				spans++
			}
		}
		return tokens, spans
	}
	for k := range t.Nodes[id].Spans {
		if c := t.Nodes[id].Spans[k].TrainableCount(); c > 0 {
			tokens += c
			spans++
		}
	}
	return tokens, spans
}
