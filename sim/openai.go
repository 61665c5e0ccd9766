package sim

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAI APIs: POST /v1/chat/completions and POST /v1/responses. Prompts are rendered with
// the model's chat template and tokenized; tool calls the model writes in Hermes form are
// returned as structured calls.

type chatMsg struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatReq struct {
	Model               *string           `json:"model"`
	Messages            []chatMsg         `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	Logprobs            bool              `json:"logprobs"`
	TopLogprobs         *int              `json:"top_logprobs"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	MaxTokens           *int              `json:"max_tokens"`
	Temperature         *float64          `json:"temperature"`
	TopP                *float64          `json:"top_p"`
	TopK                *int              `json:"top_k"`
	Seed                *int64            `json:"seed"`
	Stop                json.RawMessage   `json:"stop"`
	N                   *int              `json:"n"`
	ReturnTokenIDs      *bool             `json:"return_token_ids"`
	Stream              bool              `json:"stream"`
	StreamOptions       json.RawMessage   `json:"stream_options"`
}

// chatTurn is a conversation ready for the template plus what generation needs.
type chatTurn struct {
	prompt []uint32
	mode   toolMode
}

// contentText flattens string | [{type:text|input_text|output_text, text}] | null content.
func contentText(raw json.RawMessage) (string, bool) {
	if isNull(raw) {
		return "", true
	}
	var s string
	if jsonx.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if jsonx.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(p.Text)
	}
	return sb.String(), true
}

// toolChoice reads "none" | "auto" | "required" | {type:function, function:{name}} | {type:function, name}.
func toolChoice(raw json.RawMessage) (toolMode, bool) {
	if isNull(raw) {
		return toolMode{}, true
	}
	var s string
	if jsonx.Unmarshal(raw, &s) == nil {
		switch s {
		case "none":
			return toolMode{never: true}, true
		case "auto":
			return toolMode{}, true
		case "required":
			return toolMode{force: true}, true
		}
		return toolMode{}, false
	}
	var obj struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if jsonx.Unmarshal(raw, &obj) != nil {
		return toolMode{}, false
	}
	name := obj.Function.Name
	if name == "" {
		name = obj.Name
	}
	return toolMode{force: true, name: name}, name != ""
}

// render applies the chat template and tokenizes. messages are template-ready maps.
func (s *Server) render(messages []any, tools []any) ([]uint32, error) {
	data := map[string]any{"messages": messages, "add_generation_prompt": true}
	if len(tools) > 0 {
		data["tools"] = tools
	}
	text, err := s.tmpl.Render(data)
	if err != nil {
		return nil, fmt.Errorf("rendering the chat template: %w", err)
	}
	return s.encode(text)
}

