package export

import (
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// Record keys and lanes (binding; the Python names are ESTIMATOR_KEY, LANE_KEY
// and Lane). The full key lists are ActorKeys and CriticKeys.
const (
	LaneKey      = "lane"
	EstimatorKey = "estimator"
	LaneActor    = "actor"
	LaneCritic   = "critic"
)

// Layout is how actor records cut a tree (Python's to_records(layout=...)).
type Layout string

const (
	// LayoutSpans (the default, the spec's records): one record per generated
	// span, carrying the span's whole prefix; its scalar advantage applies to
	// every masked token.
	LayoutSpans Layout = "spans"
	// LayoutPaths: one record per root-to-leaf path (paths.go): every trained
	// token is masked in exactly one record, with its own edge's advantage in
	// the record's per-token advantages; a sequence trainer with a sum reducer
	// gets the same gradient from fewer tokens.
	LayoutPaths Layout = "paths"
)

// Options tune Encode.
type Options struct {
	// MinAbsAdvantage drops actor records whose |advantage| is below it.
	// 0 (Python None) keeps every record. In the path layout it drops edges:
	// their tokens stay in a path as context.
	MinAbsAdvantage float64
	// Layout of the actor records; "" is LayoutSpans.
	Layout Layout
	// VisitationWeights exports each actor record's advantage as
	// Weight * Visitation (prepare.Visitation: the factor that makes a
	// searched tree's edges an unbiased estimate of the on-policy gradient)
	// instead of Weight. Off by default, in Go and in the bindings
	// (DefaultVisitationWeights).
	// MinAbsAdvantage still compares the unweighted Weight, so the same edges
	// are kept either way.
	VisitationWeights bool
	// Text, when set, decodes each actor record's response (its tokens from
	// its response start on) into the record's response text, once, at export:
	// the bindings pass the codec the collection used. nil leaves the text out.
	Text Decoder
	// SkipSpecialTokens is Text's skipSpecial argument: leave special tokens
	// out of the response text (Slime's skip_special_tokens). The tokens
	// themselves stay exact.
	SkipSpecialTokens bool
}

// Decoder turns token ids into text: the chat codec's tokenizer
// (backends/chat.Codec and backends/tokenizer.Tokenizer satisfy it).
type Decoder interface {
	Decode(ids []uint32, skipSpecial bool) (string, error)
}

// DefaultVisitationWeights is the bindings' default for
// Options.VisitationWeights (Python's visitation_weights= of to_records,
// to_samples, collect_records, Slime's make_generate and Tinker's train, and
// focus-go collect's --visitation-weights; capi/binding hands it to them): off,
// because per generated token the default search learned more from the plain
// edge advantages on the benchmark of docs/signal.md §B, at every critic
// noise (docs/learning-signal.md). Independent trees are unaffected: their
// factor is exactly 1.
const DefaultVisitationWeights = false

// Validate checks MinAbsAdvantage >= 0 (NaN is refused) and the layout. Encode applies it, and the
// binding checks a threshold with it before collecting anything (capi/binding).
func (o Options) Validate() error {
	if math.IsNaN(o.MinAbsAdvantage) || o.MinAbsAdvantage < 0 {
		return status.FieldErrorf(status.InvalidArgument, "", "min_abs_advantage", "is %g, must be >= 0", o.MinAbsAdvantage)
	}
	if o.Layout != "" && o.Layout != LayoutSpans && o.Layout != LayoutPaths {
		return status.FieldErrorf(status.InvalidArgument, "", "layout", "is %q, must be %q or %q", string(o.Layout), string(LayoutSpans), string(LayoutPaths))
	}
	return nil
}

// layout is o.Layout with "" read as LayoutSpans.
func (o Options) layout() Layout {
	if o.Layout == "" {
		return LayoutSpans
	}
	return o.Layout
}

// ActorColumns holds every actor record column-wise (either layout; in the path
// layout the "own span" is the record's owned suffix, see paths.go). Record i's tokens are
// Tokens[Offsets[i]:Offsets[i+1]]. Its first SpanStart[i] tokens are context
// (loss mask false, log-probability 0.0); the rest are the record's own span,
// whose mask and log-probabilities are SpanMask and SpanLogprobs
// [SpanOffsets[i]:SpanOffsets[i+1]] (0.0 wherever the mask is false). Storing
// the all-false context part implicitly keeps the arrays near the size of the
// tree's own tokens instead of growing with depth times span. Masks are one
// byte per token, 0 or 1. The other columns have one entry per record.
type ActorColumns struct {
	Offsets      []int64 // NumActor+1 entries, Offsets[0] = 0
	Tokens       []uint32
	SpanStart    []int64
	SpanOffsets  []int64 // NumActor+1 entries
	SpanMask     []bool
	SpanLogprobs []float64
	// SpanAdvantages (path layout only, nil otherwise) is each own-part
	// token's advantage, aligned with SpanMask: its edge's advantage where the
	// mask is true, 0.0 elsewhere.
	SpanAdvantages []float64
	Advantage      []float64
	NodeID         []int64
	SearchPass     []int64 // prepare.NoSearchPass (-1) for Python None
	Estimator      []int32 // index into Flat.Estimators
	Sample         []int64 // index of the ActorSample in Batch.Actor
	Span           []int64 // index of the generated span within that sample; -1 for a path record
	// ResponseStart is where each record's response starts: the index in its
	// tokens of its first trained token (loss mask true), at or after
	// SpanStart; the record's length when it trains none.
	ResponseStart []int64
	// Return is the return of each record's path, from the root through its
	// edge (tree.Returns at NodeID); Finished whether that node ends a
	// finished rollout (tree.Finished). 0 and false for a sample with explicit
	// spans, which has no tree.
	Return   []float64
	Finished []bool
	// OffPolicyTokens is how many tokens of each record's response, from
	// ResponseStart on, an earlier collection generated: those the record's
	// path holds through its deepest tree.Node.OffPolicy edge (the nodes a
	// resume kept, core/collect.WithResume). 0 for a tree never resumed and
	// for a sample with explicit spans.
	OffPolicyTokens []int64
	// WeightVersionOffsets (NumActor+1 entries) and WeightVersion hold the
	// weight versions that generated each record's response (from
	// ResponseStart on): record i's are VersionNames[k] for each k in
	// WeightVersion[WeightVersionOffsets[i]:WeightVersionOffsets[i+1]], the
	// distinct tree.Node.WeightVersion of the edges holding its response, in
	// path order (addWeightVersions). None where the server reported no
	// version and for a sample with explicit spans.
	WeightVersionOffsets []int64
	WeightVersion        []int32
	VersionNames         []string // distinct versions, first-seen order
	// TextOffsets (NumActor+1 entries) and Text hold each record's response
	// text, the UTF-8 Text[TextOffsets[i]:TextOffsets[i+1]]: its tokens from
	// ResponseStart on, decoded by Options.Text. Both nil without Options.Text.
	TextOffsets []int64
	Text        []byte
}

// reserve makes the per-record and own-part columns, empty with room for records
// records and own own-part tokens (the full tokens are the caller's: plain or
// shared); the text columns only when opts decodes text.
func (ac *ActorColumns) reserve(records, own int, opts Options) {
	ac.ResponseStart = make([]int64, 0, records)
	ac.Return = make([]float64, 0, records)
	ac.Finished = make([]bool, 0, records)
	ac.OffPolicyTokens = make([]int64, 0, records)
	ac.WeightVersionOffsets = make([]int64, 1, records+1)
	if opts.Text != nil {
		ac.TextOffsets = make([]int64, 1, records+1)
		ac.Text = make([]byte, 0, 8*own)
	}
	ac.SpanStart = make([]int64, 0, records)
	ac.SpanOffsets = make([]int64, 1, records+1)
	ac.SpanMask = make([]bool, 0, own)
	ac.SpanLogprobs = make([]float64, 0, own)
	ac.Advantage = make([]float64, 0, records)
	ac.NodeID = make([]int64, 0, records)
	ac.SearchPass = make([]int64, 0, records)
	ac.Estimator = make([]int32, 0, records)
	ac.Sample = make([]int64, 0, records)
	ac.Span = make([]int64, 0, records)
}

// addResponse appends the response columns of the record just added: its
// response starts first tokens into its own part, which starts at spanStart;
// response is its tokens from there on; its path ends at node id of t (nil
// for explicit spans), whose returns are returns.
func (ac *ActorColumns) addResponse(opts Options, spanStart, first int, response []uint32, t *tree.Tree, returns []float64, id int) error {
	start := spanStart + first
	ac.ResponseStart = append(ac.ResponseStart, int64(start))
	ac.addWeightVersions(t, id, start, start+len(response))
	if t != nil {
		ac.Return = append(ac.Return, returns[id])
		ac.Finished = append(ac.Finished, t.Finished(id))
		ac.OffPolicyTokens = append(ac.OffPolicyTokens, int64(min(max(offPolicyEnd(t, id)-start, 0), len(response))))
	} else {
		ac.Return = append(ac.Return, 0)
		ac.Finished = append(ac.Finished, false)
		ac.OffPolicyTokens = append(ac.OffPolicyTokens, 0)
	}
	if opts.Text == nil {
		return nil
	}
	if len(response) > 0 {
		text, err := opts.Text.Decode(response, opts.SkipSpecialTokens)
		if err != nil {
			return status.Wrap(status.Internal, err, "export: decode the response text of actor record %d", len(ac.ResponseStart)-1)
		}
		ac.Text = append(ac.Text, text...)
	}
	ac.TextOffsets = append(ac.TextOffsets, int64(len(ac.Text)))
	return nil
}

// offPolicyEnd is where the tokens an earlier collection generated end on the
// path to node id: the context length through its deepest tree.Node.OffPolicy
// node (itself included; a resume keeps its nodes' ancestors), 0 when none is.
// A record's tokens are a prefix of its node's context, so the record's first
// offPolicyEnd tokens are off-policy.
func offPolicyEnd(t *tree.Tree, id int) int {
	for c := id; c >= 0; c = t.Nodes[c].Parent {
		if t.Nodes[c].OffPolicy {
			return t.ContextLen(c)
		}
	}
	return 0
}

// firstTrue is the index of the first true in mask, len(mask) when none is.
func firstTrue(mask []bool) int {
	if i := slices.Index(mask, true); i >= 0 {
		return i
	}
	return len(mask)
}

// treeReturns gives tree.Returns of each tree a batch's samples read, computed
// once per tree.
type treeReturns struct {
	t       *tree.Tree
	returns []float64
}

func (r *treeReturns) of(t *tree.Tree) []float64 {
	if t == nil {
		return nil
	}
	if t != r.t {
		r.t, r.returns = t, t.Returns()
	}
	return r.returns
}

// CriticColumns holds every critic record column-wise. Record i's context is
// the UTF-8 bytes Context[Offsets[i]:Offsets[i+1]].
type CriticColumns struct {
	Offsets []int64 // NumCritic+1 entries
	Context []byte
	Target  []float64
	NodeID  []int64
}

// Flat is a batch's records in columnar form: a few contiguous arrays that
// cross the C boundary as pointer + length, from which the Python wrapper
// builds per-record objects with slicing alone. Records are ordered actor
// first (batch order, spans in edge order), then critic (batch order).
type Flat struct {
	ProblemID  string
	GroupIndex int
	Layout     Layout   // how the actor records were cut
	Estimators []string // distinct estimator names, first-seen order
	Actor      ActorColumns
	Critic     CriticColumns
}

// NumActor is the number of actor records.
func (f *Flat) NumActor() int { return len(f.Actor.Advantage) }

// NumCritic is the number of critic records.
func (f *Flat) NumCritic() int { return len(f.Critic.Target) }

// Len is the number of records.
func (f *Flat) Len() int { return f.NumActor() + f.NumCritic() }

// Encode flattens b into records for prompt group groupIndex (to_samples /
// Batch.to_records). Cost is linear in samples plus exported tokens; token
// arrays are allocated once at their final size.
func Encode(b *prepare.Batch, groupIndex int, opts Options) (*Flat, error) {
	return encode(b, groupIndex, opts, nil)
}

// SharedTokens holds the actor records' tokens with shared prefixes stored
// once: record i's tokens are record Base[i]'s tokens (none when Base[i] is
// -1) followed by Tokens[Offsets[i]:Offsets[i+1]]. Along a tree path every
// record's context is the record before it (the parent edge's last span, or
// the sample's previous span), so the tree's tokens are stored about once
// instead of once per descendant, and a reader builds each token list by
// extending one it already holds.
type SharedTokens struct {
	Base    []int64
	Offsets []int64 // NumActor+1 entries
	Tokens  []uint32
}

// EncodeShared is Encode with the actor tokens as SharedTokens: the returned
// Flat's Actor.Tokens and Actor.Offsets are nil. Full contexts are never
// materialised. A record's base is the sample's previous span, else the last
// record of the node its edge leaves from; for samples that read a tree the
// prefix holds by construction, for explicit samples it is checked, and a
// record without a valid base stores all its tokens.
func EncodeShared(b *prepare.Batch, groupIndex int, opts Options) (*Flat, *SharedTokens, error) {
	st := &SharedTokens{}
	f, err := encode(b, groupIndex, opts, st)
	return f, st, err
}

// encode builds f; with st non-nil the actor tokens go to st instead of
// f.Actor.Tokens.
func encode(b *prepare.Batch, groupIndex int, opts Options, st *SharedTokens) (*Flat, error) {
	if err := opts.Validate(); err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "export")
	}
	for i := range b.Actor {
		if err := checkSample(b, i); err != nil {
			return nil, err
		}
	}
	if opts.layout() == LayoutPaths {
		return encodePaths(b, groupIndex, opts, st)
	}
	records, tokens, own := 0, 0, 0
	for i := range b.Actor {
		a := &b.Actor[i]
		if !keep(a, opts) {
			continue
		}
		for k := range a.NumSpans() {
			sp := a.Split(k)
			records++
			tokens += sp.LeadLen(a.Tree()) + sp.Own.Len()
			own += sp.Own.Len()
		}
	}
	f := &Flat{ProblemID: b.ProblemID, GroupIndex: groupIndex, Layout: LayoutSpans}
	ac := &f.Actor
	var sh *sharer
	if st == nil {
		ac.Offsets = make([]int64, 1, records+1)
		ac.Tokens = make([]uint32, 0, tokens)
	} else {
		sh = newSharer(b, st, records, own)
	}
	ac.reserve(records, own, opts)
	var returns treeReturns
	for i := range b.Actor {
		a := &b.Actor[i]
		if !keep(a, opts) {
			continue
		}
		est := f.estimatorIndex(a.Estimator)
		for k := range a.NumSpans() {
			sp := a.Split(k)
			if sh != nil {
				ac.SpanStart = append(ac.SpanStart, int64(sh.add(a, i, k, sp)))
			} else {
				start := len(ac.Tokens)
				if sp.ContextNode >= 0 {
					ac.Tokens = a.Tree().AppendContextTokens(ac.Tokens, sp.ContextNode)
				}
				for _, l := range sp.Lead {
					ac.Tokens = append(ac.Tokens, l.Tokens...)
				}
				ac.SpanStart = append(ac.SpanStart, int64(len(ac.Tokens)-start))
				ac.Tokens = append(ac.Tokens, sp.Own.Tokens...)
				ac.Offsets = append(ac.Offsets, int64(len(ac.Tokens)))
			}
			ac.SpanMask = append(ac.SpanMask, sp.Own.Trainable...)
			// One copy, then zero the few conditioning positions.
			lp := len(ac.SpanLogprobs)
			ac.SpanLogprobs = append(ac.SpanLogprobs, sp.Own.Logprobs...)
			for j, trainable := range sp.Own.Trainable {
				if !trainable {
					ac.SpanLogprobs[lp+j] = 0
				}
			}
			ac.SpanOffsets = append(ac.SpanOffsets, int64(len(ac.SpanMask)))
			first := firstTrue(sp.Own.Trainable)
			if err := ac.addResponse(opts, int(ac.SpanStart[len(ac.SpanStart)-1]), first, sp.Own.Tokens[first:], a.Tree(), returns.of(a.Tree()), a.NodeID); err != nil {
				return nil, err
			}
			ac.Advantage = append(ac.Advantage, opts.advantage(a))
			ac.NodeID = append(ac.NodeID, int64(a.NodeID))
			ac.SearchPass = append(ac.SearchPass, int64(a.SearchPass))
			ac.Estimator = append(ac.Estimator, est)
			ac.Sample = append(ac.Sample, int64(i))
			ac.Span = append(ac.Span, int64(k))
		}
	}

	encodeCritic(f, b)
	return f, nil
}

