package export

import (
	"math"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
)

// Record keys and lanes (binding; the Python names are ESTIMATOR_KEY, LANE_KEY
// and Lane).
const (
	LaneKey      = "lane"
	EstimatorKey = "estimator"
	LaneActor    = "actor"
	LaneCritic   = "critic"
)

// Options tune Encode.
type Options struct {
	// MinAbsAdvantage drops actor records whose |advantage| is below it.
	// 0 (Python None) keeps every record.
	MinAbsAdvantage float64
}

// ActorColumns holds every actor record column-wise. Record i's tokens are
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
	Advantage    []float64
	NodeID       []int64
	SearchPass   []int64 // prepare.NoSearchPass (-1) for Python None
	Estimator    []int32 // index into Flat.Estimators
	Sample       []int64 // index of the ActorSample in Batch.Actor
	Span         []int64 // index of the generated span within that sample
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
	if math.IsNaN(opts.MinAbsAdvantage) || opts.MinAbsAdvantage < 0 {
		return nil, status.Errorf(status.InvalidArgument, "export: min_abs_advantage is %g, must be >= 0", opts.MinAbsAdvantage)
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
	f := &Flat{ProblemID: b.ProblemID, GroupIndex: groupIndex}
	ac := &f.Actor
	ac.Offsets = make([]int64, 1, records+1)
	ac.Tokens = make([]uint32, 0, tokens)
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
	for i := range b.Actor {
		a := &b.Actor[i]
		if !keep(a, opts) {
			continue
		}
		est := f.estimatorIndex(a.Estimator)
		for k := range a.NumSpans() {
			sp := a.Split(k)
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
			ac.SpanMask = append(ac.SpanMask, sp.Own.Trainable...)
			for j, lp := range sp.Own.Logprobs {
				if !sp.Own.Trainable[j] {
					lp = 0
				}
				ac.SpanLogprobs = append(ac.SpanLogprobs, lp)
			}
			ac.SpanOffsets = append(ac.SpanOffsets, int64(len(ac.SpanMask)))
			ac.Advantage = append(ac.Advantage, a.Weight)
			ac.NodeID = append(ac.NodeID, int64(a.NodeID))
			ac.SearchPass = append(ac.SearchPass, int64(a.SearchPass))
			ac.Estimator = append(ac.Estimator, est)
			ac.Sample = append(ac.Sample, int64(i))
			ac.Span = append(ac.Span, int64(k))
		}
	}

	cc := &f.Critic
	n, bytes := len(b.Critic), 0
	for i := range b.Critic {
		bytes += len(b.Critic[i].Context)
	}
	cc.Offsets = make([]int64, 1, n+1)
	cc.Context = make([]byte, 0, bytes)
	cc.Target = make([]float64, 0, n)
	cc.NodeID = make([]int64, 0, n)
	for i := range b.Critic {
		c := &b.Critic[i]
		cc.Context = append(cc.Context, c.Context...)
		cc.Offsets = append(cc.Offsets, int64(len(cc.Context)))
		cc.Target = append(cc.Target, c.Target)
		cc.NodeID = append(cc.NodeID, int64(c.NodeID))
	}
	return f, nil
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

// ActorRecord is the default actor record (binding keys).
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
}

// CriticRecord is the default critic record (binding keys).
type CriticRecord struct {
	Context    string  `json:"context"`
	Target     float64 `json:"target"`
	Lane       string  `json:"lane"`
	GroupIndex int     `json:"group_index"`
	NodeID     int     `json:"node_id"`
	ProblemID  string  `json:"problem_id"`
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
	}
	copy(r.LossMask[ac.SpanStart[i]:], own)
	copy(r.BehaviorLogprobs[ac.SpanStart[i]:], ac.SpanLogprobs[ac.SpanOffsets[i]:ac.SpanOffsets[i+1]])
	if p := int(ac.SearchPass[i]); p != prepare.NoSearchPass {
		r.SearchPass = &p
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

// Records returns every record in order: ActorRecord values, then
// CriticRecord values.
func (f *Flat) Records() []any {
	out := make([]any, 0, f.Len())
	for i := range f.NumActor() {
		out = append(out, f.ActorRecord(i))
	}
	for i := range f.NumCritic() {
		out = append(out, f.CriticRecord(i))
	}
	return out
}
