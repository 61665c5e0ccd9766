package chat

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/focus-go/focus-go/backends/tokenizer"
	"github.com/focus-go/focus-go/core/status"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chatMLTools is a Qwen2.5-style ChatML template cut down to what matters here: tools are
// printed with tojson and tool-call arguments with tojson.
const chatMLTools = `{%- if tools %}
<|im_start|>system
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools><|im_end|>
{% endif %}
{%- for message in messages %}
<|im_start|>{{ message.role }}
{% if message.content %}{{ message.content }}{% endif %}
{%- for call in message.tool_calls or [] %}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}
`

func TestChatMLToolsKeepKeyOrder(t *testing.T) {
	tmpl, err := Compile(chatMLTools)
	require.NoError(t, err)
	tools, err := ParseTools([]byte(`[{"type": "function", "function": {"name": "zeta",
		"parameters": {"type": "object", "required": ["b", "a"],
		"properties": {"b": {"type": "string", "description": "<b> & \"q\" ü 🙂"}, "a": {"type": "integer"}}}}}]`))
	require.NoError(t, err)
	msgs := []Message{
		{Role: "user", Content: Text("call it")},
		{Role: "assistant", Content: nil, ToolCalls: []ToolCall{{ID: "c1", Function: FunctionCall{
			Name: "zeta", Arguments: json.RawMessage(`{"b": "x", "a": 2, "nested": {"z": null, "y": [true, 1.5]}}`)}}}},
	}
	text, err := tmpl.Render(msgs, tools, true, nil)
	require.NoError(t, err)
	// Checked against Python jinja2 with transformers' settings (see testdata/make_golden.py).
	want := "<|im_start|>system\n<tools>" +
		`{"type": "function", "function": {"name": "zeta", "parameters": {"type": "object", "required": ["b", "a"], ` +
		`"properties": {"b": {"type": "string", "description": "<b> & \"q\" ü 🙂"}, "a": {"type": "integer"}}}}}` +
		"</tools><|im_end|>\n" +
		"<|im_start|>user\ncall it<|im_end|>\n" +
		"<|im_start|>assistant\n<tool_call>\n" +
		`{"name": "zeta", "arguments": {"b": "x", "a": 2, "nested": {"z": null, "y": [true, 1.5]}}}` +
		"\n</tool_call><|im_end|>\n" +
		"<|im_start|>assistant\n" // the template's final newline is dropped (keep_trailing_newline=False)
	assert.Equal(t, want, text)

	// The same schema through a plain Go map loses its order: that is why tools are raw JSON.
	var unordered map[string]any
	require.NoError(t, json.Unmarshal(tools[0], &unordered))
	sorted, err := Compile(`{{ t | tojson }}`)
	require.NoError(t, err)
	out, err := sorted.Render(nil, nil, false, map[string]any{"t": unordered})
	require.NoError(t, err)
	assert.Contains(t, out, `"properties": {"a": {"type": "integer"}, "b": `)
}

func TestRenderVariables(t *testing.T) {
	tmpl, err := Compile(
		`{{ bos_token }}|{{ eos_token }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|`+
			`{{ enable_thinking }}|{{ messages[0].reasoning_content is defined }}|{{ messages[1].reasoning_content }}|`+
			`{{ messages[1].tool_call_id }}|{{ messages[1].name }}|{{ extra.k2 }}{{ extra | tojson }}`,
		WithSpecialTokens(map[string]any{"bos_token": "<s>", "eos_token": "</s>"}))
	require.NoError(t, err)
	msgs := []Message{{Role: "user", Content: Text("u")},
		{Role: "tool", Content: Text("r"), ReasoningContent: Text("why"), ToolCallID: "c9", Name: "calc"}}
	text, err := tmpl.Render(msgs, nil, true, map[string]any{
		"enable_thinking": false, "eos_token": "<|end|>", "extra": json.RawMessage(`{"k2": 2, "k1": [1]}`)})
	require.NoError(t, err)
	assert.Equal(t, `<s>|<|end|>|True|True|True|False|False|why|c9|calc|2{"k2": 2, "k1": [1]}`, text)
}

