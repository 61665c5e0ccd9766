package sglang

import (
	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/generate"
)

// readFast decodes a /generate reply of the usual shape (one object; keys without
// escapes) in one pass over its bytes, reading small values (finish_reason, counts, top
// logprobs) with json-iterator and the logprob list with scanner.triples. It gives the
// same response as readResponse or declines (false) on anything unusual, and the caller
// then reads the body with readResponse, which accepts or names the problem as always.
func readFast(body []byte, r *response, p generate.Resolved, skipText bool) bool {
	s := scanner{transport.Scanner{B: body}}
	ok := s.Object(func(key []byte) bool {
		switch string(key) {
		case "text":
			if skipText {
				return s.SkipString()
			}
			return s.Str(&r.text)
		case "output_ids":
			if s.Null() {
				return true
			}
			r.hasOutputIDs = true
			var ok bool
			r.outputIDs, ok = s.IDs(make([]uint32, 0, max(p.MaxTokens, 0)))
			return ok
		case "meta_info":
			r.hasMeta = true
			return s.meta(&r.meta, p)
		}
		return s.Skip(0)
	})
	return ok && s.End()
}

// meta reads meta_info as readMeta does.
func (s *scanner) meta(m *metaInfo, p generate.Resolved) bool {
	m.completionTokens = -1
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "finish_reason":
			return s.Small(func(iter *jsoniter.Iterator) { readFinish(iter, m) })
		case "prompt_tokens":
			return s.Small(func(iter *jsoniter.Iterator) { m.promptTokens = readCount(iter) })
		case "completion_tokens":
			return s.Small(func(iter *jsoniter.Iterator) { m.completionTokens = max(readCount(iter), -1) })
		case "cached_tokens":
			return s.Small(func(iter *jsoniter.Iterator) { m.cachedTokens = max(readCount(iter), 0) })
		case "weight_version":
			return s.Small(func(iter *jsoniter.Iterator) { m.weightVersion = readVersion(iter) })
		case "output_token_logprobs":
			if s.Null() {
				return true
			}
			m.hasOut = true
			var ok bool
			size := max(p.MaxTokens, 0)
			m.outLogprobs, m.outIDs, ok = s.triples(make([]float64, 0, size), make([]uint32, 0, size))
			return ok
		case "input_token_logprobs":
			if s.Null() {
				return true
			}
			var ok bool
			m.inLogprobs, _, ok = s.triples([]float64{}, []uint32{})
			return ok
		case "output_top_logprobs":
			if p.TopLogprobs > 0 {
				return s.Small(func(iter *jsoniter.Iterator) { m.outTop = readTopList(iter, &m.num) })
			}
		case "input_top_logprobs":
			if p.PromptLogprobs > 0 {
				return s.Small(func(iter *jsoniter.Iterator) { m.inTop = readTopList(iter, &m.num) })
			}
		}
		return s.Skip(0)
	})
}
