package transport

import (
	"math"
	"strconv"
	"unsafe"

	jsoniter "github.com/json-iterator/go"
)

// Scanner walks JSON bytes for the one-pass readers of server replies (backends/sglang,
// backends/vllm): the usual reply read in one tight pass instead of a json-iterator call per
// value. Every method declines (false) what it does not expect, leaving the verdict to
// json-iterator: a reader that declines re-reads the reply with its general reader, which
// accepts or names the problem exactly as before.
type Scanner struct {
	B []byte // the JSON
	I int    // the position in B
}

// SkipSpace passes white space.
func (s *Scanner) SkipSpace() {
	for s.I < len(s.B) && (s.B[s.I] == ' ' || s.B[s.I] == '\n' || s.B[s.I] == '\t' || s.B[s.I] == '\r') {
		s.I++
	}
}

// Peek is the byte at the position (0 at the end).
func (s *Scanner) Peek() byte {
	if s.I < len(s.B) {
		return s.B[s.I]
	}
	return 0
}

// Next skips white space and consumes c.
func (s *Scanner) Next(c byte) bool {
	s.SkipSpace()
	if s.Peek() != c {
		return false
	}
	s.I++
	return true
}

// End reports whether only white space is left.
func (s *Scanner) End() bool {
	s.SkipSpace()
	return s.I == len(s.B)
}

// Null consumes null if it comes next.
func (s *Scanner) Null() bool { return s.Literal("null") }

// Literal consumes lit if it comes next.
func (s *Scanner) Literal(lit string) bool {
	if len(s.B)-s.I >= len(lit) && string(s.B[s.I:s.I+len(lit)]) == lit {
		s.I += len(lit)
		return true
	}
	return false
}

// Logprob reads a JSON number (exactly, as strconv.ParseFloat) or null (NaN).
func (s *Scanner) Logprob() (float64, bool) {
	s.SkipSpace()
	if s.Null() {
		return math.NaN(), true
	}
	num, ok := s.Number()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(num), len(num)), 64)
	return v, err == nil
}

// Number passes a number at the position and returns its bytes; ok only if JSON allows
// it.
func (s *Scanner) Number() (num []byte, ok bool) {
	start := s.I
	for s.I < len(s.B) {
		c := s.B[s.I]
		if (c < '0' || c > '9') && c != '-' && c != '.' && c != 'e' && c != 'E' && c != '+' {
			break
		}
		s.I++
	}
	num = s.B[start:s.I]
	return num, JSONNumber(num)
}

// JSONNumber reports whether b is a number as JSON writes it:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. strconv.ParseFloat also accepts
// ".5", "5." and "01", which JSON does not.
func JSONNumber(b []byte) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i, n = i+1, n+1
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch start := i; digits() {
	case 0:
		return false
	case 1:
	default:
		if b[start] == '0' {
			return false
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// ID reads a token id: digits only, at most 4294967295.
func (s *Scanner) ID() (uint32, bool) {
	s.SkipSpace()
	start := s.I
	var v uint64
	for s.I < len(s.B) && s.B[s.I] >= '0' && s.B[s.I] <= '9' && s.I-start < 11 {
		v = v*10 + uint64(s.B[s.I]-'0')
		s.I++
	}
	n := s.I - start
	if n == 0 || v > math.MaxUint32 || (n > 1 && s.B[start] == '0') {
		return 0, false
	}
	return uint32(v), true
}

// Object reads {"key": value, ...}, calling field for each key with the position at its
// value; field must consume the value. The key is a view of B (switch on string(key): no
// copy is made).
func (s *Scanner) Object(field func(key []byte) bool) bool {
	return s.list('{', '}', func() bool {
		s.SkipSpace()
		start := s.I
		if !s.SkipString() {
			return false
		}
		key := s.B[start+1 : s.I-1]
		if len(key) == 0 {
			return false // json-iterator's ReadObject takes "" for the end of the object
		}
		for _, c := range key {
			if c == '\\' {
				return false
			}
		}
		if !s.Next(':') {
			return false
		}
		s.SkipSpace()
		return field(key)
	})
}

// Small reads the value at the position with json-iterator.
func (s *Scanner) Small(read func(iter *jsoniter.Iterator)) bool {
	start := s.I
	if !s.Skip(0) {
		return false
	}
	// The byte after the value (a ',' or '}' in a whole reply) ends a trailing number:
	// json-iterator reports a number that reaches the end of its buffer as truncated.
	iter := JSON.BorrowIterator(s.B[start:min(s.I+1, len(s.B))])
	defer JSON.ReturnIterator(iter)
	read(iter)
	return iter.Error == nil
}

// Str reads a string; one with escapes (or control bytes) is decoded by json-iterator.
func (s *Scanner) Str(out *string) bool {
	start := s.I
	if !s.SkipString() {
		return false
	}
	raw := s.B[start+1 : s.I-1]
	for _, c := range raw {
		if c == '\\' || c < 0x20 {
			return s.reread(start, func(iter *jsoniter.Iterator) { *out = iter.ReadString() })
		}
	}
	*out = string(raw)
	return true
}

// reread reads the value from start to the position with json-iterator.
func (s *Scanner) reread(start int, read func(iter *jsoniter.Iterator)) bool {
	end := s.I
	s.I = start
	ok := s.Small(read)
	return ok && s.I == end
}

// IDs reads [id, ...] with the strictness of ID.
func (s *Scanner) IDs(out []uint32) ([]uint32, bool) {
	ok := s.Array(func() bool {
		id, ok := s.ID()
		if ok {
			out = append(out, id)
		}
		return ok
	})
	return out, ok
}

// Array reads [elem, ...], calling elem with the position at each element; elem must
// consume it.
func (s *Scanner) Array(elem func() bool) bool {
	return s.list('[', ']', elem)
}

// list reads open item, item, ... close (an object's or an array's comma-separated
// members), calling item at the start of each member; item must consume it.
func (s *Scanner) list(open, close byte, item func() bool) bool {
	if !s.Next(open) {
		return false
	}
	if s.SkipSpace(); s.Peek() == close {
		s.I++
		return true
	}
	for {
		if !item() {
			return false
		}
		switch s.SkipSpace(); s.Peek() {
		case ',':
			s.I++
		case close:
			s.I++
			return true
		default:
			return false
		}
	}
}

// SkipString passes a string at the position. It declines what JSON forbids in one
// (control bytes, unknown escapes), leaving the verdict to json-iterator.
func (s *Scanner) SkipString() bool {
	if s.Peek() != '"' {
		return false
	}
	for s.I++; s.I < len(s.B); s.I++ {
		switch c := s.B[s.I]; {
		case c == '"':
			s.I++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.I++; s.I >= len(s.B) {
				return false
			}
			switch s.B[s.I] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(s.B)-s.I <= 4 {
					return false
				}
				for _, h := range s.B[s.I+1 : s.I+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				s.I += 4
			default:
				return false
			}
		}
	}
	return false
}

// Skip passes any value (depth: how deep it is nested, 0 for a whole reply); anything
// malformed, or nested deeper than 32, is declined.
func (s *Scanner) Skip(depth int) bool {
	s.SkipSpace()
	switch c := s.Peek(); {
	case c == '"':
		return s.SkipString()
	case c == '{':
		return depth < 32 && s.Object(func([]byte) bool { return s.Skip(depth + 1) })
	case c == '[':
		return s.Array(func() bool { return depth < 32 && s.Skip(depth+1) })
	case c == 'n':
		return s.Null()
	case c == 't' || c == 'f':
		return s.Literal("true") || s.Literal("false")
	default:
		_, ok := s.Number()
		return ok
	}
}
