package parse

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/focus-go/focus-go/core/action"
)

// checkTurn holds for any input: parsing is deterministic, every call is either marked
// malformed or has a name and a JSON-object argument string, text and reasoning are
// trimmed, and (for the <tool_call> dialects) there are no more calls than <tool_call>
// and <function= tags outside the reasoning.
func checkTurn(t *testing.T, text string, parse func(string) action.ToolTurn) {
	turn := checkAnyTurn(t, text, parse)
	_, visible := SplitReasoning(text)
	if n := strings.Count(visible, toolCallOpen) + strings.Count(visible, fnOpen); len(turn.ToolCalls) > n {
		t.Fatalf("%d <tool_call>/<function= tags but %d calls for %q", n, len(turn.ToolCalls), text)
	}
}

// checkAnyTurn checks the invariants every tool-call parser keeps and returns the turn.
func checkAnyTurn(t *testing.T, text string, parse func(string) action.ToolTurn) action.ToolTurn {
	turn := parse(text)
	if again := parse(text); !reflect.DeepEqual(turn, again) {
		t.Fatalf("parse is not deterministic for %q", text)
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
	return turn
}

// roundTrip parses a call rendered in a dialect and checks the name and string argument
// come back. Model text is decoded tokens, so valid UTF-8; names are identifiers.
func roundTrip(t *testing.T, rendered, name, param, value string, parse func(string) action.ToolTurn) {
	turn := parse(rendered)
	if len(turn.ToolCalls) != 1 || turn.ToolCalls[0].Malformed() {
		t.Fatalf("rendered call not parsed: %q -> %+v", rendered, turn)
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(turn.ToolCalls[0].Arguments), &args); err != nil {
		t.Fatalf("arguments %q: %v", turn.ToolCalls[0].Arguments, err)
	}
	if turn.ToolCalls[0].Name != name || args[param] != value {
		t.Fatalf("round trip of %q/%q/%q gave %+v", name, param, value, turn.ToolCalls[0])
	}
}

// identifier reports whether s can be a function or parameter name in every dialect.
func identifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')) {
			return false
		}
	}
	return true
}

// jsonString is s as a JSON string literal.
func jsonString(s string) string { return quote(s) }

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
		checkTurn(t, text, func(s string) action.ToolTurn { return ParseHermes(action.Result{Text: s}) })
	})
}

