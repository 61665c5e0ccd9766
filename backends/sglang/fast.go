package sglang

import (
	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/backends/generate"
	"github.com/focus-go/focus-go/backends/transport"
)

// readFast decodes a /generate reply of the usual shape (one object; keys without
// escapes) in one pass over its bytes, reading small values (finish_reason, counts, top
// logprobs) with json-iterator and the logprob list with scanner.triples. It gives the
// same response as readResponse or declines (false) on anything unusual, and the caller
// then reads the body with readResponse, which accepts or names the problem as always.
func readFast(body []byte, r *response, p generate.Resolved) bool {
	s := scanner{b: body}
	ok := s.object(func(key string) bool {
		switch key {
		case "text":
			return s.str(&r.text)
		case "output_ids":
			if s.null() {
				return true
			}
			r.hasOutputIDs = true
			var ok bool
			r.outputIDs, ok = s.ids(make([]uint32, 0, max(p.MaxTokens, 0)))
			return ok
		case "meta_info":
			r.hasMeta = true
			return s.meta(&r.meta, p)
		}
		return s.skip(0)
	})
	return ok && s.end()
}

// meta reads meta_info as readMeta does.
func (s *scanner) meta(m *metaInfo, p generate.Resolved) bool {
	m.completionTokens = -1
	return s.object(func(key string) bool {
		switch key {
		case "finish_reason":
			return s.small(func(iter *jsoniter.Iterator) { readFinish(iter, m) })
		case "prompt_tokens":
			return s.small(func(iter *jsoniter.Iterator) { m.promptTokens = readCount(iter) })
		case "completion_tokens":
			return s.small(func(iter *jsoniter.Iterator) { m.completionTokens = max(readCount(iter), -1) })
		case "cached_tokens":
			return s.small(func(iter *jsoniter.Iterator) { m.cachedTokens = max(readCount(iter), 0) })
		case "output_token_logprobs":
			if s.null() {
				return true
			}
			m.hasOut = true
			var ok bool
			size := max(p.MaxTokens, 0)
			m.outLogprobs, m.outIDs, ok = s.triples(make([]float64, 0, size), make([]uint32, 0, size))
			return ok
		case "input_token_logprobs":
			if s.null() {
				return true
			}
			var ok bool
			m.inLogprobs, _, ok = s.triples([]float64{}, []uint32{})
			return ok
		case "output_top_logprobs":
			if p.TopLogprobs > 0 {
				return s.small(func(iter *jsoniter.Iterator) { m.outTop = readTopList(iter, &m.num) })
			}
		case "input_top_logprobs":
			if p.PromptLogprobs > 0 {
				return s.small(func(iter *jsoniter.Iterator) { m.inTop = readTopList(iter, &m.num) })
			}
		}
		return s.skip(0)
	})
}

// object reads {"key": value, ...}, calling field for each key with the scanner at its
// value; field must consume the value.
func (s *scanner) object(field func(key string) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.skipSpace(); s.peek() == '}' {
		s.i++
		return true
	}
	for {
		s.skipSpace()
		start := s.i
		if !s.skipString() {
			return false
		}
		key := s.b[start+1 : s.i-1]
		if len(key) == 0 {
			return false // json-iterator's ReadObject takes "" for the end of the object
		}
		for _, c := range key {
			if c == '\\' {
				return false
			}
		}
		if !s.next(':') {
			return false
		}
		s.skipSpace()
		if !field(string(key)) {
			return false
		}
		switch s.skipSpace(); s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// small reads the value at the scanner with json-iterator.
func (s *scanner) small(read func(iter *jsoniter.Iterator)) bool {
	start := s.i
	if !s.skip(0) {
		return false
	}
	// The byte after the value (a ',' or '}' in a whole reply) ends a trailing number:
	// json-iterator reports a number that reaches the end of its buffer as truncated.
	iter := transport.JSON.BorrowIterator(s.b[start:min(s.i+1, len(s.b))])
	defer transport.JSON.ReturnIterator(iter)
	read(iter)
	return iter.Error == nil
}

// str reads a string; one with escapes (or control bytes) is decoded by json-iterator.
func (s *scanner) str(out *string) bool {
	start := s.i
	if !s.skipString() {
		return false
	}
	raw := s.b[start+1 : s.i-1]
	for _, c := range raw {
		if c == '\\' || c < 0x20 {
			return s.reread(start, func(iter *jsoniter.Iterator) { *out = iter.ReadString() })
		}
	}
	*out = string(raw)
	return true
}

// reread reads the value from start to the scanner's position with json-iterator.
func (s *scanner) reread(start int, read func(iter *jsoniter.Iterator)) bool {
	end := s.i
	s.i = start
	ok := s.small(read)
	return ok && s.i == end
}

// ids reads [id, ...] with the strictness of scanner.id.
func (s *scanner) ids(out []uint32) ([]uint32, bool) {
	ok := s.array(func() bool {
		id, ok := s.id()
		if ok {
			out = append(out, id)
		}
		return ok
	})
	return out, ok
}

// array reads [elem, ...], calling elem with the scanner at each element; elem must
// consume it.
func (s *scanner) array(elem func() bool) bool {
	if !s.next('[') {
		return false
	}
	if s.skipSpace(); s.peek() == ']' {
		s.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch s.skipSpace(); s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// skipString passes a string at the scanner. It declines what JSON forbids in one
// (control bytes, unknown escapes), leaving the verdict to json-iterator.
func (s *scanner) skipString() bool {
	if s.peek() != '"' {
		return false
	}
	for s.i++; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i++; s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(s.b)-s.i <= 4 {
					return false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				s.i += 4
			default:
				return false
			}
		}
	}
	return false
}

// skip passes any value; anything malformed (or nested deeper than 32) is declined.
func (s *scanner) skip(depth int) bool {
	s.skipSpace()
	switch c := s.peek(); {
	case c == '"':
		return s.skipString()
	case c == '{':
		return depth < 32 && s.object(func(string) bool { return s.skip(depth + 1) })
	case c == '[':
		return s.array(func() bool { return depth < 32 && s.skip(depth+1) })
	case c == 'n':
		return s.null()
	case c == 't' || c == 'f':
		return s.literal("true") || s.literal("false")
	default:
		_, ok := s.number()
		return ok
	}
}
