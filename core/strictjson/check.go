package strictjson

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxDepth is the deepest nesting a document may have (encoding/json's own limit).
const maxDepth = 10000

// path is where a value sits, rendered only when an error names it: a chain of object
// keys and list indices from the document's top (a nil *path).
type path struct {
	parent *path
	key    []byte // an object member's key (as written, between the quotes)
	index  int    // a list item's index, when key is nil
}

func (p *path) String() string {
	if p == nil {
		return ""
	}
	var parts []*path
	for q := p; q != nil; q = q.parent {
		parts = append(parts, q)
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		q := parts[i]
		if q.key == nil {
			fmt.Fprintf(&b, "[%d]", q.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(decodeKey(q.key))
	}
	return b.String()
}

// checker walks one document against a shape.
type checker struct {
	input string
	data  []byte
	pos   int
	depth int
	// nullable is true while the value being checked may also be null (a pointer).
	nullable bool
}

// check checks data, the whole document named input, against s.
func check(input string, data []byte, s *shape) error {
	c := &checker{input: input, data: data}
	if err := c.value(s, nil); err != nil {
		return err
	}
	c.space()
	if c.pos < len(c.data) {
		return c.syntax(nil, "more data follows the JSON value, starting with %s", c.found())
	}
	return nil
}

func (c *checker) syntax(p *path, format string, args ...any) error {
	return &ValueError{Input: c.input, Path: p.String(), Offset: c.pos, Syntax: true, Problem: fmt.Sprintf(format, args...)}
}

// mismatch is a well-formed value that its field does not take.
func (c *checker) mismatch(p *path, s *shape, problem string) error {
	return &ValueError{Input: c.input, Path: p.String(), Offset: c.pos, Problem: problem, Allowed: c.want(s)}
}

// want says what the value being checked may be.
func (c *checker) want(s *shape) string {
	if c.nullable {
		return s.want() + " or null"
	}
	return s.want()
}

// end is the error for a document that stops inside p.
func (c *checker) end(p *path) error {
	if p == nil && len(strings.TrimSpace(string(c.data))) == 0 {
		return c.syntax(nil, "the input is empty")
	}
	return c.syntax(p, "the input ends before the value is complete (is it cut off?)")
}

// found describes the byte at c.pos for a syntax error.
func (c *checker) found() string {
	if c.pos >= len(c.data) {
		return "the end of the input"
	}
	return strconv.QuoteRune(rune(c.data[c.pos]))
}

func (c *checker) space() {
	for c.pos < len(c.data) {
		switch c.data[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *checker) literal(word string) bool {
	if strings.HasPrefix(string(c.data[c.pos:min(len(c.data), c.pos+len(word))]), word) {
		c.pos += len(word)
		return true
	}
	return false
}

// value checks the value at c.pos, which p names.
func (c *checker) value(s *shape, p *path) error {
	c.space()
	if c.pos >= len(c.data) {
		return c.end(p)
	}
	b := c.data[c.pos]
	c.nullable = s.kind == pointerKind
	if c.nullable {
		if b == 'n' && c.literal("null") {
			return nil
		}
		s = s.elem
	}
	switch {
	case b == '{':
		if s.kind != structKind && s.kind != mapKind && s.kind != anyKind {
			return c.mismatch(p, s, "is an object")
		}
		return c.object(s, p)
	case b == '[':
		if s.kind != listKind && s.kind != anyKind {
			return c.mismatch(p, s, "is a list")
		}
		return c.list(s, p)
	case b == '"':
		start := c.pos
		if err := c.str(p); err != nil {
			return err
		}
		if s.kind != stringKind && s.kind != anyKind {
			text := c.data[start:c.pos]
			c.pos = start
			return c.mismatch(p, s, "is the string "+shorten(text))
		}
		return nil
	case b == 't' || b == 'f':
		word := "true"
		if b == 'f' {
			word = "false"
		}
		if !c.literal(word) {
			return c.syntax(p, "invalid value starting with %s", c.found())
		}
		if s.kind != boolKind && s.kind != anyKind {
			c.pos -= len(word)
			return c.mismatch(p, s, "is "+word)
		}
		return nil
	case b == 'n' && c.literal("null"):
		switch s.kind {
		case floatKind, intKind, uintKind, stringKind, boolKind:
			c.pos -= 4
			return c.mismatch(p, s, "is null")
		}
		return nil
	case b == '-' || b >= '0' && b <= '9':
		if b == '-' && c.pos+1 < len(c.data) && isLetter(c.data[c.pos+1]) {
			return c.nonFinite(s, p)
		}
		return c.number(s, p)
	case isLetter(b) || b == '+':
		return c.nonFinite(s, p)
	}
	return c.syntax(p, "expected a value, found %s", c.found())
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// nonFinite names NaN, Infinity and -Infinity (Python's json module writes them; JSON
// has no such values); any other bare word is a syntax error.
func (c *checker) nonFinite(s *shape, p *path) error {
	start := c.pos
	end := start + 1
	for end < len(c.data) && (isLetter(c.data[end]) || c.data[end] == '+' || c.data[end] == '-') {
		end++
	}
	word := string(c.data[start:end])
	switch strings.ToLower(strings.TrimLeft(word, "+-")) {
	case "nan", "infinity", "inf":
		want := c.want(s)
		if s.kind == anyKind {
			want = "a finite number"
		}
		return &ValueError{Input: c.input, Path: p.String(), Offset: start, Problem: "is " + word, Allowed: want}
	}
	return c.syntax(p, "expected a value, found %s", shorten([]byte(word)))
}

// number checks a number token against s: a float in range, an integer in its type's.
func (c *checker) number(s *shape, p *path) error {
	start := c.pos
	if c.data[c.pos] == '-' {
		c.pos++
	}
	digits := c.pos
	switch {
	case c.pos < len(c.data) && c.data[c.pos] == '0':
		c.pos++
	case c.pos < len(c.data) && c.data[c.pos] >= '1' && c.data[c.pos] <= '9':
		c.skipDigits()
	case c.pos >= len(c.data):
		return c.end(p)
	default:
		return c.syntax(p, "expected a digit after '-', found %s", c.found())
	}
	intDigits := c.pos - digits
	fraction, exponent := false, false
	if c.pos < len(c.data) && c.data[c.pos] == '.' {
		fraction = true
		c.pos++
		if !c.skipDigits() {
			return c.digitExpected(p, "'.'")
		}
	}
	if c.pos < len(c.data) && (c.data[c.pos] == 'e' || c.data[c.pos] == 'E') {
		exponent = true
		c.pos++
		if c.pos < len(c.data) && (c.data[c.pos] == '+' || c.data[c.pos] == '-') {
			c.pos++
		}
		if !c.skipDigits() {
			return c.digitExpected(p, "an exponent")
		}
	}
	token := c.data[start:c.pos]
	bad := func(problem string) error {
		return &ValueError{Input: c.input, Path: p.String(), Offset: start, Problem: problem, Allowed: c.want(s)}
	}
	switch s.kind {
	case intKind, uintKind:
		if fraction || exponent {
			return bad("is " + shorten(token))
		}
		neg := token[0] == '-'
		if s.kind == uintKind && neg && !allZero(token[1:]) {
			return bad("is " + shorten(token))
		}
		if intDigits > 20 {
			return bad("is " + shorten(token) + ", out of range")
		}
		limit := s.ihi // the largest magnitude: -ilo = ihi+1 below zero
		if neg && s.kind == intKind {
			limit++
		}
		if u, err := strconv.ParseUint(string(token[digits-start:]), 10, 64); err != nil || u > limit {
			return bad("is " + shorten(token) + ", out of range")
		}
	case floatKind, anyKind:
		bits := 64
		if s.kind == floatKind {
			bits = s.bits
		}
		if !exponent && intDigits <= 38 {
			return nil // finite in any float
		}
		if f, _ := strconv.ParseFloat(string(token), bits); math.IsInf(f, 0) {
			want := "a finite number"
			if s.kind == floatKind {
				want = c.want(s)
			}
			return &ValueError{Input: c.input, Path: p.String(), Offset: start,
				Problem: fmt.Sprintf("is %s, beyond the range of a %d-bit float", shorten(token), bits), Allowed: want}
		}
	default:
		return bad("is the number " + shorten(token))
	}
	return nil
}

func allZero(b []byte) bool {
	for _, d := range b {
		if d != '0' {
			return false
		}
	}
	return true
}

func (c *checker) skipDigits() bool {
	start := c.pos
	for c.pos < len(c.data) && c.data[c.pos] >= '0' && c.data[c.pos] <= '9' {
		c.pos++
	}
	return c.pos > start
}

func (c *checker) digitExpected(p *path, after string) error {
	if c.pos >= len(c.data) {
		return c.end(p)
	}
	return c.syntax(p, "expected a digit after %s, found %s", after, c.found())
}

// str checks the string at c.pos (its opening quote) and moves past it.
func (c *checker) str(p *path) error {
	c.pos++
	for c.pos < len(c.data) {
		switch b := c.data[c.pos]; {
		case b == '"':
			c.pos++
			return nil
		case b == '\\':
			c.pos++
			if c.pos >= len(c.data) {
				return c.end(p)
			}
			switch c.data[c.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				c.pos++
			case 'u':
				for i := 1; i <= 4; i++ {
					if c.pos+i >= len(c.data) {
						c.pos = len(c.data)
						return c.end(p)
					}
					if !isHex(c.data[c.pos+i]) {
						c.pos += i
						return c.syntax(p, `a \u escape needs four hex digits, found %s`, c.found())
					}
				}
				c.pos += 5
			default:
				return c.syntax(p, `invalid escape \%c in a string`, c.data[c.pos])
			}
		case b < 0x20:
			return c.syntax(p, "a control character (%U) inside a string; write it escaped", rune(b))
		default:
			c.pos++
		}
	}
	return c.end(p)
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}

// shorten is a value's text for a message, cut to 40 bytes.
func shorten(b []byte) string {
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}

// decodeKey is a key's text with its escapes resolved.
func decodeKey(raw []byte) string {
	for _, b := range raw {
		if b == '\\' {
			var s string
			if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) == nil {
				return s
			}
			break
		}
	}
	return string(raw)
}

// object checks the object at c.pos against s (a struct, a map or any JSON).
func (c *checker) object(s *shape, p *path) error {
	if c.depth++; c.depth > maxDepth {
		return c.syntax(p, "nested more than %d deep", maxDepth)
	}
	defer func() { c.depth-- }()
	c.pos++
	var seen []bool
	var seenKeys map[string]bool
	if s.kind == structKind {
		seen = make([]bool, len(s.allowed))
	} else if s.kind == mapKind {
		seenKeys = map[string]bool{}
	}
	for first := true; ; first = false {
		c.space()
		if c.pos >= len(c.data) {
			return c.end(p)
		}
		if first && c.data[c.pos] == '}' {
			c.pos++
			return nil
		}
		if c.data[c.pos] != '"' {
			return c.syntax(p, "expected a key (a string in double quotes), found %s", c.found())
		}
		keyStart := c.pos
		if err := c.str(p); err != nil {
			return err
		}
		raw := c.data[keyStart+1 : c.pos-1]
		child := &path{parent: p, key: raw}
		c.space()
		if c.pos >= len(c.data) {
			return c.end(p)
		}
		if c.data[c.pos] != ':' {
			return c.syntax(p, "expected ':' after the key %s, found %s", shorten(c.data[keyStart:keyStart+len(raw)+2]), c.found())
		}
		c.pos++
		elem := s.elem
		switch s.kind {
		case structKind:
			key := decodeKey(raw)
			i, ok := s.order[key]
			if !ok {
				c.pos = keyStart
				return &UnknownKeyError{Input: c.input, Path: p.String(), Key: key, Allowed: s.allowed}
			}
			if seen[i] {
				return c.twice(child, keyStart)
			}
			seen[i] = true
			elem = s.fields[key]
		case mapKind:
			key := decodeKey(raw)
			if seenKeys[key] {
				return c.twice(child, keyStart)
			}
			seenKeys[key] = true
		}
		if elem == nil {
			elem = &anyShape
		}
		if err := c.value(elem, child); err != nil {
			return err
		}
		c.space()
		if c.pos >= len(c.data) {
			return c.end(p)
		}
		switch c.data[c.pos] {
		case ',':
			c.pos++
		case '}':
			c.pos++
			return nil
		default:
			return c.syntax(p, "expected ',' or '}' after the value of %s, found %s", shorten(c.data[keyStart:keyStart+len(raw)+2]), c.found())
		}
	}
}

var anyShape = shape{kind: anyKind}

func (c *checker) twice(p *path, offset int) error {
	return &ValueError{Input: c.input, Path: p.String(), Offset: offset, Problem: "is given twice", Allowed: "one value per key"}
}

// list checks the list at c.pos against s (a list or any JSON).
func (c *checker) list(s *shape, p *path) error {
	if c.depth++; c.depth > maxDepth {
		return c.syntax(p, "nested more than %d deep", maxDepth)
	}
	defer func() { c.depth-- }()
	c.pos++
	elem := s.elem
	if elem == nil {
		elem = &anyShape
	}
	child := &path{parent: p}
	for i := 0; ; i++ {
		c.space()
		if c.pos >= len(c.data) {
			return c.end(p)
		}
		if i == 0 && c.data[c.pos] == ']' {
			c.pos++
			return nil
		}
		child.index = i
		if err := c.value(elem, child); err != nil {
			return err
		}
		c.space()
		if c.pos >= len(c.data) {
			return c.end(p)
		}
		switch c.data[c.pos] {
		case ',':
			c.pos++
		case ']':
			c.pos++
			return nil
		default:
			return c.syntax(p, "expected ',' or ']' after item %d, found %s", i, c.found())
		}
	}
}
