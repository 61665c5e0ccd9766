package prepare

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/tree"
)

// Diagnostic is one named number attached to a sample.
type Diagnostic struct {
	Name  string
	Value float64
}

// Diagnostics is an ordered list of named numbers (a Python Mapping[str,
// float]). The samples an estimator makes share one list of names and take
// their values as rows of one dense matrix: a batch's diagnostics cost two
// allocations, hold no pointers per sample, and cross the C boundary as the
// matrix itself. The zero value is empty.
type Diagnostics struct {
	names  []string
	values []float64
}

// DiagnosticsOf builds diagnostics from pairs, in order.
func DiagnosticsOf(pairs ...Diagnostic) Diagnostics {
	d := Diagnostics{names: make([]string, len(pairs)), values: make([]float64, len(pairs))}
	for i, p := range pairs {
		d.names[i], d.values[i] = p.Name, p.Value
	}
	return d
}

// Len is the number of diagnostics.
func (d Diagnostics) Len() int { return len(d.values) }

// At returns diagnostic i.
func (d Diagnostics) At(i int) Diagnostic { return Diagnostic{d.names[i], d.values[i]} }

// Names returns the names in order, as a new slice.
func (d Diagnostics) Names() []string { return slices.Clone(d.names) }

// Values returns the values in Names order, as a new slice.
func (d Diagnostics) Values() []float64 { return slices.Clone(d.values) }

// SameNames reports whether d and e name the same diagnostics in the same
// order (without comparing strings when both share one list of names).
func (d Diagnostics) SameNames(e Diagnostics) bool {
	if len(d.names) != len(e.names) {
		return false
	}
	if len(d.names) == 0 || &d.names[0] == &e.names[0] {
		return true
	}
	return slices.Equal(d.names, e.names)
}

// AppendValues appends the values in Names order to dst.
func (d Diagnostics) AppendValues(dst []float64) []float64 { return append(dst, d.values...) }

// Get returns the value named name.
func (d Diagnostics) Get(name string) (float64, bool) {
	for i, n := range d.names {
		if n == name {
			return d.values[i], true
		}
	}
	return 0, false
}

// Map returns the diagnostics as a new map.
func (d Diagnostics) Map() map[string]float64 {
	m := make(map[string]float64, len(d.names))
	for i, n := range d.names {
		m[n] = d.values[i]
	}
	return m
}

// String renders the diagnostics as name=value pairs in order.
func (d Diagnostics) String() string {
	var sb strings.Builder
	for i, n := range d.names {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%s=%v", n, d.values[i])
	}
	return sb.String()
}

// MarshalJSON encodes the diagnostics as one JSON object, keys in order.
func (d Diagnostics) MarshalJSON() ([]byte, error) {
	s := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowStream(nil)
	defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnStream(s)
	s.WriteObjectStart()
	for i, n := range d.names {
		if i > 0 {
			s.WriteMore()
		}
		s.WriteObjectField(n)
		s.WriteFloat64(d.values[i])
	}
	s.WriteObjectEnd()
	if s.Error != nil {
		return nil, s.Error
	}
	return append([]byte(nil), s.Buffer()...), nil
}

// UnmarshalJSON reads a JSON object, keeping its key order.
func (d *Diagnostics) UnmarshalJSON(data []byte) error {
	it := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowIterator(data)
	defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnIterator(it)
	var out Diagnostics
	it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
		out.names = append(out.names, key)
		out.values = append(out.values, it.ReadFloat64())
		return true
	})
	if it.Error != nil && it.Error != io.EOF {
		return fmt.Errorf("diagnostics: %w", it.Error)
	}
	*d = out
	return nil
}

// diagMatrix hands out Diagnostics rows of one dense matrix under one list of
// names.
type diagMatrix struct {
	names  []string
	values []float64
}

func newDiagMatrix(names []string, rows int) *diagMatrix {
	return &diagMatrix{names: names, values: make([]float64, 0, rows*len(names))}
}

// row appends one sample's values (in names order) and returns them as
// Diagnostics. The full slice expression keeps an append to one row from
// overwriting the next.
func (m *diagMatrix) row(v ...float64) Diagnostics {
	start := len(m.values)
	m.values = append(m.values, v...)
	return Diagnostics{names: m.names, values: m.values[start:len(m.values):len(m.values)]}
}

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
	return ActorSample{NodeID: nodeID, GroupID: groupID, Estimator: estimator, Weight: weight, SearchPass: NoSearchPass, spans: spans}
}

