package parse

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/status"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitReasoning(t *testing.T) {
	tests := []struct {
		name, text, reasoning, visible string
	}{
		{"none", "  just text \n", "", "just text"},
		{"qwen3 think block", "<think>\nLet me add.\n</think>\n\nThe answer is 7.", "Let me add.", "The answer is 7."},
		{"prompt opened think", "Thinking here.\n</think>\n\nAnswer.", "Thinking here.", "Answer."},
		{"empty think (enable_thinking false)", "<think>\n\n</think>\n\nHi!", "", "Hi!"},
		{"cut off while thinking", "<think>\nstill going", "still going", ""},
		{"text before think kept", "Sure. <think>hmm</think> Done.", "hmm", "Sure.  Done."},
		{"only first close splits", "<think>a</think>b</think>c", "a", "b</think>c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, v := SplitReasoning(tt.text)
			assert.Equal(t, tt.reasoning, r)
			assert.Equal(t, tt.visible, v)
		})
	}
}

func TestParseHermes(t *testing.T) {
	tests := []struct {
		name string
		text string
		want action.ToolTurn
	}{
		{"qwen3 thinking then call",
			"<think>\nThe user wants the weather in Paris. I should call get_weather.\n</think>\n\n" +
				"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris, FR\", \"unit\": \"celsius\"}}\n</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "get_weather", Arguments: `{"location": "Paris, FR", "unit": "celsius"}`}},
				Reasoning: "The user wants the weather in Paris. I should call get_weather."}},
		{"qwen2.5 parallel calls with text",
			"Let me check both cities.\n<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San Francisco, CA, USA\"}}\n</tool_call>\n" +
				"<tool_call>\n{\"name\": \"get_temperature_date\", \"arguments\": {\"location\": \"San Francisco, CA, USA\", \"date\": \"2024-10-01\"}}\n</tool_call>",
			action.ToolTurn{Text: "Let me check both cities.", ToolCalls: []action.ToolCall{
				{Name: "get_current_temperature", Arguments: `{"location": "San Francisco, CA, USA"}`},
				{Name: "get_temperature_date", Arguments: `{"location": "San Francisco, CA, USA", "date": "2024-10-01"}`}}}},
		{"no call", "<think>\n\n</think>\n\nThe capital of France is Paris.",
			action.ToolTurn{Text: "The capital of France is Paris."}},
		{"arguments as JSON string", `<tool_call>{"name": "f", "arguments": "{\"x\": [1, 2]}"}</tool_call>`,
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "f", Arguments: `{"x": [1, 2]}`}}}},
		{"parameters alias and missing arguments", "<tool_call>{\"name\": \"g\", \"parameters\": {\"y\": true}}</tool_call>\n<tool_call>{\"name\": \"h\"}</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "g", Arguments: `{"y": true}`}, {Name: "h", Arguments: `{}`}}}},
		{"call drafted inside think is not a call",
			"<think>maybe <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call>? no.</think>I know this: 42.",
			action.ToolTurn{Text: "I know this: 42.", Reasoning: "maybe <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call>? no."}},
		{"unclosed block cut by length stays text", "Calling.\n<tool_call>\n{\"name\": \"get_weather\", \"argu",
			action.ToolTurn{Text: "Calling.\n<tool_call>\n{\"name\": \"get_weather\", \"argu"}},
		{"malformed: extra brace",
			"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}}\n</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "get_weather", Arguments: `{"name": "get_weather", "arguments": {"location": "Paris"}}}`,
				Error: "text after the tool call's JSON object"}}}},
		{"malformed: single quotes",
			"<tool_call>\n{'name': 'get_weather', 'arguments': {'location': 'Paris'}}\n</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Arguments: `{'name': 'get_weather', 'arguments': {'location': 'Paris'}}`,
				Error: "tool call is not a JSON object: invalid character '\\'' looking for beginning of object key string"}}}},
		{"malformed: truncated JSON keeps the name",
			"<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"a</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "search", Arguments: `{"name": "search", "arguments": {"q": "a`,
				Error: "tool call is not a JSON object: unexpected EOF"}}}},
		{"malformed: no name", `<tool_call>{"arguments": {}}</tool_call>`,
			action.ToolTurn{ToolCalls: []action.ToolCall{{Arguments: `{"arguments": {}}`, Error: `tool call has no "name" string`}}}},
		{"malformed: arguments array", `<tool_call>{"name": "f", "arguments": [1]}</tool_call>`,
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "f", Arguments: `{"name": "f", "arguments": [1]}`, Error: "arguments are not a JSON object"}}}},
		{"malformed: arguments string not JSON", `<tool_call>{"name": "f", "arguments": "x=1"}</tool_call>`,
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "f", Arguments: `{"name": "f", "arguments": "x=1"}`, Error: "arguments string is not a JSON object"}}}},
		{"malformed: empty block", `<tool_call></tool_call>`,
			action.ToolTurn{ToolCalls: []action.ToolCall{{Error: "tool call is not a JSON object: EOF"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseHermes(action.Result{Text: tt.text, StopReason: "stop"})
			assert.Equal(t, tt.want, got)
			for _, c := range got.ToolCalls {
				if !c.Malformed() {
					assert.True(t, json.Valid([]byte(c.Arguments)), c.Arguments)
				}
			}
		})
	}
}

