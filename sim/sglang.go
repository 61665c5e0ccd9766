package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// SGLang native API: POST /generate and the metadata endpoints.

type generateReq struct {
	Text                 json.RawMessage `json:"text"`
	InputIDs             json.RawMessage `json:"input_ids"`
	SamplingParams       json.RawMessage `json:"sampling_params"`
	RID                  json.RawMessage `json:"rid"`
	ReturnLogprob        json.RawMessage `json:"return_logprob"`
	LogprobStartLen      *int            `json:"logprob_start_len"`
	TopLogprobsNum       json.RawMessage `json:"top_logprobs_num"`
	ReturnTextInLogprobs bool            `json:"return_text_in_logprobs"`
	Stream               bool            `json:"stream"`
}

type sglSampling struct {
	MaxNewTokens      *int            `json:"max_new_tokens"`
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	TopK              *int            `json:"top_k"`
	MinP              *float64        `json:"min_p"`
	Stop              json.RawMessage `json:"stop"`
	StopTokenIDs      []int64         `json:"stop_token_ids"`
	SkipSpecialTokens *bool           `json:"skip_special_tokens"`
	NoStopTrim        bool            `json:"no_stop_trim"`
	IgnoreEOS         bool            `json:"ignore_eos"`
	MinNewTokens      int             `json:"min_new_tokens"`
	N                 *int            `json:"n"`
	SamplingSeed      *int64          `json:"sampling_seed"`
}

type sglItem struct {
	Text      string   `json:"text"`
	OutputIDs []uint32 `json:"output_ids"`
	MetaInfo  sglMeta  `json:"meta_info"`
}

type sglMeta struct {
	ID                  string   `json:"id"`
	FinishReason        any      `json:"finish_reason"`
	PromptTokens        int      `json:"prompt_tokens"`
	CompletionTokens    int      `json:"completion_tokens"`
	CachedTokens        int      `json:"cached_tokens"`
	WeightVersion       string   `json:"weight_version"`
	E2ELatency          float64  `json:"e2e_latency"`
	OutputTokenLogprobs *triples `json:"output_token_logprobs,omitempty"`
	OutputTopLogprobs   []any    `json:"output_top_logprobs,omitempty"`
	InputTokenLogprobs  *triples `json:"input_token_logprobs,omitempty"`
	InputTopLogprobs    []any    `json:"input_top_logprobs,omitempty"`
}

type finishStop struct {
	Type    string `json:"type"`
	Matched any    `json:"matched"`
}

type finishLength struct {
	Type   string `json:"type"`
	Length int    `json:"length"`
}

type finishAbort struct {
	Type       string `json:"type"`
	Message    string `json:"message"`
	StatusCode any    `json:"status_code"`
	ErrType    any    `json:"err_type"`
}