// EdgeSample builds a sample for the edge into node id of t, referencing the
// tree for its spans. Estimators outside this package use it too.
func EdgeSample(t *tree.Tree, id int, estimator string, weight float64, diag Diagnostics) ActorSample {
	nd := &t.Nodes[id]
	return ActorSample{NodeID: id, GroupID: nd.Parent, Estimator: estimator, Weight: weight,
		Diagnostics: diag, SearchPass: nd.SearchPass, src: t}
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

// CriticSample pairs a checkpoint's context text with its target return.
//
// Samples made by Prepare or CriticTargets store only the tree and node id and
// build the context text when it is read: a context is O(depth x text), so
// writing every one at preparation time would cost more than the whole
// backup. Samples made with NewCriticSample carry their context.
type CriticSample struct {
	NodeID      int
	Target      float64
	Diagnostics Diagnostics

	src     *tree.Tree // prepared samples: the context is src's path to NodeID
	context string
}

// NewCriticSample builds a sample with an explicit context (what a Python
// caller passes as CriticSample(context=...)).
func NewCriticSample(nodeID int, context string, target float64, diag Diagnostics) CriticSample {
	return CriticSample{NodeID: nodeID, Target: target, Diagnostics: diag, context: context}
}

// Context is the checkpoint's context text: the edge texts from the root
// prompt to the node, as the critic read it.
func (c *CriticSample) Context() string {
	if c.src == nil {
		return c.context
	}
	return c.src.ContextText(c.NodeID)
}

// ContextLen is the byte length of Context.
func (c *CriticSample) ContextLen() int {
	if c.src == nil {
		return len(c.context)
	}
	n := 0
	for id := c.NodeID; id >= 0; id = c.src.Nodes[id].Parent {
		n += len(c.src.Nodes[id].Text)
	}
	return n
}

// AppendContext appends Context to dst without an intermediate string.
func (c *CriticSample) AppendContext(dst []byte) []byte {
	if c.src == nil {
		return append(dst, c.context...)
	}
	return appendText(dst, c.src, c.NodeID)
}

func appendText(dst []byte, t *tree.Tree, id int) []byte {
	if id < 0 {
		return dst
	}
	return append(appendText(dst, t, t.Nodes[id].Parent), t.Nodes[id].Text...)
}

// criticJSON is the JSON form of a CriticSample, context included.
type criticJSON struct {
	NodeID      int         `json:"node_id"`
	Context     string      `json:"context"`
	Target      float64     `json:"target"`
	Diagnostics Diagnostics `json:"diagnostics"`
}

// MarshalJSON encodes the sample with its context text.
func (c CriticSample) MarshalJSON() ([]byte, error) {
	return jsoniter.ConfigCompatibleWithStandardLibrary.Marshal(criticJSON{c.NodeID, c.Context(), c.Target, c.Diagnostics})
}

// UnmarshalJSON decodes a sample with an explicit context.
func (c *CriticSample) UnmarshalJSON(data []byte) error {
	var w criticJSON
	if err := jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal(data, &w); err != nil {
		return err
	}
	*c = NewCriticSample(w.NodeID, w.Context, w.Target, w.Diagnostics)
	return nil
}

// InexactPrefix opens the failure message of an inexact edge, which trained no actor.
const InexactPrefix = "inexact edge: "

// Failure is a failed branch (the node marked failed and its message), or an inexact
// edge that made no actor sample (InexactPrefix + the node's Inexact reason).
type Failure struct {
	NodeID  int    `json:"node_id"`
	Message string `json:"message"`
}

// Stats are a batch's collection statistics. The JSON keys are the binding
// Batch.stats keys.
type Stats struct {
	Rollouts           int     `json:"rollouts"`
	Nodes              int     `json:"nodes"`
	GeneratedTokens    int     `json:"generated_tokens"`
	PrefixTokensReused int     `json:"prefix_tokens_reused"`
	BudgetUnspent      int     `json:"budget_unspent"`
	AdvantageMean      float64 `json:"advantage_mean"`
	AdvantageStd       float64 `json:"advantage_std"`
	Failures           int     `json:"failures"`
	WallSeconds        float64 `json:"wall_seconds"`
	PolicySeconds      float64 `json:"policy_seconds"`
}

// Batch is what one prompt's tree prepares into.
//
// Its JSON form carries the samples' metadata, not their token spans, which
// cross the C boundary through export.Flat or ActorSample.Spans.
type Batch struct {
	ProblemID    string         `json:"problem_id"`
	Actor        []ActorSample  `json:"actor"`
	Critic       []CriticSample `json:"critic"`
	RewardConfig *RewardConfig  `json:"reward_config"` // nil for batches not made by Prepare
	Stats        Stats          `json:"stats"`
	Failures     []Failure      `json:"failures"`
}

// Len is the number of samples, actor and critic.
func (b *Batch) Len() int { return len(b.Actor) + len(b.Critic) }

// Prepare computes values, critic targets and (unless est is nil) actor
// samples for t. Failed branches are excluded and listed in Failures; inexact
// edges (tree.Node.Inexact) make no actor sample and are listed there too.
func Prepare(t *tree.Tree, cfg RewardConfig, est Estimator) (*Batch, error) {
	v, err := Values(t, cfg)
	if err != nil {
		return nil, err
	}
	b := &Batch{ProblemID: t.ProblemID, Critic: CriticTargets(v), RewardConfig: &cfg}
	if est != nil {
		if b.Actor, err = est.Estimate(v); err != nil {
			return nil, fmt.Errorf("prepare: %s: %w", est.Name(), err)
		}
	}
	// An inexact edge (tree.Node.Inexact) trains no actor: whatever the estimator made
	// for it is dropped, and the failures say why. Its values and critic target stay.
	kept := b.Actor[:0]
	for _, a := range b.Actor {
		if a.NodeID > 0 && a.NodeID < len(t.Nodes) && t.Nodes[a.NodeID].Inexact != "" {
			continue
		}
		kept = append(kept, a)
	}
	b.Actor = kept
	// One pass over the nodes: failures, leaves, and every edge's generated
	// tokens and spans, which the actor samples keep.
	n := len(t.Nodes)
	gen := make([]int32, 2*n) // gen[2*id]: generated tokens, gen[2*id+1]: generated spans
	leaves, trainable := 0, 0
	for id := range t.Nodes {
		nd := &t.Nodes[id]
		switch {
		case nd.Failed != "":
			b.Failures = append(b.Failures, Failure{NodeID: id, Message: nd.Failed})
		case nd.Inexact != "":
			b.Failures = append(b.Failures, Failure{NodeID: id, Message: InexactPrefix + nd.Inexact})
		}
		if id > 0 && len(nd.Children) == 0 {
			leaves++
		}
		edge, spans := t.EdgeTrainable(id)
		gen[2*id], gen[2*id+1] = int32(edge), int32(spans)
		trainable += edge
	}
	for i := range b.Actor {
		a := &b.Actor[i]
		if a.src == t {
			a.counted, a.edgeTokens, a.numSpans = true, int(gen[2*a.NodeID]), int(gen[2*a.NodeID+1])
		}
	}
	// A tree assembled outside the engine carries no stats; its leaves (one per
	// rollout) and trainable tokens are lower bounds the engine's counts meet.
	b.Stats = Stats{
		Rollouts:           max(t.Stats.Rollouts, leaves),
		Nodes:              len(t.Nodes),
		GeneratedTokens:    max(t.Stats.GeneratedTokens, trainable),
		PrefixTokensReused: t.Stats.PrefixTokensReused,
		BudgetUnspent:      t.Stats.BudgetUnspent,
		Failures:           len(b.Failures),
		WallSeconds:        t.Stats.WallSeconds,
		PolicySeconds:      t.Stats.PolicySeconds,
	}
	b.Stats.AdvantageMean, b.Stats.AdvantageStd = weightMoments(b.Actor)
	return b, nil
}

// weightMoments returns the mean and population standard deviation of the
// actor weights (two passes, for accuracy).
func weightMoments(actor []ActorSample) (mean, std float64) {
	if len(actor) == 0 {
		return 0, 0
	}
	for i := range actor {
		mean += actor[i].Weight
	}
	mean /= float64(len(actor))
	for i := range actor {
		d := actor[i].Weight - mean
		std += d * d
	}
	return mean, math.Sqrt(std / float64(len(actor)))
}
