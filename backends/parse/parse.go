package parse

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/focus-go/focus-go/core/action"
)

// ToolCallPattern matches serialized tool-call blocks: TOOL_CALL =
// re.compile('<tool_call>(.*?)</tool_call>', re.DOTALL). Group 1 is the block body.
var ToolCallPattern = regexp.MustCompile(`(?s)<tool_call>(.*?)</tool_call>`)

// BuildToolTurn parses a completion into a tool-calling turn with decode applied to the body
// of each ToolCallPattern block (tool_turn in Python): reasoning is split off first (see
// SplitReasoning), calls are read from the rest, and Text is what remains outside the
// blocks, trimmed.
func BuildToolTurn(text string, decode func(block string) action.ToolCall) action.ToolTurn {
	return buildTurn(text, firstClose, decode)
}

const toolCallOpen, toolCallClose = "<tool_call>", "</tool_call>"

// firstClose ends a block at the first </tool_call> (the TOOL_CALL regex).
func firstClose(body string) int { return strings.Index(body, toolCallClose) }

// buildTurn is BuildToolTurn with the block end chosen by closeAt: given the text after a
// <tool_call>, it returns the offset of the </tool_call> that closes the block, or -1 when
// the block is not closed (that <tool_call> and everything after it stay text).
func buildTurn(text string, closeAt func(body string) int, decode func(block string) action.ToolCall) action.ToolTurn {
	reasoning, visible := SplitReasoning(text)
	var calls []action.ToolCall
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
	return action.ToolTurn{Text: strings.TrimSpace(rest.String()), ToolCalls: calls, Reasoning: reasoning}
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

// ParseNative turns a backend's structured tool calls into a ToolTurn; the text is split into
// reasoning and visible text as for the text dialects. Calls without a name or whose
// arguments are not a JSON object are marked malformed; empty arguments become "{}".
func ParseNative(r action.Result) action.ToolTurn {
	reasoning, visible := SplitReasoning(r.Text)
	var calls []action.ToolCall
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
	return action.ToolTurn{Text: visible, ToolCalls: calls, Reasoning: reasoning}
}

func isJSONObject(data []byte) bool {
	data = bytes.TrimSpace(data)
	return len(data) > 0 && data[0] == '{' && json.Valid(data)
}