func TestRenderErrors(t *testing.T) {
	tmpl, err := Compile(`{% if messages|length == 0 %}{{ raise_exception('No messages given.') }}{% endif %}{{ x }}`)
	require.NoError(t, err)
	tests := []struct {
		name     string
		messages []Message
		tools    []json.RawMessage
		kwargs   map[string]any
		errPart  string
	}{
		{"raise_exception", nil, nil, nil, "No messages given."},
		{"reserved kwarg", []Message{{Role: "user"}}, nil, map[string]any{"messages": 1}, `keyword argument "messages" is set by Render`},
		{"bad tool json", []Message{{Role: "user"}}, []json.RawMessage{json.RawMessage(`{"a":`)}, nil, "tools[0]"},
		{"trailing tool json", []Message{{Role: "user"}}, []json.RawMessage{json.RawMessage(`{} {}`)}, nil, "data after the first value"},
		{"bad arguments json", []Message{{Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f", Arguments: json.RawMessage(`{x}`)}}}}}, nil, nil, "messages[0].tool_calls[0]"},
		{"unsupported kwarg", []Message{{Role: "user"}}, nil, map[string]any{"x": struct{}{}}, "unsupported type struct {}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tmpl.Render(tt.messages, tt.tools, false, tt.kwargs)
			assert.ErrorContains(t, err, tt.errPart)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
		})
	}

	_, err = Compile(`{% for x in %}`)
	assert.ErrorContains(t, err, "cannot compile the chat template")
	_, err = FromConfig(&tokenizer.Config{ChatTemplates: map[string]string{"rag": "x"}})
	assert.ErrorContains(t, err, "no default chat_template")
	assert.Equal(t, status.NotFound, status.CodeOf(err))
}

func TestDecodeJSON(t *testing.T) {
	tmpl, err := Compile(`{{ v | tojson }}`)
	require.NoError(t, err)
	tests := []struct {
		name, in, want string
	}{
		{"order kept", `{"z": 1, "a": {"y": 2, "b": 3}}`, `{"z": 1, "a": {"y": 2, "b": 3}}`},
		{"duplicate key keeps first slot, last value", `{"a": 1, "b": 2, "a": 3}`, `{"a": 3, "b": 2}`},
		{"big int stays int", `[9007199254740993, -1, 0.25]`, `[9007199254740993, -1, 0.25]`},
		{"unicode unescaped", `"\u00fc\ud83d\ude42"`, `"ü🙂"`},
		{"string", `"plain"`, `"plain"`},
		{"empty containers", `{"a": [], "b": {}}`, `{"a": [], "b": {}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tmpl.Render(nil, nil, false, map[string]any{"v": json.RawMessage(tt.in)})
			require.NoError(t, err)
			assert.Equal(t, tt.want, out)
		})
	}
}

func TestStrftime(t *testing.T) {
	at := time.Date(2024, 7, 4, 9, 5, 3, 120000000, time.UTC)
	tests := []struct{ format, want string }{
		{"%d %b %Y", "04 Jul 2024"},
		{"%A, %B %-d, %Y", "Thursday, July 4, 2024"},
		{"%H:%M:%S %p %I", "09:05:03 AM 09"},
		{"%-H:%-M:%-S", "9:5:3"},
		{"%y-%m-%d %j %e %a %w %u", "24-07-04 186  4 Thu 4 4"},
		{"%F %T %D %f", "2024-07-04 09:05:03 07/04/24 120000"},
		{"100%% %Z%z %Q", "100%  %Q"},
		{"trailing %", "trailing %"},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			assert.Equal(t, tt.want, Strftime(at, tt.format))
		})
	}
	assert.Equal(t, "12 PM", Strftime(time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC), "%I %p"))
}

func TestNormalizeSource(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a\r\nb\r\n", "a\nb"},
		{"a\rb", "a\nb"},
		{"a\n\n", "a\n"},
		{"a", "a"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.in), func(t *testing.T) {
			assert.Equal(t, tt.want, normalizeSource(tt.in))
		})
	}
}

func TestParseInputs(t *testing.T) {
	msgs, err := ParseMessages([]byte(`[{"role": "assistant", "content": null, "tool_calls": [{"id": "a",
		"type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]}]`))
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Nil(t, msgs[0].Content)
	assert.JSONEq(t, `"{\"x\": 1}"`, string(msgs[0].ToolCalls[0].Function.Arguments))

	_, err = ParseMessages([]byte(`{"role": "user"}`))
	assert.ErrorContains(t, err, "messages must be a JSON list")
	tools, err := ParseTools([]byte(" null "))
	require.NoError(t, err)
	assert.Nil(t, tools)
	_, err = ParseTools([]byte(`{}`))
	assert.ErrorContains(t, err, "tools must be a JSON list")
}

func TestContinuation(t *testing.T) {
	prefix := []uint32{1, 2, 3}
	got := Continuation(prefix, []uint32{4}, nil, []uint32{5, 6})
	assert.Equal(t, []uint32{1, 2, 3, 4, 5, 6}, got)
	got[0] = 99
	assert.Equal(t, []uint32{1, 2, 3}, prefix, "the checkpoint prefix is never aliased")
	assert.Equal(t, []uint32{}, Continuation(nil))
}

func TestConcurrentRender(t *testing.T) {
	tmpl, err := Compile(chatMLTools)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				content := fmt.Sprintf("worker %d turn %d", w, i)
				text, err := tmpl.Render([]Message{{Role: "user", Content: Text(content)}}, nil, false, nil)
				assert.NoError(t, err)
				assert.Equal(t, "<|im_start|>user\n"+content+"<|im_end|>\n", text)
			}
		}(w)
	}
	wg.Wait()
}

func ExampleTemplate_Render() {
	tmpl, _ := Compile(`{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`)
	text, _ := tmpl.Render([]Message{{Role: "user", Content: Text("What is 2 + 2?")}}, nil, true, nil)
	fmt.Print(text)
	// Output:
	// <|im_start|>user
	// What is 2 + 2?<|im_end|>
	// <|im_start|>assistant
}

func ExampleContinuation() {
	checkpoint := []uint32{151644, 872, 198} // the exact prefix the policy already saw
	generated := []uint32{40, 1079}
	fmt.Println(Continuation(checkpoint, generated))
	// Output: [151644 872 198 40 1079]
}

// TestPythonValues: values reach the template as Python has them (issue #46): dict methods
// on a dict holding a key of the same name, text filters on numbers and lists, None
// keyword arguments, and integers beyond int64 refused by name.
func TestPythonValues(t *testing.T) {
	tmpl, err := Compile(`{% for k, v in p.items() %}{{ k }}={{ v.get('type') }};{% endfor %}{{ p.keys() | list }}|{{ x | trim }}|{{ y | upper }}|{{ z }}`)
	require.NoError(t, err)
	p := json.RawMessage(`{"items": {"type": "array"}, "keys": {"type": "integer"}, "get": {}}`)
	text, err := tmpl.Render([]Message{{Role: "user"}}, nil, false, map[string]any{"p": p, "x": json.RawMessage(`1.0`), "y": json.RawMessage(`[1.0, "it's"]`), "z": json.RawMessage(nil)})
	require.NoError(t, err)
	assert.Equal(t, `items=array;keys=integer;get=None;['items', 'keys', 'get']|1.0|[1.0, "IT'S"]|None`, text)

	_, err = tmpl.Render([]Message{{Role: "user"}}, nil, false, map[string]any{"p": json.RawMessage(`[1]`)})
	assert.ErrorContains(t, err, "'list' object has no attribute 'items'")
	_, err = tmpl.Render([]Message{{Role: "user"}}, nil, false, map[string]any{"p": json.RawMessage(`{"n": 18446744073709551616}`)})
	assert.ErrorContains(t, err, "keyword argument p: integer 18446744073709551616 is beyond the 64-bit range")
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
}
