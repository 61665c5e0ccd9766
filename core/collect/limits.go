package collect

import (
	"errors"
	"fmt"

	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
)

// AgentLimits are the agent's limits as a caller states them: Segments(tokens),
// Agent(max_segments, max_total_tokens). Each must be at least 1; Config.Validate
// checks its limits with it after filling zeros with their defaults, and the
// binding's Agent and Segments are checked with it at construction (capi/binding),
// so the rule is written once.
type AgentLimits struct {
	Segments       int `json:"segments"`
	MaxSegments    int `json:"max_segments"`
	MaxTotalTokens int `json:"max_total_tokens"`
}

// DefaultAgentLimits are Segments(256), max_segments 64, max_total_tokens 8192.
func DefaultAgentLimits() AgentLimits {
	return AgentLimits{Segments: DefaultSegments, MaxSegments: DefaultMaxSegments, MaxTotalTokens: DefaultMaxTotalTokens}
}

// Validate reports the first limit below 1 as a *status.FieldError naming it in
// Python's spelling (segments, max_segments, max_total_tokens): "agent limit segments:
// is 0, must be >= 1" (nil: all valid).
func (l AgentLimits) Validate() error {
	if e := l.check(); e != nil {
		return e
	}
	return nil
}

// check applies search.Limits' rule to the token limits (the search plans with them)
// and its own to MaxSegments.
func (l AgentLimits) check() *status.FieldError {
	if err := (search.Limits{MaxTotalTokens: l.MaxTotalTokens, SegmentTokens: l.Segments}).Validate(); err != nil {
		var se *status.FieldError
		if !errors.As(err, &se) {
			return limitError("limits", err.Error())
		}
		field := se.Field
		if field == "segment_tokens" {
			field = "segments"
		}
		return limitError(field, se.Reason)
	}
	if l.MaxSegments < 1 {
		return limitError("max_segments", fmt.Sprintf("is %d, must be >= 1", l.MaxSegments))
	}
	if l.MaxSegments > search.MaxTokens {
		return limitError("max_segments", fmt.Sprintf("is %d, must be <= %d", l.MaxSegments, search.MaxTokens))
	}
	return nil
}

func limitError(field, reason string) *status.FieldError {
	return &status.FieldError{Config: "agent limit", Field: field, Reason: reason}
}
