package sglang

import (
	"math"
	"strconv"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// response is the part of a /generate reply the client reads.
type response struct {
	text         string
	outputIDs    []uint32
	hasOutputIDs bool
	meta         metaInfo
	hasMeta      bool
}

type metaInfo struct {
	finishType, abortMessage string
	weightVersion            string // "" when absent or not a string
	hasFinish                bool
	matched                  generate.StopMatch
	matchedErr               error
	promptTokens             int
	completionTokens         int // -1 when absent
	cachedTokens             int
	outLogprobs              []float64 // NaN where the server sent null
	outIDs                   []uint32
	hasOut                   bool
	outTop                   []map[uint32]float64
	inLogprobs               []float64
	inTop                    []map[uint32]float64
	num                      transport.NumberReader
}

// parseResponse decodes one /generate reply (an object, or a one-element array as batch
// endpoints return) and turns it into a Result for prompt. It checks the id sources against
// each other; Result.Validate does the rest. With skipText the reply's text is checked
// as a JSON string but not read (Result.Text may stay empty: Request.SkipText).
func parseResponse(body []byte, prompt []uint32, p generate.Resolved, skipText bool) (*generate.Result, error) {
	var r response
	if !readFast(body, &r, p, skipText) {
		r = response{}
		if err := readGeneral(body, &r, p); err != nil {
			return nil, err
		}
	}
	return resultOf(&r, prompt, p)
}

// readGeneral reads a reply of any accepted shape with json-iterator, naming what is wrong.
func readGeneral(body []byte, r *response, p generate.Resolved) error {
	iter := transport.JSON.BorrowIterator(body)
	defer transport.JSON.ReturnIterator(iter)
	switch iter.WhatIsNext() {
	case jsoniter.ObjectValue:
		readResponse(iter, r, p)
	case jsoniter.ArrayValue:
		n := 0
		for iter.ReadArray() {
			if n++; n > 1 {
				return status.Errorf(status.Backend, "%s: response is an array of several results; one request expects one", Name)
			}
			readResponse(iter, r, p)
		}
		if n == 0 && iter.Error == nil {
			return status.Errorf(status.Backend, "%s: response is an empty array; expected one result", Name)
		}
	default:
		return status.Errorf(status.Backend, "%s: response is not a JSON object: %s", Name, snippet(body))
	}
	if iter.Error != nil {
		return status.Errorf(status.Backend, "%s: malformed or truncated JSON response (%d bytes): %v", Name, len(body), iter.Error)
	}
	return nil
}

// resultOf checks a decoded reply and turns it into a Result for prompt.
func resultOf(r *response, prompt []uint32, p generate.Resolved) (*generate.Result, error) {
	m := &r.meta
	if !r.hasMeta {
		return nil, status.Errorf(status.Backend, "%s: response has no meta_info", Name)
	}
	if !m.hasOut {
		return nil, status.Errorf(status.Backend,
			"%s: response has no meta_info.output_token_logprobs; the server ignored return_logprob", Name)
	}
	if m.completionTokens >= 0 && m.completionTokens != len(m.outIDs) {
		return nil, status.Errorf(status.Backend,
			"%s: meta_info.completion_tokens is %d but output_token_logprobs has %d entries", Name, m.completionTokens, len(m.outIDs))
	}
	// output_ids is trusted only as a cross-check, and only when its length matches: some
	// builds start it with prompt-context tokens (sglang issue #17240).
	if r.hasOutputIDs && len(r.outputIDs) == len(m.outIDs) {
		for i, id := range r.outputIDs {
			if id != m.outIDs[i] {
				return nil, status.Errorf(status.Backend,
					"%s: output_ids[%d] is %d but output_token_logprobs[%d] has id %d", Name, i, id, i, m.outIDs[i])
			}
		}
	}
	if !m.hasFinish {
		return nil, status.Errorf(status.Backend, "%s: response has no meta_info.finish_reason (an unfinished stream chunk?)", Name)
	}
	res := &generate.Result{
		Tokens: m.outIDs, PrefixTokens: prompt, Text: r.text, StopReason: m.finishType,
		Logprobs: m.outLogprobs, PromptTokens: m.promptTokens, CachedTokens: m.cachedTokens,
		ExactGeneration: true, WeightVersion: m.weightVersion,
	}
	if res.Logprobs == nil {
		res.Logprobs = []float64{}
	}
	switch m.finishType {
	case generate.StopReasonStop:
		if m.matchedErr != nil {
			return nil, status.Errorf(status.Backend, "%s: meta_info.finish_reason.matched %v", Name, m.matchedErr)
		}
		res.MatchedStop = m.matched
	case generate.StopReasonAbort:
		res.AbortMessage = m.abortMessage
	}
	if p.TopLogprobs > 0 {
		res.TopLogprobs = m.outTop
		if res.TopLogprobs == nil {
			return nil, status.Errorf(status.Backend, "%s: %d top logprobs were requested but the response has no output_top_logprobs", Name, p.TopLogprobs)
		}
	}
	if p.PromptLogprobs >= 0 {
		if m.inLogprobs == nil {
			return nil, status.Errorf(status.Backend, "%s: prompt logprobs were requested but the response has no input_token_logprobs", Name)
		}
		res.PromptLogprobs = m.inLogprobs
		if p.PromptLogprobs > 0 {
			res.PromptTopLogprobs = m.inTop
		}
	}
	res.Entropy = generate.SampleEntropy(res.Logprobs)
	return res, nil
}

func readResponse(iter *jsoniter.Iterator, r *response, p generate.Resolved) {
	for f := iter.ReadObject(); f != ""; f = iter.ReadObject() {
		switch f {
		case "text":
			r.text = iter.ReadString()
		case "output_ids":
			if iter.WhatIsNext() == jsoniter.NilValue {
				iter.Skip()
				continue
			}
			r.hasOutputIDs = true
			r.outputIDs = r.outputIDs[:0]
			for iter.ReadArray() {
				r.outputIDs = append(r.outputIDs, iter.ReadUint32())
			}
		case "meta_info":
			r.hasMeta = true
			readMeta(iter, &r.meta, p)
		default:
			iter.Skip()
		}
		if iter.Error != nil {
			return
		}
	}
}

// readMeta reads meta_info; top-logprob lists that p did not ask for are skipped.
func readMeta(iter *jsoniter.Iterator, m *metaInfo, p generate.Resolved) {
	m.completionTokens = -1
	for f := iter.ReadObject(); f != ""; f = iter.ReadObject() {
		switch f {
		case "finish_reason":
			readFinish(iter, m)
		case "prompt_tokens":
			m.promptTokens = readCount(iter)
		case "completion_tokens":
			m.completionTokens = readCount(iter)
			if m.completionTokens < 0 {
				m.completionTokens = -1
			}
		case "cached_tokens":
			m.cachedTokens = max(readCount(iter), 0)
		case "weight_version":
			m.weightVersion = readVersion(iter)
		case "output_token_logprobs":
			if iter.WhatIsNext() == jsoniter.NilValue {
				iter.Skip()
				continue
			}
			m.hasOut = true
			m.outLogprobs, m.outIDs = readTriples(iter, "output_token_logprobs", &m.num)
		case "output_top_logprobs":
			if p.TopLogprobs <= 0 {
				iter.Skip() // some servers send a null per token even when none were asked for
				continue
			}
			m.outTop = readTopList(iter, &m.num)
		case "input_token_logprobs":
			if iter.WhatIsNext() == jsoniter.NilValue {
				iter.Skip()
				continue
			}
			m.inLogprobs, _ = readTriples(iter, "input_token_logprobs", &m.num)
			if m.inLogprobs == nil {
				m.inLogprobs = []float64{}
			}
		case "input_top_logprobs":
			if p.PromptLogprobs <= 0 {
				iter.Skip()
				continue
			}
			m.inTop = readTopList(iter, &m.num)
		default:
			iter.Skip()
		}
		if iter.Error != nil {
			return
		}
	}
}

// readVersion reads meta_info.weight_version: a string ("" when it is anything else).
func readVersion(iter *jsoniter.Iterator) string {
	if iter.WhatIsNext() != jsoniter.StringValue {
		iter.Skip()
		return ""
	}
	return iter.ReadString()
}

// readCount reads a non-negative count; null or absent gives -1.
func readCount(iter *jsoniter.Iterator) int {
	if iter.WhatIsNext() != jsoniter.NumberValue {
		iter.Skip()
		return -1
	}
	return int(iter.ReadInt64())
}

// readFinish reads {"type":"stop","matched":17|[17]|"</answer>"|null}, {"type":"length",...},
// {"type":"abort","message":...}; a bare string is taken as the type (very old builds).
func readFinish(iter *jsoniter.Iterator, m *metaInfo) {
	switch iter.WhatIsNext() {
	case jsoniter.NilValue:
		iter.Skip()
		return
	case jsoniter.StringValue:
		m.hasFinish, m.finishType = true, iter.ReadString()
		return
	case jsoniter.ObjectValue:
	default:
		iter.ReportError("finish_reason", "expected an object, a string or null")
		return
	}
	m.hasFinish = true
	for f := iter.ReadObject(); f != ""; f = iter.ReadObject() {
		switch f {
		case "type":
			m.finishType = iter.ReadString()
		case "matched":
			m.matched, m.matchedErr = generate.ReadStopMatch(iter)
		case "message":
			if iter.WhatIsNext() == jsoniter.StringValue {
				m.abortMessage = iter.ReadString()
			} else {
				iter.Skip()
			}
		default:
			iter.Skip()
		}
	}
}

// readTriples reads [[logprob|null, id, text|null], ...]; a null logprob becomes NaN.
// SGLang writes null for -inf and NaN (orjson's float rule: sglang/srt/utils/json_response.py
// dumps_json), so NaN here is "no logprob", never 0 or a stand-in number.
func readTriples(iter *jsoniter.Iterator, field string, num *transport.NumberReader) ([]float64, []uint32) {
	lps := make([]float64, 0, 64)
	ids := make([]uint32, 0, 64)
	for iter.ReadArray() {
		if iter.WhatIsNext() != jsoniter.ArrayValue {
			iter.ReportError(field, "entry "+strconv.Itoa(len(ids))+" is not a [logprob, token_id, text] triple")
			return nil, nil
		}
		if !iter.ReadArray() {
			iter.ReportError(field, "entry "+strconv.Itoa(len(ids))+" is empty")
			return nil, nil
		}
		lp := math.NaN()
		if iter.WhatIsNext() == jsoniter.NilValue {
			iter.Skip()
		} else {
			lp = num.Float64(iter)
		}
		if !iter.ReadArray() {
			iter.ReportError(field, "entry "+strconv.Itoa(len(ids))+" has no token id")
			return nil, nil
		}
		id := iter.ReadUint32()
		for iter.ReadArray() {
			iter.Skip()
		}
		lps = append(lps, lp)
		ids = append(ids, id)
	}
	return lps, ids
}

// readTopList reads [null | [[logprob, id, text], ...], ...] into id → logprob maps; a null
// position gives a nil map. A null list gives nil.
func readTopList(iter *jsoniter.Iterator, num *transport.NumberReader) []map[uint32]float64 {
	if iter.WhatIsNext() == jsoniter.NilValue {
		iter.Skip()
		return nil
	}
	out := []map[uint32]float64{}
	for iter.ReadArray() {
		if iter.WhatIsNext() == jsoniter.NilValue {
			iter.Skip()
			out = append(out, nil)
			continue
		}
		lps, ids := readTriples(iter, "top_logprobs", num)
		top := make(map[uint32]float64, len(ids))
		for i, id := range ids {
			top[id] = lps[i]
		}
		out = append(out, top)
	}
	return out
}

func snippet(b []byte) string {
	if len(b) > 120 {
		return strconv.Quote(string(b[:120])) + "…"
	}
	return strconv.Quote(string(b))
}
