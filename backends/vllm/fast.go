package vllm

import (
	"bytes"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/generate"
)

// readFast reads a /v1/completions reply of the usual shape in one pass over its bytes
// (transport.Scanner): the per-token lists straight from the bytes, small values with
// json-iterator, and the top_logprobs nobody asked for skipped without json-iterator's
// per-key strings. It fills c and u exactly as readGeneral would, or declines (false) on
// anything unusual; the caller then starts over with readGeneral.
func readFast(body []byte, c *choice, u *usage) (choices int, ok bool) {
	s := transport.Scanner{B: body}
	ok = s.Object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			return s.Array(func() bool {
				if choices++; choices > 1 {
					return s.Skip(1)
				}
				return fastChoice(&s, c)
			})
		case "usage":
			return s.Small(func(iter *jsoniter.Iterator) { readUsage(iter, u) })
		}
		return s.Skip(1)
	})
	return choices, ok && s.End()
}

// fastChoice reads choices[0] as readChoice does.
func fastChoice(s *transport.Scanner, c *choice) bool {
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "text":
			if s.Peek() != '"' {
				c.text = ""
				return s.Skip(3)
			}
			return s.Str(&c.text)
		case "finish_reason":
			return s.Small(func(iter *jsoniter.Iterator) {
				if iter.WhatIsNext() == jsoniter.StringValue {
					c.hasFinish, c.finishReason = true, iter.ReadString()
				} else {
					iter.Skip()
				}
			})
		case "stop_reason":
			return s.Small(func(iter *jsoniter.Iterator) { c.stopReason, c.stopReasonErr = generate.ReadStopMatch(iter) })
		case "token_ids":
			if s.Null() {
				return true
			}
			c.hasTokenIDs = true
			var ok bool
			c.tokenIDs, ok = s.IDs(make([]uint32, 0, 64))
			return ok
		case "logprobs":
			return fastLogprobs(s, c)
		case "prompt_logprobs":
			return s.Small(func(iter *jsoniter.Iterator) { readPromptLogprobs(iter, c) })
		}
		return s.Skip(3)
	})
}

// fastLogprobs reads choices[0].logprobs as readLogprobs does.
func fastLogprobs(s *transport.Scanner, c *choice) bool {
	if s.Null() {
		return true
	}
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "tokens":
			if s.Null() {
				return true
			}
			c.hasLpTokens = true
			c.lpTokenIDs = make([]uint32, 0, 64)
			i := 0
			return s.Array(func() bool {
				start := s.I
				if !s.SkipString() {
					return false // not a string: json-iterator decides
				}
				tok := s.B[start+1 : s.I-1]
				if bytes.IndexByte(tok, '\\') >= 0 {
					return false
				}
				id, ok := parseTokenID(tok)
				if !ok && c.badLpToken == "" {
					c.badLpToken, c.badLpTokenAt = string(tok), i
				}
				c.lpTokenIDs = append(c.lpTokenIDs, id)
				i++
				return true
			})
		case "token_logprobs":
			if s.Null() {
				return true
			}
			c.hasLogprobs = true
			c.lpValues = make([]float64, 0, 64)
			return s.Array(func() bool {
				lp, ok := s.Logprob() // null is NaN, as readFloatOrNaN reads it
				c.lpValues = append(c.lpValues, lp)
				return ok
			})
		case "top_logprobs":
			switch {
			case s.Null():
				return true
			case c.wantTop <= 0:
				return s.Skip(4) // with logprobs 0 every map holds only the sampled token
			}
			return s.Small(func(iter *jsoniter.Iterator) { readTop(iter, c) })
		}
		return s.Skip(4)
	})
}
