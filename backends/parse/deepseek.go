package parse

import (
	"strings"

	"github.com/focus-go/focus-go/core/action"
)

// DeepSeek V3 tool-call markers (tokens of the DeepSeek V3 / R1 vocabularies).
const (
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"
)

// ParseDeepSeekV3 reads DeepSeek V3 / R1 tool calls, which the chat template writes as
//
//	<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//	```json
//	{...}
//	```<｜tool▁call▁end｜>
//	<｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//
// The V3.1 form <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜> (no type, no
// fence) is read too. Text is what precedes <｜tool▁calls▁begin｜> and follows
// <｜tool▁calls▁end｜>. A call block not closed by <｜tool▁call▁end｜> (a turn cut off by the
// length limit) is not a call and stays in Text; a calls section holding no call block, a
// block without <｜tool▁sep｜> and arguments that are not a JSON object are malformed calls.
func ParseDeepSeekV3(r action.Result) action.ToolTurn {
	reasoning, visible := SplitReasoning(r.Text)
	i := strings.Index(visible, dsCallsBegin)
	if i < 0 {
		return action.ToolTurn{Text: visible, Reasoning: reasoning}
	}
	text := visible[:i]
	section := visible[i+len(dsCallsBegin):]
	closed := false
	if j := strings.Index(section, dsCallsEnd); j >= 0 {
		text += section[j+len(dsCallsEnd):]
		section, closed = section[:j], true
	}
	var calls []action.ToolCall
	rest := section
	for {
		k := strings.Index(rest, dsCallBegin)
		if k < 0 {
			break
		}
		body := rest[k+len(dsCallBegin):]
		end := strings.Index(body, dsCallEnd)
		if end < 0 {
			break
		}
		calls = append(calls, decodeDeepSeekCall(body[:end]))
		rest = body[end+len(dsCallEnd):]
	}
	switch {
	case len(calls) == 0 && closed:
		calls = append(calls, action.ToolCall{Arguments: strings.TrimSpace(section),
			Error: "the tool-calls section holds no " + dsCallBegin + "..." + dsCallEnd + " block"})
	case len(calls) == 0:
		// Cut off before the first call was complete: no call, all text.
		text = visible
	case !closed:
		// Cut off after some calls: the unfinished block stays text.
		text += rest
	}
	return action.ToolTurn{Text: strings.TrimSpace(text), ToolCalls: calls, Reasoning: reasoning}
}

// decodeDeepSeekCall decodes the body of one <｜tool▁call▁begin｜> block.
func decodeDeepSeekCall(block string) action.ToolCall {
	head, tail, ok := strings.Cut(block, dsSep)
	if !ok {
		return action.ToolCall{Arguments: strings.TrimSpace(block), Error: "tool call has no " + dsSep}
	}
	var name, args string
	if nl := strings.IndexByte(tail, '\n'); nl >= 0 && strings.Contains(tail[nl:], "```") {
		// V3: TYPE<｜tool▁sep｜>NAME\n```json\nARGS\n```
		name = strings.TrimSpace(tail[:nl])
		args = strings.TrimSpace(tail[nl+1:])
		args = strings.TrimPrefix(args, "```json")
		args = strings.TrimPrefix(args, "```")
		args = strings.TrimSuffix(strings.TrimSpace(args), "```")
	} else {
		// V3.1: NAME<｜tool▁sep｜>ARGS
		name, args = strings.TrimSpace(head), tail
	}
	args = strings.TrimSpace(args)
	switch {
	case name == "":
		return action.ToolCall{Arguments: strings.TrimSpace(block), Error: "tool call has an empty function name"}
	case args == "":
		args = "{}"
	case !isJSONObject([]byte(args)):
		return action.ToolCall{Name: name, Arguments: args, Error: "arguments are not a JSON object"}
	}
	return action.ToolCall{Name: name, Arguments: args}
}