// checkSample refuses actor sample i of b if no record may be made of it.
func checkSample(b *prepare.Batch, i int) error {
	a := &b.Actor[i]
	// Prepare never makes these; a batch assembled by hand could.
	if t := a.Tree(); t != nil && a.NodeID > 0 && a.NodeID < len(t.Nodes) && t.Nodes[a.NodeID].Inexact != "" {
		return status.Errorf(status.InvalidArgument,
			"export: actor sample %d is for node %d, an inexact edge (%s); inexact edges train no actor (use its critic target only)",
			i, a.NodeID, t.Nodes[a.NodeID].Inexact)
	}
	return nil
}

// encodeCritic appends b's critic records to f.
func encodeCritic(f *Flat, b *prepare.Batch) {
	cc := &f.Critic
	n, bytes := len(b.Critic), 0
	for i := range b.Critic {
		bytes += b.Critic[i].ContextLen()
	}
	cc.Offsets = make([]int64, 1, n+1)
	cc.Context = make([]byte, 0, bytes)
	cc.Target = make([]float64, 0, n)
	cc.NodeID = make([]int64, 0, n)
	for i := range b.Critic {
		c := &b.Critic[i]
		cc.Context = c.AppendContext(cc.Context)
		cc.Offsets = append(cc.Offsets, int64(len(cc.Context)))
		cc.Target = append(cc.Target, c.Target)
		cc.NodeID = append(cc.NodeID, int64(c.NodeID))
	}
}

