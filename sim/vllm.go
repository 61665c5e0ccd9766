package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// vLLM OpenAI-compatible POST /v1/completions with token-id prompts.

type completionReq struct {
	Model                  *string         `json:"model"`
	Prompt                 json.RawMessage `json:"prompt"`
	MaxTokens              *int            `json:"max_tokens"`
	Temperature            *float64        `json:"temperature"`
	TopP                   *float64        `json:"top_p"`
	TopK                   *int            `json:"top_k"`
	MinP                   *float64        `json:"min_p"`
	Stop                   json.RawMessage `json:"stop"`
	StopTokenIDs           []int64         `json:"stop_token_ids"`
	Seed                   *int64          `json:"seed"`
	N                      *int            `json:"n"`
	Logprobs               *int            `json:"logprobs"`
	PromptLogprobs         *int            `json:"prompt_logprobs"`
	SkipSpecialTokens      *bool           `json:"skip_special_tokens"`
	IncludeStopStrInOutput bool            `json:"include_stop_str_in_output"`
	ReturnTokensAsTokenIDs *bool           `json:"return_tokens_as_token_ids"`
	ReturnTokenIDs         *bool           `json:"return_token_ids"`
	IgnoreEOS              bool            `json:"ignore_eos"`
	MinTokens              int             `json:"min_tokens"`
	Echo                   bool            `json:"echo"`
	Stream                 bool            `json:"stream"`
	StreamOptions          json.RawMessage `json:"stream_options"`
}

type cmplResp struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []cmplChoice `json:"choices"`
	Usage   usage        `json:"usage"`
}

type cmplChoice struct {
	Index          int             `json:"index"`
	Text           string          `json:"text"`
	Logprobs       *cmplLogprobs   `json:"logprobs"`
	FinishReason   string          `json:"finish_reason"`
	StopReason     any             `json:"stop_reason"`
	TokenIDs       json.RawMessage `json:"token_ids,omitempty"`
	PromptLogprobs json.RawMessage `json:"prompt_logprobs,omitempty"`
	PromptTokenIDs json.RawMessage `json:"prompt_token_ids,omitempty"`
}

