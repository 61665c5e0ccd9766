package mathenv

import (
	"math/big"
	"regexp"
	"strings"
	"unicode"
)

// LastBoxed returns the contents of the last \boxed{...} (or \fbox{...}) in
// text, with balanced braces; "\boxed {x}" and the brace-less "\boxed x" are
// accepted. ok is false when there is none, or when the last one is cut off
// before its closing brace (a truncated answer is no answer).
func LastBoxed(text string) (answer string, ok bool) {
	at, cmd := -1, ""
	for _, c := range [...]string{`\boxed`, `\fbox`} {
		if i := lastIndex(text, c); i > at {
			at, cmd = i, c
		}
	}
	if at < 0 {
		return "", false
	}
	rest := text[at+len(cmd):]
	trimmed := strings.TrimLeft(rest, " \t\n")
	if strings.HasPrefix(trimmed, "{") {
		body, _, ok := braced(trimmed)
		return body, ok
	}
	if len(trimmed) == len(rest) {
		// "\boxedx" is another command, not a brace-less box.
		return "", false
	}
	end := strings.IndexAny(trimmed, " \t\n$")
	if end < 0 {
		end = len(trimmed)
	}
	if end == 0 {
		return "", false
	}
	return trimmed[:end], true
}

// lastIndex is strings.LastIndex(s, sub) for a non-empty sub, found by searching forward:
// strings.Index compares many bytes at a time, while LastIndex hashes every byte, which
// made it most of grading a whole response (9 µs of 11 for a 5 KB reply).
func lastIndex(s, sub string) int {
	last := -1
	for {
		i := strings.Index(s[last+1:], sub)
		if i < 0 {
			return last
		}
		last += 1 + i
	}
}

// braced reads a balanced {...} group at the start of s and returns its
// body and the rest after the closing brace. Escaped braces \{ and \} do not
// count.
func braced(s string) (body, rest string, ok bool) {
	if !strings.HasPrefix(s, "{") {
		return "", s, false
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // skip the escaped character
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[1:i], s[i+1:], true
			}
		}
	}
	return "", s, false
}

// unwrap replaces every cmd{X} in s with X (for \text, \mathrm, ...).
func unwrap(s, cmd string) string {
	for {
		i := strings.Index(s, cmd+"{")
		if i < 0 {
			i = strings.Index(s, cmd+" {")
			if i < 0 {
				return s
			}
			s = s[:i+len(cmd)] + s[i+len(cmd)+1:]
		}
		body, rest, ok := braced(s[i+len(cmd):])
		if !ok {
			return s
		}
		s = s[:i] + body + rest
	}
}

// dropCommand removes the LaTeX command cmd wherever it is not the prefix of
// a longer command name (\left but not \leftarrow).
func dropCommand(s, cmd string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, cmd)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := i + len(cmd)
		if j < len(s) && isLetter(s[j]) {
			b.WriteString(s[:j])
		} else {
			b.WriteString(s[:i])
		}
		s = s[j:]
	}
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

var (
	thousands   = regexp.MustCompile(`^-?\d{1,3}(,\d{3})+(\.\d+)?$`)
	choice      = regexp.MustCompile(`^\(([A-Za-z])\)$`)
	assignment  = regexp.MustCompile(`^[A-Za-z](_\{?[A-Za-z0-9]+\}?)?=`)
	shortSqrt   = regexp.MustCompile(`\\sqrt([0-9A-Za-z])`)
	shortFrac   = regexp.MustCompile(`\\frac([0-9A-Za-z])([0-9A-Za-z])`)
	halfFrac1   = regexp.MustCompile(`\\frac([0-9A-Za-z])\{`)
	halfFrac2   = regexp.MustCompile(`\\frac(\{[^{}]*\})([0-9A-Za-z])`)
	spacingCmds = strings.NewReplacer(`\!`, "", `\,`, "", `\;`, "", `\:`, "", `\ `, "", "~", "",
		`\displaystyle`, "", `\$`, "", "$", "", `\dfrac`, `\frac`, `\tfrac`, `\frac`, "−", "-",
		`^{\circ}`, "", `^\circ`, "", "°", "", `\%`, "", "%", "", `\{`, "{", `\}`, "}",
		`\le `, `\leq `, `\ge `, `\geq `, `\neq`, `\ne`)
)

