package export

import (
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// The path layout (LayoutPaths): one actor record per root-to-leaf path of
// the trained edges, so a trainer that scores whole sequences reads every
// shared prefix once per leaf instead of once per segment below it.
//
// Records: every lowest trained node m (a node whose edge has generated tokens
// and a kept actor sample, and no such edge below it: the leaves, when every leaf edge
// trains) gives one record, m's whole context, in depth-first order (children
// in launch order). Owners: walking up from m, the record owns every edge
// that no earlier record owns; owned edges form a prefix of every path, so a
// record owns a contiguous suffix of its tokens (SpanStart on), and each
// trained edge is owned by the first record below it. Inside the owned
// suffix, trained edges keep their trainable mask, behaviour log-probabilities
// and Options.advantage (visitation-weighted when asked); untrained edges (filtered by min_abs_advantage, inexact)
// and conditioning tokens get mask false, log-probability 0 and advantage 0.
// The context before SpanStart is all mask false, advantage 0.
//
// Total tokens are the sum of those record lengths: at most the sum of the
// leaf path lengths (the least a sequence trainer without tree attention can
// be sent when every leaf trains), and at most the per-span layout's tokens.

// encodePaths is encode for LayoutPaths: the samples must reference one tree.
func encodePaths(b *prepare.Batch, groupIndex int, opts Options, st *SharedTokens) (*Flat, error) {
	var t *tree.Tree
	for i := range b.Actor {
		a := &b.Actor[i]
		switch {
		case a.Tree() == nil:
			return nil, status.Errorf(status.InvalidArgument,
				"export: layout %q needs samples prepared from a tree; actor sample %d (node %d) has explicit spans (use the default layout %q)",
				string(LayoutPaths), i, a.NodeID, string(LayoutSpans))
		case t == nil:
			t = a.Tree()
		case a.Tree() != t:
			return nil, status.Errorf(status.InvalidArgument,
				"export: layout %q needs every actor sample from one tree; sample %d is from another tree than sample 0", string(LayoutPaths), i)
		}
	}
	f := &Flat{ProblemID: b.ProblemID, GroupIndex: groupIndex, Layout: LayoutPaths}
	if t == nil {
		return emptyPaths(f, b, st, opts), nil
	}
	n := len(t.Nodes)
	sampleOf := make([]int32, n) // node -> its kept actor sample, -1 for none
	for id := range sampleOf {
		sampleOf[id] = -1
	}
	for i := range b.Actor {
		a := &b.Actor[i]
		// Prepare makes one sample per edge; a batch assembled by hand could do otherwise.
		if a.NodeID <= 0 || a.NodeID >= n {
			return nil, status.Errorf(status.InvalidArgument, "export: actor sample %d is for node %d, not an edge of the tree (nodes 1..%d)", i, a.NodeID, n-1)
		}
		if j := sampleOf[a.NodeID]; j >= 0 {
			return nil, status.Errorf(status.InvalidArgument,
				"export: layout %q needs one actor sample per edge; samples %d and %d are both for node %d", string(LayoutPaths), j, i, a.NodeID)
		}
		// An edge without generated tokens trains nothing: no record needs it.
		if keep(a, opts) && a.NumSpans() > 0 {
			sampleOf[a.NodeID] = int32(i)
		}
	}
	// trainedBelow[id]: a kept sample strictly below id.
	trainedBelow := make([]bool, n)
	order := t.BreadthFirst()
	for k := len(order) - 1; k > 0; k-- {
		id := order[k]
		if sampleOf[id] >= 0 || trainedBelow[id] {
			trainedBelow[t.Nodes[id].Parent] = true
		}
	}
	// The lowest trained nodes, depth first, with each record's own suffix.
	type path struct{ node, top, length int }
	var paths []path
	owned := make([]bool, n)
	owned[0] = true // the prompt is context of every record
	records, tokens, own := 0, 0, 0
	stack := []int{0}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if sampleOf[id] >= 0 && !trainedBelow[id] {
			top := id
			for c := id; !owned[c]; c = t.Nodes[c].Parent {
				owned[c], top = true, c
			}
			full := t.ContextLen(t.Nodes[id].Parent) + lastTrained(&t.Nodes[id])
			paths = append(paths, path{id, top, full})
			records++
			tokens += full
			own += full - t.ContextLen(t.Nodes[top].Parent)
			continue
		}
		ch := t.Nodes[id].Children
		for k := len(ch) - 1; k >= 0; k-- {
			if c := ch[k]; sampleOf[c] >= 0 || trainedBelow[c] {
				stack = append(stack, c)
			}
		}
	}

	ac := &f.Actor
	if st == nil {
		ac.Offsets = make([]int64, 1, records+1)
		ac.Tokens = make([]uint32, 0, tokens)
	} else {
		st.Base = make([]int64, 0, records)
		st.Offsets = make([]int64, 1, records+1)
		st.Tokens = make([]uint32, 0, tokens)
	}
	ac.reserve(records, own, opts)
	ac.SpanAdvantages = make([]float64, 0, own)
	returns := t.Returns()
	var suffix []int // the own suffix's nodes, top first
	for _, p := range paths {
		// Paths rarely prefix one another: every record stores its tokens whole.
		var recordTokens []uint32
		if st == nil {
			from := len(ac.Tokens)
			ac.Tokens = appendPathTokens(ac.Tokens, t, p.node, p.length)
			ac.Offsets = append(ac.Offsets, int64(len(ac.Tokens)))
			recordTokens = ac.Tokens[from:]
		} else {
			from := len(st.Tokens)
			st.Tokens = appendPathTokens(st.Tokens, t, p.node, p.length)
			st.Base = append(st.Base, -1)
			st.Offsets = append(st.Offsets, int64(len(st.Tokens)))
			recordTokens = st.Tokens[from:]
		}
		spanStart := t.ContextLen(t.Nodes[p.top].Parent)
		ac.SpanStart = append(ac.SpanStart, int64(spanStart))
		ownFrom := len(ac.SpanMask)
		suffix = suffix[:0]
		for c := p.node; ; c = t.Nodes[c].Parent {
			suffix = append(suffix, c)
			if c == p.top {
				break
			}
		}
		for k := len(suffix) - 1; k >= 0; k-- {
			id := suffix[k]
			limit := -1
			if k == 0 {
				limit = lastTrained(&t.Nodes[id])
			}
			appendEdge(ac, t, id, b, sampleOf[id], limit, opts)
		}
		ac.SpanOffsets = append(ac.SpanOffsets, int64(len(ac.SpanMask)))
		start := spanStart + firstTrue(ac.SpanMask[ownFrom:])
		if err := ac.addResponse(opts, start, 0, recordTokens[start:], t, returns, p.node); err != nil {
			return nil, err
		}
		i := int(sampleOf[p.node])
		a := &b.Actor[i]
		ac.Advantage = append(ac.Advantage, opts.advantage(a))
		ac.NodeID = append(ac.NodeID, int64(p.node))
		ac.SearchPass = append(ac.SearchPass, int64(a.SearchPass))
		ac.Estimator = append(ac.Estimator, f.estimatorIndex(a.Estimator))
		ac.Sample = append(ac.Sample, int64(i))
		ac.Span = append(ac.Span, -1) // the whole path, not one span
	}
	encodeCritic(f, b)
	return f, nil
}