func (s *Server) generateHandler(body []byte, f *Fault, epoch uint64) reply {
	t0 := time.Now()
	bad := func(msg string) reply { return s.errorReply(famSGLang, 400, msg, "", nil) }
	var req generateReq
	flat, err := decodeGenerateReq(body, &req)
	if err != nil {
		return validationReply("body", "JSON decode error: "+err.Error())
	}
	var prompts [][]uint32
	batch := false
	switch {
	case !isNull(req.InputIDs):
		if flat == nil {
			flat, _ = flatIDs(req.InputIDs)
		}
		if flat != nil {
			prompts = append(prompts, flat)
			break
		}
		lists, b, ok := tokenLists(req.InputIDs)
		if !ok {
			return validationReply("input_ids", "input_ids must be a list of token ids or a list of such lists")
		}
		batch = b
		for _, l := range lists {
			ids, ok := toIDs(l)
			if !ok {
				return bad("input_ids must be non-negative token ids.")
			}
			prompts = append(prompts, ids)
		}
	case !isNull(req.Text):
		texts, ok := stringOrList(req.Text)
		if !ok {
			return validationReply("text", "text must be a string or a list of strings")
		}
		batch = len(texts) > 1 || (len(req.Text) > 0 && req.Text[0] == '[')
		for _, t := range texts {
			ids, err := s.encode(t)
			if err != nil {
				return bad(err.Error())
			}
			prompts = append(prompts, ids)
		}
	default:
		return bad("Either text, input_ids or input_embeds should be provided.")
	}
	if len(prompts) == 0 {
		return bad("The input batch is empty.")
	}
	if req.Stream && batch {
		return bad("stream=true with a batch of inputs is not supported by the simulated server; stream one input per request.")
	}
	params := make([]sglSampling, len(prompts))
	if !isNull(req.SamplingParams) {
		var one sglSampling
		var many []sglSampling
		if jsonx.Unmarshal(req.SamplingParams, &one) == nil {
			for i := range params {
				params[i] = one
			}
		} else if jsonx.Unmarshal(req.SamplingParams, &many) == nil && len(many) == len(prompts) {
			copy(params, many)
		} else {
			return validationReply("sampling_params", fmt.Sprintf("sampling_params must be an object or a list of %d objects", len(prompts)))
		}
	}
	rids, ok := stringOrList(req.RID)
	if !ok || (len(rids) > 1 && len(rids) != len(prompts)) {
		return validationReply("rid", "rid must be a string or a list with one entry per input")
	}
	wantLP, ok := boolOrList(req.ReturnLogprob, len(prompts))
	if !ok {
		return validationReply("return_logprob", "return_logprob must be a bool or a list of bools, one per input")
	}
	topNs, ok := intOrList(req.TopLogprobsNum, len(prompts))
	if !ok {
		return validationReply("top_logprobs_num", "top_logprobs_num must be an int or a list of ints, one per input")
	}
	var seqs []seqReq
	type meta struct {
		rid          string
		logprob      bool
		topN         int
		skip, noTrim bool
	}
	var metas []meta
	for i, ids := range prompts {
		p := params[i]
		if err := s.checkIDs(ids); err != nil {
			return bad(err.Error())
		}
		sp, msg := s.sglangSampling(p, len(ids))
		if msg != "" {
			return bad(msg)
		}
		n := 1
		if p.N != nil {
			n = *p.N
		}
		if n < 1 {
			return bad(fmt.Sprintf("n must be at least 1, got %d.", n))
		}
		rid := ""
		switch {
		case len(rids) == len(prompts):
			rid = rids[i]
		case len(rids) == 1:
			rid = rids[0]
			if len(prompts) > 1 {
				rid = fmt.Sprintf("%s_%d", rids[0], i)
			}
		}
		sp.topN = topNs[i]
		for j := 0; j < n; j++ {
			sq := sp
			if p.SamplingSeed != nil {
				sq.seed = seedFor(uint64(*p.SamplingSeed), j)
			} else {
				sq.seed = s.nextSeed()
			}
			id := rid
			if id == "" {
				id = hexID(s.nextID())
			} else if n > 1 {
				id = fmt.Sprintf("%s_%d", rid, j)
			}
			seqs = append(seqs, seqReq{prompt: ids, s: sq, rid: id, fault: f, epoch: epoch})
			skip := p.SkipSpecialTokens == nil || *p.SkipSpecialTokens
			metas = append(metas, meta{rid: id, logprob: wantLP[i], topN: topNs[i], skip: skip, noTrim: p.NoStopTrim})
		}
	}
	results, err := s.runAll(seqs)
	if err != nil {
		return s.errorReply(famSGLang, 503, err.Error(), "", nil)
	}
	items := make([]sglItem, len(results))
	for k, res := range results {
		m := metas[k]
		it := sglItem{
			Text:      s.outputText(res, m.skip, m.noTrim),
			OutputIDs: res.ids,
			MetaInfo: sglMeta{ID: m.rid, PromptTokens: res.promptLen, CompletionTokens: len(res.ids),
				CachedTokens: res.cached, WeightVersion: "default", E2ELatency: time.Since(t0).Seconds()},
		}
		if it.OutputIDs == nil {
			it.OutputIDs = []uint32{}
		}
		switch {
		case res.finish == "abort":
			it.MetaInfo.FinishReason = finishAbort{Type: "abort", Message: res.abortMsg}
		case res.finish == "length":
			it.MetaInfo.FinishReason = finishLength{Type: "length", Length: len(res.ids)}
		case res.hasStr:
			it.MetaInfo.FinishReason = finishStop{Type: "stop", Matched: res.matchedStr}
		default:
			it.MetaInfo.FinishReason = finishStop{Type: "stop", Matched: res.matchedID}
		}
		if m.logprob && (f == nil || f.Kind != FaultMissingLogprobs) {
			tr := triples{lps: res.lps, ids: res.ids}
			if req.ReturnTextInLogprobs {
				tr.texts = s.tokenStrings(res.ids)
			}
			if tr.ids == nil {
				tr.ids, tr.lps = []uint32{}, []float64{}
			}
			it.MetaInfo.OutputTokenLogprobs = &tr
			tops := make([]any, len(res.ids))
			for p := range res.ids {
				if m.topN > 0 && p < len(res.tops) {
					ct := triples{}
					for _, c := range res.tops[p] {
						ct.lps = append(ct.lps, clampLog(c.p))
						ct.ids = append(ct.ids, c.id)
						if req.ReturnTextInLogprobs {
							ct.texts = append(ct.texts, s.tokenString(c.id))
						}
					}
					tops[p] = ct
				}
			}
			it.MetaInfo.OutputTopLogprobs = tops
		}
		if m.logprob && req.LogprobStartLen != nil && *req.LogprobStartLen >= 0 {
			it.MetaInfo.InputTokenLogprobs, it.MetaInfo.InputTopLogprobs = s.sglangInputLogprobs(seqs[k].prompt, *req.LogprobStartLen, m.topN, req.ReturnTextInLogprobs)
		}
		if f != nil && f.Kind == FaultPromptInOutputIDs {
			prompt := seqs[k].prompt
			lead := prompt[max(0, len(prompt)-3):]
			it.OutputIDs = append(append([]uint32(nil), lead...), res.ids...)
		}
		items[k] = it
	}
	if req.Stream {
		sm := make([]sglStreamMeta, len(metas))
		for k, m := range metas {
			sm[k] = sglStreamMeta{skip: m.skip}
		}
		return s.sglangStream(items, results, sm)
	}
	return sglReply(items, !batch && len(items) == 1)
}

