package sim

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Streaming (stream=true) in each server's server-sent-event format. A sequence is
// generated whole, as without streaming (generation is a pure function of the request),
// then written as one event per generated token and "data: [DONE]"; the events carry
// exactly what the whole reply carries, so concatenating a stream's deltas gives the
// non-streaming text, ids and logprobs. Event timing is not simulated: the body is sent
// at once (Config.Latency still delays the request as a whole).

// sseReply is a text/event-stream body: "data: <event>\n\n" per event, then [DONE].
func sseReply(events [][]byte) reply {
	n := len("data: [DONE]\n\n")
	for _, e := range events {
		n += len(e) + 8
	}
	b := make([]byte, 0, n)
	for _, e := range events {
		b = append(b, "data: "...)
		b = append(b, e...)
		b = append(b, "\n\n"...)
	}
	b = append(b, "data: [DONE]\n\n"...)
	return reply{status: 200, body: b, contentType: "text/event-stream"}
}

// mustJSON encodes an event; the values are built here and always encode.
func mustJSON(v any) []byte {
	b, err := jsonx.Marshal(v)
	if err != nil {
		return []byte(`{"error":{"message":"sim: encoding a stream event failed"}}`)
	}
	return b
}

// textDeltas splits final, the reply text of res, into one delta per generated token:
// delta k is what decoding the first k+1 tokens adds, held back while it is not yet a
// prefix of final (a stop string still to be trimmed, an incomplete UTF-8 sequence), as
// the servers' incremental detokenizers hold text back. The deltas concatenate to final.
func (s *Server) textDeltas(res genResult, final string, skipSpecial bool) []string {
	out := make([]string, len(res.ids))
	sent := 0
	for k := range res.ids {
		if k == len(res.ids)-1 {
			out[k] = final[sent:]
			break
		}
		text := s.decode(res.ids[:k+1], skipSpecial)
		n := validPrefix(final, sent, max(commonPrefix([]byte(text), final), sent))
		out[k] = final[sent:n]
		sent = n
	}
	return out
}

// validPrefix shortens s[from:to] to end on a rune boundary of s.
func validPrefix(s string, from, to int) int {
	for to > from && to < len(s) && !utf8.RuneStart(s[to]) {
		to--
	}
	return to
}

// streamOptions is the OpenAI stream_options object.
type streamOptions struct {
	IncludeUsage         bool `json:"include_usage"`
	ContinuousUsageStats bool `json:"continuous_usage_stats"`
}

// sglangStream writes /generate results as SGLang 0.5.23 streams them by default (no
// --incremental-streaming-output; managers/tokenizer_manager.py): every event is the
// whole reply so far, cumulative text, output_ids and logprobs, finish_reason null until
// the last event, which equals the non-streaming reply.
func (s *Server) sglangStream(items []sglItem, results []genResult, metas []sglStreamMeta) reply {
	var events [][]byte
	for k := range items {
		res, it := results[k], items[k]
		deltas := s.textDeltas(res, it.Text, metas[k].skip)
		text := ""
		for j := 0; j+1 < len(res.ids); j++ {
			text += deltas[j]
			part := it
			part.Text = text
			part.OutputIDs = it.OutputIDs[:len(it.OutputIDs)-len(res.ids)+j+1]
			m := it.MetaInfo
			m.FinishReason = nil
			m.CompletionTokens = j + 1
			if it.MetaInfo.OutputTokenLogprobs != nil {
				tr := *it.MetaInfo.OutputTokenLogprobs
				tr.ids, tr.lps = tr.ids[:j+1], tr.lps[:j+1]
				if tr.texts != nil {
					tr.texts = tr.texts[:j+1]
				}
				m.OutputTokenLogprobs = &tr
				m.OutputTopLogprobs = it.MetaInfo.OutputTopLogprobs[:j+1]
			}
			part.MetaInfo = m
			events = append(events, sglReply([]sglItem{part}, true).body)
		}
		events = append(events, sglReply([]sglItem{it}, true).body)
	}
	return sseReply(events)
}

// sglStreamMeta is what sglangStream needs of a request beyond its item.
type sglStreamMeta struct{ skip bool }

