package parse

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/focus-go/focus-go/core/action"
)

// QwenXML reads Qwen3.5 / Qwen3-Coder tool calls, which the chat templates write as
//
//	<tool_call>
//	<function=NAME>
//	<parameter=ARG>
//	VALUE
//	</parameter>
//	</function>
//	</tool_call>
//
// Parameter values are raw text (one leading and one trailing newline belong to the
// format). The templates print mappings and lists as JSON and everything else with Python's
// str(), so the value's JSON type is ambiguous: Tools, the tool schemas offered in the
// prompt, say which parameters are strings. Without a schema for a parameter, a value that
// is a JSON object, array, number, true/false/null (or Python's True/False/None) is taken as
// that JSON value and anything else as a string.
type QwenXML struct {
	// Tools are the tool schemas of the prompt, OpenAI form ({"type": "function",
	// "function": {"name", "parameters"}}) or bare ({"name", "parameters"}).
	Tools []json.RawMessage
}

// ParseQwenXML reads Qwen XML tool calls without tool schemas.
func ParseQwenXML(r action.Result) action.ToolTurn { return QwenXML{}.Parse(r) }

// Parse reads the tool calls of a result. A <function=...>...</function> block the model
// wrote without its <tool_call> wrapper is a call too, as SGLang's and vLLM's Qwen3-Coder
// parsers read it.
func (q QwenXML) Parse(r action.Result) action.ToolTurn {
	types := toolParamTypes(q.Tools)
	decode := func(block string) action.ToolCall { return decodeQwenXML(block, types) }
	turn := buildTurn(r.Text, qwenXMLClose, decode)
	if !strings.Contains(turn.Text, fnOpen) {
		return turn
	}
	var text strings.Builder
	rest := turn.Text
	for {
		i := strings.Index(rest, fnOpen)
		if i < 0 {
			break
		}
		end := bareFunctionEnd(rest[i:])
		if end < 0 {
			break
		}
		text.WriteString(rest[:i])
		turn.ToolCalls = append(turn.ToolCalls, decode(rest[i:i+end]))
		rest = rest[i+end:]
		// A </tool_call> after the block closes the wrapper whose opening tag the model left out.
		if after := strings.TrimLeft(rest, " \t\r\n"); strings.HasPrefix(after, toolCallClose) {
			rest = after[len(toolCallClose):]
		}
	}
	text.WriteString(rest)
	turn.Text = strings.TrimSpace(text.String())
	return turn
}

// bareFunctionEnd finds the end of a <function=...> block without a <tool_call> wrapper:
// just after the first </function> that another block, a </tool_call> or the end of the
// text follows (the first </function> when none does), or -1 when the block is not closed.
func bareFunctionEnd(s string) int {
	first := -1
	for off := 0; ; {
		i := strings.Index(s[off:], fnClose)
		if i < 0 {
			if first >= 0 {
				return first
			}
			return -1
		}
		end := off + i + len(fnClose)
		if first < 0 {
			first = end
		}
		if after := strings.TrimLeft(s[end:], " \t\r\n"); after == "" || strings.HasPrefix(after, fnOpen) || strings.HasPrefix(after, toolCallOpen) || strings.HasPrefix(after, toolCallClose) {
			return end
		}
		off = end
	}
}

// DecodeBlock decodes one <tool_call> block body.
func (q QwenXML) DecodeBlock(block string) action.ToolCall {
	return decodeQwenXML(block, toolParamTypes(q.Tools))
}

const fnOpen, fnClose, pOpen, pClose = "<function=", "</function>", "<parameter=", "</parameter>"

// qwenXMLClose finds the </tool_call> that closes a Qwen XML block: the first one right
// after a </function> (the template writes "</function>\n</tool_call>"), so a parameter
// value holding "</tool_call>" does not cut the block; without one, the first </tool_call>.
func qwenXMLClose(body string) int {
	for off := 0; ; {
		i := strings.Index(body[off:], toolCallClose)
		if i < 0 {
			return firstClose(body)
		}
		if strings.HasSuffix(strings.TrimRight(body[:off+i], " \t\r\n"), fnClose) {
			return off + i
		}
		off += i + len(toolCallClose)
	}
}

// valueEnd finds where a parameter value ends in rest (the text after <parameter=NAME>) and
// where the text after its closing tag starts. The value ends at the first </parameter>
// that the markup can follow (another <parameter=, </function>, or the end of the block,
// after optional whitespace), so a value may hold "</parameter>" itself. A value whose
// closing tag is missing ends where the next parameter starts: a "\n<parameter=NAME>"
// line naming a parameter the tool declares and the call has not given (any name without
// a schema).
func valueEnd(rest string, declared map[string][]string, seen map[string]bool) (end, next int) {
	closing := -1
	for off := 0; ; {
		i := strings.Index(rest[off:], pClose)
		if i < 0 {
			break
		}
		after := strings.TrimLeft(rest[off+i+len(pClose):], " \t\r\n")
		if after == "" || strings.HasPrefix(after, pOpen) || strings.HasPrefix(after, fnClose) {
			closing = off + i
			break
		}
		off += i + len(pClose)
	}
	if closing < 0 {
		closing = strings.Index(rest, pClose)
	}
	limit := len(rest)
	if closing >= 0 {
		limit = closing
	}
	for off := 0; off < limit; {
		i := strings.Index(rest[off:limit], "\n"+pOpen)
		if i < 0 {
			break
		}
		at := off + i + 1
		name, _, ok := strings.Cut(rest[at+len(pOpen):], ">")
		name = strings.TrimSpace(name)
		if ok && !seen[name] && (declared == nil || declared[name] != nil) {
			return at, at
		}
		off = at + len(pOpen)
	}
	if closing < 0 {
		return len(rest), len(rest)
	}
	return closing, closing + len(pClose)
}

