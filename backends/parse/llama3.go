package parse

import (
	"encoding/json"
	"strings"

	"github.com/focus-go/focus-go/core/action"
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
func ParseLlama3JSON(r action.Result) action.ToolTurn {
	reasoning, visible := SplitReasoning(r.Text)
	calls, text := llamaCalls(visible)
	return action.ToolTurn{Text: strings.TrimSpace(text), ToolCalls: calls, Reasoning: reasoning}
}

// llamaCalls reads the calls of s and returns them and the text around them. It scans s
// once: a JSON value is skipped whole (so "<|python_tag|>" or "{" inside a string is not
// markup), a <|python_tag|> outside JSON starts a tagged run in which every JSON value is
// a call, and text that is not whitespace or a ";" separator ends the run.
func llamaCalls(s string) ([]action.ToolCall, string) {
	var calls []action.ToolCall
	var text strings.Builder
	pos := 0
	tagged := false    // inside a run that <|python_tag|> opened
	afterCall := false // whitespace and one ";" right after a call separate calls
	for pos < len(s) {
		rest := s[pos:]
		if afterCall {
			if trimmed := strings.TrimLeft(rest, " \t\r\n"); strings.HasPrefix(trimmed, ";") {
				pos += len(rest) - len(trimmed) + 1
				continue
			}
		}
		i := strings.IndexByte(rest, '{')
		j := strings.Index(rest, pythonTag)
		if j >= 0 && (i < 0 || j < i) {
			if gap := rest[:j]; !afterCall || strings.TrimSpace(gap) != "" {
				text.WriteString(gap)
			}
			pos += j + len(pythonTag)
			tagged, afterCall = true, false
			if next := strings.TrimLeft(s[pos:], " \t\r\n"); !strings.HasPrefix(next, "{") && !strings.HasPrefix(next, pythonTag) {
				// <|python_tag|> announced a call, and no JSON follows.
				calls = append(calls, action.ToolCall{Arguments: strings.TrimSpace(s[pos:]),
					Error: `expected a JSON tool call {"name": ..., "parameters": {...}} after <|python_tag|>`})
				pos = len(s)
			}
			continue
		}
		if i < 0 {
			break
		}
		gap := rest[:i]
		if strings.TrimSpace(gap) != "" {
			tagged = false
		}
		if !afterCall || strings.TrimSpace(gap) != "" {
			text.WriteString(gap) // whitespace between two calls is not text
		}
		start := pos + i
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
			if k := strings.Index(s[start+1:], `{"name"`); k >= 0 {
				end = start + 1 + k
			}
			calls = append(calls, malformedJSONCall(s[start:end]))
			pos, afterCall = end, true
		default:
			text.WriteByte('{')
			pos, afterCall = start+1, false
		}
	}
	if pos < len(s) {
		text.WriteString(s[pos:])
	}
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

func decodeLlamaCall(raw string) action.ToolCall { return DecodeHermes(raw) }

func malformedJSONCall(raw string) action.ToolCall {
	c := DecodeHermes(raw)
	if !c.Malformed() {
		c = action.ToolCall{Name: c.Name, Arguments: strings.TrimSpace(raw), Error: "tool call is not a JSON object"}
	}
	return c
}
