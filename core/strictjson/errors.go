package strictjson

import (
	"fmt"
	"strings"

	"github.com/focus-go/focus-go/core/status"
)

// ValueError is a value that does not fit its field, or JSON that is not well formed.
type ValueError struct {
	// Input names the document ("tree", "collection spec").
	Input string
	// Path is where the value sits: "" for the whole document, else "nodes[2].reward",
	// "state.fit", "[0]".
	Path string
	// Problem says what was wrong ("is NaN", "is a string").
	Problem string
	// Allowed says what the field takes ("a finite number"); "" for a syntax error.
	Allowed string
	// Offset is the byte offset in the document where the problem was found.
	Offset int
	// Syntax is true when the document is not well-formed JSON.
	Syntax bool
}

func (e *ValueError) Error() string {
	if e.Syntax {
		where := ""
		if e.Path != "" {
			where = " (in " + e.Path + ")"
		}
		return fmt.Sprintf("%s: bad JSON at byte %d%s: %s", e.Input, e.Offset, where, e.Problem)
	}
	subject := e.Path
	if subject == "" {
		subject = "the document"
	}
	return fmt.Sprintf("%s: %s %s; %s is required", e.Input, subject, e.Problem, e.Allowed)
}

// As lets status.FieldOf find the field a value error is about, so that it crosses the C
// ABI beside the message (Python's ConfigError.field).
func (e *ValueError) As(target any) bool {
	fe, ok := target.(**status.FieldError)
	if !ok || e.Path == "" || e.Syntax {
		return false
	}
	*fe = &status.FieldError{Config: e.Input, Field: e.Path, Reason: e.Problem + "; " + e.Allowed + " is required"}
	return true
}

// UnknownKeyError is a key an input's Go type does not declare: a misspelt or unsupported
// setting, or a declared key written in another case, refused instead of ignored.
type UnknownKeyError struct {
	// Input names the input ("collection spec").
	Input string
	// Path is where the object holding Key sits in the input: "" at the top, else
	// "search", "policy", "result.native_tool_calls[0]".
	Path string
	// Key is the key that was sent.
	Key string
	// Allowed are the keys the object declares, sorted.
	Allowed []string
}

func (e *UnknownKeyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: unknown key %q", e.Input, e.Key)
	if e.Path != "" {
		fmt.Fprintf(&b, " in %s", e.Path)
	}
	if near := closest(e.Key, e.Allowed); near != "" {
		if strings.EqualFold(near, e.Key) {
			b.WriteString(" (keys are case-sensitive)")
		}
		fmt.Fprintf(&b, ", did you mean %q?", near)
	}
	fmt.Fprintf(&b, " (allowed: %s)", strings.Join(e.Allowed, ", "))
	return b.String()
}

// closest is the allowed key the sender most probably meant: one equal to key but for
// case, else the nearest at most two edits away, else "".
func closest(key string, allowed []string) string {
	for _, a := range allowed {
		if strings.EqualFold(key, a) {
			return a
		}
	}
	best, bestDist := "", 3
	for _, a := range allowed {
		if d := editDistance(key, a); d < bestDist {
			best, bestDist = a, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