// sharer appends records to a SharedTokens, choosing each record's base.
type sharer struct {
	st     *SharedTokens
	b      *prepare.Batch
	length []int // record -> its full token length
	sample []int // record -> its sample
	// The last record of each node so far: by node id for samples that read
	// the batch's first tree, in a map for explicit samples.
	tree     *tree.Tree
	lastTree []int32
	lastOwn  map[int]int
}

// newSharer prepares st for records holding own tokens in their own spans.
func newSharer(b *prepare.Batch, st *SharedTokens, records, own int) *sharer {
	st.Base = make([]int64, 0, records)
	st.Offsets = make([]int64, 1, records+1)
	sh := &sharer{st: st, b: b, length: make([]int, 0, records), sample: make([]int, 0, records), lastOwn: map[int]int{}}
	size := own
	for i := range b.Actor {
		if t := b.Actor[i].Tree(); t != nil {
			sh.tree = t
			sh.lastTree = make([]int32, len(t.Nodes))
			for id := range sh.lastTree {
				sh.lastTree[id] = -1
			}
			// About every token of the tree is stored once, and the prompt
			// once per child of the root.
			size = (len(t.Nodes[0].Children) - 1) * t.Nodes[0].EdgeLen()
			for id := range t.Nodes {
				size += t.Nodes[id].EdgeLen()
			}
			size = max(size, own)
			break
		}
	}
	st.Tokens = make([]uint32, 0, size)
	return sh
}

