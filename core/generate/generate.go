// Package generate owns the values that cross every token-exact policy backend: the
// sampling parameters of one request (SamplingParams, with the documented defaults
// temperature 0.7, max tokens 512, top-p 1.0), the request itself (Request) and the record
// of one model response (Result, the Go form of focus.backends.GenerateResult), plus the
// checks every backend applies to a response before handing it on (Result.Validate).
//
// Everything here is a plain value with no shared state: safe to copy, and safe to share
// between goroutines as long as nobody modifies it.
package generate

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/status"
)

// Defaults for the sampling fields a caller leaves unset (focus.generation.types).
const (
	DefaultTemperature = 0.7
	DefaultMaxTokens   = 512
	DefaultTopP        = 1.0
	// DefaultTopK (-1) disables top-k on both SGLang and vLLM.
	DefaultTopK = -1
	// DefaultRepetitionPenalty (1.0) disables the penalty.
	DefaultRepetitionPenalty = 1.0
)

// Stop reasons: why generation ended.
const (
	StopReasonStop   = "stop"   // EOS, a stop token or a stop string
	StopReasonLength = "length" // max tokens reached (or the server's context limit)
	StopReasonAbort  = "abort"  // the server aborted the request; the output is partial
)

// SamplingParams are the generation controls of one request. A nil pointer means "unset":
// Resolve fills it with the default, and backends always send every field explicitly,
// because servers otherwise fill unset fields from the model's generation_config.json.
type SamplingParams struct {
	Temperature *float64 `json:"temperature,omitempty"`
	MaxTokens   *int     `json:"max_tokens,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	TopK        *int     `json:"top_k,omitempty"` // -1 (or nil) = off
	Stop        []string `json:"stop,omitempty"`
	// StopTokenIDs end generation when sampled (vLLM extension, SGLang native).
	StopTokenIDs []uint32 `json:"stop_token_ids,omitempty"`
	// Logprobs is the number of top alternatives to return per generated token (0 = the
	// sampled token's logprob only). Token-exact backends always return the sampled
	// token's logprob, so nil and 0 mean the same.
	Logprobs *int `json:"logprobs,omitempty"`
	// PromptLogprobs, when set, asks for the logprob of every prompt token plus this many
	// alternatives per position.
	PromptLogprobs    *int     `json:"prompt_logprobs,omitempty"`
	RepetitionPenalty *float64 `json:"repetition_penalty,omitempty"`
	Seed              *int64   `json:"seed,omitempty"`
}

// Float64, Int and Int64 return pointers for building SamplingParams literals.
func Float64(v float64) *float64 { return &v }
func Int(v int) *int             { return &v }
func Int64(v int64) *int64       { return &v }

// WithDefaults returns p with every unset field taken from defaults (e.g. a policy's
// default_params); Stop and StopTokenIDs count as unset when nil.
func (p SamplingParams) WithDefaults(defaults SamplingParams) SamplingParams {
	if p.Temperature == nil {
		p.Temperature = defaults.Temperature
	}
	if p.MaxTokens == nil {
		p.MaxTokens = defaults.MaxTokens
	}
	if p.TopP == nil {
		p.TopP = defaults.TopP
	}
	if p.TopK == nil {
		p.TopK = defaults.TopK
	}
	if p.Stop == nil {
		p.Stop = defaults.Stop
	}
	if p.StopTokenIDs == nil {
		p.StopTokenIDs = defaults.StopTokenIDs
	}
	if p.Logprobs == nil {
		p.Logprobs = defaults.Logprobs
	}
	if p.PromptLogprobs == nil {
		p.PromptLogprobs = defaults.PromptLogprobs
	}
	if p.RepetitionPenalty == nil {
		p.RepetitionPenalty = defaults.RepetitionPenalty
	}
	if p.Seed == nil {
		p.Seed = defaults.Seed
	}
	return p
}

// Resolved is SamplingParams with every default applied: what goes on the wire.
type Resolved struct {
	Temperature       float64
	MaxTokens         int
	TopP              float64
	TopK              int
	Stop              []string // never nil
	StopTokenIDs      []uint32 // never nil
	TopLogprobs       int      // alternatives per generated token, ≥ 0
	PromptLogprobs    int      // alternatives per prompt position; -1 = prompt logprobs not wanted
	RepetitionPenalty float64
	Seed              int64
	HasSeed           bool
}

// Resolve applies the defaults and checks the ranges both servers enforce, so that a bad
// value fails here with a clear message instead of as a server 400.
func (p SamplingParams) Resolve() (Resolved, error) {
	r := Resolved{
		Temperature: DefaultTemperature, MaxTokens: DefaultMaxTokens, TopP: DefaultTopP,
		TopK: DefaultTopK, Stop: p.Stop, StopTokenIDs: p.StopTokenIDs, PromptLogprobs: -1,
		RepetitionPenalty: DefaultRepetitionPenalty,
	}
	if p.Temperature != nil {
		r.Temperature = *p.Temperature
	}
	if p.MaxTokens != nil {
		r.MaxTokens = *p.MaxTokens
	}
	if p.TopP != nil {
		r.TopP = *p.TopP
	}
	if p.TopK != nil {
		r.TopK = *p.TopK
	}
	if p.Logprobs != nil {
		r.TopLogprobs = *p.Logprobs
	}
	if p.PromptLogprobs != nil {
		r.PromptLogprobs = *p.PromptLogprobs
	}
	if p.RepetitionPenalty != nil {
		r.RepetitionPenalty = *p.RepetitionPenalty
	}
	if p.Seed != nil {
		r.Seed, r.HasSeed = *p.Seed, true
	}
	if r.Stop == nil {
		r.Stop = []string{}
	}
	if r.StopTokenIDs == nil {
		r.StopTokenIDs = []uint32{}
	}
	switch {
	case math.IsNaN(r.Temperature) || r.Temperature < 0:
		return r, status.FieldErrorf(status.InvalidArgument, "sampling", "temperature", "%v must be ≥ 0", r.Temperature)
	case r.MaxTokens < 1:
		return r, status.FieldErrorf(status.InvalidArgument, "sampling", "max_tokens", "%d must be ≥ 1", r.MaxTokens)
	case math.IsNaN(r.TopP) || r.TopP <= 0 || r.TopP > 1:
		return r, status.FieldErrorf(status.InvalidArgument, "sampling", "top_p", "%v must be in (0, 1]", r.TopP)
	case r.TopK < -1:
		return r, status.FieldErrorf(status.InvalidArgument, "sampling", "top_k", "%d must be -1 (off), 0 (off) or ≥ 1", r.TopK)
	case p.Logprobs != nil && *p.Logprobs < 0:
		return r, status.FieldErrorf(status.InvalidArgument, "sampling", "logprobs", "%d must be ≥ 0", *p.Logprobs)
	case p.PromptLogprobs != nil && *p.PromptLogprobs < 0:
		return r, status.FieldErrorf(status.InvalidArgument, "sampling", "prompt_logprobs", "%d must be ≥ 0", *p.PromptLogprobs)
	case math.IsNaN(r.RepetitionPenalty) || r.RepetitionPenalty <= 0 || r.RepetitionPenalty > 2:
		return r, status.FieldErrorf(status.InvalidArgument, "sampling", "repetition_penalty", "%v must be in (0, 2]", r.RepetitionPenalty)
	}
	for i, s := range r.Stop {
		if s == "" {
			return r, status.Errorf(status.InvalidArgument, "sampling: stop[%d] is empty", i)
		}
	}
	return r, nil
}

// Request is one token-exact generation request.
type Request struct {
	// Tokens is the exact prompt (the prefix the model continues). Never re-tokenized.
	Tokens []uint32
	Params SamplingParams
	// ID names the request on the server (SGLang rid, vLLM X-Request-Id) so it can be
	// aborted; empty = the backend makes one up.
	ID string
	// RoutingKey, when set, is sent as X-SMG-Routing-Key so that an SGLang router keeps a
	// whole tree on one worker (its KV cache is per worker).
	RoutingKey string
	// Tree identifies the collection the request belongs to, for client-side scheduling
	// and routing (core/fleet keeps a tree on the replica that holds its prefix); it is
	// never sent to the server. Zero: unknown.
	Tree uint64
	// SkipText says the caller never reads Result.Text (it decodes Tokens itself, as the
	// collection engine does with a Codec); a backend may then skip reading the server's
	// text and leave Text empty. The SGLang client does.
	SkipText bool
}

// StopMatchKind says what ended a "stop" finish.
type StopMatchKind uint8

const (
	MatchNone   StopMatchKind = iota // EOS with no recorded match, a length or abort finish
	MatchToken                       // a token id (EOS or a stop_token_ids entry)
	MatchString                      // a stop string (or SGLang stop regex)
)

// StopMatch is GenerateResult.matched_stop: an int token id, a string, or None.
type StopMatch struct {
	Kind   StopMatchKind
	Token  uint32
	String string
}

// Value is the Python-shaped value: nil, an int64 token id, or a string.
func (m StopMatch) Value() any {
	switch m.Kind {
	case MatchToken:
		return int64(m.Token)
	case MatchString:
		return m.String
	}
	return nil
}

// ReadStopMatch reads a server's matched-stop field (SGLang finish_reason.matched, vLLM
// stop_reason): a number is a token id, a string a stop string, null none. SGLang's
// schema (sglang/api/v1/api_types.py, Matched = Union[int, str, MatchedTokens]) also
// allows a list of token ids: an empty list is no match, a one-id list that id. A list of
// several ids has no matched_stop form (an int, a string or None), so it is an error
// naming the list, as is any other value (a negative or fractional id, an object). The
// value is consumed either way; iter.Error is left for JSON syntax errors.
func ReadStopMatch(iter *jsoniter.Iterator) (StopMatch, error) {
	switch iter.WhatIsNext() {
	case jsoniter.NumberValue:
		return tokenMatch(iter.ReadNumber())
	case jsoniter.StringValue:
		return StopMatch{Kind: MatchString, String: iter.ReadString()}, nil
	case jsoniter.NilValue:
		iter.Skip()
		return StopMatch{}, nil
	case jsoniter.ArrayValue:
		var ids []uint32
		var err error
		for iter.ReadArray() {
			if iter.WhatIsNext() != jsoniter.NumberValue {
				iter.Skip()
				if err == nil {
					err = fmt.Errorf("list entry %d is not a token id", len(ids))
				}
				continue
			}
			m, e := tokenMatch(iter.ReadNumber())
			if e != nil && err == nil {
				err = e
			}
			ids = append(ids, m.Token)
		}
		switch {
		case err != nil:
			return StopMatch{}, err
		case len(ids) == 0:
			return StopMatch{}, nil
		case len(ids) == 1:
			return StopMatch{Kind: MatchToken, Token: ids[0]}, nil
		}
		return StopMatch{}, fmt.Errorf("is a list of %d token ids %v; matched_stop holds one token id, a string or None", len(ids), ids)
	}
	raw := iter.SkipAndReturnBytes()
	return StopMatch{}, fmt.Errorf("is %.40s; expected a token id, a string, a list of token ids or null", raw)
}

// tokenMatch reads a JSON number that must be a token id in [0, 2^32).
func tokenMatch(v json.Number) (StopMatch, error) {
	id, err := strconv.ParseUint(string(v), 10, 32)
	if err != nil {
		return StopMatch{}, fmt.Errorf("token id %s is not an integer in [0, 2^32)", v)
	}
	return StopMatch{Kind: MatchToken, Token: uint32(id)}, nil
}

// MarshalJSON writes null, the token id, or the string.
func (m StopMatch) MarshalJSON() ([]byte, error) {
	switch m.Kind {
	case MatchToken:
		return strconv.AppendUint(nil, uint64(m.Token), 10), nil
	case MatchString:
		return json.Marshal(m.String)
	}
	return []byte("null"), nil
}

// Result records one model response (focus.backends.GenerateResult).
type Result struct {
	// Tokens are the generated ids, exactly as sampled, the final EOS / stop token included.
	Tokens []uint32 `json:"tokens"`
	// PrefixTokens is the prompt the tokens continue.
	PrefixTokens []uint32 `json:"prefix_tokens"`
	// Text is the server's detokenization of Tokens (specials and stop strings kept).
	Text        string    `json:"text"`
	StopReason  string    `json:"stop_reason"` // StopReasonStop, StopReasonLength or StopReasonAbort
	MatchedStop StopMatch `json:"matched_stop"`
	// Logprobs holds the sampled token's logprob per generated token, aligned with Tokens.
	// A token the server gave no finite logprob is never 0 or a made-up number: SGLang
	// serialises -inf and NaN alike as JSON null (orjson), read as NaN (unknown); vLLM
	// writes -inf as -9999.0 (read back as -Inf) and NaN as null (NaN). Such a response is valid
	// (NonFiniteLogprobs counts them), but its tokens cannot train the actor: the
	// collection engine records the edge as inexact (tree.Node.Inexact).
	Logprobs []float64 `json:"logprobs"`
	// TopLogprobs, when alternatives were asked for, maps token id → logprob per generated
	// position (aligned with Tokens); nil otherwise.
	TopLogprobs []map[uint32]float64 `json:"top_logprobs"`
	// PromptLogprobs, when asked for, holds one value per prompt token; positions the
	// server gives no logprob for (always the first) are NaN. Empty otherwise.
	PromptLogprobs []float64 `json:"prompt_logprobs"`
	// PromptTopLogprobs, when prompt alternatives were asked for, maps token id → logprob
	// per prompt position (nil entries where the server has none); nil otherwise.
	PromptTopLogprobs []map[uint32]float64 `json:"prompt_top_logprobs"`
	// Entropy is the sample estimate of the per-token entropy, -mean(Logprobs) (the
	// expected surprisal of a sampled token); 0 with no tokens.
	Entropy float64 `json:"entropy"`
	// ExactGeneration is true when Tokens are the ids the server sampled (always, for
	// these backends), false when they were reconstructed from text.
	ExactGeneration bool `json:"exact_generation"`
	// PromptTokens is the server's count of prompt tokens; CachedTokens how many of them
	// it reused from its prefix cache (0 when the server does not report it).
	PromptTokens int `json:"prompt_tokens"`
	CachedTokens int `json:"cached_tokens"`
	// AbortMessage is the server's reason for an "abort" finish, if it gave one.
	AbortMessage string `json:"abort_message,omitempty"`
	// WeightVersion is the version of the weights that produced it, where the server says
	// (SGLang's meta_info.weight_version) or its fleet knows; "" otherwise.
	WeightVersion string `json:"weight_version,omitempty"`
}

// SampleEntropy is -mean(logprobs), the sample estimate of the per-token entropy, over
// the tokens with a finite logprob (NaN, the server's missing values, and -Inf are left
// out, so the estimate stays a number JSON can carry); 0 with none.
func SampleEntropy(logprobs []float64) float64 {
	sum, n := 0.0, 0
	for _, lp := range logprobs {
		if !math.IsNaN(lp) && !math.IsInf(lp, 0) {
			sum -= lp
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// NonFiniteLogprobs is the number of generated tokens without a finite logprob (NaN:
// the server sent none; -Inf), and the index of the first (-1 with none).
func (r *Result) NonFiniteLogprobs() (n, first int) {
	first = -1
	for i, lp := range r.Logprobs {
		if math.IsNaN(lp) || math.IsInf(lp, -1) {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	return n, first
}

// Validate checks what the execution service relies on: a known stop reason, at most
// maxTokens tokens, one logprob per token (≤ 0: finite, -Inf, or NaN where the server
// sent none; see Logprobs), and top-logprob maps (when present)
// aligned with the tokens. backend prefixes the error ("sglang: response has 300 tokens,
// max_tokens was 256"). Every failure is status.Backend: the server broke its contract.
func (r *Result) Validate(backend string, maxTokens int) error {
	switch r.StopReason {
	case StopReasonStop, StopReasonLength, StopReasonAbort:
	default:
		return status.Errorf(status.Backend, "%s: unknown finish reason %q, expected stop, length or abort", backend, r.StopReason)
	}
	if len(r.Tokens) > maxTokens {
		return status.Errorf(status.Backend, "%s: response has %d tokens, max_tokens was %d", backend, len(r.Tokens), maxTokens)
	}
	if len(r.Logprobs) != len(r.Tokens) {
		return status.Errorf(status.Backend, "%s: response has %d tokens but %d logprobs; expected one logprob per token",
			backend, len(r.Tokens), len(r.Logprobs))
	}
	for i, lp := range r.Logprobs {
		if lp > 1e-6 { // false for NaN; true for +Inf
			return status.Errorf(status.Backend, "%s: logprob %v of token %d (id %d) is positive; expected a value ≤ 0 (NaN for none)", backend, lp, i, r.Tokens[i])
		}
	}
	if r.TopLogprobs != nil {
		if len(r.TopLogprobs) != len(r.Tokens) {
			return status.Errorf(status.Backend, "%s: response has %d tokens but %d top-logprob entries", backend, len(r.Tokens), len(r.TopLogprobs))
		}
		for i, m := range r.TopLogprobs {
			if m == nil {
				return status.Errorf(status.Backend, "%s: top logprobs were requested but token %d (id %d) has none", backend, i, r.Tokens[i])
			}
		}
	}
	if r.PromptLogprobs != nil && len(r.PromptLogprobs) > 0 && len(r.PromptLogprobs) != len(r.PrefixTokens) {
		return status.Errorf(status.Backend, "%s: prompt has %d tokens but %d prompt logprobs", backend, len(r.PrefixTokens), len(r.PromptLogprobs))
	}
	return nil
}
