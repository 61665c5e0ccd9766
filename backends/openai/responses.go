package openai

import (
	"encoding/json"
	"strings"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

type responsesBody struct {
	Model           string            `json:"model"`
	Input           []json.RawMessage `json:"input"`
	Instructions    string            `json:"instructions,omitempty"`
	Tools           []map[string]any  `json:"tools,omitempty"`
	ToolChoice      any               `json:"tool_choice,omitempty"`
	Temperature     *float64          `json:"temperature,omitempty"`
	TopP            *float64          `json:"top_p,omitempty"`
	MaxOutputTokens *int              `json:"max_output_tokens,omitempty"`
	TopLogprobs     *int              `json:"top_logprobs,omitempty"`
	Include         []string          `json:"include,omitempty"`
	Reasoning       *reasoning        `json:"reasoning,omitempty"`
}

type reasoning struct {
	Effort string `json:"effort"`
}

// responsesBody builds the Responses request: messages become message items, an assistant's
// tool calls function_call items, and tool messages function_call_output items linked by
// call_id (the API links them by call_id, not by item id).
func (c *Client) responsesBody(req Request) (*responsesBody, error) {
	s, err := toSampling(Responses, req.Params)
	if err != nil {
		return nil, err
	}
	b := &responsesBody{Model: c.cfg.Model, ToolChoice: responsesToolChoice(req.ToolChoice),
		Temperature: s.temperature, TopP: s.topP, MaxOutputTokens: s.maxTokens}
	if s.logprobs != nil {
		b.Include, b.TopLogprobs = []string{"message.output_text.logprobs"}, s.logprobs
	}
	if c.cfg.ReasoningEffort != "" {
		b.Reasoning = &reasoning{Effort: c.cfg.ReasoningEffort}
	}
	if c.cfg.SystemPrompt != "" && !opensWithSystem(req.Messages) {
		b.Instructions = c.cfg.SystemPrompt
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "tool":
			b.Input = append(b.Input, mustJSON(map[string]any{"type": "function_call_output", "call_id": m.ToolCallID, "output": m.text()}))
		case "assistant":
			if text := m.text(); text != "" || len(m.ToolCalls) == 0 {
				b.Input = append(b.Input, mustJSON(map[string]any{"type": "message", "role": "assistant", "content": text}))
			}
			for _, tc := range m.ToolCalls {
				b.Input = append(b.Input, mustJSON(map[string]any{"type": "function_call", "call_id": tc.ID,
					"name": tc.Function.Name, "arguments": tc.arguments()}))
			}
		default:
			b.Input = append(b.Input, mustJSON(map[string]any{"type": "message", "role": m.Role, "content": rawOrString(m.Content)}))
		}
	}
	for _, t := range req.Tools {
		b.Tools = append(b.Tools, flatTool(t))
	}
	return b, nil
}

// responsesToolChoice flattens Chat's named-function choice {"type":"function","function":
// {"name":...}} into the Responses form {"type":"function","name":...}.
func responsesToolChoice(choice any) any {
	if m, ok := choice.(map[string]any); ok {
		return flatTool(m)
	}
	return choice
}

type responsesResponse struct {
	ID                string            `json:"id"`
	Status            string            `json:"status"`
	Output            []json.RawMessage `json:"output"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Usage *struct {
		InputTokens        int `json:"input_tokens"`
		OutputTokens       int `json:"output_tokens"`
		InputTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokensDetails *struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
}

type outputItem struct {
	Type      string `json:"type"`
	Role      string `json:"role"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type     string         `json:"type"`
		Text     string         `json:"text"`
		Refusal  string         `json:"refusal"`
		Logprobs []tokenLogprob `json:"logprobs"`
	} `json:"content"`
	Summary []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

// responsesFinish maps status (and incomplete_details.reason) to a focus stop reason.
func responsesFinish(r *responsesResponse) (stop, finish string, err error) {
	switch r.Status {
	case "completed":
		return generate.StopReasonStop, "completed", nil
	case "incomplete":
		reason := ""
		if r.IncompleteDetails != nil {
			reason = r.IncompleteDetails.Reason
		}
		if reason == "max_output_tokens" {
			return generate.StopReasonLength, reason, nil
		}
		return generate.StopReasonAbort, reason, nil
	case "cancelled":
		return generate.StopReasonAbort, "cancelled", nil
	case "failed":
		msg := "(no error message)"
		if r.Error != nil {
			msg = r.Error.Code + ": " + r.Error.Message
		}
		return "", "", status.Errorf(status.Backend, "%s: response %q failed: %s", Name, r.ID, msg)
	}
	return "", "", status.Errorf(status.Backend, "%s: response %q has status %q, expected completed or incomplete", Name, r.ID, r.Status)
}

func parseResponses(body []byte) (*Result, error) {
	var r responsesResponse
	if err := transport.JSON.Unmarshal(body, &r); err != nil {
		return nil, status.Wrap(status.Backend, err, "%s: response is not the expected JSON object", Name)
	}
	stop, finish, err := responsesFinish(&r)
	if err != nil {
		return nil, err
	}
	res := &Result{ID: r.ID, StopReason: stop, FinishReason: finish, Native: r.Output}
	var text, thought strings.Builder
	var entries []tokenLogprob
	for i, raw := range r.Output {
		var it outputItem
		if err := transport.JSON.Unmarshal(raw, &it); err != nil {
			return nil, status.Wrap(status.Backend, err, "%s: response %q: output[%d] is not an output item", Name, r.ID, i)
		}
		switch it.Type {
		case "message":
			for _, part := range it.Content {
				switch part.Type {
				case "output_text":
					text.WriteString(part.Text)
					entries = append(entries, part.Logprobs...)
				case "refusal":
					text.WriteString(part.Refusal)
				}
			}
		case "function_call":
			if it.Name == "" || it.CallID == "" {
				return nil, status.Errorf(status.Backend, "%s: response %q: output[%d] is a function call without name or call_id", Name, r.ID, i)
			}
			res.ToolCalls = append(res.ToolCalls, ToolCall{Name: it.Name, Arguments: it.Arguments, CallID: it.CallID})
		case "reasoning":
			for _, s := range it.Summary {
				if thought.Len() > 0 {
					thought.WriteByte('\n')
				}
				thought.WriteString(s.Text)
			}
		}
		// Other items (built-in tool calls) stay in Native only.
	}
	res.Text, res.Reasoning = text.String(), thought.String()
	if len(entries) > 0 {
		res.Logprobs, res.TopLogprobs = readLogprobs(entries)
	}
	if u := r.Usage; u != nil {
		res.PromptTokens, res.CompletionTokens = u.InputTokens, u.OutputTokens
		if u.InputTokensDetails != nil {
			res.CachedTokens = u.InputTokensDetails.CachedTokens
		}
		if u.OutputTokensDetails != nil {
			res.ReasoningTokens = u.OutputTokensDetails.ReasoningTokens
		}
	}
	if res.Native == nil {
		res.Native = []json.RawMessage{}
	}
	res.finish()
	return res, nil
}