// add appends span k of sample i (split sp) as the next record and returns
// its span start (the length of its conditioning part).
func (sh *sharer) add(a *prepare.ActorSample, i, k int, sp prepare.SpanSplit) int {
	t := a.Tree()
	lead := sp.LeadLen(t)
	full := lead + sp.Own.Len()
	r := len(sh.length)
	base, skip := -1, 0
	if t != nil {
		// Prefixes hold by construction: the sample's previous span record is
		// this record's context up to that span, and the last record of the
		// context node (the parent) is a prefix of that node's context.
		switch {
		case k > 0:
			base = r - 1
		case t == sh.tree && sp.ContextNode >= 0 && sh.lastTree[sp.ContextNode] >= 0:
			base = int(sh.lastTree[sp.ContextNode])
		}
		if base >= 0 {
			skip = sh.length[base]
		}
		sh.st.Tokens = appendRecordTokens(sh.st.Tokens, t, sp, skip)
		if t == sh.tree {
			sh.lastTree[a.NodeID] = int32(r)
		}
	} else {
		// Explicit spans are full sequences already: use a base only if its
		// tokens really are this record's prefix.
		own := sp.Own.Tokens
		cand, ok := r-1, k > 0
		if !ok {
			cand, ok = sh.lastOwn[a.GroupID]
		}
		if ok && sh.b.Actor[sh.sample[cand]].Tree() == nil {
			prev := sh.recordTokens(cand)
			if len(prev) <= len(own) && slices.Equal(prev, own[:len(prev)]) {
				base, skip = cand, len(prev)
			}
		}
		sh.st.Tokens = append(sh.st.Tokens, own[skip:]...)
		sh.lastOwn[a.NodeID] = r
	}
	sh.st.Base = append(sh.st.Base, int64(base))
	sh.st.Offsets = append(sh.st.Offsets, int64(len(sh.st.Tokens)))
	sh.length = append(sh.length, full)
	sh.sample = append(sh.sample, i)
	return lead
}

