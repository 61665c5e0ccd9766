package prepare

import (
	"math"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// ActorSampleJSON is the JSON form of an ActorSample, spans included: its keys are the
// keys an actor sample of a batch's JSON may hold.
type ActorSampleJSON struct {
	NodeID      int                   `json:"node_id"`
	GroupID     int                   `json:"group_id"`
	Estimator   string                `json:"estimator"`
	Weight      float64               `json:"weight"`
	Diagnostics Diagnostics           `json:"diagnostics"`
	SearchPass  *int                  `json:"search_pass"`          // null: unknown (NoSearchPass)
	Visitation  *float64              `json:"visitation,omitempty"` // absent: 1
	Spans       []tree.PackedSequence `json:"spans"`
}

// MarshalJSON encodes the sample with its spans materialised.
func (a ActorSample) MarshalJSON() ([]byte, error) {
	w := ActorSampleJSON{NodeID: a.NodeID, GroupID: a.GroupID, Estimator: a.Estimator, Weight: a.Weight,
		Diagnostics: a.Diagnostics, Spans: a.Spans(), Visitation: &a.Visitation}
	if a.SearchPass != NoSearchPass {
		p := a.SearchPass
		w.SearchPass = &p
	}
	return jsoniter.ConfigCompatibleWithStandardLibrary.Marshal(w)
}

// UnmarshalJSON decodes a sample with explicit spans (NewActorSample);
// DecodeBatch checks that each span's tokens, flags and logprobs align.
func (a *ActorSample) UnmarshalJSON(data []byte) error {
	var w ActorSampleJSON
	if err := jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal(data, &w); err != nil {
		return err
	}
	*a = NewActorSample(w.NodeID, w.GroupID, w.Estimator, w.Weight, w.Spans)
	a.Diagnostics = w.Diagnostics
	if w.SearchPass != nil {
		a.SearchPass = *w.SearchPass
	}
	if w.Visitation != nil {
		a.Visitation = *w.Visitation
	}
	return nil
}

// DecodeBatch reads a batch of samples a caller made itself (the Python
// Batch(actor=(ActorSample(...),)) with explicit spans and contexts): keys
// problem_id, actor, critic and failures, then Checks it. It ignores keys it does not
// know; the C ABI decodes strictly (capi/binding) and then calls Check.
func DecodeBatch(data []byte) (*Batch, error) {
	var b Batch
	if err := jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal(data, &b); err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "batch: bad JSON")
	}
	if err := b.Check(); err != nil {
		return nil, err
	}
	return &b, nil
}

// Check verifies a decoded batch: every actor sample's visitation is finite and >= 0,
// and every span has as many trainable flags and logprobs as tokens.
func (b *Batch) Check() error {
	for i := range b.Actor {
		if w := b.Actor[i].Visitation; !(w >= 0) || math.IsInf(w, 0) {
			return status.Errorf(status.InvalidArgument, "batch: actor sample %d has visitation %g, must be finite and >= 0", i, w)
		}
		for k, s := range b.Actor[i].spans {
			if len(s.Trainable) != len(s.Tokens) || len(s.Logprobs) != len(s.Tokens) {
				return status.Errorf(status.InvalidArgument,
					"batch: actor sample %d span %d has %d tokens, %d trainable flags and %d logprobs; they must be equal",
					i, k, len(s.Tokens), len(s.Trainable), len(s.Logprobs))
			}
		}
	}
	return nil
}