func FuzzQwenXML(f *testing.F) {
	f.Add("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>", "get_weather", "location", "Paris, FR")
	f.Add("x</think><tool_call><function=f><parameter=a>True<parameter=b>[1,", "f", "code", "\ndef f():\n    return {\"a\": 1}\n")
	f.Add("<tool_call><function=></function></tool_call><tool_call><function=g\n</tool_call>", "n", "v", "None")
	f.Add("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=a>\n2\n</parameter>\n</function>\n</tool_call>", "f", "p", "02139")
	tools := []json.RawMessage{json.RawMessage(`{"name": "f", "parameters": {"properties": {"a": {"type": "integer"}, "b": {"type": ["array", "null"]}}}}`)}
	f.Fuzz(func(t *testing.T, text, name, param, value string) {
		checkTurn(t, text, func(s string) action.ToolTurn { return ParseQwenXML(action.Result{Text: s}) })
		checkTurn(t, text, func(s string) action.ToolTurn { return QwenXML{Tools: tools}.Parse(action.Result{Text: s}) })

		// Round trip: a call rendered the way the template renders it comes back with the
		// same name and string value, when the pieces cannot be confused with the markup.
		// Model text is decoded tokens, so valid UTF-8.
		if !utf8.ValidString(name) || !utf8.ValidString(param) || !utf8.ValidString(value) || strings.ContainsAny(name+param, "<>") ||
			strings.IndexFunc(name+param, unicode.IsSpace) >= 0 || name == "" || param == "" || strings.Contains(value, "<") {
			return
		}
		schema := json.RawMessage(`{"name": ` + quote(name) + `, "parameters": {"properties": {` + quote(param) + `: {"type": "string"}}}}`)
		block := "<tool_call>\n<function=" + name + ">\n<parameter=" + param + ">\n" + value + "\n</parameter>\n</function>\n</tool_call>"
		turn := QwenXML{Tools: []json.RawMessage{schema}}.Parse(action.Result{Text: block})
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

func FuzzLlama3JSON(f *testing.F) {
	f.Add(`<|python_tag|>{"name": "f", "parameters": {"a": 1}}; {"name": "g", "parameters": {}}`, "get_weather", "city", "Paris")
	f.Add(`Sure: {"name": "f", "parameters": {"a": "{"}} and {"x": 1} {"name": "g", "parameters"`, "f", "q", "a;b}")
	f.Add(`{"name": "f", "parameters": {{"name": "g", "arguments": "{}"}`, "n", "v", "")
	f.Add(`<|python_tag|>code(x)<|python_tag|>{`, "n", "v", "<|python_tag|>")
	f.Fuzz(func(t *testing.T, text, name, param, value string) {
		parse := func(s string) action.ToolTurn { return ParseLlama3JSON(action.Result{Text: s}) }
		checkAnyTurn(t, text, parse)
		if !identifier(name) || !identifier(param) || !utf8.ValidString(value) {
			return
		}
		call := `{"name": ` + jsonString(name) + `, "parameters": {` + jsonString(param) + `: ` + jsonString(value) + `}}`
		roundTrip(t, pythonTag+call, name, param, value, parse)
		roundTrip(t, call, name, param, value, parse)
	})
}

func FuzzDeepSeekV3(f *testing.F) {
	f.Add(dsCallsBegin+dsCallBegin+"function"+dsSep+"f\n```json\n{\"a\": 1}\n```"+dsCallEnd+dsCallsEnd, "get_weather", "city", "Tokyo")
	f.Add("x"+dsCallsBegin+dsCallBegin+"f"+dsSep+"{}"+dsCallEnd+dsCallBegin+"function"+dsSep, "f", "code", "```json\n{}\n```")
	f.Add(dsCallsBegin+"junk"+dsCallsEnd+"<think>"+dsCallsBegin, "n", "v", dsCallEnd)
	f.Fuzz(func(t *testing.T, text, name, param, value string) {
		parse := func(s string) action.ToolTurn { return ParseDeepSeekV3(action.Result{Text: s}) }
		checkAnyTurn(t, text, parse)
		if !identifier(name) || !identifier(param) || !utf8.ValidString(value) || strings.Contains(value, "<think>") || strings.Contains(value, "</think>") {
			return
		}
		// As the chat template renders it (arguments as JSON, which escapes no markers: a
		// value holding a marker is ambiguous, so only values without one are checked).
		if strings.Contains(value, "｜") {
			return
		}
		args := `{` + jsonString(param) + `: ` + jsonString(value) + `}`
		roundTrip(t, dsCallsBegin+dsCallBegin+"function"+dsSep+name+"\n```json\n"+args+"\n```"+dsCallEnd+dsCallsEnd, name, param, value, parse)
		roundTrip(t, dsCallsBegin+dsCallBegin+name+dsSep+args+dsCallEnd+dsCallsEnd, name, param, value, parse)
	})
}

func FuzzPythonic(f *testing.F) {
	f.Add("Here: [get_weather(city='Paris', days=3, opts={'a': [1, 2.5e3, None]})] done", "get_weather", "city", "Paris")
	f.Add("[f(a='x 'y'), g()] [h(b=\"\"\"tri\nple\"\"\")] [1, 2] [x]", "f", "q", "it's \"quoted\"\n")
	f.Add("<|python_start|>[f(x=-0x1F, y=1_000, z=.5)]<|python_end|>```tool_code\n[g(a=b'z')]\n```", "n", "v", "\\u00e9")
	f.Fuzz(func(t *testing.T, text, name, param, value string) {
		parse := func(s string) action.ToolTurn { return ParsePythonic(action.Result{Text: s}) }
		checkAnyTurn(t, text, parse)
		if !identifier(name) || !identifier(param) || !utf8.ValidString(value) || strings.Contains(value, "<think>") || strings.Contains(value, "</think>") {
			return
		}
		// A Python string literal of value, written as repr() would with double quotes.
		lit := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`).Replace(value) + `"`
		roundTrip(t, "["+name+"("+param+"="+lit+")]", name, param, value, parse)
	})
}

func FuzzHarmony(f *testing.F) {
	f.Add("<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>", "get_weather", "city", "SF")
	f.Add("<|start|>assistant to=functions.g<|channel|>commentary json<|message|>foo<|call|><|channel|>final<|message|>done<|return|>", "f", "q", "x")
	f.Add("<|message|><|message|>to=<|channel|><|start|>", "n", "v", "<|end|>")
	f.Fuzz(func(t *testing.T, text, name, param, value string) {
		for _, stop := range []string{"stop", "length"} {
			checkAnyTurn(t, text, func(s string) action.ToolTurn { return ParseHarmony(action.Result{Text: s, StopReason: stop}) })
		}
		if !identifier(name) || !identifier(param) || !utf8.ValidString(value) || strings.Contains(value, "<|") {
			return
		}
		args := `{` + jsonString(param) + `: ` + jsonString(value) + `}`
		parse := func(s string) action.ToolTurn { return ParseHarmony(action.Result{Text: s, StopReason: "stop"}) }
		roundTrip(t, "<|channel|>analysis<|message|>plan<|end|><|start|>assistant<|channel|>commentary to=functions."+name+" <|constrain|>json<|message|>"+args+"<|call|>", name, param, value, parse)
		roundTrip(t, "<|start|>assistant to=functions."+name+"<|channel|>commentary json<|message|>"+args, name, param, value, parse)
	})
}