// recordTokens is the full token list of explicit-span record r.
func (sh *sharer) recordTokens(r int) []uint32 {
	a := &sh.b.Actor[sh.sample[r]]
	k := r
	for k > 0 && sh.sample[k-1] == sh.sample[r] {
		k--
	}
	return a.Split(r - k).Own.Tokens
}

// appendRecordTokens appends the tokens of the record split sp describes
// (context of sp.ContextNode, lead spans, own span), leaving out the first
// skip, without materialising the skipped part.
func appendRecordTokens(dst []uint32, t *tree.Tree, sp prepare.SpanSplit, skip int) []uint32 {
	add := func(s []uint32) {
		if skip >= len(s) {
			skip -= len(s)
			return
		}
		dst = append(dst, s[skip:]...)
		skip = 0
	}
	var path func(id int)
	path = func(id int) {
		if id < 0 {
			return
		}
		path(t.Nodes[id].Parent)
		for _, s := range t.Nodes[id].Spans {
			add(s.Tokens)
		}
	}
	path(sp.ContextNode)
	for _, l := range sp.Lead {
		add(l.Tokens)
	}
	add(sp.Own.Tokens)
	return dst
}

// advantage is the record advantage of a under opts.
func (o Options) advantage(a *prepare.ActorSample) float64 {
	if o.VisitationWeights {
		return a.Weight * a.Visitation
	}
	return a.Weight
}

