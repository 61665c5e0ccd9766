package sglang

import (
	"math"
	"strconv"
	"unsafe"
)

// scanTriples reads a logprob list, [[logprob|null, id, text|null], ...], straight from
// its bytes (a null logprob becomes NaN), appending to lps and ids. ok=false means a shape
// it does not expect (see scanner.triples).
func scanTriples(raw []byte, lps []float64, ids []uint32) ([]float64, []uint32, bool) {
	s := scanner{b: raw}
	lps, ids, ok := s.triples(lps, ids)
	return lps, ids, ok && s.end()
}

// triples reads a logprob list at the scanner's position: one tight loop instead of a
// json-iterator call per element, for the largest part of a reply. It declines (false)
// anything it does not expect (a fourth element, numbers JSON does not allow, a malformed
// list); the caller then reads the reply with json-iterator, which
// accepts or names the problem exactly as before.
func (s *scanner) triples(lps []float64, ids []uint32) ([]float64, []uint32, bool) {
	ok := s.array(func() bool {
		if !s.next('[') {
			return false
		}
		lp, ok := s.logprob()
		if !ok || !s.next(',') {
			return false
		}
		id, ok := s.id()
		if !ok || !s.next(',') || !s.text() || !s.next(']') {
			return false
		}
		lps, ids = append(lps, lp), append(ids, id)
		return true
	})
	return lps, ids, ok
}

// scanner walks JSON bytes for the fast paths of this package.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) skipSpace() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\n' || s.b[s.i] == '\t' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// next skips white space and consumes c.
func (s *scanner) next(c byte) bool {
	s.skipSpace()
	if s.peek() != c {
		return false
	}
	s.i++
	return true
}

// end reports whether only white space is left.
func (s *scanner) end() bool {
	s.skipSpace()
	return s.i == len(s.b)
}

func (s *scanner) null() bool { return s.literal("null") }

// literal consumes lit if it comes next.
func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// logprob reads a JSON number (exactly, as strconv.ParseFloat) or null (NaN).
func (s *scanner) logprob() (float64, bool) {
	s.skipSpace()
	if s.null() {
		return math.NaN(), true
	}
	num, ok := s.number()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(num), len(num)), 64)
	return v, err == nil
}

// number passes a number at the scanner and returns its bytes; ok only if JSON allows
// it.
func (s *scanner) number() (num []byte, ok bool) {
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if (c < '0' || c > '9') && c != '-' && c != '.' && c != 'e' && c != 'E' && c != '+' {
			break
		}
		s.i++
	}
	num = s.b[start:s.i]
	return num, jsonNumber(num)
}

// jsonNumber reports whether b is a number as JSON writes it:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. strconv.ParseFloat also accepts
// ".5", "5." and "01", which JSON does not.
func jsonNumber(b []byte) bool {
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

// id reads a token id: digits only, at most 4294967295.
func (s *scanner) id() (uint32, bool) {
	s.skipSpace()
	start := s.i
	var v uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' && s.i-start < 11 {
		v = v*10 + uint64(s.b[s.i]-'0')
		s.i++
	}
	n := s.i - start
	if n == 0 || v > math.MaxUint32 || (n > 1 && s.b[start] == '0') {
		return 0, false
	}
	return uint32(v), true
}

// text skips a logprob entry's third element: null or a string.
func (s *scanner) text() bool {
	s.skipSpace()
	return s.null() || s.skipString()
}