type cmplLogprobs struct {
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs floatList            `json:"token_logprobs"`
	Tokens        []string             `json:"tokens"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
}

type usage struct {
	PromptTokens        int            `json:"prompt_tokens"`
	TotalTokens         int            `json:"total_tokens"`
	CompletionTokens    int            `json:"completion_tokens"`
	PromptTokensDetails *tokensDetails `json:"prompt_tokens_details"`
}

type tokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

const maxLogprobs = 20 // vLLM --max-logprobs default

// modelOK checks the request's model against the served name (vLLM answers 404 otherwise).
func (s *Server) modelOK(m *string) bool {
	return m == nil || *m == "" || *m == s.name || *m == s.dir
}

func (s *Server) completions(body []byte, f *Fault, epoch uint64) reply {
	bad := func(msg string) reply { return s.errorReply(famVLLM, 400, msg, "", nil) }
	var req completionReq
	if err := jsonx.Unmarshal(body, &req); err != nil {
		return bad("JSON decode error: " + err.Error())
	}
	if !s.modelOK(req.Model) {
		return s.errorReply(famVLLM, 404, fmt.Sprintf("The model `%s` does not exist.", *req.Model), "", nil)
	}
	opts, msg := streamOptionsOK(req.StreamOptions, req.Stream)
	switch {
	case msg != "":
		return bad(msg)
	case req.Stream && req.PromptLogprobs != nil && (*req.PromptLogprobs > 0 || *req.PromptLogprobs == -1):
		// vllm 0.33.0 completion/protocol.py, CompletionRequest.check_logprobs
		return bad("`prompt_logprobs` are not available when `stream=True`.")
	case req.Echo:
		return bad("echo=true is not supported by the simulated server.")
	case req.PromptLogprobs != nil && *req.PromptLogprobs < 0 && *req.PromptLogprobs != -1:
		// vllm 0.33.0 completion/protocol.py, CompletionRequest.check_logprobs
		return bad("`prompt_logprobs` must be a positive value or -1.")
	case req.PromptLogprobs != nil && *req.PromptLogprobs > maxLogprobs:
		return bad(fmt.Sprintf("Requested prompt logprobs of %d, which is greater than max allowed: %d", *req.PromptLogprobs, maxLogprobs))
	}
	var prompts [][]uint32
	if texts, ok := stringOrList(req.Prompt); ok && len(texts) > 0 {
		for _, t := range texts {
			ids, err := s.encode(t)
			if err != nil {
				return bad(err.Error())
			}
			prompts = append(prompts, ids)
		}
	} else if lists, _, ok := tokenLists(req.Prompt); ok {
		for _, l := range lists {
			ids, ok := toIDs(l)
			if !ok {
				return bad("Prompt token ids must be non-negative integers.")
			}
			prompts = append(prompts, ids)
		}
	} else {
		return bad("prompt must be a string, a list of strings, a list of token ids or a list of such lists.")
	}
	for _, p := range prompts {
		if len(p) == 0 {
			return bad("Prompt cannot be empty.")
		}
		if err := s.checkIDs(p); err != nil {
			return bad(err.Error())
		}
	}
	sp := sampling{maxTokens: 16, temperature: 1, topP: 1, topK: 0, raw: s.cfg.LogprobMode == "raw",
		ignoreEOS: req.IgnoreEOS, minTokens: req.MinTokens}
	if req.MaxTokens != nil {
		sp.maxTokens = *req.MaxTokens
	}
	if req.Temperature != nil {
		sp.temperature = *req.Temperature
	}
	if req.TopP != nil {
		sp.topP = *req.TopP
	}
	if req.TopK != nil {
		sp.topK = *req.TopK
	}
	if req.MinP != nil {
		sp.minP = *req.MinP
	}
	n := 1
	if req.N != nil {
		n = *req.N
	}
	switch {
	case n < 1:
		return bad(fmt.Sprintf("n must be at least 1, got %d.", n))
	case sp.temperature < 0:
		return bad(fmt.Sprintf("temperature must be non-negative, got %v.", sp.temperature))
	case sp.topP <= 0 || sp.topP > 1:
		return bad(fmt.Sprintf("top_p must be in (0, 1], got %v.", sp.topP))
	case sp.topK < -1:
		return bad(fmt.Sprintf("top_k must be 0 or -1 (disable), or at least 1, got %d.", sp.topK))
	case sp.minP < 0 || sp.minP > 1:
		return bad(fmt.Sprintf("min_p must be in [0, 1], got %v.", sp.minP))
	case sp.maxTokens < 1:
		return bad(fmt.Sprintf("max_tokens must be at least 1, got %d.", sp.maxTokens))
	case sp.minTokens < 0 || sp.minTokens > sp.maxTokens:
		return bad(fmt.Sprintf("min_tokens must be in [0, max_tokens], got %d.", sp.minTokens))
	case req.Logprobs != nil && (*req.Logprobs > maxLogprobs || *req.Logprobs < 0):
		return bad(fmt.Sprintf("Requested sample logprobs of %d, which is greater than max allowed: %d", *req.Logprobs, maxLogprobs))
	}
	stops, ok := stringOrList(req.Stop)
	if !ok {
		return bad("stop must be a string or a list of strings.")
	}
	sp.stopStrs = stops
	for _, id := range req.StopTokenIDs {
		if id < 0 || id >= int64(s.model.v.size()) {
			return bad(fmt.Sprintf("stop_token_ids entry %d is out of vocabulary (size %d).", id, s.model.v.size()))
		}
		sp.stopIDs = append(sp.stopIDs, uint32(id))
	}
	for _, p := range prompts {
		if msg := s.vllmContextError(len(p), sp.maxTokens); msg != "" {
			return bad(msg)
		}
	}
	if req.Logprobs != nil {
		sp.topN = *req.Logprobs
	}
	var seqs []seqReq
	for _, p := range prompts {
		for j := 0; j < n; j++ {
			sq := sp
			if req.Seed != nil {
				sq.seed = seedFor(uint64(*req.Seed), j)
			} else {
				sq.seed = s.nextSeed()
			}
			seqs = append(seqs, seqReq{prompt: p, s: sq, fault: f, epoch: epoch})
		}
	}
	results, err := s.runAll(seqs)
	if err != nil {
		return s.errorReply(famVLLM, 503, err.Error(), "", nil)
	}
	v := s.vllmVer
	asIDs := s.cfg.ReturnTokensAsTokenIDs
	if req.ReturnTokensAsTokenIDs != nil && versionAtLeast(v, 0, 8, 0) {
		asIDs = *req.ReturnTokensAsTokenIDs
	}
	withIDs := versionAtLeast(v, 0, 10, 2) && req.ReturnTokenIDs != nil && *req.ReturnTokenIDs
	skip := req.SkipSpecialTokens == nil || *req.SkipSpecialTokens
	resp := cmplResp{ID: "cmpl-" + hexID(s.nextID()), Object: "text_completion", Created: now(), Model: s.name}
	block := s.cfg.Cache.BlockSize
	cachedTotal := 0
	for k, res := range results {
		c := cmplChoice{Index: k, Text: s.outputText(res, skip, req.IncludeStopStrInOutput), FinishReason: res.finish,
			PromptLogprobs: json.RawMessage("null")}
		switch {
		case res.finish != "stop":
		case res.hasStr:
			c.StopReason = res.matchedStr
		case res.matchedID >= 0 && res.matchedID != int64(s.model.v.eos):
			c.StopReason = res.matchedID
		}
		if versionAtLeast(v, 0, 10, 2) {
			c.TokenIDs, c.PromptTokenIDs = json.RawMessage("null"), json.RawMessage("null")
			if withIDs {
				c.TokenIDs, _ = jsonx.Marshal(orEmpty(res.ids))
				c.PromptTokenIDs, _ = jsonx.Marshal(seqs[k].prompt)
			}
		}
		if req.Logprobs != nil && (f == nil || f.Kind != FaultMissingLogprobs) {
			c.Logprobs = s.completionLogprobs(res, *req.Logprobs, asIDs)
		}
		if req.PromptLogprobs != nil {
			c.PromptLogprobs = s.vllmPromptLogprobs(seqs[k].prompt, *req.PromptLogprobs)
		}
		resp.Choices = append(resp.Choices, c)
		resp.Usage.CompletionTokens += len(res.ids)
		cachedTotal += res.cached / block * block
	}
	for _, p := range prompts {
		resp.Usage.PromptTokens += len(p) * n
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	resp.Usage.PromptTokensDetails = &tokensDetails{CachedTokens: cachedTotal}
	if req.Stream {
		streamed := make([][]uint32, len(seqs))
		for k := range seqs {
			streamed[k] = seqs[k].prompt
		}
		return s.completionStream(resp, results, skip, opts, withIDs, streamed)
	}
	return jsonReply(200, resp)
}

// vllmPromptLogprobs is choices[].prompt_logprobs as vLLM 0.33.0 writes it
// (CompletionResponseChoice.prompt_logprobs: list[dict[int, Logprob] | None]): null for the
// first prompt token, then per position the prompt token and the topN most likely tokens,
// each {"logprob", "rank", "decoded_token"}, -inf floored at -9999.0
// (generate/base/serving.py clamp_prompt_logprobs). topN -1 is every candidate.
func (s *Server) vllmPromptLogprobs(prompt []uint32, topN int) json.RawMessage {
	n := topN
	if n < 0 {
		n = s.model.v.size()
	}
	lps, tops := s.model.promptLogprobs(prompt, s.model.v.size()) // every candidate, for the ranks
	b := []byte{'['}
	entry := func(id uint32, lp float64, rank int) {
		b = append(b, '"')
		b = strconv.AppendUint(b, uint64(id), 10)
		b = append(b, `":{"logprob":`...)
		b = strconv.AppendFloat(b, math.Max(lp, logFloor), 'g', -1, 64)
		b = append(b, `,"rank":`...)
		b = strconv.AppendInt(b, int64(rank), 10)
		b = append(b, `,"decoded_token":`...)
		q, _ := json.Marshal(s.tokenString(id))
		b = append(b, q...)
		b = append(b, '}')
	}
	for i, id := range prompt {
		if i > 0 {
			b = append(b, ',')
		}
		if i == 0 {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '{')
		// rank: 1 + the number of tokens more likely than the prompt token
		rank := 1
		for _, c := range tops[i] {
			if c.p > math.Exp(lps[i]) {
				rank++
			}
		}
		entry(id, lps[i], rank)
		for r, c := range tops[i][:min(n, len(tops[i]))] {
			if c.id != id {
				b = append(b, ',')
				entry(c.id, math.Log(c.p), r+1)
			}
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

func orEmpty(ids []uint32) []uint32 {
	if ids == nil {
		return []uint32{}
	}
	return ids
}

func (s *Server) completionLogprobs(res genResult, topN int, asIDs bool) *cmplLogprobs {
	name := func(id uint32) string {
		if asIDs {
			return "token_id:" + itoa(int(id))
		}
		return s.tokenString(id)
	}
	lp := &cmplLogprobs{TextOffset: []int{}, TokenLogprobs: floatList{}, Tokens: []string{}, TopLogprobs: []map[string]float64{}}
	off := 0
	for i, id := range res.ids {
		tok := name(id)
		lp.Tokens = append(lp.Tokens, tok)
		lp.TokenLogprobs = append(lp.TokenLogprobs, res.lps[i])
		lp.TextOffset = append(lp.TextOffset, off)
		off += len(s.tokenString(id))
		top := map[string]float64{tok: res.lps[i]}
		if topN > 0 && i < len(res.tops) {
			for _, c := range res.tops[i] {
				if _, seen := top[name(c.id)]; !seen {
					top[name(c.id)] = clampLog(c.p)
				}
			}
		}
		lp.TopLogprobs = append(lp.TopLogprobs, top)
	}
	return lp
}

// vllmContextError is vLLM's 400 message for prompt + max_tokens past the context window,
// worded as the configured version words it.
func (s *Server) vllmContextError(promptLen, maxTokens int) string {
	m := s.cfg.MaxModelLen
	if promptLen+maxTokens <= m {
		return ""
	}
	v := s.vllmVer
	switch {
	case !versionAtLeast(v, 0, 10, 0):
		return fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens "+
			"(%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			m, promptLen+maxTokens, promptLen, maxTokens)
	case !versionAtLeast(v, 0, 12, 0):
		return fmt.Sprintf("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context "+
			"length is %d tokens and your request has %d input tokens (%d > %d - %d).",
			maxTokens, m, promptLen, maxTokens, m, promptLen)
	}
	return fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d output tokens "+
		"and your prompt contains %d input tokens, for a total of %d tokens. Please reduce the length of the input "+
		"prompt or the number of requested output tokens.", m, maxTokens, promptLen, promptLen+maxTokens)
}
