package collect

import (
	"errors"
	"fmt"

	"github.com/focus-go/focus-go/core/search"
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

// LimitError names the limit that is out of range (segments, max_segments,
// max_total_tokens) and why.
type LimitError struct {
	Field  string
	Reason string
}

func (e *LimitError) Error() string { return fmt.Sprintf("agent limit %s: %s", e.Field, e.Reason) }

// Validate reports the first limit below 1 as a *LimitError (nil: all valid).
func (l AgentLimits) Validate() error {
	if e := l.check(); e != nil {
		return e
	}
	return nil
}

// check applies search.Limits' rule to the token limits (the search plans with them)
// and its own to MaxSegments.
func (l AgentLimits) check() *LimitError {
	if err := (search.Limits{MaxTotalTokens: l.MaxTotalTokens, SegmentTokens: l.Segments}).Validate(); err != nil {
		var se *search.ConfigError
		if !errors.As(err, &se) {
			return &LimitError{"limits", err.Error()}
		}
		field := se.Field
		if field == "segment_tokens" {
			field = "segments"
		}
		return &LimitError{field, se.Reason}
	}
	if l.MaxSegments < 1 {
		return &LimitError{"max_segments", fmt.Sprintf("is %d, must be >= 1", l.MaxSegments)}
	}
	return nil
}