func keep(a *prepare.ActorSample, opts Options) bool {
	return math.Abs(a.Weight) >= opts.MinAbsAdvantage
}

func (f *Flat) estimatorIndex(name string) int32 {
	for i, e := range f.Estimators {
		if e == name {
			return int32(i)
		}
	}
	f.Estimators = append(f.Estimators, name)
	return int32(len(f.Estimators) - 1)
}

// ActorRecord is the default actor record: the one definition of its keys
// (the JSON tags, binding, in order), which the Python wrapper reads through
// ActorKeys instead of repeating them.
type ActorRecord struct {
	Tokens           []uint32  `json:"tokens"`
	LossMask         []bool    `json:"loss_mask"`
	BehaviorLogprobs []float64 `json:"behavior_logprobs"`
	Advantage        float64   `json:"advantage"`
	Lane             string    `json:"lane"`
	GroupIndex       int       `json:"group_index"`
	Estimator        string    `json:"estimator"`
	NodeID           int       `json:"node_id"`
	SearchPass       *int      `json:"search_pass"` // nil = unknown
	ProblemID        string    `json:"problem_id"`
	// ResponseStart is the index in Tokens where the trained response starts:
	// the first token whose loss mask is true (len(Tokens) when none is).
	// Trainers that split a sequence into prompt and response cut it here.
	ResponseStart int `json:"response_start"`
	// ResponseText is Tokens[ResponseStart:] decoded once at export with the
	// collection's codec (Options.Text); nil when exported without one.
	ResponseText *string `json:"response_text"`
	// Return is the sum of the environment rewards on the record's path, from
	// the root through its edge (tree.Returns): for a record that ends a
	// finished rollout, that rollout's outcome. 0 for explicit spans.
	Return float64 `json:"return"`
	// Finished is whether the record's edge ends a finished rollout: its node is
	// terminal (done or truncated) and did not fail (tree.Finished).
	Finished bool `json:"finished"`
	// OffPolicyTokens is how many tokens of the response (Tokens[ResponseStart:],
	// from its start) an earlier collection generated, one this tree was resumed
	// from (core/collect.WithResume marks its nodes tree.Node.OffPolicy): a
	// trainer that masks off-policy tokens (Slime's
	// --mask-offpolicy-in-partial-rollout) zeroes their loss mask. 0 for a tree
	// never resumed and for explicit spans.
	OffPolicyTokens int `json:"off_policy_tokens"`
	// WeightVersions are the versions of the weights that generated the
	// response (Tokens[ResponseStart:]): the distinct versions of the edges
	// holding it, in path order, as the server reported them (SGLang's
	// weight_version, tree.Node.WeightVersion). One version for a response one
	// edge generated; several only when the weights changed between its
	// edges (a run that allows it, core/fleet). Empty when the server
	// reported none and for explicit spans.
	WeightVersions []string `json:"weight_versions"`
}

