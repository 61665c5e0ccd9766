package vllm

import (
	"math"
	"strconv"
	"strings"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

const tokenIDPrefix = "token_id:"

// choice is the part of choices[0] the client reads.
type choice struct {
	text                 string
	num                  transport.NumberReader // scratch for logprob numbers
	finishReason         string
	hasFinish            bool
	stopReason           generate.StopMatch
	stopReasonErr        error
	tokenIDs             []uint32
	hasTokenIDs          bool
	lpTokenIDs           []uint32 // logprobs.tokens parsed from "token_id:N"
	hasLpTokens          bool
	badLpToken           string // the first logprobs.tokens entry that is not "token_id:N"
	badLpTokenAt         int
	lpValues             []float64
	hasLogprobs          bool
	top                  []map[uint32]float64
	promptLogprobs       []float64
	promptTop            []map[uint32]float64
	hasPromptLogprobs    bool
	wantTop, wantPromptN int
	prompt               []uint32
	err                  string
}

type usage struct {
	promptTokens, completionTokens, cachedTokens int
}

// parseResponse decodes a /v1/completions reply into a Result for prompt.
func parseResponse(body []byte, prompt []uint32, p generate.Resolved) (*generate.Result, error) {
	return parse(body, prompt, p, true)
}

// parse is parseResponse, reading the reply in one pass (readFast) when fast is set and
// the reply has the usual shape, else with json-iterator (readGeneral).
func parse(body []byte, prompt []uint32, p generate.Resolved, fast bool) (*generate.Result, error) {
	fresh := func() (choice, usage) {
		return choice{wantTop: p.TopLogprobs, wantPromptN: p.PromptLogprobs, prompt: prompt}, usage{completionTokens: -1}
	}
	c, u := fresh()
	choices, ok := 0, false
	if fast {
		choices, ok = readFast(body, &c, &u)
	}
	if !ok {
		c, u = fresh() // readFast may have filled them partly
		var err error
		if choices, err = readGeneral(body, &c, &u); err != nil {
			return nil, err
		}
	}
	return result(&c, &u, choices, prompt, p)
}

// readGeneral reads any reply with json-iterator, naming what is malformed.
func readGeneral(body []byte, c *choice, u *usage) (choices int, err error) {
	iter := transport.JSON.BorrowIterator(body)
	defer transport.JSON.ReturnIterator(iter)
	if iter.WhatIsNext() != jsoniter.ObjectValue {
		return 0, status.Errorf(status.Backend, "%s: response is not a JSON object: %s", Name, snippet(body))
	}
	for f := iter.ReadObject(); f != ""; f = iter.ReadObject() {
		switch f {
		case "choices":
			for iter.ReadArray() {
				if choices++; choices == 1 {
					readChoice(iter, c)
				} else {
					iter.Skip()
				}
			}
		case "usage":
			readUsage(iter, u)
		default:
			iter.Skip()
		}
		if iter.Error != nil {
			break
		}
	}
	if iter.Error != nil {
		return 0, status.Errorf(status.Backend, "%s: malformed or truncated JSON response (%d bytes): %v", Name, len(body), iter.Error)
	}
	return choices, nil
}

// LogprobFloor is the value vLLM's OpenAI endpoints write for a -inf logprob (vllm 0.33.0
// entrypoints/openai/completion/serving.py; a NaN logprob is written as null). The client
// reads it back as -Inf everywhere (token, top, prompt and prompt-top logprobs): such a
// generated token has no usable behaviour logprob (generate.Result.Logprobs), and the
// engine makes its edge inexact.
const LogprobFloor = -9999.0

// result checks what was read and builds the Result.
func result(c *choice, u *usage, choices int, prompt []uint32, p generate.Resolved) (*generate.Result, error) {
	if c.err != "" {
		return nil, status.Errorf(status.Backend, "%s: %s", Name, c.err)
	}
	if choices != 1 {
		return nil, status.Errorf(status.Backend, "%s: response has %d choices; one prompt with n=1 expects exactly one", Name, choices)
	}
	if !c.hasFinish {
		return nil, status.Errorf(status.Backend, "%s: response has no finish_reason (an unfinished stream chunk?)", Name)
	}
	ids, err := tokenIDs(c)
	if err != nil {
		return nil, err
	}
	if u.completionTokens >= 0 && u.completionTokens != len(ids) {
		return nil, status.Errorf(status.Backend, "%s: usage.completion_tokens is %d but the response has %d token ids", Name, u.completionTokens, len(ids))
	}
	res := &generate.Result{
		Tokens: ids, PrefixTokens: prompt, Text: c.text, StopReason: c.finishReason,
		Logprobs: c.lpValues, PromptTokens: u.promptTokens, CachedTokens: u.cachedTokens,
		ExactGeneration: true,
	}
	if !c.hasLogprobs {
		return nil, status.Errorf(status.Backend, "%s: response has no logprobs for its %d tokens; logprobs were requested", Name, len(ids))
	}
	if res.Logprobs == nil {
		res.Logprobs = []float64{}
	}
	if c.finishReason == generate.StopReasonStop {
		if c.stopReasonErr != nil {
			return nil, status.Errorf(status.Backend, "%s: stop_reason %v", Name, c.stopReasonErr)
		}
		res.MatchedStop = c.stopReason
	}
	// vLLM writes -inf as -9999.0 in its OpenAI shapes (completion/serving.py:765,
	// max(step_token.logprob, -9999.0); NaN stays NaN and pydantic writes it as null): the
	// floor is read back as -Inf, the value it stands for, never kept as a number to train on.
	for i, lp := range res.Logprobs {
		if lp == LogprobFloor {
			res.Logprobs[i] = math.Inf(-1)
		}
	}
	if p.TopLogprobs > 0 {
		if c.top == nil {
			return nil, status.Errorf(status.Backend, "%s: %d top logprobs were requested but logprobs.top_logprobs is missing", Name, p.TopLogprobs)
		}
		res.TopLogprobs = c.top
	}
	if p.PromptLogprobs >= 0 {
		if !c.hasPromptLogprobs {
			return nil, status.Errorf(status.Backend, "%s: prompt logprobs were requested but the response has none (prompt_logprobs needs vLLM ≥ 0.6)", Name)
		}
		res.PromptLogprobs = c.promptLogprobs
		for i, lp := range res.PromptLogprobs {
			if lp == LogprobFloor { // generate/base/serving.py clamp_prompt_logprobs: -inf only
				res.PromptLogprobs[i] = math.Inf(-1)
			}
		}
		if p.PromptLogprobs > 0 {
			res.PromptTopLogprobs = c.promptTop
		}
	}
	for _, ms := range [][]map[uint32]float64{res.TopLogprobs, res.PromptTopLogprobs} {
		for _, m := range ms {
			for id, lp := range m {
				if lp == LogprobFloor {
					m[id] = math.Inf(-1)
				}
			}
		}
	}
	res.Entropy = generate.SampleEntropy(res.Logprobs)
	return res, nil
}

// tokenIDs settles the generated ids: choices[].token_ids (≥ 0.10.2), else the
// "token_id:N" strings of logprobs.tokens; when both are there they must agree.
func tokenIDs(c *choice) ([]uint32, error) {
	stringsOK := c.hasLpTokens && c.badLpToken == ""
	if !c.hasTokenIDs {
		switch {
		case c.hasLpTokens && !stringsOK:
			return nil, status.Errorf(status.Backend,
				"%s: logprobs.tokens[%d] is %q, not \"token_id:N\", and the response has no token_ids: the server returns "+
					"no exact ids (needs vLLM ≥ 0.10.2 for return_token_ids, ≥ 0.8.0 for return_tokens_as_token_ids, "+
					"or the --return-tokens-as-token-ids flag)", Name, c.badLpTokenAt, c.badLpToken)
		case !stringsOK:
			return nil, status.Errorf(status.Backend,
				"%s: response has neither token_ids nor logprobs.tokens; cannot recover the exact generated ids", Name)
		}
		return c.lpTokenIDs, nil
	}
	if stringsOK {
		if len(c.lpTokenIDs) != len(c.tokenIDs) {
			return nil, status.Errorf(status.Backend, "%s: response has %d token_ids but %d logprobs.tokens; expected one logprob per token",
				Name, len(c.tokenIDs), len(c.lpTokenIDs))
		}
		for i, id := range c.tokenIDs {
			if c.lpTokenIDs[i] != id {
				return nil, status.Errorf(status.Backend, "%s: token_ids[%d] is %d but logprobs.tokens[%d] is token_id:%d",
					Name, i, id, i, c.lpTokenIDs[i])
			}
		}
	}
	return c.tokenIDs, nil
}

// parseTokenID reads "token_id:N" without allocating.
func parseTokenID(s []byte) (uint32, bool) {
	if len(s) <= len(tokenIDPrefix) || string(s[:len(tokenIDPrefix)]) != tokenIDPrefix {
		return 0, false
	}
	var n uint64
	for _, ch := range s[len(tokenIDPrefix):] {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		if n = n*10 + uint64(ch-'0'); n > math.MaxUint32 {
			return 0, false
		}
	}
	return uint32(n), true
}

func readChoice(iter *jsoniter.Iterator, c *choice) {
	for f := iter.ReadObject(); f != ""; f = iter.ReadObject() {
		switch f {
		case "text":
			c.text = readStringOrNull(iter)
		case "finish_reason":
			if iter.WhatIsNext() == jsoniter.StringValue {
				c.hasFinish, c.finishReason = true, iter.ReadString()
			} else {
				iter.Skip()
			}
		case "stop_reason":
			c.stopReason, c.stopReasonErr = generate.ReadStopMatch(iter)
		case "token_ids":
			if iter.WhatIsNext() == jsoniter.NilValue {
				iter.Skip()
				continue
			}
			c.hasTokenIDs = true
			c.tokenIDs = make([]uint32, 0, 64)
			for iter.ReadArray() {
				c.tokenIDs = append(c.tokenIDs, iter.ReadUint32())
			}
		case "logprobs":
			readLogprobs(iter, c)
		case "prompt_logprobs":
			readPromptLogprobs(iter, c)
		default:
			iter.Skip()
		}
		if iter.Error != nil {
			return
		}
	}
}

func readLogprobs(iter *jsoniter.Iterator, c *choice) {
	if iter.WhatIsNext() == jsoniter.NilValue {
		iter.Skip()
		return
	}
	for f := iter.ReadObject(); f != ""; f = iter.ReadObject() {
		switch f {
		case "tokens":
			if iter.WhatIsNext() == jsoniter.NilValue {
				iter.Skip()
				continue
			}
			c.hasLpTokens = true
			c.lpTokenIDs = make([]uint32, 0, 64)
			for i := 0; iter.ReadArray(); i++ {
				var tok []byte
				if iter.WhatIsNext() == jsoniter.StringValue {
					tok = iter.ReadStringAsSlice() // valid until the next read: parsed at once
				} else {
					iter.Skip()
				}
				id, ok := parseTokenID(tok)
				if !ok && c.badLpToken == "" {
					c.badLpToken, c.badLpTokenAt = string(tok), i
				}
				c.lpTokenIDs = append(c.lpTokenIDs, id)
			}
		case "token_logprobs":
			if iter.WhatIsNext() == jsoniter.NilValue {
				iter.Skip()
				continue
			}
			c.hasLogprobs = true
			c.lpValues = make([]float64, 0, 64)
			for iter.ReadArray() {
				c.lpValues = append(c.lpValues, readFloatOrNaN(iter, &c.num))
			}
		case "top_logprobs":
			if c.wantTop <= 0 || iter.WhatIsNext() == jsoniter.NilValue {
				iter.Skip() // with logprobs 0 every map holds only the sampled token
				continue
			}
			readTop(iter, c)
		default:
			iter.Skip()
		}
		if iter.Error != nil {
			return
		}
	}
}

// readTop reads top_logprobs, [{"token_id:N": logprob, ...} | null, ...].
func readTop(iter *jsoniter.Iterator, c *choice) {
	c.top = make([]map[uint32]float64, 0, 64)
	for iter.ReadArray() {
		if iter.WhatIsNext() == jsoniter.NilValue {
			iter.Skip()
			c.top = append(c.top, nil)
			continue
		}
		m := make(map[uint32]float64, c.wantTop+1)
		for k := iter.ReadObject(); k != ""; k = iter.ReadObject() {
			lp := readFloatOrNaN(iter, &c.num)
			id, ok := parseTokenID([]byte(k))
			if !ok {
				if c.err == "" {
					c.err = "top_logprobs key " + strconv.Quote(k) + " is not \"token_id:N\"; the server ignored return_tokens_as_token_ids"
				}
				continue
			}
			m[uint32(id)] = lp
		}
		c.top = append(c.top, m)
	}
}

// readPromptLogprobs reads [null, {"<id>": {"logprob": -3.1, "rank": 5, "decoded_token": "Hi"}}, ...]:
// the prompt token's own logprob per position (NaN where null) and, when asked for, every
// entry as id → logprob.
func readPromptLogprobs(iter *jsoniter.Iterator, c *choice) {
	if iter.WhatIsNext() == jsoniter.NilValue {
		iter.Skip()
		return
	}
	c.hasPromptLogprobs = true
	c.promptLogprobs = make([]float64, 0, len(c.prompt))
	if c.wantPromptN > 0 {
		c.promptTop = make([]map[uint32]float64, 0, len(c.prompt))
	}
	for i := 0; iter.ReadArray(); i++ {
		own := math.NaN()
		var top map[uint32]float64
		if iter.WhatIsNext() == jsoniter.NilValue {
			iter.Skip()
		} else {
			if c.wantPromptN > 0 {
				top = make(map[uint32]float64, c.wantPromptN+1)
			}
			for k := iter.ReadObject(); k != ""; k = iter.ReadObject() {
				lp := math.NaN()
				for g := iter.ReadObject(); g != ""; g = iter.ReadObject() {
					if g == "logprob" {
						lp = readFloatOrNaN(iter, &c.num)
					} else {
						iter.Skip()
					}
				}
				id, err := strconv.ParseUint(strings.TrimPrefix(k, tokenIDPrefix), 10, 32)
				if err != nil {
					if c.err == "" {
						c.err = "prompt_logprobs key " + strconv.Quote(k) + " is not a token id"
					}
					continue
				}
				if i < len(c.prompt) && uint32(id) == c.prompt[i] {
					own = lp
				}
				if top != nil {
					top[uint32(id)] = lp
				}
			}
		}
		c.promptLogprobs = append(c.promptLogprobs, own)
		if c.promptTop != nil {
			c.promptTop = append(c.promptTop, top)
		}
	}
}

func readUsage(iter *jsoniter.Iterator, u *usage) {
	if iter.WhatIsNext() == jsoniter.NilValue {
		iter.Skip()
		return
	}
	for f := iter.ReadObject(); f != ""; f = iter.ReadObject() {
		switch f {
		case "prompt_tokens":
			u.promptTokens = max(readCount(iter), 0)
		case "completion_tokens":
			u.completionTokens = readCount(iter)
		case "prompt_tokens_details":
			if iter.WhatIsNext() == jsoniter.NilValue {
				iter.Skip()
				continue
			}
			for g := iter.ReadObject(); g != ""; g = iter.ReadObject() {
				if g == "cached_tokens" {
					u.cachedTokens = max(readCount(iter), 0)
				} else {
					iter.Skip()
				}
			}
		default:
			iter.Skip()
		}
	}
}

func readCount(iter *jsoniter.Iterator) int {
	if iter.WhatIsNext() != jsoniter.NumberValue {
		iter.Skip()
		return -1
	}
	return int(iter.ReadInt64())
}

func readFloatOrNaN(iter *jsoniter.Iterator, num *transport.NumberReader) float64 {
	if iter.WhatIsNext() != jsoniter.NumberValue {
		iter.Skip()
		return math.NaN()
	}
	return num.Float64(iter)
}

func readStringOrNull(iter *jsoniter.Iterator) string {
	if iter.WhatIsNext() != jsoniter.StringValue {
		iter.Skip()
		return ""
	}
	return iter.ReadString()
}

func snippet(b []byte) string {
	if len(b) > 120 {
		return strconv.Quote(string(b[:120])) + "…"
	}
	return strconv.Quote(string(b))
}
