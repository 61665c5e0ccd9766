package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxDepth is the deepest nesting a document may have (encoding/json's own limit).
const maxDepth = 10000

// segment is one step of a value's path: an object member's key (as written, between
// the quotes) or, when key is nil, a list item's index.
type segment struct {
	key   []byte
	index int
}

// path renders the path of the value being checked: "nodes[3].reward", "" at the top.
func (c *checker) path() string {
	var b []byte
	for _, s := range c.stack {
		if s.key == nil {
			b = append(strconv.AppendInt(append(b, '['), int64(s.index), 10), ']')
			continue
		}
		if len(b) > 0 {
			b = append(b, '.')
		}
		b = append(b, decodeKey(s.key)...)
	}
	return string(b)
}

// checker walks one document against a shape.
type checker struct {
	input string
	data  []byte
	pos   int
	depth int
	// stack is the path from the top to the value being checked, rendered only when an
	// error names it.
	stack []segment
	// nullable is true while the value being checked may also be null (a pointer).
	nullable bool
}

// check checks data, the whole document named input, against s.
func check(input string, data []byte, s *shape) error {
	c := &checker{input: input, data: data, stack: make([]segment, 0, 16)}
	if err := c.value(s); err != nil {
		return err
	}
	c.space()
	if c.pos < len(c.data) {
		return c.syntax("more data follows the JSON value, starting with %s", c.found())
	}
	return nil
}

func (c *checker) syntax(format string, args ...any) error {
	return &ValueError{Input: c.input, Path: c.path(), Offset: c.pos, Syntax: true, Problem: fmt.Sprintf(format, args...)}
}

// mismatch is a well-formed value that its field does not take.
func (c *checker) mismatch(s *shape, problem string) error {
	return &ValueError{Input: c.input, Path: c.path(), Offset: c.pos, Problem: problem, Allowed: c.want(s)}
}

// want says what the value being checked may be.
func (c *checker) want(s *shape) string {
	if c.nullable {
		return s.want() + " or null"
	}
	return s.want()
}

// end is the error for a document that stops inside the value c.stack names.
func (c *checker) end() error {
	if len(c.stack) == 0 && len(strings.TrimSpace(string(c.data))) == 0 {
		return c.syntax("the input is empty")
	}
	return c.syntax("the input ends before the value is complete (is it cut off?)")
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

// literal moves past word if the input has it at c.pos.
func (c *checker) literal(word string) bool {
	if len(c.data)-c.pos >= len(word) && string(c.data[c.pos:c.pos+len(word)]) == word {
		c.pos += len(word)
		return true
	}
	return false
}

// value checks the value at c.pos, which c.stack names.
func (c *checker) value(s *shape) error {
	c.space()
	if c.pos >= len(c.data) {
		return c.end()
	}
	b := c.data[c.pos]
	c.nullable = s.kind == pointerKind
	for s.kind == pointerKind {
		if b == 'n' && c.literal("null") {
			return nil
		}
		s = s.elem
	}
	switch {
	case b == '{':
		if s.kind != structKind && s.kind != mapKind && s.kind != anyKind {
			return c.mismatch(s, "is an object")
		}
		return c.object(s)
	case b == '[':
		if s.kind != listKind && s.kind != anyKind {
			return c.mismatch(s, "is a list")
		}
		return c.list(s)
	case b == '"':
		start := c.pos
		if err := c.str(); err != nil {
			return err
		}
		if s.kind != stringKind && s.kind != anyKind {
			text := c.data[start:c.pos]
			c.pos = start
			return c.mismatch(s, "is the string "+shorten(text))
		}
		return nil
	case b == 't' || b == 'f':
		word := "true"
		if b == 'f' {
			word = "false"
		}
		if !c.literal(word) {
			return c.syntax("invalid value starting with %s", c.found())
		}
		if s.kind != boolKind && s.kind != anyKind {
			c.pos -= len(word)
			return c.mismatch(s, "is "+word)
		}
		return nil
	case b == 'n' && c.literal("null"):
		switch s.kind {
		case floatKind, intKind, uintKind, stringKind, boolKind:
			c.pos -= 4
			return c.mismatch(s, "is null")
		}
		return nil
	case b == '-' || b >= '0' && b <= '9':
		if b == '-' && c.pos+1 < len(c.data) && isLetter(c.data[c.pos+1]) {
			return c.nonFinite(s)
		}
		return c.number(s)
	case isLetter(b) || b == '+':
		return c.nonFinite(s)
	}
	return c.syntax("expected a value, found %s", c.found())
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// nonFinite names NaN, Infinity and -Infinity (Python's json module writes them; JSON
// has no such values); any other bare word is a syntax error.
func (c *checker) nonFinite(s *shape) error {
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
		return &ValueError{Input: c.input, Path: c.path(), Offset: start, Problem: "is " + word, Allowed: want}
	}
	return c.syntax("expected a value, found %s", shorten([]byte(word)))
}

// number checks a number token against s: a float in range, an integer in its type's.
func (c *checker) number(s *shape) error {
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
		return c.end()
	default:
		return c.syntax("expected a digit after '-', found %s", c.found())
	}
	intDigits := c.pos - digits
	fraction, exponent := false, false
	if c.pos < len(c.data) && c.data[c.pos] == '.' {
		fraction = true
		c.pos++
		if !c.skipDigits() {
			return c.digitExpected("'.'")
		}
	}
	if c.pos < len(c.data) && (c.data[c.pos] == 'e' || c.data[c.pos] == 'E') {
		exponent = true
		c.pos++
		if c.pos < len(c.data) && (c.data[c.pos] == '+' || c.data[c.pos] == '-') {
			c.pos++
		}
		if !c.skipDigits() {
			return c.digitExpected("an exponent")
		}
	}
	token := c.data[start:c.pos]
	bad := func(problem string) error {
		return &ValueError{Input: c.input, Path: c.path(), Offset: start, Problem: problem, Allowed: c.want(s)}
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
		if u, ok := magnitude(token[digits-start:]); !ok || u > limit {
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
			return &ValueError{Input: c.input, Path: c.path(), Offset: start,
				Problem: fmt.Sprintf("is %s, beyond the range of a %d-bit float", shorten(token), bits), Allowed: want}
		}
	default:
		return bad("is the number " + shorten(token))
	}
	return nil
}

// magnitude is the value of a run of at most 20 decimal digits; false beyond uint64.
func magnitude(digits []byte) (uint64, bool) {
	if len(digits) == 20 {
		u, err := strconv.ParseUint(string(digits), 10, 64)
		return u, err == nil
	}
	var u uint64
	for _, d := range digits {
		u = u*10 + uint64(d-'0') // 19 digits cannot overflow
	}
	return u, true
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

func (c *checker) digitExpected(after string) error {
	if c.pos >= len(c.data) {
		return c.end()
	}
	return c.syntax("expected a digit after %s, found %s", after, c.found())
}

// str checks the string at c.pos (its opening quote) and moves past it.
func (c *checker) str() error {
	c.pos++
	for c.pos < len(c.data) {
		switch b := c.data[c.pos]; {
		case b == '"':
			c.pos++
			return nil
		case b == '\\':
			c.pos++
			if c.pos >= len(c.data) {
				return c.end()
			}
			switch c.data[c.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				c.pos++
			case 'u':
				for i := 1; i <= 4; i++ {
					if c.pos+i >= len(c.data) {
						c.pos = len(c.data)
						return c.end()
					}
					if !isHex(c.data[c.pos+i]) {
						c.pos += i
						return c.syntax(`a \u escape needs four hex digits, found %s`, c.found())
					}
				}
				c.pos += 5
			default:
				return c.syntax(`invalid escape \%c in a string`, c.data[c.pos])
			}
		case b < 0x20:
			return c.syntax("a control character (%U) inside a string; write it escaped", rune(b))
		default:
			c.pos++
		}
	}
	return c.end()
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
func (c *checker) object(s *shape) error {
	if c.depth++; c.depth > maxDepth {
		return c.syntax("nested more than %d deep", maxDepth)
	}
	defer func() { c.depth-- }()
	c.pos++
	var seen keySet
	var seenKeys map[string]bool
	if s.kind == structKind && len(s.allowed) > 64 {
		seen.more = make([]bool, len(s.allowed))
	} else if s.kind == mapKind {
		seenKeys = map[string]bool{}
	}
	for first := true; ; first = false {
		c.space()
		if c.pos >= len(c.data) {
			return c.end()
		}
		if first && c.data[c.pos] == '}' {
			c.pos++
			return nil
		}
		if c.data[c.pos] != '"' {
			return c.syntax("expected a key (a string in double quotes), found %s", c.found())
		}
		keyStart := c.pos
		if err := c.str(); err != nil {
			return err
		}
		raw := c.data[keyStart+1 : c.pos-1]
		c.space()
		if c.pos >= len(c.data) {
			return c.end()
		}
		if c.data[c.pos] != ':' {
			return c.syntax("expected ':' after the key %s, found %s", shorten(c.data[keyStart:keyStart+len(raw)+2]), c.found())
		}
		c.pos++
		elem := s.elem
		switch s.kind {
		case structKind:
			i, ok := s.order[string(raw)] // no copy: the common key has no escape
			if !ok && bytes.IndexByte(raw, '\\') >= 0 {
				i, ok = s.order[decodeKey(raw)]
			}
			if !ok {
				c.pos = keyStart
				return &UnknownKeyError{Input: c.input, Path: c.path(), Key: decodeKey(raw), Allowed: s.allowed}
			}
			if seen.has(i) {
				return c.twice(raw, keyStart)
			}
			seen.add(i)
			elem = s.fields[i]
		case mapKind:
			key := decodeKey(raw)
			if seenKeys[key] {
				return c.twice(raw, keyStart)
			}
			seenKeys[key] = true
		}
		if elem == nil {
			elem = &anyShape
		}
		c.stack = append(c.stack, segment{key: raw})
		if err := c.value(elem); err != nil {
			return err
		}
		c.stack = c.stack[:len(c.stack)-1]
		c.space()
		if c.pos >= len(c.data) {
			return c.end()
		}
		switch c.data[c.pos] {
		case ',':
			c.pos++
		case '}':
			c.pos++
			return nil
		default:
			return c.syntax("expected ',' or '}' after the value of %s, found %s", shorten(c.data[keyStart:keyStart+len(raw)+2]), c.found())
		}
	}
}

var anyShape = shape{kind: anyKind}

// keySet is the struct fields an object has given, by index: a bit each for the first 64
// (no allocation), else more.
type keySet struct {
	bits uint64
	more []bool
}

func (k *keySet) has(i int) bool {
	if k.more != nil {
		return k.more[i]
	}
	return k.bits&(1<<i) != 0
}

func (k *keySet) add(i int) {
	if k.more != nil {
		k.more[i] = true
	} else {
		k.bits |= 1 << i
	}
}

func (c *checker) twice(key []byte, offset int) error {
	c.stack = append(c.stack, segment{key: key})
	return &ValueError{Input: c.input, Path: c.path(), Offset: offset, Problem: "is given twice", Allowed: "one value per key"}
}

// list checks the list at c.pos against s (a list or any JSON).
func (c *checker) list(s *shape) error {
	if c.depth++; c.depth > maxDepth {
		return c.syntax("nested more than %d deep", maxDepth)
	}
	defer func() { c.depth-- }()
	c.pos++
	elem := s.elem
	if elem == nil {
		elem = &anyShape
	}
	for i := 0; ; i++ {
		c.space()
		if c.pos >= len(c.data) {
			return c.end()
		}
		if i == 0 && c.data[c.pos] == ']' {
			c.pos++
			return nil
		}
		c.stack = append(c.stack, segment{index: i})
		if err := c.value(elem); err != nil {
			return err
		}
		c.stack = c.stack[:len(c.stack)-1]
		c.space()
		if c.pos >= len(c.data) {
			return c.end()
		}
		switch c.data[c.pos] {
		case ',':
			c.pos++
		case ']':
			c.pos++
			return nil
		default:
			return c.syntax("expected ',' or ']' after item %d, found %s", i, c.found())
		}
	}
}