func decodeQwenXML(block string, types map[string]map[string][]string) action.ToolCall {
	body := strings.TrimSpace(block)
	malformed := func(name, reason string) action.ToolCall {
		return action.ToolCall{Name: name, Arguments: body, Error: reason}
	}
	start := strings.Index(body, fnOpen)
	if start < 0 {
		return malformed("", "tool call has no <function=NAME> tag")
	}
	rest := body[start+len(fnOpen):]
	gt := strings.IndexByte(rest, '>')
	if gt < 0 {
		return malformed("", "tool call's <function= tag is not closed with '>'")
	}
	name := strings.TrimSpace(rest[:gt])
	if name == "" {
		return malformed("", "tool call has an empty function name")
	}
	if cut := strings.IndexAny(name, " \t\r\n<"); cut >= 0 { // the '>' found belongs to a later tag
		return malformed(name[:cut], "tool call's <function= tag is not closed with '>'")
	}
	rest = rest[gt+1:]
	// The block ends with the function's closing tag; a value may hold the text
	// "</function>" before it.
	if end := strings.LastIndex(rest, fnClose); end >= 0 {
		rest = rest[:end]
	}
	params, declared := types[name]
	if !declared {
		params = nil
	}

	var args bytes.Buffer
	args.WriteByte('{')
	seen := map[string]bool{}
	for {
		i := strings.Index(rest, pOpen)
		if i < 0 {
			break
		}
		rest = rest[i+len(pOpen):]
		gt := strings.IndexByte(rest, '>')
		if gt < 0 {
			return malformed(name, "a <parameter= tag is not closed with '>'")
		}
		pname := strings.TrimSpace(rest[:gt])
		rest = rest[gt+1:]
		if pname == "" {
			return malformed(name, "a parameter has an empty name")
		}
		if seen[pname] {
			return malformed(name, "parameter "+strconv.Quote(pname)+" is given twice")
		}
		seen[pname] = true
		var schema map[string][]string
		if declared {
			schema = types[name]
		}
		end, next := valueEnd(rest, schema, seen)
		value := rest[:end]
		rest = rest[next:]
		value = strings.TrimPrefix(value, "\n")
		value = strings.TrimSuffix(value, "\n")

		if len(seen) > 1 {
			args.WriteString(", ")
		}
		writeJSONString(&args, pname)
		args.WriteString(": ")
		args.WriteString(paramJSON(value, params[pname]))
	}
	args.WriteByte('}')
	return action.ToolCall{Name: name, Arguments: args.String()}
}

// paramJSON converts a raw parameter value to JSON, guided by its schema types (nil: none).
func paramJSON(value string, types []string) string {
	trimmed := strings.TrimSpace(value)
	if len(types) == 0 {
		if lit, ok := literalJSON(trimmed); ok {
			return lit
		}
		return quote(value)
	}
	for _, t := range types {
		switch t {
		case "string":
			// A string is a string even when it looks like a number; try the other
			// types first only for "null".
			if hasType(types, "null") && (trimmed == "null" || trimmed == "None") {
				return "null"
			}
			return quote(value)
		case "null":
			if trimmed == "null" || trimmed == "None" {
				return "null"
			}
		case "integer":
			// Written back in JSON's form: ParseInt also takes "007" and "+7", which
			// JSON does not (the peers' int(value) reads them the same way).
			if n, err := strconv.ParseInt(trimmed, 10, 64); err == nil {
				return strconv.FormatInt(n, 10)
			}
		case "number":
			if isJSONNumber(trimmed) {
				return trimmed
			}
		case "boolean":
			switch trimmed {
			case "true", "True":
				return "true"
			case "false", "False":
				return "false"
			}
		case "object":
			if isJSONObject([]byte(trimmed)) {
				return trimmed
			}
			if lit, ok := pyLiteralJSON(trimmed); ok && strings.HasPrefix(lit, "{") {
				return lit // the model wrote a Python dict
			}
		case "array":
			if strings.HasPrefix(trimmed, "[") && json.Valid([]byte(trimmed)) {
				return trimmed
			}
			if lit, ok := pyLiteralJSON(trimmed); ok && strings.HasPrefix(lit, "[") {
				return lit // the model wrote a Python list
			}
		default:
			if lit, ok := literalJSON(trimmed); ok {
				return lit
			}
		}
	}
	// No schema type fits: keep the text, so the environment sees what the model wrote.
	return quote(value)
}

// literalJSON reads a value that is JSON (but not a JSON string) or a Python literal.
func literalJSON(s string) (string, bool) {
	switch s {
	case "True":
		return "true", true
	case "False":
		return "false", true
	case "None":
		return "null", true
	case "":
		return "", false
	}
	if s[0] != '"' && json.Valid([]byte(s)) {
		return s, true
	}
	if s[0] == '[' || s[0] == '{' {
		return pyLiteralJSON(s) // a Python list or dict
	}
	return "", false
}

func isJSONNumber(s string) bool {
	if s == "" || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

func hasType(types []string, t string) bool {
	for _, x := range types {
		if x == t {
			return true
		}
	}
	return false
}

func quote(s string) string {
	var b bytes.Buffer
	writeJSONString(&b, s)
	return b.String()
}

// writeJSONString writes s as a JSON string the way Python's json.dumps(ensure_ascii=False)
// does: no HTML escaping, non-ASCII kept.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a Go string always encodes
	b.Truncate(b.Len() - 1) // Encode appends a newline
}
