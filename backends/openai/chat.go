package openai

import (
	"encoding/json"
	"strings"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Name       string          `json:"name,omitempty"`
}

type chatBody struct {
	Model               string           `json:"model"`
	Messages            []chatMessage    `json:"messages"`
	Tools               []map[string]any `json:"tools,omitempty"`
	ToolChoice          any              `json:"tool_choice,omitempty"`
	Temperature         *float64         `json:"temperature,omitempty"`
	TopP                *float64         `json:"top_p,omitempty"`
	MaxCompletionTokens *int             `json:"max_completion_tokens,omitempty"`
	Stop                []string         `json:"stop,omitempty"`
	Seed                *int64           `json:"seed,omitempty"`
	Logprobs            bool             `json:"logprobs,omitempty"`
	TopLogprobs         *int             `json:"top_logprobs,omitempty"`
	ReasoningEffort     string           `json:"reasoning_effort,omitempty"`
}

// chatBody builds the Chat Completions request. max_completion_tokens replaces the
// deprecated max_tokens, which reasoning models reject.
func (c *Client) chatBody(req Request) (*chatBody, error) {
	s, err := toSampling(Chat, req.Params)
	if err != nil {
		return nil, err
	}
	b := &chatBody{Model: c.cfg.Model, ToolChoice: req.ToolChoice, Temperature: s.temperature, TopP: s.topP,
		MaxCompletionTokens: s.maxTokens, Stop: s.stop, Seed: s.seed, ReasoningEffort: c.cfg.ReasoningEffort}
	if s.logprobs != nil {
		b.Logprobs, b.TopLogprobs = true, s.logprobs
	}
	if c.cfg.SystemPrompt != "" && !opensWithSystem(req.Messages) {
		b.Messages = append(b.Messages, chatMessage{Role: "system", Content: mustJSON(c.cfg.SystemPrompt)})
	}
	for _, m := range req.Messages {
		cm := chatMessage{Role: m.Role, Content: rawOrString(m.Content), ToolCallID: m.ToolCallID, Name: m.Name}
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			if m.text() == "" {
				cm.Content = json.RawMessage("null") // the API's form for a pure tool-call turn
			}
			for _, tc := range m.ToolCalls {
				call := chatToolCall{ID: tc.ID, Type: "function"}
				call.Function.Name, call.Function.Arguments = tc.Function.Name, tc.arguments()
				cm.ToolCalls = append(cm.ToolCalls, call)
			}
		}
		if m.Role != "tool" {
			cm.ToolCallID = ""
		}
		b.Messages = append(b.Messages, cm)
	}
	for _, t := range req.Tools {
		b.Tools = append(b.Tools, chatTool(t))
	}
	return b, nil
}

type tokenLogprob struct {
	Token       string   `json:"token"`
	Logprob     *float64 `json:"logprob"`
	TopLogprobs []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
	} `json:"top_logprobs"`
}

