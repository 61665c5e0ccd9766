package parse

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strings"

	"github.com/focus-go/focus-go/core/action"
)

// ParseHermes reads Hermes-style tool calls: each <tool_call> block holds one JSON object
// {"name": ..., "arguments": {...}} (Qwen2.5 and Qwen3 templates). A block ends at the
// </tool_call> that follows its JSON object, so a JSON string holding "</tool_call>" does
// not cut the block; a block whose body is not one JSON object ends at the first
// </tool_call>, as the TOOL_CALL regex reads it. A final block the model ended (stop
// reason "stop": its end-of-turn token) right after a whole, well-formed call object,
// without writing </tool_call>, is a call too, as vLLM and SGLang read it; one cut off by
// the length limit, or whose body is not a complete call, stays text.
func ParseHermes(r action.Result) action.ToolTurn {
	text := r.Text
	if r.StopReason == "stop" {
		text = closeFinalHermesBlock(text)
	}
	return buildTurn(text, hermesClose, DecodeHermes)
}

// closeFinalHermesBlock appends the </tool_call> a finished reply left out after its last
// block, when that block's body is one well-formed call.
func closeFinalHermesBlock(text string) string {
	i := strings.LastIndex(text, toolCallOpen)
	if i < 0 {
		return text
	}
	body := text[i+len(toolCallOpen):]
	if strings.Contains(body, toolCallClose) || DecodeHermes(body).Malformed() {
		return text
	}
	return text + toolCallClose
}

// hermesClose finds the </tool_call> that closes a Hermes block: the one right after the
// block's JSON value when the body starts with one, else the first.
func hermesClose(body string) int {
	start := len(body) - len(strings.TrimLeft(body, " \t\r\n"))
	if start < len(body) && body[start] == '{' {
		dec := json.NewDecoder(strings.NewReader(body[start:]))
		var v json.RawMessage
		if dec.Decode(&v) == nil {
			end := start + int(dec.InputOffset())
			after := body[end:]
			if trimmed := strings.TrimLeft(after, " \t\r\n"); strings.HasPrefix(trimmed, toolCallClose) {
				return end + len(after) - len(trimmed)
			}
		}
	}
	return firstClose(body)
}

// hermesName finds a name in a block that is not valid JSON, so a malformed call still says
// which tool the model meant.
var hermesName = regexp.MustCompile(`"name"\s*:\s*"((?:[^"\\]|\\.)*)"`)

// DecodeHermes decodes one Hermes block body. Arguments may be an object (kept as written),
// a string holding a JSON object (the OpenAI form, unwrapped), or absent/null ("{}").
// "parameters" is accepted for "arguments", as some models write it.
func DecodeHermes(block string) action.ToolCall {
	body := strings.TrimSpace(block)
	malformed := func(reason string) action.ToolCall {
		c := action.ToolCall{Arguments: body, Error: reason}
		if m := hermesName.FindStringSubmatch(body); m != nil {
			var name string
			if json.Unmarshal([]byte(`"`+m[1]+`"`), &name) == nil {
				c.Name = name
			}
		}
		return c
	}
	var call struct {
		Name       *string         `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	if err := dec.Decode(&call); err != nil {
		return malformed("tool call is not a JSON object: " + err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return malformed("text after the tool call's JSON object")
	}
	if !strings.HasPrefix(body, "{") {
		return malformed("tool call is not a JSON object")
	}
	if call.Name == nil || *call.Name == "" {
		return malformed(`tool call has no "name" string`)
	}
	args := bytes.TrimSpace(call.Arguments)
	if len(args) == 0 {
		args = bytes.TrimSpace(call.Parameters)
	}
	switch {
	case len(args) == 0 || string(args) == "null":
		args = []byte("{}")
	case args[0] == '"':
		var inner string
		if json.Unmarshal(args, &inner) != nil || !isJSONObject([]byte(inner)) {
			return malformed("arguments string is not a JSON object")
		}
		args = []byte(strings.TrimSpace(inner))
	case args[0] != '{':
		return malformed("arguments are not a JSON object")
	}
	return action.ToolCall{Name: *call.Name, Arguments: string(args)}
}
