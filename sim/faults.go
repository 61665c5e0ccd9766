package sim

import (
	"slices"

	"github.com/focus-go/focus-go/core/status"
)

// FaultKind names one misbehaviour the server can inject.
type FaultKind string

const (
	// FaultHTTPError answers with Status (500, 503, 429, ...) in the endpoint's error shape,
	// with a Retry-After header when RetryAfter > 0. /generate answers 429 and 408
	// status-only, as the SGLang router does.
	FaultHTTPError FaultKind = "http_error"
	// FaultMalformedJSON answers 200 with a body that is not valid JSON (the real body cut
	// in half, with a consistent Content-Length).
	FaultMalformedJSON FaultKind = "malformed_json"
	// FaultTruncatedBody announces the full Content-Length, sends half the body and closes
	// the connection.
	FaultTruncatedBody FaultKind = "truncated_body"
	// FaultCloseConnection closes the connection without any response.
	FaultCloseConnection FaultKind = "close_connection"
	// FaultHang never answers: the connection stays open until the client gives up or the
	// server closes.
	FaultHang FaultKind = "hang"
	// FaultSlow waits Delay before handling the request.
	FaultSlow FaultKind = "slow"
	// FaultAbort ends every sequence of the request with finish reason abort and half of
	// its tokens (OpenAI endpoints: length / incomplete).
	FaultAbort FaultKind = "abort"
	// FaultExtraTokens returns Tokens more tokens than the request's maximum.
	FaultExtraTokens FaultKind = "extra_tokens"
	// FaultMissingLogprobs leaves out the logprobs that were asked for.
	FaultMissingLogprobs FaultKind = "missing_logprobs"
	// FaultPromptInOutputIDs makes SGLang's output_ids start with the last prompt tokens
	// (SGLang issue #17240), so clients must read ids from the logprob triples.
	FaultPromptInOutputIDs FaultKind = "prompt_in_output_ids"
)

var faultKinds = []FaultKind{FaultHTTPError, FaultMalformedJSON, FaultTruncatedBody, FaultCloseConnection,
	FaultHang, FaultSlow, FaultAbort, FaultExtraTokens, FaultMissingLogprobs, FaultPromptInOutputIDs}

// generationPaths are the endpoints a Fault with no Endpoints applies to.
var generationPaths = []string{"/generate", "/v1/completions", "/v1/chat/completions", "/v1/responses"}

// Fault is one fault rule. A request to a matching endpoint takes the first rule that fires:
// a rule with Count > 0 fires for the next Count matching requests and is then dropped; a
// rule with Rate > 0 fires with that probability (dice seeded by Config.Seed); a rule with
// neither fires for every matching request until replaced.
type Fault struct {
	Kind FaultKind `json:"kind"`
	// Endpoints are request paths ("/health", "/v1/completions"); empty means every
	// generation endpoint (/generate, /v1/completions, /v1/chat/completions, /v1/responses).
	Endpoints  []string `json:"endpoints,omitempty"`
	Count      int      `json:"count,omitempty"`
	Rate       float64  `json:"rate,omitempty"`
	Status     int      `json:"status,omitempty"`      // http_error
	RetryAfter int      `json:"retry_after,omitempty"` // http_error, seconds
	Delay      Duration `json:"delay,omitempty"`       // slow
	Tokens     int      `json:"tokens,omitempty"`      // extra_tokens; zero means 1
}

func (f Fault) validate() error {
	if !slices.Contains(faultKinds, f.Kind) {
		return status.Errorf(status.InvalidArgument, "sim: fault kind %q: want one of %v", f.Kind, faultKinds)
	}
	if f.Kind == FaultHTTPError && (f.Status < 400 || f.Status > 599) {
		return status.Errorf(status.InvalidArgument, "sim: http_error fault status %d: want 400-599", f.Status)
	}
	if f.Count < 0 || f.Rate < 0 || f.Rate > 1 || f.RetryAfter < 0 || f.Delay < 0 || f.Tokens < 0 {
		return status.Errorf(status.InvalidArgument, "sim: fault %+v: count, retry_after, delay and tokens must be non-negative and rate in [0, 1]", f)
	}
	return nil
}

func (f Fault) matches(path string) bool {
	if len(f.Endpoints) == 0 {
		return slices.Contains(generationPaths, path)
	}
	return slices.Contains(f.Endpoints, path)
}

// faultRule is a Fault with its use count; counted rules leave once used up.
type faultRule struct {
	Fault
	counted bool
}

func toRules(faults []Fault) []faultRule {
	out := make([]faultRule, len(faults))
	for i, f := range faults {
		out[i] = faultRule{Fault: f, counted: f.Count > 0}
	}
	return out
}

// SetFaults replaces the fault rules; it is safe while requests are running. A request
// already past its fault check keeps what it drew.
func (s *Server) SetFaults(faults ...Fault) error {
	for i, f := range faults {
		if err := f.validate(); err != nil {
			return status.Wrap(status.InvalidArgument, err, "sim: faults[%d]", i)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = toRules(faults)
	return nil
}

// Faults are the rules still active, Count showing what is left of counted ones.
func (s *Server) Faults() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Fault, len(s.faults))
	for i, r := range s.faults {
		out[i] = r.Fault
	}
	return out
}

// takeFault returns the rule that fires for this request, if any.
func (s *Server) takeFault(path string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.faults {
		r := &s.faults[i]
		if !r.matches(path) {
			continue
		}
		if r.counted {
			r.Count--
		} else if r.Rate > 0 && s.dice.Float64() >= r.Rate {
			continue
		}
		out := r.Fault
		if r.counted && r.Count == 0 {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
		}
		s.stats.Faults++
		return &out
	}
	return nil
}
