package binding

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
)

// Kinds Check accepts: the binding's names of the objects it checks.
const (
	KindSelective       = "Selective"
	KindIndependent     = "Independent"
	KindSegments        = "Segments"
	KindAgent           = "Agent"
	KindConstantCritic  = "Critic.constant"
	KindMinAbsAdvantage = "min_abs_advantage"
	KindRecordLayout    = "record_layout" // export.Layout of to_records / make_generate
	KindSampling        = "sampling"      // SamplingParams
	KindReward          = "reward"        // RewardConfig
)

// Kinds lists every kind Check accepts.
var Kinds = []string{KindSelective, KindIndependent, KindSegments, KindAgent, KindConstantCritic, KindMinAbsAdvantage, KindRecordLayout, KindSampling, KindReward}

// SelectiveDefaults are Selective(budget=8, warmup=4, *, per_pass=4,
// max_children=4, min_remaining=None, score="value_refinement_per_token",
// seed=0, stop_alike=True):
// search.Selective and search.DefaultScore.
type SelectiveDefaults struct {
	Budget       int    `json:"budget"`
	Warmup       int    `json:"warmup"`
	PerPass      int    `json:"per_pass"`
	MaxChildren  int    `json:"max_children"`
	MinRemaining *int   `json:"min_remaining"` // nil: the segment length
	Score        string `json:"score"`
	Seed         uint64 `json:"seed"`
	StopAlike    bool   `json:"stop_alike"`
}

// IndependentDefaults are Independent(n=16, *, seed=0).
type IndependentDefaults struct {
	N    int    `json:"n"`
	Seed uint64 `json:"seed"`
}

// SegmentsDefaults are Segments(tokens=256).
type SegmentsDefaults struct {
	Tokens int `json:"tokens"`
}

// AgentDefaults are Agent's max_segments=64 and max_total_tokens=8192.
type AgentDefaults struct {
	MaxSegments    int `json:"max_segments"`
	MaxTotalTokens int `json:"max_total_tokens"`
}

// RecordsDefaults are the record export's defaults in the binding
// (Batch.to_records, to_samples, collect_records, the integrations, the
// command line): the actor layout and whether advantages carry the
// visitation weights (export.DefaultVisitationWeights).
type RecordsDefaults struct {
	Layout            string `json:"layout"`
	VisitationWeights bool   `json:"visitation_weights"`
}

// SamplingDefaults are what an unset SamplingParams field means.
type SamplingDefaults struct {
	Temperature float64 `json:"temperature"`
	MaxTokens   int     `json:"max_tokens"`
	TopP        float64 `json:"top_p"`
}

// CriticFreeDefaults are the critic-free preset (search.CriticFree, docs/signal.md
// §C): its Selective, its estimator, the constant critic prediction (in [0, 1]
// units of the reward range) and whether its records carry the visitation
// weights.
type CriticFreeDefaults struct {
	Selective         SelectiveDefaults `json:"selective"`
	Estimator         string            `json:"estimator"`
	Prediction        float64           `json:"prediction"`
	VisitationWeights bool              `json:"visitation_weights"`
}

// Defaults are the library's defaults and the choices the binding offers.
type Defaults struct {
	Selective   SelectiveDefaults    `json:"selective"`
	Independent IndependentDefaults  `json:"independent"`
	Segments    SegmentsDefaults     `json:"segments"`
	Agent       AgentDefaults        `json:"agent"`
	Reward      prepare.RewardConfig `json:"reward"`
	Sampling    SamplingDefaults     `json:"sampling"`
	Records     RecordsDefaults      `json:"records"`
	// CriticFree is the critic-free preset.
	CriticFree CriticFreeDefaults `json:"critic_free"`
	// Scores are the Selective scores Validate accepts; Truncations the
	// RewardConfig truncation modes.
	Scores      []string `json:"scores"`
	Truncations []string `json:"truncations"`
}