// PathRecord is an actor record of the path layout: one root-to-leaf path,
// the ActorRecord keys plus Advantages, the per-token advantages (aligned to
// Tokens: the owning edge's advantage on masked tokens, 0.0 on context). Its
// Advantage, NodeID and SearchPass are those of the path's last edge.
type PathRecord struct {
	ActorRecord
	Advantages []float64 `json:"advantages"`
}

// AdvantagesKey is the key of a path record's per-token advantages.
const AdvantagesKey = "advantages"

// CriticRecord is the default critic record: the one definition of its keys,
// as ActorRecord is of the actor record's.
type CriticRecord struct {
	Context    string  `json:"context"`
	Target     float64 `json:"target"`
	Lane       string  `json:"lane"`
	GroupIndex int     `json:"group_index"`
	NodeID     int     `json:"node_id"`
	ProblemID  string  `json:"problem_id"`
}

// ActorKeys and CriticKeys are the record keys in order, read from the JSON
// tags of ActorRecord and CriticRecord. Every records blob names them in its
// metadata ("actor_keys", "critic_keys"); the Python wrapper builds its
// record dicts with these keys, in this order.
var (
	ActorKeys  = jsonKeys[ActorRecord]()
	CriticKeys = jsonKeys[CriticRecord]()
	// PathKeys are the keys of a path-layout actor record: ActorKeys, then
	// AdvantagesKey.
	PathKeys = append(slices.Clone(ActorKeys), AdvantagesKey)
)