type chatResponse struct {
	ID      string `json:"id"`
	Choices []struct {
		Message      json.RawMessage `json:"message"`
		FinishReason *string         `json:"finish_reason"`
		Logprobs     *struct {
			Content []tokenLogprob `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails *struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

// chatFinish maps finish_reason to a focus stop reason. A tool-call finish is "stop": the
// model ended its turn normally, with calls instead of (or besides) text; "content_filter"
// is "abort", a cut-off answer.
func chatFinish(reason string) (string, error) {
	switch reason {
	case "stop", "tool_calls", "function_call":
		return generate.StopReasonStop, nil
	case "length":
		return generate.StopReasonLength, nil
	case "content_filter":
		return generate.StopReasonAbort, nil
	}
	return "", status.Errorf(status.Backend, "%s: unknown finish_reason %q, expected stop, length, tool_calls or content_filter", Name, reason)
}

func parseChat(body []byte) (*Result, error) {
	var r chatResponse
	if err := transport.JSON.Unmarshal(body, &r); err != nil {
		return nil, status.Wrap(status.Backend, err, "%s: chat completion is not the expected JSON object", Name)
	}
	if len(r.Choices) == 0 {
		return nil, status.Errorf(status.Backend, "%s: chat completion %q has no choices", Name, r.ID)
	}
	ch := r.Choices[0]
	if ch.FinishReason == nil {
		return nil, status.Errorf(status.Backend, "%s: chat completion %q has no finish_reason (an unfinished stream chunk?)", Name, r.ID)
	}
	var msg struct {
		Content          *string        `json:"content"`
		Refusal          *string        `json:"refusal"`
		ReasoningContent *string        `json:"reasoning_content"`
		Reasoning        *string        `json:"reasoning"`
		ToolCalls        []chatToolCall `json:"tool_calls"`
	}
	if err := transport.JSON.Unmarshal(ch.Message, &msg); err != nil {
		return nil, status.Wrap(status.Backend, err, "%s: chat completion %q: message is not the expected object", Name, r.ID)
	}
	stop, err := chatFinish(*ch.FinishReason)
	if err != nil {
		return nil, err
	}
	res := &Result{ID: r.ID, StopReason: stop, FinishReason: *ch.FinishReason, Native: []json.RawMessage{ch.Message}}
	switch {
	case msg.Content != nil:
		res.Text = *msg.Content
	case msg.Refusal != nil:
		res.Text = *msg.Refusal
	}
	// vLLM and SGLang reasoning parsers put the thinking here; OpenAI keeps it server-side.
	if msg.ReasoningContent != nil {
		res.Reasoning = *msg.ReasoningContent
	} else if msg.Reasoning != nil {
		res.Reasoning = *msg.Reasoning
	}
	for i, tc := range msg.ToolCalls {
		if tc.Function.Name == "" {
			return nil, status.Errorf(status.Backend, "%s: chat completion %q: tool_calls[%d] has no function name", Name, r.ID, i)
		}
		// Arguments pass on as the model wrote them, valid JSON or not: the parser and the
		// environment decide what a malformed call means.
		res.ToolCalls = append(res.ToolCalls, ToolCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments, CallID: tc.ID})
	}
	if ch.Logprobs != nil {
		res.Logprobs, res.TopLogprobs = readLogprobs(ch.Logprobs.Content)
	}
	if u := r.Usage; u != nil {
		res.PromptTokens, res.CompletionTokens = u.PromptTokens, u.CompletionTokens
		if u.PromptTokensDetails != nil {
			res.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
		if u.CompletionTokensDetails != nil {
			res.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
		}
	}
	res.finish()
	return res, nil
}

// readLogprobs turns the per-token entries into sampled logprobs and, when the server sent
// alternatives, token-text -> logprob maps. A null logprob (not offered for that token) ends
// the list: what follows could not be aligned.
func readLogprobs(entries []tokenLogprob) ([]float64, []map[string]float64) {
	lps := make([]float64, 0, len(entries))
	var tops []map[string]float64
	for _, e := range entries {
		if e.Logprob == nil {
			break
		}
		lps = append(lps, *e.Logprob)
		if len(e.TopLogprobs) > 0 {
			if tops == nil {
				tops = make([]map[string]float64, len(lps)-1, len(entries))
			}
			m := make(map[string]float64, len(e.TopLogprobs))
			for _, t := range e.TopLogprobs {
				m[t.Token] = t.Logprob
			}
			tops = append(tops, m)
		} else if tops != nil {
			tops = append(tops, map[string]float64{})
		}
	}
	return lps, tops
}

// estimateText is what the estimated output tokens count: the visible text, then each tool
// call as the JSON a chat template would write.
func (r *Result) estimateText() string {
	var b strings.Builder
	b.WriteString(r.Text)
	for _, c := range r.ToolCalls {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.Write(mustJSON(map[string]string{"name": c.Name, "arguments": c.Arguments}))
	}
	return b.String()
}