// sglangInputLogprobs is meta_info.input_token_logprobs (and input_top_logprobs when
// topN > 0) for logprob_start_len start, as SGLang 0.5.23 builds them
// (scheduler_components/logprob_result_processor.py): one [logprob, id, text] per prompt
// token from start on, the first with a null logprob; the top lists start with null.
func (s *Server) sglangInputLogprobs(prompt []uint32, start, topN int, withText bool) (*triples, []any) {
	start = min(start, max(len(prompt)-1, 0))
	lps, tops := s.model.promptLogprobs(prompt, topN)
	tr := &triples{ids: append([]uint32{}, prompt[start:]...), lps: append([]float64{}, lps[start:]...)}
	if len(tr.lps) > 0 {
		tr.lps[0] = math.NaN() // the first scored position has no logprob
	}
	if withText {
		tr.texts = s.tokenStrings(tr.ids)
	}
	if topN <= 0 {
		return tr, nil
	}
	out := make([]any, len(tr.ids))
	for j := 1; j < len(tr.ids); j++ {
		ct := triples{}
		for _, c := range tops[start+j] {
			ct.lps = append(ct.lps, clampLog(c.p))
			ct.ids = append(ct.ids, c.id)
			if withText {
				ct.texts = append(ct.texts, s.tokenString(c.id))
			}
		}
		out[j] = ct
	}
	return tr, out
}

func (s *Server) tokenStrings(ids []uint32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = s.tokenString(id)
	}
	return out
}

