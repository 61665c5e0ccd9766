package sim

import "encoding/json"

// A fast path for the request every engine sends, POST /generate with token ids: decoding
// it through jsoniter's reflection (the body held as raw messages, then the id list tried
// as a batch before as one list) was a tenth of the server's time. The scanner below
// accepts only strictly valid JSON of the expected shape, exact lower-case keys each at
// most once, and hands anything else to the general decoder, whose result (and error
// messages) it would otherwise reproduce exactly; decode_test.go compares the two.

// jscan reads one JSON text; each method returns false on anything it does not accept.
type jscan struct {
	b     []byte
	i     int
	depth int
}

func (s *jscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jscan) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// str skips a string; plain reports one without escapes (its content is b[start+1:i-1]).
// Only ASCII is accepted, so validity never depends on UTF-8 handling.
func (s *jscan) str() (plain, ok bool) {
	if s.peek() != '"' {
		return false, false
	}
	s.i++
	plain = true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return plain, true
		case c < 0x20 || c >= 0x80:
			return false, false
		case c == '\\':
			plain = false
			if s.i+1 >= len(s.b) {
				return false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false, false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false, false
					}
				}
				s.i += 6
			default:
				return false, false
			}
		default:
			s.i++
		}
	}
	return false, false
}

func (s *jscan) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// num skips a number without exponent; integer reports one without fraction.
func (s *jscan) num() (integer, ok bool) {
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return false, false
	}
	integer = true
	if s.peek() == '.' {
		s.i++
		if s.digits() == 0 {
			return false, false
		}
		integer = false
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		return false, false // valid JSON, but jsoniter refuses huge exponents: leave them to it
	}
	return integer, true
}

func (s *jscan) lit(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// value skips one value.
func (s *jscan) value() bool {
	switch c := s.peek(); {
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '-' || c >= '0' && c <= '9':
		_, ok := s.num()
		return ok
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '[':
		return s.nested(']', func() bool { return s.value() })
	case c == '{':
		return s.nested('}', func() bool {
			if _, ok := s.str(); !ok {
				return false
			}
			s.ws()
			if s.peek() != ':' {
				return false
			}
			s.i++
			s.ws()
			return s.value()
		})
	}
	return false
}

// nested skips an array or object whose elements item reads.
func (s *jscan) nested(end byte, item func() bool) bool {
	if s.depth++; s.depth > 64 {
		return false
	}
	defer func() { s.depth-- }()
	s.i++
	s.ws()
	if s.peek() == end {
		s.i++
		return true
	}
	for {
		if !item() {
			return false
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case end:
			s.i++
			return true
		default:
			return false
		}
	}
}

// decodeGenerateReq decodes a /generate body; ids holds input_ids when they are one flat
// list of plain integers (what flatIDs reads), nil otherwise.
func decodeGenerateReq(body []byte, req *generateReq) (ids []uint32, err error) {
	if ids, ok := fastGenerateReq(body, req); ok {
		return ids, nil
	}
	*req = generateReq{}
	return nil, jsonx.Unmarshal(body, req)
}

func fastGenerateReq(body []byte, req *generateReq) (ids []uint32, ok bool) {
	defer func() {
		if !ok {
			ids = nil
		}
	}()
	s := &jscan{b: body}
	s.ws()
	if s.peek() != '{' {
		return nil, false
	}
	s.i++
	s.ws()
	var seen uint16
	if s.peek() == '}' {
		s.i++
	} else {
		for {
			start := s.i
			plain, ok := s.str()
			if !ok || !plain {
				return nil, false
			}
			key := string(body[start+1 : s.i-1])
			s.ws()
			if s.peek() != ':' {
				return nil, false
			}
			s.i++
			s.ws()
			vstart := s.i
			field := -1
			switch key {
			case "text", "input_ids", "sampling_params", "rid", "return_logprob", "top_logprobs_num":
				if key == "input_ids" && s.peek() == '[' {
					// read the ids on the way (one pass); a list they are not is skipped
					if got, n, ok := scanIDs(body[s.i:]); ok {
						ids, s.i = got, s.i+n
					} else if !s.value() {
						return nil, false
					}
				} else if !s.value() {
					return nil, false
				}
				raw := json.RawMessage(body[vstart:s.i])
				if string(raw) == "null" {
					raw = nil // as jsoniter leaves a null raw message
				}
				switch key {
				case "text":
					field, req.Text = 0, raw
				case "input_ids":
					field, req.InputIDs = 1, raw
				case "sampling_params":
					field, req.SamplingParams = 2, raw
				case "rid":
					field, req.RID = 3, raw
				case "return_logprob":
					field, req.ReturnLogprob = 4, raw
				default:
					field, req.TopLogprobsNum = 5, raw
				}
			case "logprob_start_len":
				integer, ok := s.num()
				if !ok || !integer || s.i-vstart > 18 {
					return nil, false
				}
				n := 0
				neg := body[vstart] == '-'
				for _, c := range body[vstart:s.i] {
					if c != '-' {
						n = 10*n + int(c-'0')
					}
				}
				if neg {
					n = -n
				}
				field, req.LogprobStartLen = 6, &n
			case "return_text_in_logprobs", "stream":
				var v bool
				switch {
				case s.lit("true"):
					v = true
				case s.lit("false"):
				default:
					return nil, false
				}
				if key == "stream" {
					field, req.Stream = 7, v
				} else {
					field, req.ReturnTextInLogprobs = 8, v
				}
			default:
				return nil, false // unknown, or a case variant the general decoder would match
			}
			if seen&(1<<field) != 0 {
				return nil, false
			}
			seen |= 1 << field
			s.ws()
			if s.peek() == ',' {
				s.i++
				s.ws()
				continue
			}
			if s.peek() != '}' {
				return nil, false
			}
			s.i++
			break
		}
	}
	s.ws()
	return ids, s.i == len(body)
}

// flatIDs reads a JSON list of token ids ([] included) written as plain integers that
// fit in uint32; false for anything else (batches, signs, exponents, big values).
func flatIDs(raw []byte) ([]uint32, bool) {
	s := &jscan{b: raw}
	s.ws()
	ids, n, ok := scanIDs(raw[s.i:])
	if !ok {
		return nil, false
	}
	s.i += n
	s.ws()
	return ids, s.i == len(raw)
}

// scanIDs reads such a list at the start of b and returns how many bytes it took.
func scanIDs(b []byte) ([]uint32, int, bool) {
	s := &jscan{b: b}
	if s.peek() != '[' {
		return nil, 0, false
	}
	s.i++
	out := make([]uint32, 0, len(b)/5)
	s.ws()
	if s.peek() == ']' {
		return out, s.i + 1, true
	}
	for {
		start := s.i
		v := uint64(0)
		for s.i < len(b) && b[s.i] >= '0' && b[s.i] <= '9' && s.i-start < 11 {
			v = 10*v + uint64(b[s.i]-'0')
			s.i++
		}
		n := s.i - start
		if n == 0 || n > 10 || v > 1<<32-1 || (b[start] == '0' && n > 1) {
			return nil, 0, false
		}
		out = append(out, uint32(v))
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case ']':
			return out, s.i + 1, true
		default:
			return nil, 0, false
		}
	}
}