// actorKeys are the keys of f's actor records.
func (f *Flat) actorKeys() []string {
	if f.Layout == LayoutPaths {
		return PathKeys
	}
	return ActorKeys
}

// jsonKeys lists the JSON keys of struct T's fields in declaration order.
func jsonKeys[T any]() []string {
	rt := reflect.TypeFor[T]()
	keys := make([]string, rt.NumField())
	for i := range keys {
		tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		keys[i] = tag
	}
	return keys
}

// ActorRecord returns actor record i. Its tokens share f's memory; the full
// loss mask and log-probabilities are materialised.
func (f *Flat) ActorRecord(i int) ActorRecord {
	ac := &f.Actor
	lo, hi := ac.Offsets[i], ac.Offsets[i+1]
	own := ac.SpanMask[ac.SpanOffsets[i]:ac.SpanOffsets[i+1]]
	r := ActorRecord{
		Tokens:           ac.Tokens[lo:hi:hi],
		LossMask:         make([]bool, hi-lo),
		BehaviorLogprobs: make([]float64, hi-lo),
		Advantage:        ac.Advantage[i],
		Lane:             LaneActor,
		GroupIndex:       f.GroupIndex,
		Estimator:        f.Estimators[ac.Estimator[i]],
		NodeID:           int(ac.NodeID[i]),
		ProblemID:        f.ProblemID,
		ResponseStart:    int(ac.ResponseStart[i]),
		Return:           ac.Return[i],
		Finished:         ac.Finished[i],
		OffPolicyTokens:  int(ac.OffPolicyTokens[i]),
		WeightVersions:   ac.weightVersions(i),
	}
	if ac.TextOffsets != nil {
		text := string(ac.Text[ac.TextOffsets[i]:ac.TextOffsets[i+1]])
		r.ResponseText = &text
	}
	copy(r.LossMask[ac.SpanStart[i]:], own)
	copy(r.BehaviorLogprobs[ac.SpanStart[i]:], ac.SpanLogprobs[ac.SpanOffsets[i]:ac.SpanOffsets[i+1]])
	if p := int(ac.SearchPass[i]); p != prepare.NoSearchPass {
		r.SearchPass = &p
	}
	return r
}

// PathRecord returns actor record i with its per-token advantages: for the
// path layout as stored, for the per-span layout the record's advantage on its
// masked tokens (so both layouts can be compared token by token).
func (f *Flat) PathRecord(i int) PathRecord {
	r := PathRecord{ActorRecord: f.ActorRecord(i)}
	r.Advantages = make([]float64, len(r.Tokens))
	ac := &f.Actor
	if ac.SpanAdvantages != nil {
		copy(r.Advantages[ac.SpanStart[i]:], ac.SpanAdvantages[ac.SpanOffsets[i]:ac.SpanOffsets[i+1]])
		return r
	}
	for j, m := range r.LossMask {
		if m {
			r.Advantages[j] = r.Advantage
		}
	}
	return r
}

// CriticRecord returns critic record i.
func (f *Flat) CriticRecord(i int) CriticRecord {
	cc := &f.Critic
	return CriticRecord{
		Context:    string(cc.Context[cc.Offsets[i]:cc.Offsets[i+1]]),
		Target:     cc.Target[i],
		Lane:       LaneCritic,
		GroupIndex: f.GroupIndex,
		NodeID:     int(cc.NodeID[i]),
		ProblemID:  f.ProblemID,
	}
}

// Records returns every record in order: ActorRecord values (PathRecord
// values in the path layout), then CriticRecord values.
func (f *Flat) Records() []any {
	out := make([]any, 0, f.Len())
	for i := range f.NumActor() {
		if f.Layout == LayoutPaths {
			out = append(out, f.PathRecord(i))
		} else {
			out = append(out, f.ActorRecord(i))
		}
	}
	for i := range f.NumCritic() {
		out = append(out, f.CriticRecord(i))
	}
	return out
}