func (s *Server) chatCompletions(body []byte, f *Fault, epoch uint64) reply {
	bad := func(msg string, param any) reply {
		return s.apiErr(famOpenAI, apiError{status: 400, msg: msg, typ: "invalid_request_error", param: param})
	}
	var req chatReq
	if err := jsonx.Unmarshal(body, &req); err != nil {
		return bad("We could not parse the JSON body of your request: "+err.Error(), nil)
	}
	if !s.modelOK(req.Model) {
		return s.apiErr(famOpenAI, apiError{status: 404, msg: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", *req.Model),
			typ: "invalid_request_error", code: "model_not_found"})
	}
	opts, msg := streamOptionsOK(req.StreamOptions, req.Stream)
	if msg != "" {
		return bad(msg, "stream_options")
	}
	if len(req.Messages) == 0 {
		return bad("[] is too short - 'messages'", "messages")
	}
	mode, ok := toolChoice(req.ToolChoice)
	if !ok {
		return bad("Invalid value for 'tool_choice': want none, auto, required or a named function.", "tool_choice")
	}
	var msgs []any
	known := map[string]bool{}
	for i, m := range req.Messages {
		text, ok := contentText(m.Content)
		if !ok {
			return bad(fmt.Sprintf("Invalid type for 'messages[%d].content': want a string or an array of text parts.", i), fmt.Sprintf("messages.[%d].content", i))
		}
		msg := map[string]any{"role": m.Role, "content": text}
		switch m.Role {
		case "system", "user":
		case "developer":
			msg["role"] = "system"
		case "assistant":
			if len(m.ToolCalls) > 0 {
				var calls []any
				for _, c := range m.ToolCalls {
					known[c.ID] = true
					calls = append(calls, map[string]any{"id": c.ID, "type": "function",
						"function": map[string]any{"name": c.Function.Name, "arguments": c.Function.Arguments}})
				}
				msg["tool_calls"] = calls
			}
		case "tool":
			if !known[m.ToolCallID] {
				return bad(fmt.Sprintf("Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous message.", m.ToolCallID),
					fmt.Sprintf("messages.[%d].tool_call_id", i))
			}
		default:
			return bad(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'.", m.Role),
				fmt.Sprintf("messages.[%d].role", i))
		}
		msgs = append(msgs, msg)
	}
	var tools []any
	for _, raw := range req.Tools {
		var t any
		if jsonx.Unmarshal(raw, &t) != nil {
			return bad("Invalid 'tools': each tool must be a JSON object.", "tools")
		}
		tools = append(tools, t)
	}
	if len(tools) == 0 && mode.force {
		return bad("'tool_choice' requires 'tools' to be specified.", "tool_choice")
	}
	prompt, err := s.render(msgs, tools)
	if err != nil {
		return s.apiErr(famOpenAI, apiError{status: 500, msg: err.Error(), typ: "server_error"})
	}
	maxTok := s.cfg.MaxModelLen - len(prompt)
	for _, m := range []*int{req.MaxTokens, req.MaxCompletionTokens} {
		if m != nil {
			maxTok = *m
		}
	}
	if len(prompt)+maxTok > s.cfg.MaxModelLen || maxTok < 0 {
		return s.apiErr(famOpenAI, apiError{status: 400, typ: "invalid_request_error", param: "messages", code: "context_length_exceeded",
			msg: fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens "+
				"(%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
				s.cfg.MaxModelLen, len(prompt)+max(0, maxTok), len(prompt), max(0, maxTok))})
	}
	sp, msg := s.openaiSampling(req.Temperature, req.TopP, req.TopK, req.Stop, maxTok)
	if msg != "" {
		return bad(msg, nil)
	}
	if req.TopLogprobs != nil {
		if *req.TopLogprobs < 0 || *req.TopLogprobs > maxLogprobs {
			return bad(fmt.Sprintf("Invalid 'top_logprobs': integer above maximum value. Expected a value <= %d, but got %d instead.", maxLogprobs, *req.TopLogprobs), "top_logprobs")
		}
		sp.topN = *req.TopLogprobs
	}
	n := 1
	if req.N != nil {
		n = *req.N
	}
	if n < 1 || n > 128 {
		return bad(fmt.Sprintf("Invalid 'n': want 1 to 128, got %d.", n), "n")
	}
	var seqs []seqReq
	for j := 0; j < n; j++ {
		sq := sp
		if req.Seed != nil {
			sq.seed = seedFor(uint64(*req.Seed), j)
		} else {
			sq.seed = s.nextSeed()
		}
		seqs = append(seqs, seqReq{prompt: prompt, s: sq, mode: mode, fault: f, epoch: epoch})
	}
	results, err := s.runAll(seqs)
	if err != nil {
		return s.apiErr(famOpenAI, apiError{status: 503, msg: err.Error(), typ: "server_error"})
	}
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type toolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	type message struct {
		Role      string     `json:"role"`
		Content   *string    `json:"content"`
		Refusal   any        `json:"refusal"`
		ToolCalls []toolCall `json:"tool_calls"`
	}
	type choice struct {
		Index        int             `json:"index"`
		Message      message         `json:"message"`
		Logprobs     any             `json:"logprobs"`
		FinishReason string          `json:"finish_reason"`
		TokenIDs     json.RawMessage `json:"token_ids,omitempty"`
	}
	withIDs := req.ReturnTokenIDs != nil && *req.ReturnTokenIDs
	id := s.nextID()
	var choices []choice
	var streamed []chatStreamChoice
	completion, cached := 0, 0
	for k, res := range results {
		text := s.outputText(res, true, false)
		content, calls := text, []parsedCall(nil)
		if len(tools) > 0 && !mode.never {
			content, calls = splitToolCalls(text)
		}
		c := choice{Index: k, Message: message{Role: "assistant"}, FinishReason: res.finish}
		if res.finish == "abort" {
			c.FinishReason = "length" // the OpenAI API has no abort: a cut-off answer reads as length
		}
		for ci, pc := range calls {
			c.Message.ToolCalls = append(c.Message.ToolCalls, toolCall{ID: fmt.Sprintf("call_%s%d", hexID(id^uint64(k)), ci),
				Type: "function", Function: fn{Name: pc.name, Arguments: pc.arguments}})
		}
		if len(calls) > 0 && c.FinishReason == "stop" {
			c.FinishReason = "tool_calls"
		}
		if content != "" || len(calls) == 0 {
			c.Message.Content = &content
		}
		if req.Logprobs && (f == nil || f.Kind != FaultMissingLogprobs) {
			c.Logprobs = map[string]any{"content": s.openaiLogprobs(res), "refusal": nil}
		}
		if withIDs {
			c.TokenIDs, _ = jsonx.Marshal(orEmpty(res.ids))
		}
		choices = append(choices, c)
		if req.Stream {
			sc := chatStreamChoice{index: k, content: c.Message.Content, finish: c.FinishReason, res: res}
			for ci, tc := range c.Message.ToolCalls {
				sc.toolCalls = append(sc.toolCalls, map[string]any{"index": ci, "id": tc.ID, "type": tc.Type,
					"function": map[string]any{"name": tc.Function.Name, "arguments": tc.Function.Arguments}})
			}
			if lp, ok := c.Logprobs.(map[string]any); ok {
				sc.logprobs, sc.hasLPs = lp["content"].([]openaiTokenLogprob), true
			}
			streamed = append(streamed, sc)
		}
		completion += len(res.ids)
		cached += res.cached
	}
	resp := map[string]any{
		"id": "chatcmpl-" + hexID(id), "object": "chat.completion", "created": now(), "model": s.name,
		"choices": choices, "system_fingerprint": nil,
		"usage": map[string]any{"prompt_tokens": len(prompt) * n, "completion_tokens": completion,
			"total_tokens":              len(prompt)*n + completion,
			"prompt_tokens_details":     map[string]any{"cached_tokens": cached, "audio_tokens": 0},
			"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
	}
	if withIDs {
		resp["prompt_token_ids"] = prompt
	}
	if req.Stream {
		return s.chatStream(resp["id"].(string), resp["created"].(int64), streamed, resp["usage"].(map[string]any), opts)
	}
	return jsonReply(200, resp)
}