// DefaultValues returns the library's defaults, read from the constants of the
// packages that own them.
func DefaultValues() Defaults {
	sel := search.Selective(search.DefaultBudget, search.DefaultWarmup)
	free := search.CriticFree()
	lim := collect.DefaultAgentLimits()
	return Defaults{
		CriticFree: CriticFreeDefaults{
			Selective: SelectiveDefaults{
				Budget: free.Budget, Warmup: free.Warmup, PerPass: free.PerPass, MaxChildren: free.MaxChildren,
				Score: free.Score, Seed: free.Seed, StopAlike: free.StopAlike,
			},
			Estimator: search.CriticFreeEstimator, Prediction: search.CriticFreePrediction,
			VisitationWeights: search.CriticFreeVisitationWeights,
		},
		Selective: SelectiveDefaults{
			Budget: sel.Budget, Warmup: sel.Warmup, PerPass: sel.PerPass, MaxChildren: sel.MaxChildren,
			Score: sel.Score, Seed: sel.Seed, StopAlike: sel.StopAlike,
		},
		Independent: IndependentDefaults{N: search.DefaultIndependent},
		Segments:    SegmentsDefaults{Tokens: lim.Segments},
		Agent:       AgentDefaults{MaxSegments: lim.MaxSegments, MaxTotalTokens: lim.MaxTotalTokens},
		Reward:      prepare.DefaultRewardConfig(),
		Sampling:    SamplingDefaults{Temperature: generate.DefaultTemperature, MaxTokens: generate.DefaultMaxTokens, TopP: generate.DefaultTopP},
		Records:     RecordsDefaults{Layout: string(export.LayoutSpans), VisitationWeights: export.DefaultVisitationWeights},
		Scores:      slices.Clone(search.ScoreNames),
		Truncations: []string{prepare.TruncationTerminal, prepare.TruncationBootstrap},
	}
}

// Check validates the object of the given kind, described by config (a JSON
// object of its fields in the binding's spelling; a missing field takes its
// default), and returns its normalised form: for Selective and Independent the
// search.Config the engine runs (so Independent(n) is search.Independent(n)
// whatever the binding holds), for "reward" the prepare.RewardConfig, for
// "sampling" the generate.SamplingParams (null fields unset), for the others the
// checked fields. A non-finite
// number may be written as the string "NaN", "Infinity" or "-Infinity" (JSON has
// no such numbers). A violation is status.InvalidArgument, its message led by the
// kind and naming the field: "Selective: warmup is 8, must be in [1, budget=4]: ...".
func Check(kind string, config []byte) (any, error) {
	fields, err := decodeObject(kind, config)
	if err != nil {
		return nil, err
	}
	d := DefaultValues()
	switch kind {
	case KindSelective:
		c := search.Selective(d.Selective.Budget, d.Selective.Warmup)
		minRemaining := 0
		err := firstError(
			fields.integer("budget", &c.Budget),
			fields.integer("warmup", &c.Warmup),
			fields.integer("per_pass", &c.PerPass),
			fields.integer("max_children", &c.MaxChildren),
			fields.optionalInteger("min_remaining", &minRemaining),
			fields.text("score", &c.Score),
			fields.seed("seed", &c.Seed),
			fields.boolean("stop_alike", &c.StopAlike),
			fields.unknown(),
		)
		if err != nil {
			return nil, err
		}
		c.MinRemaining = minRemaining // None (absent) is 0: the segment length
		return c, named(kind, c.Validate(), nil)
	case KindIndependent:
		n, seed := d.Independent.N, d.Independent.Seed
		if err := firstError(fields.integer("n", &n), fields.seed("seed", &seed), fields.unknown()); err != nil {
			return nil, err
		}
		c := search.Independent(n)
		c.Seed = seed
		// Independent(n) sets budget = warmup = n: an error about either is about n.
		return c, named(kind, c.Validate(), map[string]string{"budget": "n", "warmup": "n"})
	case KindSegments:
		v := d.Segments
		if err := firstError(fields.integer("tokens", &v.Tokens), fields.unknown()); err != nil {
			return nil, err
		}
		lim := collect.DefaultAgentLimits()
		lim.Segments = v.Tokens
		return v, named(kind, lim.Validate(), map[string]string{"segments": "tokens"})
	case KindAgent:
		v := d.Agent
		if err := firstError(fields.integer("max_segments", &v.MaxSegments), fields.integer("max_total_tokens", &v.MaxTotalTokens), fields.unknown()); err != nil {
			return nil, err
		}
		lim := collect.DefaultAgentLimits()
		lim.MaxSegments, lim.MaxTotalTokens = v.MaxSegments, v.MaxTotalTokens
		return v, named(kind, lim.Validate(), nil)
	case KindConstantCritic:
		var v struct {
			Value float64 `json:"value"`
		}
		if err := firstError(fields.number("value", &v.Value), fields.unknown()); err != nil {
			return nil, err
		}
		if err := (collect.ConstantCritic{Value: v.Value}).Validate(); err != nil {
			return nil, status.FieldErrorf(status.InvalidArgument, kind, "value", "is %v, must be a finite number", v.Value)
		}
		return v, nil
	case KindMinAbsAdvantage:
		var v struct {
			Value *float64 `json:"value"` // nil: no threshold
		}
		var x float64
		if fields.present("value") && !fields.null("value") {
			if err := fields.number("value", &x); err != nil {
				return nil, err
			}
			v.Value = &x
		}
		if err := fields.unknown(); err != nil {
			return nil, err
		}
		if v.Value != nil {
			// The error names the field already: "min_abs_advantage is -1, must be >= 0".
			if err := (export.Options{MinAbsAdvantage: x}).Validate(); err != nil {
				return nil, err
			}
		}
		return v, nil
	case KindRecordLayout:
		var v struct {
			Value string `json:"value"`
		}
		if err := fields.text("value", &v.Value); err != nil {
			return nil, err
		}
		if err := fields.unknown(); err != nil {
			return nil, err
		}
		if err := (export.Options{Layout: export.Layout(v.Value)}).Validate(); err != nil {
			return nil, err
		}
		return v, nil
	case KindSampling:
		// A null or missing field is unset (the default); Resolve holds the ranges and
		// leads its messages with "sampling:" already.
		var p generate.SamplingParams
		var seed *int
		err := firstError(
			fields.optionalNumber("temperature", &p.Temperature),
			fields.optionalInt("max_tokens", &p.MaxTokens),
			fields.optionalNumber("top_p", &p.TopP),
			fields.optionalInt("top_k", &p.TopK),
			fields.optionalStrings("stop", &p.Stop),
			fields.optionalTokenIDs("stop_token_ids", &p.StopTokenIDs),
			fields.optionalInt("logprobs", &p.Logprobs),
			fields.optionalInt("prompt_logprobs", &p.PromptLogprobs),
			fields.optionalNumber("repetition_penalty", &p.RepetitionPenalty),
			fields.optionalInt("seed", &seed),
			fields.unknown(),
		)
		if err != nil {
			return nil, err
		}
		if seed != nil {
			p.Seed = generate.Int64(int64(*seed))
		}
		if _, err := p.Resolve(); err != nil {
			return nil, err
		}
		return p, nil
	case KindReward:
		c := d.Reward
		err := firstError(
			fields.number("gamma", &c.Gamma),
			fields.number("critic_weight", &c.CriticWeight),
			fields.number("reward_min", &c.RewardMin),
			fields.number("reward_max", &c.RewardMax),
			fields.number("truncated_reward", &c.TruncatedReward),
			fields.text("truncation", &c.Truncation),
			fields.unknown(),
		)
		if err != nil {
			return nil, err
		}
		return c, named(kind, c.Validate(), nil)
	}
	return nil, status.Errorf(status.InvalidArgument, "rules: unknown kind %q, expected %s", kind, strings.Join(Kinds, ", "))
}