// completionStream writes a /v1/completions reply as vLLM 0.33.0 streams it
// (entrypoints/openai/completion/serving.py): one CompletionStreamResponse per token per
// choice (model_dump_json(exclude_unset=True): every choice field present, null when
// unset; no usage), finish_reason and stop_reason on the last, then with
// stream_options.include_usage one event with choices [] and the usage.
func (s *Server) completionStream(resp cmplResp, results []genResult, skip bool, opts *streamOptions, withIDs bool, prompts [][]uint32) reply {
	type choice struct {
		Index          int           `json:"index"`
		Text           string        `json:"text"`
		Logprobs       *cmplLogprobs `json:"logprobs"`
		FinishReason   *string       `json:"finish_reason"`
		StopReason     any           `json:"stop_reason"`
		PromptTokenIDs []uint32      `json:"prompt_token_ids"`
		TokenIDs       []uint32      `json:"token_ids"`
		WeightVersions any           `json:"weight_versions"`
	}
	type event struct {
		ID               string   `json:"id"`
		Object           string   `json:"object"`
		Created          int64    `json:"created"`
		Model            string   `json:"model"`
		Choices          []choice `json:"choices"`
		Usage            *usage   `json:"usage,omitempty"`
		KVTransferParams any      `json:"kv_transfer_params"`
	}
	var events [][]byte
	for k, c := range resp.Choices {
		res := results[k]
		deltas := s.textDeltas(res, c.Text, skip)
		if len(res.ids) == 0 {
			deltas = []string{c.Text}
		}
		for j := range deltas {
			ch := choice{Index: c.Index, Text: deltas[j]}
			if j == 0 && withIDs {
				ch.PromptTokenIDs = prompts[k]
			}
			if withIDs && j < len(res.ids) {
				ch.TokenIDs = res.ids[j : j+1]
			}
			if c.Logprobs != nil && j < len(res.ids) {
				lp := c.Logprobs
				ch.Logprobs = &cmplLogprobs{TextOffset: lp.TextOffset[j : j+1], TokenLogprobs: lp.TokenLogprobs[j : j+1],
					Tokens: lp.Tokens[j : j+1], TopLogprobs: lp.TopLogprobs[j : j+1]}
			}
			if j == len(deltas)-1 {
				fr := c.FinishReason
				ch.FinishReason, ch.StopReason = &fr, c.StopReason
			}
			ev := event{ID: resp.ID, Object: resp.Object, Created: resp.Created, Model: resp.Model, Choices: []choice{ch}}
			if opts != nil && opts.ContinuousUsageStats {
				u := usage{PromptTokens: len(prompts[k]), CompletionTokens: j + 1}
				u.TotalTokens = u.PromptTokens + u.CompletionTokens
				ev.Usage = &u
			}
			events = append(events, mustJSON(ev))
		}
	}
	if opts != nil && opts.IncludeUsage {
		events = append(events, mustJSON(map[string]any{"id": resp.ID, "object": resp.Object, "created": resp.Created,
			"model": resp.Model, "choices": []any{}, "usage": resp.Usage}))
	}
	return sseReply(events)
}

// chatStreamChoice is one chat choice, as chatCompletions built it, for chatStream.
type chatStreamChoice struct {
	index     int
	content   *string
	toolCalls []any // {"index", "id", "type", "function": {"name", "arguments"}}
	logprobs  []openaiTokenLogprob
	hasLPs    bool
	finish    string
	res       genResult
}

// chatStream writes a chat completion as vLLM 0.33.0 streams it
// (entrypoints/openai/chat_completion/serving.py): per choice a first event with
// delta {"role": "assistant", "content": ""}, one content delta per generated token
// (with that token's logprobs), the tool calls in one delta, finish_reason on the last
// event; then with stream_options.include_usage one event with choices [] and the usage.
func (s *Server) chatStream(id string, created int64, choices []chatStreamChoice, usage map[string]any, opts *streamOptions) reply {
	type choice struct {
		Index        int            `json:"index"`
		Delta        map[string]any `json:"delta"`
		Logprobs     any            `json:"logprobs"`
		FinishReason *string        `json:"finish_reason"`
	}
	event := func(c choice) []byte {
		return mustJSON(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created,
			"model": s.name, "choices": []choice{c}})
	}
	var events [][]byte
	for _, c := range choices {
		events = append(events, event(choice{Index: c.index, Delta: map[string]any{"role": "assistant", "content": ""}}))
		content := ""
		if c.content != nil {
			content = *c.content
		}
		deltas := s.textDeltas(c.res, content, true)
		if c.content == nil || len(deltas) == 0 {
			// Tool-call turns (no visible content) and empty replies: the text deltas are
			// not the content, so the logprobs go per token with empty content.
			deltas = make([]string, max(len(c.res.ids), 1))
			if len(deltas) > 0 {
				deltas[len(deltas)-1] = content
			}
		}
		lp := 0
		for j, d := range deltas {
			ch := choice{Index: c.index, Delta: map[string]any{"content": d}}
			if c.hasLPs && j < len(c.res.ids) {
				var entries []openaiTokenLogprob
				if !s.model.v.special[c.res.ids[j]] && lp < len(c.logprobs) {
					entries = c.logprobs[lp : lp+1]
					lp++
				} else {
					entries = []openaiTokenLogprob{}
				}
				ch.Logprobs = map[string]any{"content": entries, "refusal": nil}
			}
			last := j == len(deltas)-1
			if last && len(c.toolCalls) > 0 {
				events = append(events, event(ch))
				ch = choice{Index: c.index, Delta: map[string]any{"tool_calls": c.toolCalls}}
			}
			if last {
				fr := c.finish
				ch.FinishReason = &fr
			}
			events = append(events, event(ch))
		}
	}
	if opts != nil && opts.IncludeUsage {
		events = append(events, mustJSON(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created,
			"model": s.name, "choices": []any{}, "usage": usage}))
	}
	return sseReply(events)
}

// streamOptionsOK checks stream_options against stream as vLLM does.
func streamOptionsOK(raw json.RawMessage, stream bool) (*streamOptions, string) {
	if isNull(raw) {
		return nil, ""
	}
	if !stream {
		return nil, "Stream options can only be defined when `stream=True`."
	}
	var o streamOptions
	if err := jsonx.Unmarshal(raw, &o); err != nil {
		return nil, "stream_options must be an object: " + strings.TrimSpace(err.Error())
	}
	return &o, ""
}
