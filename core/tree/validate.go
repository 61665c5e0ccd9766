package tree

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/focus-go/focus-go/core/status"
)

// ValidationError names the node and field of a tree (or of a preparation
// input derived from it) that is wrong. NodeID is -1 for tree-level fields.
type ValidationError struct {
	NodeID int
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	if e.NodeID < 0 {
		return fmt.Sprintf("tree %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("node %d %s: %s", e.NodeID, e.Field, e.Reason)
}

func invalid(id int, field, format string, args ...any) *ValidationError {
	return &ValidationError{NodeID: id, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Validate checks that the tree is a well-formed rooted tree with aligned
// spans and finite numbers. It reports the first problem in node-id order as
// a *ValidationError classified status.InvalidArgument. Reward bounds depend
// on the reward configuration and are checked by preparation. Validate reads
// every token of every span; see Revalidate for the check preparation uses.
func (t *Tree) Validate() error {
	if err := t.validate(true); err != nil {
		return status.Wrap(status.InvalidArgument, err, "tree")
	}
	return nil
}

// Revalidate makes the checks of Validate, reporting the same first problem,
// but re-reads the tokens of a node's spans only when they are not the ones
// checked as the node entered the tree (see the package doc): the structure,
// rewards, critic predictions, flags, strings and statistics are checked on
// every call, so its cost grows with the number of nodes rather than tokens
// on a tree grown by AddChild or read by Unmarshal/Decode. Like Validate it
// only reads the tree.
func (t *Tree) Revalidate() error {
	if err := t.validate(false); err != nil {
		return status.Wrap(status.InvalidArgument, err, "tree")
	}
	return nil
}

// validate checks the tree; with all false, span contents are re-read only
// for nodes whose spans do not match their entry stamp.
func (t *Tree) validate(all bool) *ValidationError {
	n := len(t.Nodes)
	if n == 0 {
		return invalid(-1, "nodes", "empty: a tree needs at least its root")
	}
	if !utf8.ValidString(t.ProblemID) {
		return invalid(-1, "problem_id", "not valid UTF-8")
	}
	if err := t.Stats.validate(); err != nil {
		return err
	}
	checked := 0
	for i := range t.Nodes {
		spans := all || !t.stamped(i)
		if spans {
			checked++
		}
		if err := t.Nodes[i].validateFields(i, n, spans); err != nil {
			return err
		}
	}
	spanChecks.Add(int64(checked))
	listed := make([]bool, n)
	for i := range t.Nodes {
		for k, c := range t.Nodes[i].Children {
			field := func() string { return fmt.Sprintf("children[%d]", k) }
			switch {
			case c < 0 || c >= n:
				return invalid(i, field(), "unknown node %d", c)
			case t.Nodes[c].Parent != i:
				return invalid(i, field(), "lists node %d, whose parent is %d", c, t.Nodes[c].Parent)
			case listed[c]:
				return invalid(i, field(), "lists node %d twice", c)
			}
			listed[c] = true
		}
	}
	for i := 1; i < n; i++ {
		if !listed[i] {
			return invalid(i, "parent", "node %d does not list this node among its children", t.Nodes[i].Parent)
		}
	}
	order := t.BreadthFirst()
	for _, id := range order[1:] {
		if want := t.Nodes[t.Nodes[id].Parent].Depth + 1; t.Nodes[id].Depth != want {
			return invalid(id, "depth", "is %d, expected %d (parent depth + 1)", t.Nodes[id].Depth, want)
		}
	}
	if len(order) < n {
		reached := make([]bool, n)
		for _, id := range order {
			reached[id] = true
		}
		for i := range t.Nodes {
			if !reached[i] {
				return invalid(i, "parent", "cycle %s never reaches the root", t.cycleFrom(i))
			}
		}
	}
	return nil
}

// cycleFrom follows parents from id (which must not reach the root) and
// renders the loop it ends in, e.g. "4 -> 7 -> 4".
func (t *Tree) cycleFrom(id int) string {
	seen := map[int]bool{}
	for !seen[id] {
		seen[id] = true
		id = t.Nodes[id].Parent
	}
	parts := []string{fmt.Sprint(id)}
	for c := t.Nodes[id].Parent; c != id; c = t.Nodes[c].Parent {
		parts = append(parts, fmt.Sprint(c))
	}
	return strings.Join(append(parts, fmt.Sprint(id)), " -> ")
}

// validateFields checks what can be checked on node id alone, in a tree of n
// nodes; the per-token span checks only when spans is true.
func (nd *Node) validateFields(id, n int, spans bool) *ValidationError {
	if nd.ID != id {
		return invalid(id, "id", "is %d, expected its position %d", nd.ID, id)
	}
	if id == 0 {
		switch {
		case nd.Parent != -1:
			return invalid(0, "parent", "is %d, the root's parent must be -1", nd.Parent)
		case nd.Depth != 0:
			return invalid(0, "depth", "is %d, the root's depth must be 0", nd.Depth)
		case nd.Reward != 0:
			return invalid(0, "reward", "is %g, the root has no incoming edge", nd.Reward)
		case nd.Done || nd.Truncated || nd.Failed != "":
			return invalid(0, "done", "the root (prompt) cannot be terminal, truncated or failed")
		}
	} else {
		switch {
		case nd.Parent == -1:
			return invalid(id, "parent", "missing (-1): only the root has no parent")
		case nd.Parent < 0 || nd.Parent >= n:
			return invalid(id, "parent", "unknown node %d", nd.Parent)
		case nd.Parent == id:
			return invalid(id, "parent", "cycle: the node is its own parent")
		}
	}
	if spans {
		if err := nd.validateSpans(id); err != nil {
			return err
		}
	}
	if !finite(nd.Reward) {
		return invalid(id, "reward", "is %g, not finite", nd.Reward)
	}
	if nd.Critic != nil && !finite(*nd.Critic) {
		return invalid(id, "critic", "is %g, not finite", *nd.Critic)
	}
	if nd.SearchPass < 0 {
		return invalid(id, "search_pass", "is %d, must be >= 0", nd.SearchPass)
	}
	if nd.Terminal() && len(nd.Children) > 0 {
		return invalid(id, "children", "a terminal (done or truncated) node has %d children", len(nd.Children))
	}
	if nd.Inexact != "" && id == 0 {
		return invalid(0, "inexact", "the root (prompt) has no generated tokens to be inexact")
	}
	for _, f := range [...]struct{ name, s string }{{"text", nd.Text}, {"observation", nd.Observation}, {"failed", nd.Failed}, {"inexact", nd.Inexact}} {
		if !utf8.ValidString(f.s) {
			return invalid(id, f.name, "not valid UTF-8")
		}
	}
	return nil
}

// validateSpans is the per-token part of validateFields: aligned lengths,
// finite log-probabilities and, on the root, no generated tokens.
func (nd *Node) validateSpans(id int) *ValidationError {
	for k, s := range nd.Spans {
		if len(s.Trainable) != len(s.Tokens) {
			return invalid(id, fmt.Sprintf("spans[%d].trainable", k), "has %d entries for %d tokens", len(s.Trainable), len(s.Tokens))
		}
		if len(s.Logprobs) != len(s.Tokens) {
			return invalid(id, fmt.Sprintf("spans[%d].logprobs", k), "has %d entries for %d tokens", len(s.Logprobs), len(s.Tokens))
		}
		for j, lp := range s.Logprobs {
			if !finite(lp) {
				return invalid(id, fmt.Sprintf("spans[%d].logprobs[%d]", k, j), "is %g, not finite", lp)
			}
		}
		if id == 0 && s.HasTrainable() {
			return invalid(0, fmt.Sprintf("spans[%d].trainable", k), "the prompt has no generated tokens")
		}
		if nd.Inexact != "" && s.HasTrainable() {
			return invalid(id, fmt.Sprintf("spans[%d].trainable", k), "an inexact edge (%.60s) has trainable tokens; its tokens are conditioning only", nd.Inexact)
		}
	}
	return nil
}

func (s *Stats) validate() *ValidationError {
	for _, f := range [...]struct {
		name string
		v    int
	}{{"rollouts", s.Rollouts}, {"budget_unspent", s.BudgetUnspent}, {"generated_tokens", s.GeneratedTokens}, {"prefix_tokens_reused", s.PrefixTokensReused},
		{"resumes", s.Resumes}, {"rollouts_resumed", s.RolloutsResumed}, {"tokens_resumed", s.TokensResumed},
		{"rewards_regraded", s.RewardsRegraded}} {
		if f.v < 0 {
			return invalid(-1, "stats."+f.name, "is %d, must be >= 0", f.v)
		}
	}
	for _, f := range [...]struct {
		name string
		v    float64
	}{{"wall_seconds", s.WallSeconds}, {"policy_seconds", s.PolicySeconds}} {
		if !finite(f.v) || f.v < 0 {
			return invalid(-1, "stats."+f.name, "is %g, must be finite and >= 0", f.v)
		}
	}
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