// weatherTools are the schemas the Qwen XML tests type parameters with.
var weatherTools = []json.RawMessage{
	json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
		"properties": {"location": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
		"zip": {"type": "string"}, "limit": {"type": ["integer", "null"]}, "ratio": {"type": "number"},
		"opts": {"type": "object"}, "ids": {"type": "array"}}}}}`),
	json.RawMessage(`{"name": "bare_tool", "parameters": {"properties": {"n": {"type": "integer"}}}}`),
	json.RawMessage(`not json`),
}

func TestParseQwenXML(t *testing.T) {
	tests := []struct {
		name  string
		tools []json.RawMessage
		text  string
		want  action.ToolTurn
	}{
		{"qwen3.5 thinking then call (prompt opened think)", weatherTools,
			"The user wants the forecast.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=location>\nParis, FR\n</parameter>\n" +
				"<parameter=days>\n3\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n</function>\n</tool_call>",
			action.ToolTurn{Reasoning: "The user wants the forecast.", ToolCalls: []action.ToolCall{{Name: "get_weather",
				Arguments: `{"location": "Paris, FR", "days": 3, "metric": true}`}}}},
		{"schema keeps a numeric-looking string", weatherTools,
			"<tool_call>\n<function=get_weather>\n<parameter=zip>\n02139\n</parameter>\n<parameter=limit>\nNone\n</parameter>\n" +
				"<parameter=ratio>\n0.5\n</parameter>\n<parameter=opts>\n{\"a\": [1]}\n</parameter>\n<parameter=ids>\n[3, 4]\n</parameter>\n</function>\n</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "get_weather",
				Arguments: `{"zip": "02139", "limit": null, "ratio": 0.5, "opts": {"a": [1]}, "ids": [3, 4]}`}}}},
		{"schema type that does not fit keeps the text", weatherTools,
			"<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "get_weather", Arguments: `{"days": "three"}`}}}},
		{"bare schema", weatherTools,
			"<tool_call>\n<function=bare_tool>\n<parameter=n>\n7\n</parameter>\n</function>\n</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "bare_tool", Arguments: `{"n": 7}`}}}},
		{"no schema: literals and strings", nil,
			"I'll run it.\n\n<tool_call>\n<function=run>\n<parameter=cmd>\nls -la <dir> & echo \"hi\"\n</parameter>\n<parameter=timeout>\n30\n</parameter>\n" +
				"<parameter=verbose>\nFalse\n</parameter>\n<parameter=env>\n{\"A\": \"1\"}\n</parameter>\n<parameter=code>\n\ndef f():\n    return 1\n\n</parameter>\n</function>\n</tool_call>",
			action.ToolTurn{Text: "I'll run it.", ToolCalls: []action.ToolCall{{Name: "run",
				Arguments: `{"cmd": "ls -la <dir> & echo \"hi\"", "timeout": 30, "verbose": false, "env": {"A": "1"}, "code": "\ndef f():\n    return 1\n"}`}}}},
		{"no parameters", nil, "<tool_call>\n<function=now>\n</function>\n</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "now", Arguments: `{}`}}}},
		{"missing closing tags tolerated", nil,
			"<tool_call>\n<function=f>\n<parameter=a>\nx\n<parameter=b>\ny\n</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "f", Arguments: `{"a": "x", "b": "y"}`}}}},
		{"two calls, unicode", nil,
			"<tool_call>\n<function=say>\n<parameter=text>\n你好 🙂\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=say>\n<parameter=text>\nÿ\n</parameter>\n</function>\n</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "say", Arguments: `{"text": "你好 🙂"}`}, {Name: "say", Arguments: `{"text": "ÿ"}`}}}},
		{"malformed: hermes JSON in an XML model", nil,
			"<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Arguments: `{"name": "f", "arguments": {}}`, Error: "tool call has no <function=NAME> tag"}}}},
		{"malformed: unclosed function tag", nil, "<tool_call><function=f</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Arguments: `<function=f`, Error: "tool call's <function= tag is not closed with '>'"}}}},
		{"malformed: empty name", nil, "<tool_call><function=>\n</function></tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Arguments: "<function=>\n</function>", Error: "tool call has an empty function name"}}}},
		{"malformed: repeated parameter", nil,
			"<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=a>\n2\n</parameter>\n</function>\n</tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "f", Arguments: "<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=a>\n2\n</parameter>\n</function>",
				Error: `parameter "a" is given twice`}}}},
		{"malformed: unclosed parameter tag", nil, "<tool_call><function=f>\n<parameter=a\n</function></tool_call>",
			action.ToolTurn{ToolCalls: []action.ToolCall{{Name: "f", Arguments: "<function=f>\n<parameter=a\n</function>", Error: "a <parameter= tag is not closed with '>'"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := QwenXML{Tools: tt.tools}.Parse(action.Result{Text: tt.text, StopReason: "stop"})
			assert.Equal(t, tt.want, got)
			for _, c := range got.ToolCalls {
				if !c.Malformed() {
					assert.True(t, isJSONObject([]byte(c.Arguments)), c.Arguments)
				}
			}
		})
	}
	assert.Equal(t, ParseQwenXML(action.Result{Text: tests[4].text}), tests[4].want)
}

func TestParseNative(t *testing.T) {
	got := ParseNative(action.Result{Text: "<think>plan</think>Calling now.", StopReason: "tool_calls", NativeToolCalls: []action.ToolCall{
		{Name: "f", Arguments: `{"x": 1}`, CallID: "call_1"},
		{Name: "g", Arguments: "", CallID: "call_2"},
		{Name: "h", Arguments: `{"x": `, CallID: "call_3"},
		{Name: "", Arguments: `{}`, CallID: "call_4"},
	}})
	assert.Equal(t, action.ToolTurn{Text: "Calling now.", Reasoning: "plan", ToolCalls: []action.ToolCall{
		{Name: "f", Arguments: `{"x": 1}`, CallID: "call_1"},
		{Name: "g", Arguments: `{}`, CallID: "call_2"},
		{Name: "h", Arguments: `{"x": `, CallID: "call_3", Error: "arguments are not a JSON object"},
		{Name: "", Arguments: `{}`, CallID: "call_4", Error: "tool call has no function name"},
	}}, got)
	assert.True(t, got.Malformed())
	assert.False(t, ParseNative(action.Result{Text: "plain"}).Malformed())
}

func TestBuildToolTurnCustomDecoder(t *testing.T) {
	turn := BuildToolTurn("a<tool_call>X</tool_call>b<tool_call>\nY\n</tool_call>c", func(block string) action.ToolCall {
		return action.ToolCall{Name: strings.TrimSpace(block), Arguments: "{}"}
	})
	assert.Equal(t, action.ToolTurn{Text: "abc", ToolCalls: []action.ToolCall{{Name: "X", Arguments: "{}"}, {Name: "Y", Arguments: "{}"}}}, turn)
}

func TestParsersAndProfiles(t *testing.T) {
	r := action.Result{Tokens: []uint32{1, 2}, Text: " <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> ", StopReason: "stop"}
	tests := []struct {
		profile string
		kind    action.Kind
		check   func(t *testing.T, a action.Action)
	}{
		{ProfileTokenChunk, action.KindTokens, func(t *testing.T, a action.Action) {
			assert.Equal(t, &action.TokenChunk{Tokens: []uint32{1, 2}, Finished: true}, a.Chunk)
		}},
		{ProfileText, action.KindText, func(t *testing.T, a action.Action) {
			assert.Equal(t, `<tool_call>{"name": "f", "arguments": {}}</tool_call>`, a.Text)
		}},
		{ProfileHermes, action.KindTool, func(t *testing.T, a action.Action) { assert.Equal(t, "f", a.Turn.ToolCalls[0].Name) }},
		{ProfileQwenXML, action.KindTool, func(t *testing.T, a action.Action) { assert.True(t, a.Turn.ToolCalls[0].Malformed()) }},
		{ProfileNative, action.KindTool, func(t *testing.T, a action.Action) { assert.Empty(t, a.Turn.ToolCalls) }},
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			p, err := ForProfile(tt.profile, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.kind, p.Kind())
			a, err := p.Parse(r)
			require.NoError(t, err)
			assert.Equal(t, tt.kind, a.Kind)
			tt.check(t, a)
		})
	}
	_, err := ForProfile("xml", nil)
	assert.ErrorContains(t, err, `unknown profile "xml"`)
	_, err = action.TokenChunkParser{}.Parse(action.Result{StopReason: "abort"})
	assert.Equal(t, status.Backend, status.CodeOf(err))

	models := map[string]string{"Qwen/Qwen3.5-4B": ProfileQwenXML, "Qwen/Qwen3-Coder-30B-A3B-Instruct": ProfileQwenXML,
		"/models/qwen3_6-35b": ProfileQwenXML, "Qwen/Qwen3-8B": ProfileHermes, "Qwen/Qwen2.5-7B-Instruct": ProfileHermes}
	for model, want := range models {
		got, err := FamilyFor(model, "")
		require.NoError(t, err)
		assert.Equal(t, want, got.Profile, model)
	}
}

// TestRoundTripFromGoldenPrompts parses the assistant turns that the reference Python
// renderer wrote (backends/chat/testdata/qwen3_golden.json) and checks that the calls
// come back with the arguments that were rendered.
func TestRoundTripFromGoldenPrompts(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "chat", "testdata", "qwen3_golden.json"))
	require.NoError(t, err)
	var g struct {
		Cases []struct {
			Name     string
			Messages []struct {
				Role      string
				ToolCalls []struct {
					Function struct {
						Name      string
						Arguments json.RawMessage
					}
				} `json:"tool_calls"`
			}
			Tools []json.RawMessage
			Text  string
		}
	}
	require.NoError(t, json.Unmarshal(data, &g))
	byName := map[string]int{}
	for i, c := range g.Cases {
		byName[c.Name] = i
	}
	tests := []struct {
		caseName string
		tools    string // the case whose tool schemas type the parameters
		parse    func(text string, tools []json.RawMessage) action.ToolTurn
	}{
		{"parallel calls and results", "", func(text string, _ []json.RawMessage) action.ToolTurn { return ParseHermes(action.Result{Text: text}) }},
		{"multi-step tools with reasoning", "", func(text string, _ []json.RawMessage) action.ToolTurn { return ParseHermes(action.Result{Text: text}) }},
		{"qwen xml tool calls", "qwen25 tools order preserved", func(text string, tools []json.RawMessage) action.ToolTurn {
			return QwenXML{Tools: append(tools, json.RawMessage(`{"name": "calculator", "parameters": {"properties": {"expression": {"type": "string"}}}}`))}.Parse(action.Result{Text: text})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.caseName, func(t *testing.T) {
			c := g.Cases[byName[tt.caseName]]
			var tools []json.RawMessage
			if tt.tools != "" {
				tools = g.Cases[byName[tt.tools]].Tools
			}
			// Each rendered assistant turn, in order, against each assistant message with calls.
			turns := strings.Split(c.Text, "<|im_start|>assistant\n")[1:]
			n := 0
			for _, m := range c.Messages {
				if m.Role != "assistant" || len(m.ToolCalls) == 0 {
					continue
				}
				require.Less(t, n, len(turns))
				body, _, _ := strings.Cut(turns[n], "<|im_end|>")
				got := tt.parse(body, tools)
				require.Len(t, got.ToolCalls, len(m.ToolCalls), body)
				for i, want := range m.ToolCalls {
					call := got.ToolCalls[i]
					assert.Empty(t, call.Error)
					assert.Equal(t, want.Function.Name, call.Name)
					assert.JSONEq(t, string(want.Function.Arguments), call.Arguments)
				}
				n++
			}
			assert.Positive(t, n)
		})
	}
}

func ExampleParseHermes() {
	turn := ParseHermes(action.Result{Text: "<think>\nNeed the weather.\n</think>\n\n" +
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", StopReason: "stop"})
	fmt.Printf("reasoning=%q text=%q\n", turn.Reasoning, turn.Text)
	for _, c := range turn.ToolCalls {
		fmt.Println(c.Name, c.Arguments, c.Malformed())
	}
	// Output:
	// reasoning="Need the weather." text=""
	// get_weather {"city": "Paris"} false
}

func ExampleQwenXML_Parse() {
	turn := QwenXML{}.Parse(action.Result{Text: "<tool_call>\n<function=add>\n<parameter=a>\n2\n</parameter>\n" +
		"<parameter=label>\nsum\n</parameter>\n</function>\n</tool_call>"})
	fmt.Println(turn.ToolCalls[0].Name, turn.ToolCalls[0].Arguments)
	// Output: add {"a": 2, "label": "sum"}
}

func ExampleParseTokenChunk() {
	chunk, _ := action.ParseTokenChunk(action.Result{Tokens: []uint32{10, 20}, StopReason: "length"})
	fmt.Println(chunk.Tokens, chunk.Finished)
	// Output: [10 20] false
}

func TestFamilyFor(t *testing.T) {
	template := func(fam string) string {
		data, err := os.ReadFile(filepath.Join("..", "..", "build", "testdata", fam, "tokenizer_config.json"))
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("real tokenizer %s missing (make testdata): %v", fam, err)
			}
			t.Skipf("real tokenizer %s missing (make testdata): %v", fam, err)
		}
		var cfg struct {
			ChatTemplate string `json:"chat_template"`
		}
		require.NoError(t, json.Unmarshal(data, &cfg))
		return cfg.ChatTemplate
	}
	names := []struct{ model, profile string }{
		{"Qwen/Qwen3.5-4B", ProfileQwenXML}, {"Qwen/Qwen3-Coder-30B-A3B-Instruct", ProfileQwenXML},
		{"Qwen/Qwen3-8B", ProfileHermes}, {"Qwen/Qwen2.5-7B-Instruct", ProfileHermes}, {"NousResearch/Hermes-3-Llama-3.1-8B", ProfileHermes},
		{"meta-llama/Llama-3.1-8B-Instruct", ProfileLlama3JSON}, {"meta-llama/Llama-3.2-3B-Instruct", ProfileLlama3JSON},
		{"/models/llama3_3-70b", ProfileLlama3JSON}, {"meta-llama/Llama-4-Scout-17B-16E-Instruct", ProfilePythonic},
		{"deepseek-ai/DeepSeek-V3", ProfileDeepSeekV3}, {"deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", ProfileDeepSeekV3},
		{"google/gemma-3-27b-it", ProfilePythonic}, {"openai/gpt-oss-20b", ProfileHarmony},
	}
	for _, tt := range names {
		f, err := FamilyFor(tt.model, "")
		require.NoError(t, err, tt.model)
		assert.Equal(t, tt.profile, f.Profile, tt.model)
	}
	// An unknown name is recognised by the template it ships.
	templates := []struct{ fam, profile string }{
		{"qwen3", ProfileHermes}, {"llama3_1", ProfileLlama3JSON}, {"deepseek_v3", ProfileDeepSeekV3}, {"gemma3", ProfilePythonic},
	}
	for _, tt := range templates {
		f, err := FamilyFor("/models/my-finetune", template(tt.fam))
		require.NoError(t, err, tt.fam)
		assert.Equal(t, tt.profile, f.Profile, tt.fam)
	}
	// The template wins over a name of another family (issue #46): a local folder named
	// after Llama holding a Qwen3 template gets the Qwen3 parser, a distill named after its
	// teacher the parser of the template it ships.
	for _, tt := range []struct{ model, fam, profile string }{
		{"/models/llama3-distill-of-qwen", "qwen3", ProfileHermes},
		{"my-org/Qwen3-8B-llama-chat", "llama3_1", ProfileLlama3JSON},
		{"google/gemma-3-finetune", "deepseek_v3", ProfileDeepSeekV3},
	} {
		f, err := FamilyFor(tt.model, template(tt.fam))
		require.NoError(t, err, tt.model)
		assert.Equal(t, tt.profile, f.Profile, tt.model)
		named, ok := FamilyByName(tt.model)
		require.True(t, ok, tt.model)
		assert.NotEqual(t, named, f, "the name names another family")
	}
	f, err := FamilyFor("/models/llama3-coder", "{{- '<tool_call>\n<function=' + name + '>' }}")
	require.NoError(t, err)
	assert.Equal(t, ProfileQwenXML, f.Profile)
	// A template of no known family leaves the choice to the name.
	f, err = FamilyFor("Qwen/Qwen3-8B", "{% for m in messages %}{{ m.content }}{% endfor %}")
	require.NoError(t, err)
	assert.Equal(t, ProfileHermes, f.Profile)
	f, err = FamilyFor("my-model", "{{ '<|start|>assistant<|channel|>final<|message|>' }}")
	require.NoError(t, err)
	assert.Equal(t, ProfileHarmony, f.Profile)

	_, err = FamilyFor("mistralai/Mistral-7B-Instruct-v0.3", "{{ '[INST]' }}")
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.ErrorContains(t, err, `cannot tell the tool-call dialect of model "mistralai/Mistral-7B-Instruct-v0.3"`)
	assert.ErrorContains(t, err, "qwen_xml, hermes, llama3_json, deepseek_v3, pythonic, harmony, native")
	_, err = FamilyFor("custom", "")
	assert.Error(t, err)
	for _, p := range Profiles() {
		_, err := ForProfile(p, nil)
		assert.NoError(t, err, p)
	}
	assert.True(t, action.KeepsSpecialTokens(HarmonyParser{}))
	assert.False(t, action.KeepsSpecialTokens(HermesParser{}))
}
