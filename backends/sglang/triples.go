package sglang

import "github.com/focus-go/focus-go/backends/transport"

// scanTriples reads a logprob list, [[logprob|null, id, text|null], ...], straight from
// its bytes (a null logprob becomes NaN), appending to lps and ids. ok=false means a shape
// it does not expect (see scanner.triples).
func scanTriples(raw []byte, lps []float64, ids []uint32) ([]float64, []uint32, bool) {
	s := scanner{transport.Scanner{B: raw}}
	lps, ids, ok := s.triples(lps, ids)
	return lps, ids, ok && s.End()
}

// triples reads a logprob list at the scanner's position: one tight loop instead of a
// json-iterator call per element, for the largest part of a reply. It declines (false)
// anything it does not expect (a fourth element, numbers JSON does not allow, a malformed
// list); the caller then reads the reply with json-iterator, which
// accepts or names the problem exactly as before.
func (s *scanner) triples(lps []float64, ids []uint32) ([]float64, []uint32, bool) {
	ok := s.Array(func() bool {
		if !s.Next('[') {
			return false
		}
		lp, ok := s.Logprob()
		if !ok || !s.Next(',') {
			return false
		}
		id, ok := s.ID()
		if !ok || !s.Next(',') || !s.text() || !s.Next(']') {
			return false
		}
		lps, ids = append(lps, lp), append(ids, id)
		return true
	})
	return lps, ids, ok
}

// scanner is transport.Scanner with this package's readers of SGLang's shapes.
type scanner struct{ transport.Scanner }

// text skips a logprob entry's third element: null or a string.
func (s *scanner) text() bool {
	s.SkipSpace()
	return s.Null() || s.SkipString()
}
