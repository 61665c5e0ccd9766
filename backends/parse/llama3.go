package parse

import (
	"encoding/json"
	"strings"
)

// pythonTag is the special token Llama 3.1+ writes before a tool call.
const pythonTag = "<|python_tag|>"

// ParseLlama3JSON reads Llama 3.1 / 3.2 / 3.3 JSON tool calls. The Llama 3 templates ask
// for {"name": NAME, "parameters": {...}} ("arguments" is accepted too); the model may
// write <|python_tag|> first and separates parallel calls with ";" (or further
// <|python_tag|> tokens). After <|python_tag|> every JSON value is a call, and one that does
// not decode is a malformed call. Without the tag, the JSON objects of the reply that have
// both a "name" and a "parameters"/"arguments" key are the calls (as vLLM's llama3_json
// parser reads them), except that an object opening the reply which does not decode is a
// malformed call rather than text. Text is what remains outside the calls and separators.
func ParseLlama3JSON(r Result) ToolTurn {
	reasoning, visible := SplitReasoning(r.Text)
	var text strings.Builder
	var calls []ToolCall
	if i := strings.Index(visible, pythonTag); i >= 0 {
		text.WriteString(visible[:i])
		action := strings.ReplaceAll(visible[i+len(pythonTag):], pythonTag, ";")
		found, rest := llamaCalls(action, true)
		calls = found
		text.WriteString(rest)
	} else {
		found, rest := llamaCalls(visible, false)
		calls = found
		text.WriteString(rest)
	}
	return ToolTurn{Text: strings.TrimSpace(text.String()), ToolCalls: calls, Reasoning: reasoning}
}

// llamaCalls reads the calls of s. tagged: s follows <|python_tag|>, so it is a sequence of
// calls separated by ";" and whitespace, and the first thing that is not a call ends it
// (what follows is text). Untagged: calls are found anywhere in s.
func llamaCalls(s string, tagged bool) ([]ToolCall, string) {
	var calls []ToolCall
	var text strings.Builder
	pos := 0
	afterCall := false // a ";" right after a call is a separator, not text
	for pos < len(s) {
		if tagged || afterCall {
			rest := strings.TrimLeft(s[pos:], " \t\r\n")
			if afterCall && strings.HasPrefix(rest, ";") {
				pos = len(s) - len(rest) + 1
				continue
			}
			if tagged {
				if rest == "" {
					pos = len(s)
					break
				}
				pos = len(s) - len(rest)
			}
		}
		i := strings.IndexByte(s[pos:], '{')
		if tagged && i != 0 {
			if len(calls) == 0 {
				// <|python_tag|> announced a call, and no JSON follows.
				calls = append(calls, ToolCall{Arguments: strings.TrimSpace(s[pos:]),
					Error: `expected a JSON tool call {"name": ..., "parameters": {...}} after <|python_tag|>`})
				pos = len(s)
			}
			break
		}
		if i < 0 {
			break
		}
		start := pos + i
		if gap := s[pos:start]; !afterCall || strings.TrimSpace(gap) != "" {
			text.WriteString(gap) // whitespace between two calls is not text
		}
		raw, ok := jsonValueAt(s, start)
		switch {
		case ok && (tagged || isLlamaCall(raw)):
			calls = append(calls, decodeLlamaCall(raw))
			pos, afterCall = start+len(raw), true
		case ok:
			text.WriteString(raw)
			pos, afterCall = start+len(raw), false
		case tagged || (len(calls) == 0 && strings.TrimSpace(s[:start]) == "" && looksLikeCall(s[start:])):
			// A call the model started and did not finish: up to the next call, if any.
			end := len(s)
			if j := strings.Index(s[start+1:], `{"name"`); j >= 0 {
				end = start + 1 + j
			}
			calls = append(calls, malformedJSONCall(s[start:end]))
			pos, afterCall = end, true
		default:
			text.WriteByte('{')
			pos, afterCall = start+1, false
		}
	}
	text.WriteString(s[pos:])
	return calls, text.String()
}

// jsonValueAt decodes the JSON value starting at s[start] and returns its text.
func jsonValueAt(s string, start int) (string, bool) {
	dec := json.NewDecoder(strings.NewReader(s[start:]))
	var v json.RawMessage
	if dec.Decode(&v) != nil {
		return "", false
	}
	return s[start : start+int(dec.InputOffset())], true
}

// isLlamaCall reports whether a JSON object found in prose is a call: it has a "name"
// string and a "parameters" or "arguments" key.
func isLlamaCall(raw string) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(raw), &obj) != nil {
		return false
	}
	var name string
	if json.Unmarshal(obj["name"], &name) != nil {
		return false
	}
	_, params := obj["parameters"]
	_, args := obj["arguments"]
	return params || args
}

// looksLikeCall reports whether s starts like a JSON call object: {"name" after whitespace.
func looksLikeCall(s string) bool {
	s = strings.TrimLeft(strings.TrimPrefix(s, "{"), " \t\r\n")
	return strings.HasPrefix(s, `"name"`)
}

func decodeLlamaCall(raw string) ToolCall { return DecodeHermes(raw) }

func malformedJSONCall(raw string) ToolCall {
	c := DecodeHermes(raw)
	if !c.Malformed() {
		c = ToolCall{Name: c.Name, Arguments: strings.TrimSpace(raw), Error: "tool call is not a JSON object"}
	}
	return c
}