// sglangSampling validates SGLang sampling params and applies its defaults
// (max_new_tokens 128, temperature 1.0 from the generated generation_config, top_p 1, top_k -1).
func (s *Server) sglangSampling(p sglSampling, promptLen int) (sampling, string) {
	sp := sampling{maxTokens: 128, temperature: 1, topP: 1, topK: -1, raw: s.cfg.LogprobMode == "raw",
		ignoreEOS: p.IgnoreEOS, minTokens: p.MinNewTokens}
	if p.MaxNewTokens != nil {
		sp.maxTokens = *p.MaxNewTokens
	}
	if p.Temperature != nil {
		sp.temperature = *p.Temperature
	}
	if p.TopP != nil {
		sp.topP = *p.TopP
	}
	if p.TopK != nil {
		sp.topK = *p.TopK
	}
	if p.MinP != nil {
		sp.minP = *p.MinP
	}
	switch {
	case sp.temperature < 0:
		return sp, fmt.Sprintf("temperature must be non-negative, got %v.", sp.temperature)
	case sp.topP <= 0 || sp.topP > 1:
		return sp, fmt.Sprintf("top_p must be in (0, 1], got %v.", sp.topP)
	case sp.topK < -1 || sp.topK == 0:
		return sp, fmt.Sprintf("top_k must be -1 (disable), or at least 1, got %d.", sp.topK)
	case sp.minP < 0 || sp.minP > 1:
		return sp, fmt.Sprintf("min_p must be in [0, 1], got %v.", sp.minP)
	case sp.maxTokens < 0:
		return sp, fmt.Sprintf("max_new_tokens must be at least 0, got %d.", sp.maxTokens)
	case sp.minTokens < 0 || sp.minTokens > sp.maxTokens:
		return sp, fmt.Sprintf("min_new_tokens must be in [0, max_new_tokens], got %d.", sp.minTokens)
	}
	stops, ok := stringOrList(p.Stop)
	if !ok {
		return sp, "stop must be a string or a list of strings."
	}
	sp.stopStrs = stops
	for _, id := range p.StopTokenIDs {
		if id < 0 || id >= int64(s.model.v.size()) {
			return sp, fmt.Sprintf("stop_token_ids entry %d is out of vocabulary (size %d).", id, s.model.v.size())
		}
		sp.stopIDs = append(sp.stopIDs, uint32(id))
	}
	ctxLen := s.cfg.MaxModelLen
	if promptLen >= ctxLen {
		return sp, fmt.Sprintf("The input (%d tokens) is longer than the model's context length (%d tokens).", promptLen, ctxLen)
	}
	if promptLen+sp.maxTokens > ctxLen {
		return sp, fmt.Sprintf("Requested token count exceeds the model's maximum context length of %d tokens. "+
			"You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. "+
			"Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
			ctxLen, promptLen+sp.maxTokens, promptLen, sp.maxTokens)
	}
	return sp, ""
}

func boolOrList(raw json.RawMessage, n int) ([]bool, bool) {
	out := make([]bool, n)
	if isNull(raw) {
		return out, true
	}
	var one bool
	if jsonx.Unmarshal(raw, &one) == nil {
		for i := range out {
			out[i] = one
		}
		return out, true
	}
	var many []bool
	if jsonx.Unmarshal(raw, &many) == nil && len(many) == n {
		return many, true
	}
	return nil, false
}

func intOrList(raw json.RawMessage, n int) ([]int, bool) {
	out := make([]int, n)
	if isNull(raw) {
		return out, true
	}
	var one int
	if jsonx.Unmarshal(raw, &one) == nil && one >= 0 {
		for i := range out {
			out[i] = one
		}
		return out, true
	}
	var many []int
	if jsonx.Unmarshal(raw, &many) == nil && len(many) == n {
		return many, true
	}
	return nil, false
}