// openaiSampling applies OpenAI defaults (temperature 1, top_p 1) and validates.
func (s *Server) openaiSampling(temp, topP *float64, topK *int, stop json.RawMessage, maxTok int) (sampling, string) {
	sp := sampling{maxTokens: maxTok, temperature: 1, topP: 1, raw: s.cfg.LogprobMode == "raw"}
	if temp != nil {
		sp.temperature = *temp
	}
	if topP != nil {
		sp.topP = *topP
	}
	if topK != nil {
		sp.topK = *topK
	}
	switch {
	case sp.temperature < 0 || sp.temperature > 2:
		return sp, fmt.Sprintf("Invalid 'temperature': want a number between 0 and 2, got %v.", sp.temperature)
	case sp.topP <= 0 || sp.topP > 1:
		return sp, fmt.Sprintf("Invalid 'top_p': want a number in (0, 1], got %v.", sp.topP)
	case sp.topK < -1:
		return sp, fmt.Sprintf("Invalid 'top_k': want -1, 0 or a positive integer, got %d.", sp.topK)
	}
	stops, ok := stringOrList(stop)
	if !ok {
		return sp, "Invalid 'stop': want a string or an array of strings."
	}
	sp.stopStrs = stops
	return sp, ""
}

type openaiTop struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type openaiTokenLogprob struct {
	Token       string      `json:"token"`
	Logprob     float64     `json:"logprob"`
	Bytes       []int       `json:"bytes"`
	TopLogprobs []openaiTop `json:"top_logprobs"`
}

// openaiLogprobs lists each generated token except a trailing EOS (which is not text).
func (s *Server) openaiLogprobs(res genResult) []openaiTokenLogprob {
	out := []openaiTokenLogprob{}
	for i, id := range res.ids {
		if s.model.v.special[id] {
			continue
		}
		e := openaiTokenLogprob{Token: s.tokenString(id), Logprob: res.lps[i], Bytes: byteInts(s.model.v.tokens[id]), TopLogprobs: []openaiTop{}}
		if i < len(res.tops) {
			for _, c := range res.tops[i] {
				e.TopLogprobs = append(e.TopLogprobs, openaiTop{Token: s.tokenString(c.id), Logprob: clampLog(c.p), Bytes: byteInts(s.model.v.tokens[c.id])})
			}
		}
		out = append(out, e)
	}
	return out
}

func byteInts(b []byte) []int {
	out := make([]int, len(b))
	for i, x := range b {
		out[i] = int(x)
	}
	return out
}

// Responses API.