// Normalize puts an answer into the canonical form Equal compares: no
// whitespace, dollar signs, \left/\right, spacing commands, \text{}-style
// wrappers, degree or percent marks, or trailing period; \dfrac and \tfrac
// are \frac; \frac12 is \frac{1}{2} and \sqrt2 is \sqrt{2}; "x = 5" is "5";
// "1,000" is "1000"; "(B)" is "B".
func Normalize(answer string) string {
	s := strings.TrimSpace(answer)
	for _, cmd := range [...]string{`\text`, `\textbf`, `\textit`, `\textrm`, `\mathrm`, `\mathbf`, `\mbox`, `\operatorname`} {
		s = unwrap(s, cmd)
	}
	s = spacingCmds.Replace(s)
	s = dropCommand(s, `\left`)
	s = dropCommand(s, `\right`)
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
	for strings.HasSuffix(s, ".") || strings.HasSuffix(s, `\\`) {
		s = strings.TrimSuffix(strings.TrimSuffix(s, "."), `\\`)
	}
	if strings.Count(s, "=") == 1 {
		if loc := assignment.FindStringIndex(s); loc != nil {
			s = s[loc[1]:]
		}
	}
	s = shortSqrt.ReplaceAllString(s, `\sqrt{$1}`)
	s = shortFrac.ReplaceAllString(s, `\frac{$1}{$2}`)
	s = halfFrac1.ReplaceAllString(s, `\frac{$1}{`)
	s = halfFrac2.ReplaceAllString(s, `\frac$1{$2}`)
	if thousands.MatchString(s) {
		s = strings.ReplaceAll(s, ",", "")
	}
	if m := choice.FindStringSubmatch(s); m != nil {
		s = m[1]
	}
	return s
}

// Number reads a normalised answer as an exact rational: an integer, a
// decimal (".5", "5.0", "1e3"), a/b, or \frac{a}{b} with an optional sign
// in front or inside. ok is false for anything else.
func Number(s string) (*big.Rat, bool) {
	neg := false
	for strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		neg = neg != (s[0] == '-')
		s = s[1:]
	}
	if s == "" {
		return nil, false
	}
	var r *big.Rat
	switch {
	case strings.HasPrefix(s, `\frac`):
		num, rest, ok := braced(s[len(`\frac`):])
		if !ok {
			return nil, false
		}
		den, rest, ok := braced(rest)
		if !ok || rest != "" {
			return nil, false
		}
		a, ok1 := Number(num)
		b, ok2 := Number(den)
		if !ok1 || !ok2 || b.Sign() == 0 {
			return nil, false
		}
		r = new(big.Rat).Quo(a, b)
	default:
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= '0' && c <= '9' || c == '.' || c == '/' || c == 'e' || c == 'E' || c == '-' || c == '+') {
				return nil, false
			}
		}
		if strings.Count(s, "/") == 1 {
			a, ok1 := Number(s[:strings.Index(s, "/")])
			b, ok2 := Number(s[strings.Index(s, "/")+1:])
			if !ok1 || !ok2 || b.Sign() == 0 {
				return nil, false
			}
			r = new(big.Rat).Quo(a, b)
			break
		}
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			// Refuse exponents that would build huge rationals.
			exp := strings.TrimLeft(s[i+1:], "+-")
			if len(exp) > 3 {
				return nil, false
			}
		}
		var ok bool
		r, ok = new(big.Rat).SetString(s)
		if !ok {
			return nil, false
		}
	}
	if neg {
		r.Neg(r)
	}
	return r, true
}

// Equal reports whether two answers agree: the same normal form, the same
// exact number (0.5 == 1/2 == \frac{1}{2} == .5, 5 == 5.0), or the same word
// up to letter case ("Yes" == "yes").
func Equal(a, b string) bool {
	return newAnswerKey(b).equal(a)
}

// answerKey is one side of Equal prepared once: its normal form and exact number. An Env
// grades every finished episode against its label's key instead of normalising the label
// again (Normalize runs a dozen replacements and regular expressions). Read-only once
// built, so forks of an Env share it.
type answerKey struct {
	norm  string
	num   *big.Rat
	isNum bool
}

func newAnswerKey(answer string) *answerKey {
	k := &answerKey{norm: Normalize(answer)}
	k.num, k.isNum = Number(k.norm)
	return k
}

// labelKey is the key of a label for Grade: its last \boxed{} contents when it has one.
func labelKey(label string) *answerKey {
	if boxed, ok := LastBoxed(label); ok {
		label = boxed
	}
	return newAnswerKey(label)
}

// equal is Equal(a, the key's answer).
func (k *answerKey) equal(a string) bool {
	na := Normalize(a)
	if na == k.norm {
		return na != ""
	}
	if x, ok := Number(na); ok {
		return k.isNum && x.Cmp(k.num) == 0
	}
	return isWord(na) && strings.EqualFold(na, k.norm)
}

func isWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isLetter(s[i]) {
			return false
		}
	}
	return s != ""
}

// Grade compares the last \boxed{} answer of a response with a label, which
// may itself be boxed ("\boxed{5}") or bare ("5"). A response without a
// complete boxed answer is wrong.
func Grade(response, label string) (answer string, correct bool) {
	answer, ok := LastBoxed(response)
	if !ok {
		return "", false
	}
	return answer, labelKey(label).equal(answer)
}
