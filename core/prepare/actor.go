package prepare

import (
	"fmt"

	"github.com/focus-go/focus-go/core/tree"
)

// NoSearchPass marks an ActorSample whose search pass is unknown (Python None).
const NoSearchPass = -1

// ActorSample is one edge's training signal: Weight (the advantage) is
// broadcast to every generated token of the edge.
//
// Spans: an edge may hold several generated spans (a chat template can split
// one assistant turn). Span i is the full exact context up to and including
// the edge's i-th generated span, trainable only on that span's generated
// tokens, log-probabilities 0.0 elsewhere: exactly one actor record. Samples
// made by Prepare store only the tree and node id and materialise spans on
// demand (a context per span would cost O(depth x span) memory per record);
// samples made with NewActorSample carry their spans explicitly.
type ActorSample struct {
	NodeID int `json:"node_id"`
	// GroupID is the checkpoint the edge leaves from (its parent node): edges
	// with the same GroupID are siblings compared against the same V*(s).
	GroupID     int         `json:"group_id"`
	Estimator   string      `json:"estimator"`
	Weight      float64     `json:"weight"`
	Diagnostics Diagnostics `json:"diagnostics"`
	SearchPass  int         `json:"search_pass"` // NoSearchPass if unknown
	// Visitation is the edge's visitation factor w(s->c) = R·π̂(c) (see
	// Visitation): the multiplier that makes the tree's edges an unbiased
	// estimate of the on-policy gradient, in units of R independent rollouts.
	// Weight stays the advantage; trainers opt in to Weight*Visitation
	// (export.Options.VisitationWeights). Prepare sets it on every sample it
	// makes; NewActorSample and EdgeSample start at 1 (no reweighting).
	Visitation float64 `json:"visitation"`

	src   *tree.Tree // prepared samples: spans come from src.Nodes[NodeID]
	spans []tree.PackedSequence
	// Set by Prepare, which counts every edge's generated tokens once anyway:
	// NumSpans and EdgeTokens then need not re-read the edge's masks.
	counted              bool
	numSpans, edgeTokens int
}

// NewActorSample builds a sample from explicit spans, each already a full
// context whose trainable tokens are that span's generated tokens (what a
// Python caller passes as ActorSample(spans=...)).
func NewActorSample(nodeID, groupID int, estimator string, weight float64, spans []tree.PackedSequence) ActorSample {
	return ActorSample{NodeID: nodeID, GroupID: groupID, Estimator: estimator, Weight: weight, SearchPass: NoSearchPass, Visitation: 1, spans: spans}
}

// EdgeSample builds a sample for the edge into node id of t, referencing the
// tree for its spans. Estimators outside this package use it too.
func EdgeSample(t *tree.Tree, id int, estimator string, weight float64, diag Diagnostics) ActorSample {
	nd := &t.Nodes[id]
	return ActorSample{NodeID: id, GroupID: nd.Parent, Estimator: estimator, Weight: weight,
		Diagnostics: diag, SearchPass: nd.SearchPass, Visitation: 1, src: t}
}

// NumSpans is the number of generated spans (actor records) of the edge.
func (a *ActorSample) NumSpans() int {
	if a.counted {
		return a.numSpans
	}
	if a.src == nil {
		return len(a.spans)
	}
	n := 0
	for _, s := range a.src.Nodes[a.NodeID].Spans {
		if s.HasTrainable() {
			n++
		}
	}
	return n
}

// edgeSpan maps generated span i to its index in the node's edge spans.
func (a *ActorSample) edgeSpan(i int) int {
	for k, s := range a.src.Nodes[a.NodeID].Spans {
		if s.HasTrainable() {
			if i == 0 {
				return k
			}
			i--
		}
	}
	panic(fmt.Sprintf("prepare: node %d has no generated span %d", a.NodeID, i))
}

// SpanSplit is generated span i of a sample, described without copying: the
// record's tokens are the context of node ContextNode (none when -1), then the
// Lead spans as conditioning, then Own, the only part with trainable tokens.
type SpanSplit struct {
	ContextNode int
	Lead        []tree.PackedSequence
	Own         tree.PackedSequence
}

// Split describes generated span i (see SpanSplit).
func (a *ActorSample) Split(i int) SpanSplit {
	if a.src == nil {
		return SpanSplit{ContextNode: -1, Own: a.spans[i]}
	}
	nd := &a.src.Nodes[a.NodeID]
	k := a.edgeSpan(i)
	return SpanSplit{ContextNode: nd.Parent, Lead: nd.Spans[:k], Own: nd.Spans[k]}
}

// LeadLen is the number of tokens before Own: the record's conditioning part.
func (s SpanSplit) LeadLen(t *tree.Tree) int {
	n := 0
	if s.ContextNode >= 0 {
		n = t.ContextLen(s.ContextNode)
	}
	for _, l := range s.Lead {
		n += l.Len()
	}
	return n
}

// Tree is the tree a prepared sample reads its spans from (nil for samples
// with explicit spans).
func (a *ActorSample) Tree() *tree.Tree { return a.src }

// SpanLen is the token length of Span(i).
func (a *ActorSample) SpanLen(i int) int {
	s := a.Split(i)
	return s.LeadLen(a.src) + s.Own.Len()
}

// AppendSpan appends Span(i) to dst without intermediate copies.
func (a *ActorSample) AppendSpan(dst tree.PackedSequence, i int) tree.PackedSequence {
	s := a.Split(i)
	if s.ContextNode >= 0 {
		dst = a.src.AppendContext(dst, s.ContextNode)
	}
	for _, l := range s.Lead {
		dst = dst.AppendConditioning(l)
	}
	return dst.AppendGenerated(s.Own)
}

// Span returns generated span i as a new full-context sequence.
func (a *ActorSample) Span(i int) tree.PackedSequence {
	n := a.SpanLen(i)
	dst := tree.PackedSequence{Tokens: make([]uint32, 0, n), Trainable: make([]bool, 0, n), Logprobs: make([]float64, 0, n)}
	return a.AppendSpan(dst, i)
}

// Spans returns every generated span (ActorSample.spans in Python).
func (a *ActorSample) Spans() []tree.PackedSequence {
	out := make([]tree.PackedSequence, a.NumSpans())
	for i := range out {
		out[i] = a.Span(i)
	}
	return out
}

// EdgeTokens counts the trainable tokens across the whole edge, for callers
// that normalise by edge when a template splits it into several spans.
func (a *ActorSample) EdgeTokens() int {
	if a.counted {
		return a.edgeTokens
	}
	if a.src == nil {
		n := 0
		for _, s := range a.spans {
			n += s.TrainableCount()
		}
		return n
	}
	n, _ := a.src.EdgeTrainable(a.NodeID)
	return n
}
