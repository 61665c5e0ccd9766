package parse

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// checkTurn holds for any input: parsing is deterministic, every call is either marked
// malformed or has a name and a JSON-object argument string, and the number of calls is the
// number of TOOL_CALL blocks outside the reasoning.
func checkTurn(t *testing.T, text string, parse func(string) ToolTurn) {
	turn := parse(text)
	if again := parse(text); !reflect.DeepEqual(turn, again) {
		t.Fatalf("parse is not deterministic for %q", text)
	}
	_, visible := SplitReasoning(text)
	if n := len(ToolCallPattern.FindAllStringIndex(visible, -1)); n != len(turn.ToolCalls) {
		t.Fatalf("%d blocks but %d calls for %q", n, len(turn.ToolCalls), text)
	}
	for _, c := range turn.ToolCalls {
		if c.Malformed() {
			continue
		}
		if c.Name == "" || !isJSONObject([]byte(c.Arguments)) {
			t.Fatalf("well-formed call %+v has no name or non-object arguments (input %q)", c, text)
		}
	}
	if turn.Text != strings.TrimSpace(turn.Text) || turn.Reasoning != strings.TrimSpace(turn.Reasoning) {
		t.Fatalf("text or reasoning not trimmed: %+v", turn)
	}
}

func FuzzHermes(f *testing.F) {
	for _, seed := range []string{
		"<think>\nhmm\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>",
		"<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call><tool_call>{\"name\": \"g\"}</tool_call>",
		"<tool_call>{\"name\": \"f\", \"arguments\": {}}}</tool_call>",
		"<tool_call>{'name': 'f'}</tool_call>",
		"text <tool_call> unclosed",
		"</think><tool_call>null</tool_call><tool_call>[]</tool_call><tool_call>\"s\"</tool_call>",
		"<tool_call>{\"name\": \"\\ud800\", \"arguments\": {\"a\": 1e999}}</tool_call>",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		checkTurn(t, text, func(s string) ToolTurn { return ParseHermes(Result{Text: s}) })
	})
}

func FuzzQwenXML(f *testing.F) {
	f.Add("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>", "get_weather", "location", "Paris, FR")
	f.Add("x</think><tool_call><function=f><parameter=a>True<parameter=b>[1,", "f", "code", "\ndef f():\n    return {\"a\": 1}\n")
	f.Add("<tool_call><function=></function></tool_call><tool_call><function=g\n</tool_call>", "n", "v", "None")
	f.Add("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=a>\n2\n</parameter>\n</function>\n</tool_call>", "f", "p", "02139")
	tools := []json.RawMessage{json.RawMessage(`{"name": "f", "parameters": {"properties": {"a": {"type": "integer"}, "b": {"type": ["array", "null"]}}}}`)}
	f.Fuzz(func(t *testing.T, text, name, param, value string) {
		checkTurn(t, text, func(s string) ToolTurn { return ParseQwenXML(Result{Text: s}) })
		checkTurn(t, text, func(s string) ToolTurn { return QwenXML{Tools: tools}.Parse(Result{Text: s}) })

		// Round trip: a call rendered the way the template renders it comes back with the
		// same name and string value, when the pieces cannot be confused with the markup.
		// Model text is decoded tokens, so valid UTF-8.
		if !utf8.ValidString(name) || !utf8.ValidString(param) || !utf8.ValidString(value) || strings.ContainsAny(name+param, "<>") ||
			strings.IndexFunc(name+param, unicode.IsSpace) >= 0 || name == "" || param == "" || strings.Contains(value, "<") {
			return
		}
		schema := json.RawMessage(`{"name": ` + quote(name) + `, "parameters": {"properties": {` + quote(param) + `: {"type": "string"}}}}`)
		block := "<tool_call>\n<function=" + name + ">\n<parameter=" + param + ">\n" + value + "\n</parameter>\n</function>\n</tool_call>"
		turn := QwenXML{Tools: []json.RawMessage{schema}}.Parse(Result{Text: block})
		if len(turn.ToolCalls) != 1 || turn.ToolCalls[0].Malformed() {
			t.Fatalf("rendered call not parsed: %q -> %+v", block, turn)
		}
		var args map[string]string
		if err := json.Unmarshal([]byte(turn.ToolCalls[0].Arguments), &args); err != nil {
			t.Fatalf("arguments %q: %v", turn.ToolCalls[0].Arguments, err)
		}
		if turn.ToolCalls[0].Name != name || args[param] != value {
			t.Fatalf("round trip of %q/%q/%q gave %+v", name, param, value, turn.ToolCalls[0])
		}
	})
}