// named rewrites a field error of the config types as "<kind>: <field> <reason>",
// with the field in the binding's spelling (rename maps Go's to it); the error keeps
// the field as data (status.FieldOf).
func named(kind string, err error, rename map[string]string) error {
	if err == nil {
		return nil
	}
	var fe *status.FieldError
	if !errors.As(err, &fe) {
		return status.Wrap(status.InvalidArgument, err, "%s", kind)
	}
	field := fe.Field
	if to, ok := rename[field]; ok {
		field = to
	}
	return status.FieldErrorf(status.InvalidArgument, kind, field, "%s", fe.Reason)
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// object is a decoded JSON object whose fields are read one by one, each read
// marking its field as known.
type object struct {
	kind   string
	fields map[string]json.RawMessage
	seen   map[string]bool
}

func decodeObject(kind string, data []byte) (*object, error) {
	o := &object{kind: kind, fields: map[string]json.RawMessage{}, seen: map[string]bool{}}
	if len(bytes.TrimSpace(data)) == 0 {
		return o, nil
	}
	if err := json.Unmarshal(data, &o.fields); err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "%s: bad JSON (expected an object of its fields)", kind)
	}
	return o, nil
}

func (o *object) present(name string) bool {
	o.seen[name] = true
	_, ok := o.fields[name]
	return ok
}

func (o *object) null(name string) bool {
	return string(bytes.TrimSpace(o.fields[name])) == "null"
}

func (o *object) bad(name, expected string) error {
	return status.FieldErrorf(status.InvalidArgument, o.kind, name, "must be %s, got %s", expected, o.fields[name])
}

