package prepare

import (
	"fmt"
	"math"
	"reflect"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/strictjson"
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

// JSONForms are the forms this package's self-decoding types are read in
// (core/strictjson): an actor sample's keys are ActorSampleJSON's, a critic sample's
// CriticSampleJSON's, and diagnostics are an object of numbers.
func JSONForms() map[reflect.Type]reflect.Type {
	return map[reflect.Type]reflect.Type{
		reflect.TypeFor[ActorSample]():  reflect.TypeFor[ActorSampleJSON](),
		reflect.TypeFor[CriticSample](): reflect.TypeFor[CriticSampleJSON](),
		reflect.TypeFor[Diagnostics]():  reflect.TypeFor[map[string]float64](),
	}
}

var batchJSON = strictjson.NewDecoder(strictjson.Options{Forms: JSONForms()})

// DecodeBatch reads a batch of samples a caller made itself (the Python
// Batch(actor=(ActorSample(...),)) with explicit spans and contexts): keys
// problem_id, actor, critic and failures, then Checks it. It reads strictly
// (core/strictjson): an unknown key, a value of the wrong type, NaN or Infinity is an
// error naming its path ("batch: actor[0].weight is NaN; a finite number is required").
func DecodeBatch(data []byte) (*Batch, error) {
	var b Batch
	if err := batchJSON.Decode("batch", data, &b); err != nil {
		return nil, err
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
			return status.FieldErrorf(status.InvalidArgument, "batch", fmt.Sprintf("actor[%d].visitation", i), "is %g; a finite number >= 0 is required", w)
		}
		for k, s := range b.Actor[i].spans {
			if len(s.Trainable) != len(s.Tokens) || len(s.Logprobs) != len(s.Tokens) {
				return status.FieldErrorf(status.InvalidArgument, "batch", fmt.Sprintf("actor[%d].spans[%d]", i, k),
					"has %d tokens, %d trainable flags and %d logprobs; as many flags and logprobs as tokens are required",
					len(s.Tokens), len(s.Trainable), len(s.Logprobs))
			}
		}
	}
	return nil
}
