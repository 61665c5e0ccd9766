package parse

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/focus-go/focus-go/core/status"
)

// Result is the part of a generated response the parsers read (GenerateResult in Python).
type Result struct {
	// Tokens are the generated token ids.
	Tokens []uint32
	// Text is the generated text.
	Text string
	// StopReason is the finish reason: "stop" (EOS, a stop string or stop token),
	// "length" (max_tokens reached), "abort", "tool_calls", ...
	StopReason string
	// NativeToolCalls are a backend's structured tool calls (OpenAI tool_calls), if any.
	NativeToolCalls []ToolCall
}

// TokenChunk is one exact-token segment: the generated ids and whether the model finished
// its response (false: generation can continue from this prefix).
type TokenChunk struct {
	Tokens   []uint32
	Finished bool
}

// ToolCall is one tool call: the function name and its arguments as a JSON object string.
type ToolCall struct {
	Name      string
	Arguments string
	CallID    string
	// Error is empty for a well-formed call. Otherwise it says why the call could not be
	// decoded; Name is the best name found ("" if none) and Arguments the raw block text.
	Error string
}

// Malformed reports whether the call could not be decoded.
func (c ToolCall) Malformed() bool { return c.Error != "" }

// ToolTurn is a parsed assistant turn: visible text, tool calls in order, and reasoning.
type ToolTurn struct {
	Text      string
	ToolCalls []ToolCall
	Reasoning string
}

// Malformed reports whether any tool call of the turn could not be decoded.
func (t ToolTurn) Malformed() bool {
	for _, c := range t.ToolCalls {
		if c.Malformed() {
			return true
		}
	}
	return false
}

// ErrAborted is returned for a response the server aborted (finish reason "abort"): the
// generation was cut off by the server or its router, not finished by the model. Callers
// test for it with errors.Is; trainers treat such a branch as aborted, not as a reward.
var ErrAborted error = &status.Error{Code: status.Backend, Msg: "parse: finish reason \"abort\": the server aborted the generation"}

// ToolCallPattern matches serialized tool-call blocks: TOOL_CALL =
// re.compile('<tool_call>(.*?)</tool_call>', re.DOTALL). Group 1 is the block body.
var ToolCallPattern = regexp.MustCompile(`(?s)<tool_call>(.*?)</tool_call>`)

// BuildToolTurn parses a completion into a tool-calling turn with decode applied to the body
// of each ToolCallPattern block (tool_turn in Python): reasoning is split off first (see
// SplitReasoning), calls are read from the rest, and Text is what remains outside the
// blocks, trimmed.
func BuildToolTurn(text string, decode func(block string) ToolCall) ToolTurn {
	return buildTurn(text, firstClose, decode)
}

const toolCallOpen, toolCallClose = "<tool_call>", "</tool_call>"

// firstClose ends a block at the first </tool_call> (the TOOL_CALL regex).
func firstClose(body string) int { return strings.Index(body, toolCallClose) }

// buildTurn is BuildToolTurn with the block end chosen by closeAt: given the text after a
// <tool_call>, it returns the offset of the </tool_call> that closes the block, or -1 when
// the block is not closed (that <tool_call> and everything after it stay text).
func buildTurn(text string, closeAt func(body string) int, decode func(block string) ToolCall) ToolTurn {
	reasoning, visible := SplitReasoning(text)
	var calls []ToolCall
	var rest strings.Builder
	for {
		i := strings.Index(visible, toolCallOpen)
		if i < 0 {
			break
		}
		body := visible[i+len(toolCallOpen):]
		end := closeAt(body)
		if end < 0 {
			break
		}
		rest.WriteString(visible[:i])
		calls = append(calls, decode(body[:end]))
		visible = body[end+len(toolCallClose):]
	}
	rest.WriteString(visible)
	return ToolTurn{Text: strings.TrimSpace(rest.String()), ToolCalls: calls, Reasoning: reasoning}
}

// SplitReasoning separates thinking from the visible reply. Text up to the first </think>
// (after an optional <think>) is reasoning; a lone </think> means the prompt opened the
// think block (Qwen3.5 templates end with "<think>\n"); an unclosed <think> means the
// response was cut off while thinking, so all of it after the tag is reasoning. Both parts
// are trimmed.
func SplitReasoning(text string) (reasoning, visible string) {
	const open, closing = "<think>", "</think>"
	if end := strings.Index(text, closing); end >= 0 {
		before, after := text[:end], text[end+len(closing):]
		if start := strings.Index(before, open); start >= 0 {
			return strings.TrimSpace(before[start+len(open):]), strings.TrimSpace(before[:start] + after)
		}
		return strings.TrimSpace(before), strings.TrimSpace(after)
	}
	if start := strings.Index(text, open); start >= 0 {
		return strings.TrimSpace(text[start+len(open):]), strings.TrimSpace(text[:start])
	}
	return "", strings.TrimSpace(text)
}

// ParseTokenChunk reads an exact-token segment: a "stop" finish is a finished chunk, a
// "length" finish an unfinished one (the search may branch there); any other finish reason
// is a status.Backend error, because the segment's tokens are not a clean cut.
func ParseTokenChunk(r Result) (TokenChunk, error) {
	var finished bool
	switch r.StopReason {
	case "stop":
		finished = true
	case "length":
		finished = false
	case "abort":
		return TokenChunk{}, ErrAborted
	default:
		return TokenChunk{}, status.Errorf(status.Backend, "parse: finish reason %q cannot end a token chunk, expected \"stop\" or \"length\"", r.StopReason)
	}
	return TokenChunk{Tokens: append([]uint32(nil), r.Tokens...), Finished: finished}, nil
}

// ParseText is the completion text with surrounding whitespace removed.
func ParseText(r Result) string { return strings.TrimSpace(r.Text) }

// ParseNative turns a backend's structured tool calls into a ToolTurn; the text is split into
// reasoning and visible text as for the text dialects. Calls without a name or whose
// arguments are not a JSON object are marked malformed; empty arguments become "{}".
func ParseNative(r Result) ToolTurn {
	reasoning, visible := SplitReasoning(r.Text)
	var calls []ToolCall
	for _, c := range r.NativeToolCalls {
		if strings.TrimSpace(c.Arguments) == "" {
			c.Arguments = "{}"
		}
		if c.Error == "" {
			switch {
			case c.Name == "":
				c.Error = "tool call has no function name"
			case !isJSONObject([]byte(c.Arguments)):
				c.Error = "arguments are not a JSON object"
			}
		}
		calls = append(calls, c)
	}
	return ToolTurn{Text: visible, ToolCalls: calls, Reasoning: reasoning}
}

func isJSONObject(data []byte) bool {
	data = bytes.TrimSpace(data)
	return len(data) > 0 && data[0] == '{' && json.Valid(data)
}