func (s *Server) modelInfo() reply {
	return jsonReply(200, map[string]any{
		"model_path": s.dir, "tokenizer_path": s.dir, "is_generation": true,
		"preferred_sampling_params": nil, "weight_version": "default",
		"has_image_understanding": false, "has_audio_understanding": false,
		"model_type": "qwen2", "architectures": []string{"Qwen2ForCausalLM"},
	})
}

func (s *Server) serverInfo() reply {
	st := s.Stats()
	maxRunning := s.cfg.Latency.MaxConcurrent
	return jsonReply(200, map[string]any{
		"model_path": s.dir, "tokenizer_path": s.dir, "served_model_name": s.name,
		"context_length": s.cfg.MaxModelLen, "random_seed": s.cfg.Seed,
		"disable_radix_cache": s.cfg.Cache.Disabled, "max_total_num_tokens": s.cfg.Cache.Tokens,
		"max_running_requests": maxRunning, "max_queued_requests": s.cfg.Latency.MaxQueued,
		"page_size": 1, "skip_tokenizer_init": false, "version": s.cfg.SGLangVersion,
		// prompt_tokens and cached_tokens are the simulator's own counters (the
		// prefill a server computed is their difference), for benchmarks.
		"internal_states": []any{map[string]any{"last_gen_throughput": 0.0, "generated_tokens": st.GeneratedTokens,
			"prompt_tokens": st.PromptTokens, "cached_tokens": st.CachedTokens}},
	})
}

// loads is GET /v1/loads in SGLang's shape: one entry (dp_rank 0) with the scheduler's
// core counters. num_running_reqs and num_waiting_reqs are the sequences generating and
// queued for a slot right now, not counting those an abort has stopped (or will stop as
// they register: they arrived before an abort_all), so a client that aborts everything
// and polls until they reach zero (Slime's abort_servers_until_idle) sees the server idle
// as soon as the abort is answered. The include and
// dp_rank query parameters are accepted; the optional sections (memory, spec, lora,
// disagg, queues) are not simulated and never sent.
func (s *Server) loads() reply {
	now := time.Now()
	var running, waiting int64
	s.mu.Lock()
	for fl := range s.flights {
		switch {
		case fl.stopped: // aborted: on its way out, no longer the server's work
		case fl.running:
			running++
		case s.slots != nil:
			waiting++
		}
	}
	s.mu.Unlock()
	st := s.Stats()
	return jsonReply(200, map[string]any{
		"timestamp": now.UTC().Format(time.RFC3339Nano),
		"version":   s.cfg.SGLangVersion,
		"loads": []any{map[string]any{
			"dp_rank": 0, "timestamp": float64(now.UnixNano()) / 1e9,
			"num_running_reqs": running, "num_waiting_reqs": waiting,
			"num_waiting_uncached_tokens": 0, "num_used_tokens": 0, "num_total_tokens": 0,
			"max_total_num_tokens": s.cfg.Cache.Tokens, "token_usage": 0.0, "gen_throughput": 0.0,
			"cache_hit_rate": cacheHitRate(st), "utilization": 0.0,
			"max_running_requests": s.cfg.Latency.MaxConcurrent,
		}},
	})
}

// cacheHitRate is the share of prompt tokens the prefix cache served.
func cacheHitRate(st Stats) float64 {
	if st.PromptTokens == 0 {
		return 0
	}
	return float64(st.CachedTokens) / float64(st.PromptTokens)
}

// models is GET /v1/models in vLLM's shape.
func (s *Server) models() reply {
	created := s.started.Unix()
	return jsonReply(200, map[string]any{"object": "list", "data": []any{map[string]any{
		"id": s.name, "object": "model", "created": created, "owned_by": "vllm", "root": s.dir,
		"parent": nil, "max_model_len": s.cfg.MaxModelLen,
		"permission": []any{map[string]any{"id": "modelperm-sim", "object": "model_permission", "created": created,
			"allow_create_engine": false, "allow_sampling": true, "allow_logprobs": true, "allow_search_indices": false,
			"allow_view": true, "allow_fine_tuning": false, "organization": "*", "group": nil, "is_blocking": false}},
	}}})
}