// integer reads a JSON integer (not a bool, a string or a fraction) into dst.
func (o *object) integer(name string, dst *int) error {
	if !o.present(name) {
		return nil
	}
	n, ok := o.jsonNumber(name)
	if !ok {
		return o.bad(name, "an integer")
	}
	v, err := n.Int64()
	if err != nil || v != int64(int(v)) {
		return o.bad(name, "an integer")
	}
	*dst = int(v)
	return nil
}

// optionalInteger is integer with null allowed (dst unchanged).
func (o *object) optionalInteger(name string, dst *int) error {
	if o.present(name) && o.null(name) {
		return nil
	}
	return o.integer(name, dst)
}

// optionalInt reads a JSON integer into a new *dst; null or absent leaves dst nil.
func (o *object) optionalInt(name string, dst **int) error {
	if !o.present(name) || o.null(name) {
		return nil
	}
	var v int
	if err := o.integer(name, &v); err != nil {
		return err
	}
	*dst = &v
	return nil
}

// optionalNumber reads a number (or a non-finite string) into a new *dst; null or
// absent leaves dst nil.
func (o *object) optionalNumber(name string, dst **float64) error {
	if !o.present(name) || o.null(name) {
		return nil
	}
	var v float64
	if err := o.number(name, &v); err != nil {
		return err
	}
	*dst = &v
	return nil
}

// optionalStrings reads a JSON list of strings; null or absent leaves dst nil.
func (o *object) optionalStrings(name string, dst *[]string) error {
	return optionalList(o, name, "a list of strings", dst)
}

// optionalTokenIDs reads a JSON list of token ids (integers in [0, 2**32)); null or
// absent leaves dst nil.
func (o *object) optionalTokenIDs(name string, dst *[]uint32) error {
	return optionalList(o, name, "a list of token ids (integers in [0, 2**32))", dst)
}

func optionalList[T any](o *object, name, expected string, dst *[]T) error {
	if !o.present(name) || o.null(name) {
		return nil
	}
	var v []T
	if err := json.Unmarshal(o.fields[name], &v); err != nil {
		return o.bad(name, expected)
	}
	if v == nil {
		v = []T{}
	}
	*dst = v
	return nil
}

// seed reads a non-negative integer below 2^64.
func (o *object) seed(name string, dst *uint64) error {
	if !o.present(name) {
		return nil
	}
	n, ok := o.jsonNumber(name)
	if !ok {
		return o.bad(name, "an integer in [0, 2**64)")
	}
	var v uint64
	if _, err := fmt.Sscan(n.String(), &v); err != nil || fmt.Sprint(v) != n.String() {
		return o.bad(name, "an integer in [0, 2**64)")
	}
	*dst = v
	return nil
}

// number reads a JSON number, or one of the strings "NaN", "Infinity",
// "-Infinity".
func (o *object) number(name string, dst *float64) error {
	if !o.present(name) {
		return nil
	}
	raw := o.fields[name]
	if n, ok := o.jsonNumber(name); ok {
		v, err := n.Float64()
		if err != nil {
			return o.bad(name, "a number")
		}
		*dst = v
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "NaN":
			*dst = math.NaN()
			return nil
		case "Infinity":
			*dst = math.Inf(1)
			return nil
		case "-Infinity":
			*dst = math.Inf(-1)
			return nil
		}
	}
	return o.bad(name, "a number")
}

// jsonNumber is the field as a JSON number literal (not a string holding one).
func (o *object) jsonNumber(name string) (json.Number, bool) {
	raw := bytes.TrimSpace(o.fields[name])
	var n json.Number
	if bytes.HasPrefix(raw, []byte(`"`)) || json.Unmarshal(raw, &n) != nil {
		return "", false
	}
	return n, true
}

// boolean reads a JSON true or false (not a number or a string) into dst.
func (o *object) boolean(name string, dst *bool) error {
	if !o.present(name) {
		return nil
	}
	if err := json.Unmarshal(o.fields[name], dst); err != nil || o.null(name) {
		return o.bad(name, "true or false")
	}
	return nil
}

// text reads a JSON string.
func (o *object) text(name string, dst *string) error {
	if !o.present(name) {
		return nil
	}
	if err := json.Unmarshal(o.fields[name], dst); err != nil {
		return o.bad(name, "a string")
	}
	return nil
}

// unknown reports a field no read asked for, with the fields read (called after every
// read, they are the fields the kind allows).
func (o *object) unknown() error {
	for name := range o.fields {
		if !o.seen[name] {
			return status.Errorf(status.InvalidArgument, "%s: unknown field %q (allowed: %s)", o.kind, name, strings.Join(slices.Sorted(maps.Keys(o.seen)), ", "))
		}
	}
	return nil
}