// lastTrained is the length of nd's edge up to and including its last
// trainable token: a record ends there, since later tokens condition nothing
// it trains.
func lastTrained(nd *tree.Node) int {
	n, last := 0, 0
	for _, s := range nd.Spans {
		for j, m := range s.Trainable {
			if m {
				last = n + j + 1
			}
		}
		n += len(s.Tokens)
	}
	return last
}

// appendPathTokens appends the first length tokens of node id's context.
func appendPathTokens(dst []uint32, t *tree.Tree, id, length int) []uint32 {
	start := len(dst)
	dst = t.AppendContextTokens(dst, t.Nodes[id].Parent)
	for _, s := range t.Nodes[id].Spans {
		if rest := length - (len(dst) - start); rest < len(s.Tokens) {
			return append(dst, s.Tokens[:rest]...)
		}
		dst = append(dst, s.Tokens...)
	}
	return dst
}

// appendEdge appends the own-part columns of node id's edge (its first limit
// tokens; all of them when limit < 0): its trainable mask, behaviour
// log-probabilities and advantage when it has kept sample i (>= 0), all
// false / 0.0 when it has none.
func appendEdge(ac *ActorColumns, t *tree.Tree, id int, b *prepare.Batch, i int32, limit int, opts Options) {
	adv := 0.0
	if i >= 0 {
		adv = opts.advantage(&b.Actor[i])
	}
	for _, s := range t.Nodes[id].Spans {
		k := len(s.Tokens)
		if limit >= 0 {
			k = min(k, limit)
			limit -= k
		}
		if i < 0 {
			for range k {
				ac.SpanMask = append(ac.SpanMask, false)
				ac.SpanLogprobs = append(ac.SpanLogprobs, 0)
				ac.SpanAdvantages = append(ac.SpanAdvantages, 0)
			}
			continue
		}
		// One copy of the mask and log-probabilities, then zero the conditioning positions.
		lp := len(ac.SpanLogprobs)
		ac.SpanMask = append(ac.SpanMask, s.Trainable[:k]...)
		ac.SpanLogprobs = append(ac.SpanLogprobs, s.Logprobs[:k]...)
		for j, trained := range s.Trainable[:k] {
			if trained {
				ac.SpanAdvantages = append(ac.SpanAdvantages, adv)
			} else {
				ac.SpanLogprobs[lp+j] = 0
				ac.SpanAdvantages = append(ac.SpanAdvantages, 0)
			}
		}
	}
}

// emptyPaths is a path-layout Flat without actor records.
func emptyPaths(f *Flat, b *prepare.Batch, st *SharedTokens, opts Options) *Flat {
	ac := &f.Actor
	if st == nil {
		ac.Offsets = []int64{0}
	} else {
		st.Offsets = []int64{0}
	}
	ac.SpanOffsets = []int64{0}
	ac.SpanAdvantages = []float64{}
	ac.reserve(0, 0, opts)
	encodeCritic(f, b)
	return f
}