type responsesReq struct {
	Model           *string           `json:"model"`
	Input           json.RawMessage   `json:"input"`
	Instructions    *string           `json:"instructions"`
	Tools           []json.RawMessage `json:"tools"`
	ToolChoice      json.RawMessage   `json:"tool_choice"`
	MaxOutputTokens *int              `json:"max_output_tokens"`
	Temperature     *float64          `json:"temperature"`
	TopP            *float64          `json:"top_p"`
	TopLogprobs     *int              `json:"top_logprobs"`
	Include         []string          `json:"include"`
	Seed            *int64            `json:"seed"`
	Store           *bool             `json:"store"`
	Stream          bool              `json:"stream"`
}

type responseItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

func (s *Server) responses(body []byte, f *Fault, epoch uint64) reply {
	bad := func(msg string, param any) reply {
		return s.apiErr(famOpenAI, apiError{status: 400, msg: msg, typ: "invalid_request_error", param: param})
	}
	var req responsesReq
	if err := jsonx.Unmarshal(body, &req); err != nil {
		return bad("We could not parse the JSON body of your request: "+err.Error(), nil)
	}
	if !s.modelOK(req.Model) {
		return s.apiErr(famOpenAI, apiError{status: 404, msg: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", *req.Model),
			typ: "invalid_request_error", code: "model_not_found"})
	}
	if req.Stream {
		return bad("stream=true on /v1/responses is not supported by the simulated server; send stream=false.", "stream")
	}
	mode, ok := toolChoice(req.ToolChoice)
	if !ok {
		return bad("Invalid value for 'tool_choice'.", "tool_choice")
	}
	var msgs []any
	if req.Instructions != nil && *req.Instructions != "" {
		msgs = append(msgs, map[string]any{"role": "system", "content": *req.Instructions})
	}
	var asString string
	if jsonx.Unmarshal(req.Input, &asString) == nil {
		msgs = append(msgs, map[string]any{"role": "user", "content": asString})
	} else {
		var items []responseItem
		if err := jsonx.Unmarshal(req.Input, &items); err != nil {
			return bad("Invalid 'input': want a string or an array of input items.", "input")
		}
		calls := map[string]bool{}
		var pending []any // function calls not yet closed into an assistant message
		flush := func() {
			if len(pending) > 0 {
				msgs = append(msgs, map[string]any{"role": "assistant", "content": "", "tool_calls": pending})
				pending = nil
			}
		}
		for i, it := range items {
			switch {
			case it.Type == "function_call":
				calls[it.CallID] = true
				pending = append(pending, map[string]any{"id": it.CallID, "type": "function",
					"function": map[string]any{"name": it.Name, "arguments": it.Arguments}})
			case it.Type == "function_call_output":
				flush()
				if !calls[it.CallID] {
					return bad(fmt.Sprintf("No tool call found for function call output with call_id %s.", it.CallID), "input")
				}
				out, _ := contentText(it.Output)
				msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": it.CallID, "content": out})
			case it.Type == "reasoning":
				// reasoning items carry no visible text for the template
			case it.Type == "message" || (it.Type == "" && it.Role != ""):
				flush()
				text, ok := contentText(it.Content)
				if !ok {
					return bad(fmt.Sprintf("Invalid 'input[%d].content'.", i), fmt.Sprintf("input[%d].content", i))
				}
				role := it.Role
				if role == "developer" {
					role = "system"
				}
				if role != "user" && role != "system" && role != "assistant" {
					return bad(fmt.Sprintf("Invalid 'input[%d].role': '%s'.", i, it.Role), fmt.Sprintf("input[%d].role", i))
				}
				msgs = append(msgs, map[string]any{"role": role, "content": text})
			default:
				return bad(fmt.Sprintf("Invalid 'input[%d].type': '%s'.", i, it.Type), fmt.Sprintf("input[%d].type", i))
			}
		}
		flush()
	}
	if len(msgs) == 0 {
		return bad("Invalid 'input': empty.", "input")
	}
	var tools []any
	var flat []any
	for _, raw := range req.Tools {
		var t map[string]any
		if jsonx.Unmarshal(raw, &t) != nil {
			return bad("Invalid 'tools': each tool must be a JSON object.", "tools")
		}
		flat = append(flat, t)
		fnDef := map[string]any{"name": t["name"]}
		if d, ok := t["description"]; ok {
			fnDef["description"] = d
		}
		if p, ok := t["parameters"]; ok {
			fnDef["parameters"] = p
		}
		tools = append(tools, map[string]any{"type": "function", "function": fnDef})
	}
	prompt, err := s.render(msgs, tools)
	if err != nil {
		return s.apiErr(famOpenAI, apiError{status: 500, msg: err.Error(), typ: "server_error"})
	}
	maxTok := s.cfg.MaxModelLen - len(prompt)
	if req.MaxOutputTokens != nil {
		maxTok = *req.MaxOutputTokens
	}
	if len(prompt)+maxTok > s.cfg.MaxModelLen || maxTok < 0 {
		return s.apiErr(famOpenAI, apiError{status: 400, typ: "invalid_request_error", param: "input", code: "context_length_exceeded",
			msg: fmt.Sprintf("Your input exceeds the context window of this model (%d tokens; the input has %d and %d were requested for output).",
				s.cfg.MaxModelLen, len(prompt), max(0, maxTok))})
	}
	sp, msg := s.openaiSampling(req.Temperature, req.TopP, nil, nil, maxTok)
	if msg != "" {
		return bad(msg, nil)
	}
	wantLP := false
	for _, inc := range req.Include {
		wantLP = wantLP || inc == "message.output_text.logprobs"
	}
	if req.TopLogprobs != nil {
		sp.topN = *req.TopLogprobs
	}
	if req.Seed != nil {
		sp.seed = uint64(*req.Seed)
	} else {
		sp.seed = s.nextSeed()
	}
	results, err := s.runAll([]seqReq{{prompt: prompt, s: sp, mode: mode, fault: f, epoch: epoch}})
	if err != nil {
		return s.apiErr(famOpenAI, apiError{status: 503, msg: err.Error(), typ: "server_error"})
	}
	res := results[0]
	id := s.nextID()
	text := s.outputText(res, true, false)
	var output []any
	reasoningTokens := 0
	if i, j := strings.Index(text, "<think>"), strings.Index(text, "</think>"); i >= 0 && j > i {
		summary := strings.TrimSpace(text[i+len("<think>") : j])
		output = append(output, map[string]any{"type": "reasoning", "id": "rs_" + hexID(id),
			"summary": []any{map[string]any{"type": "summary_text", "text": summary}}})
		thinkIDs, _ := s.encode(text[:j+len("</think>")])
		reasoningTokens = len(thinkIDs)
		text = strings.TrimSpace(text[j+len("</think>"):])
	}
	content, calls := text, []parsedCall(nil)
	if len(tools) > 0 && !mode.never {
		content, calls = splitToolCalls(text)
	}
	incomplete := res.finish != "stop"
	itemStatus := "completed"
	if incomplete {
		itemStatus = "incomplete"
	}
	for ci, pc := range calls {
		output = append(output, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%s%d", hexID(id), ci),
			"call_id": fmt.Sprintf("call_%s%d", hexID(id+1), ci), "name": pc.name, "arguments": pc.arguments, "status": "completed"})
	}
	if len(calls) == 0 || content != "" {
		part := map[string]any{"type": "output_text", "text": content, "annotations": []any{}}
		if wantLP && (f == nil || f.Kind != FaultMissingLogprobs) {
			part["logprobs"] = s.openaiLogprobs(res)
		} else {
			part["logprobs"] = []any{}
		}
		output = append(output, map[string]any{"type": "message", "id": "msg_" + hexID(id), "status": itemStatus,
			"role": "assistant", "content": []any{part}})
	}
	respStatus, details := "completed", any(nil)
	if incomplete {
		respStatus, details = "incomplete", map[string]any{"reason": "max_output_tokens"}
	}
	if flat == nil {
		flat = []any{}
	}
	// The prefix cache stores every prompt it serves: what it did not reuse it wrote.
	written := 0
	if !s.cfg.Cache.Disabled {
		written = len(prompt) - res.cached
	}
	return jsonReply(200, map[string]any{
		"id": "resp_" + hexID(id), "object": "response", "created_at": now(), "status": respStatus,
		"model": s.name, "error": nil, "incomplete_details": details, "instructions": req.Instructions,
		"max_output_tokens": req.MaxOutputTokens, "output": output, "parallel_tool_calls": true,
		"temperature": sp.temperature, "top_p": sp.topP, "tools": flat, "tool_choice": rawOr(req.ToolChoice, "auto"),
		"store": req.Store == nil || *req.Store, "truncation": "disabled",
		// ResponseUsage.input_tokens_details requires cache_write_tokens (openai 3.57.0
		// types/responses/response_usage.py).
		"usage": map[string]any{"input_tokens": len(prompt), "input_tokens_details": map[string]any{"cached_tokens": res.cached, "cache_write_tokens": written},
			"output_tokens": len(res.ids), "output_tokens_details": map[string]any{"reasoning_tokens": reasoningTokens},
			"total_tokens": len(prompt) + len(res.ids)},
	})
}

func rawOr(raw json.RawMessage, def string) any {
	if isNull(raw) {
		return def
	}
	return raw
}
