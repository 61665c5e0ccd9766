package openai

import (
	"encoding/json"

	"github.com/focus-go/focus-go/core/generate"
)

// ToolCall is one structured tool call the model made (focus NativeToolCall). Arguments is
// the model's JSON text as returned, which may be invalid JSON.
type ToolCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
}

// Result is one parsed reply (the native form of focus GenerateResult).
type Result struct {
	ID string `json:"id"`
	// Text is the visible answer (a refusal's text when the model refused).
	Text string `json:"text"`
	// Reasoning is the reasoning text or summary the server exposed, if any.
	Reasoning string     `json:"reasoning"`
	ToolCalls []ToolCall `json:"tool_calls"`
	// StopReason is the focus stop reason: "stop" (including a turn that ends in tool
	// calls), "length" (the output limit) or "abort" (cut off by a content filter, or a
	// cancelled response). FinishReason is the server's own word for it.
	StopReason   string `json:"stop_reason"`
	FinishReason string `json:"finish_reason"`
	// Tokens are estimated ids of the output (EstimateTokens of the text and the tool calls):
	// API models return no token ids. They count, they do not train.
	Tokens []uint32 `json:"tokens"`
	// Logprobs are the server's per-token logprobs when it returned them (aligned with the
	// server's tokens, not with Tokens); TopLogprobs the alternatives by token text.
	Logprobs    []float64            `json:"logprobs"`
	TopLogprobs []map[string]float64 `json:"top_logprobs"`
	Entropy     float64              `json:"entropy"`
	// Native holds the raw reply: Chat's choice message, or the Responses output items.
	Native           []json.RawMessage `json:"native_output"`
	PromptTokens     int               `json:"prompt_tokens"`
	CompletionTokens int               `json:"completion_tokens"`
	CachedTokens     int               `json:"cached_tokens"`
	ReasoningTokens  int               `json:"reasoning_tokens"`
}

// finish fills the derived fields.
func (r *Result) finish() {
	if r.ToolCalls == nil {
		r.ToolCalls = []ToolCall{}
	}
	if r.Logprobs == nil {
		r.Logprobs = []float64{}
	}
	r.Tokens = EstimateTokens(r.estimateText())
	r.Entropy = generate.SampleEntropy(r.Logprobs)
}
