package collect

import (
	"fmt"
	"strings"
)

// Failure is one failed rollout or critic call: the node it concerns (the
// failed node under the rollout's start checkpoint, or a checkpoint the
// critic could not score) and what failed.
type Failure struct {
	NodeID  int    `json:"node_id"`
	Message string `json:"message"`
	// Aborted marks a rollout whose generation the server aborted (action.ErrAborted):
	// trainers such as Slime treat it as an aborted sample rather than a failure.
	Aborted bool `json:"aborted,omitempty"`
}

// FailureError lists a collection's failures. Collect and Run return it
// wrapped in a status.Collection error when AllowPartial is false; reach it
// with errors.As.
type FailureError struct {
	ProblemID string
	Failures  []Failure
}

func (e *FailureError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "problem %q: %d failure", e.ProblemID, len(e.Failures))
	if len(e.Failures) != 1 {
		b.WriteByte('s')
	}
	b.WriteString(" (set allow_partial to keep the tree without them)")
	for i, f := range e.Failures {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "node %d: %s", f.NodeID, f.Message)
	}
	return b.String()
}
