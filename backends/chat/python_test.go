package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/focus-go/focus-go/backends/tokenizer"
	"github.com/focus-go/focus-go/core/status"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Expected outputs below were printed by CPython 3.11's json.dumps and by Jinja2 3.1.6 in
// transformers' environment (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks).

func TestTojsonIsPythonJSONDumps(t *testing.T) {
	tests := []struct {
		name, args, in, want string
	}{
		{"indent keeps order and <>&", "indent=4", `{"b": [1, {"x": "<a> & </a>"}], "a": {}, "c": []}`,
			"{\n    \"b\": [\n        1,\n        {\n            \"x\": \"<a> & </a>\"\n        }\n    ],\n    \"a\": {},\n    \"c\": []\n}"},
		{"indent 0", "indent=0", `{"k": [1, 2]}`, "{\n\"k\": [\n1,\n2\n]\n}"},
		{"indent string", "indent='\\t'", `[1, [2]]`, "[\n\t1,\n\t[\n\t\t2\n\t]\n]"},
		{"floats as Python repr", "", `[1.0, 1e-05, 1e16, 0.0001, 123456.789, -0.0, 1.5e300, 2.5, 1e15, 0.1, 3]`,
			`[1.0, 1e-05, 1e+16, 0.0001, 123456.789, -0.0, 1.5e+300, 2.5, 1000000000000000.0, 0.1, 3]`},
		{"ensure_ascii", "ensure_ascii=true", `{"é": "🙂 ü \u2028 \u007f"}`, `{"\u00e9": "\ud83d\ude42 \u00fc \u2028 \u007f"}`},
		{"no HTML or U+2028 escaping", "", `"\u2028\u2029<>&'\u007f"`, "\"\u2028\u2029<>&'\u007f\""},
		{"control characters", "", `"\u0000\u0001\u001f\b\f\n\r\t\"\\"`, `"\u0000\u0001\u001f\b\f\n\r\t\"\\"`},
		{"separators", "separators=(',', ':')", `{"a": [1, 2], "b": null}`, `{"a":[1,2],"b":null}`},
		{"sort_keys", "sort_keys=true", `{"b": 1, "a": {"d": true, "c": false}, "B": 2}`, `{"B": 2, "a": {"c": false, "d": true}, "b": 1}`},
		{"indent with separators", "indent=2, separators=(', ', ' = ')", `{"a": 1, "b": 2}`, "{\n  \"a\" = 1, \n  \"b\" = 2\n}"},
		{"positional ensure_ascii", "true", `"ü"`, `"\u00fc"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := `{{ v | tojson }}`
			if tt.args != "" {
				src = `{{ v | tojson(` + tt.args + `) }}`
			}
			tmpl, err := Compile(src)
			require.NoError(t, err)
			out, err := tmpl.Render(nil, nil, false, map[string]any{"v": json.RawMessage(tt.in)})
			require.NoError(t, err)
			assert.Equal(t, tt.want, out)
		})
	}
}

func TestPythonOperatorsAndPrinting(t *testing.T) {
	m := json.RawMessage(`{"role": "user", "d": {"a": 1.0, "q": "it's", "n": null, "t": true}}`)
	tests := []struct {
		src, want, errPart string
	}{
		{`{{ 'a' in m.content }}`, "False", ""},
		{`{{ m.content is iterable }}`, "True", ""},
		{`{{ m.content is not iterable }}`, "False", ""},
		{`{{ none is iterable }}`, "False", ""},
		{`{{ m.content|length }}`, "0", ""},
		{`{{ 'x' + m.content }}`, "", "'x' + m.content with a missing value"},
		{`{{ m.content + 'x' }}`, "", "m.content + 'x' with a missing value"},
		{`{% for c in m.content %}{{c}}{% endfor %}ok`, "ok", ""},
		{`{{ m.content ~ 'x' }}`, "x", ""},
		{`{{ "d=" ~ m.d ~ 1.0 ~ none }}`, `d={'a': 1.0, 'q': "it's", 'n': None, 't': True}1.0None`, ""},
		{`{{ 1 in 'abc' }}`, "", "'in <string>' requires string as left operand, not int"},
		{`{{ 'a' in none }}`, "", "argument of type 'NoneType' is not iterable"},
		{`{{ 'a' not in 'abc' }}`, "False", ""},
		{`{{ 'a' + none }}`, "", `can only concatenate str (not "NoneType") to str`},
		{`{{ 'args: ' + m.d }}`, "", `can only concatenate str (not "dict") to str`},
		{`{{ [1] + 'a' }}`, "", `can only concatenate list (not "str") to list`},
		{`{{ 1 + 'a' }}`, "", "unsupported operand type(s) for +: 'int' and 'str'"},
		{`{{ true + 1 }}`, "2", ""},
		{`{{ 1.5 + 1 }}`, "2.5", ""},
		{`{{ 2.0 + 1 }}`, "3.0", ""},
		{`{{ [1] + [2] }}`, "[1, 2]", ""},
		{`{{ (m.content or '') + 'x' }}`, "x", ""},
		{`{{ m.content|default('d') + 'x' }}`, "dx", ""},
		{`{{ 'a' in m }}`, "False", ""},
		{`{{ 'role' in m }}`, "True", ""},
		{`{{ m.d }}`, `{'a': 1.0, 'q': "it's", 'n': None, 't': True}`, ""},
		{`{{ none }}|{{ 1.0 }}|{{ [1, 'a\n'] }}`, `None|1.0|[1, 'a\n']`, ""},
		{`{{ m.d|string }}`, `{'a': 1.0, 'q': "it's", 'n': None, 't': True}`, ""},
		{`{{ 'x' if m.content is defined else 'y' }}`, "y", ""},
		{`{% set s = 'a' + 'b' %}{{ s }}`, "ab", ""},
		{`{% if 'b' in 'abc' and not 'z' in 'abc' %}yes{% endif %}`, "yes", ""},
		{`{{ ['b', 'a'] | map('upper') | join(',') }}`, "B,A", ""},
		{`{{ ['b', 'a'] | map('tojson') | join(' | ') }}`, `"b" | "a"`, ""},
		{`{{ 'a' ~ 'b' 'c' }}`, "abc", ""},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			tmpl, err := Compile(tt.src)
			require.NoError(t, err)
			out, err := tmpl.Render(nil, nil, false, map[string]any{"m": m})
			if tt.errPart != "" {
				require.ErrorContains(t, err, tt.errPart)
				assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, out)
		})
	}
}

func TestWhitespaceControlIsLexical(t *testing.T) {
	tests := []struct{ src, want string }{
		{"{%- for o in xs -%}{{- o -}}{%- if not loop.last %} | {% endif -%}{%- endfor -%}", "a | b"},
		{"{%- for o in xs -%}{{ o }}{% if not loop.last %} | {% endif %}{%- endfor -%}", "a | b"},
		{"a {% if true %} b {% endif %} c", "a  b  c"},
		{"x  \n  {{- 'y' -}}  \n  z", "xyz"},
		{"x {#- note -#} y", "xy"},
		// The engine's own trimming reached across {{ }} tags to the nearest text (the real
		// gpt-oss template lost the indentation of its nested TypeScript types this way).
		{"{%- macro f() -%}a{{- ':' }}\n    {{ 'x' }}{%- endmacro -%}{{ f() }}", "a:\n    x"},
		{"{% if true %}\n  {{ 'x' }}\n{% endif %}", "  x\n"},
		{"  {% if true %}x{% endif %}", "x"},
		{"a\n    {% if true %}x{% endif %}", "a\nx"},
		{"{# c #}\n  x\n  {#- d #} y", "  x y"},
		{"a {% raw %} {{ x }} {% endraw %} b", "a  {{ x }}  b"},
		{"a\n  {%- raw -%}\n {{ x }}}} {%- endraw %}\nb", "a{{ x }}}}b"},
		{"{% for o in xs +%}\n{{ o }}{% endfor %}", "\na\nb"},
		{"{{ 'k' }}:{\n  {%- if true %}v{% endif %}}", "k:{v}"}, // Gemma 4 writes "{" right before a tag
	}
	for _, tt := range tests {
		tmpl, err := Compile(tt.src)
		require.NoError(t, err)
		out, err := tmpl.Render(nil, nil, false, map[string]any{"xs": []any{"a", "b"}})
		require.NoError(t, err)
		assert.Equal(t, tt.want, out, tt.src)
	}
}

func TestMessagesPassThroughLikeTransformers(t *testing.T) {
	tmpl, err := Compile(`{% for m in messages %}{{ m.keys()|list|join(',') }}={{ m.thinking }}/{{ m.reasoning_content }};{% endfor %}`)
	require.NoError(t, err)
	text, err := tmpl.RenderJSON([]json.RawMessage{
		json.RawMessage(`{"role": "assistant", "content": "x", "reasoning": "r", "custom": {"k": 1}}`),
		json.RawMessage(`{"role": "assistant", "thinking": "t", "content": null}`),
		json.RawMessage(`{"role": "assistant", "reasoning_content": null, "thinking": "u", "content": "c"}`),
		json.RawMessage(`{"role": "user", "content": "plain"}`),
	}, nil, false, nil)
	require.NoError(t, err)
	// {"thinking": r, **message, "reasoning_content": r} after dropping null-valued keys.
	assert.Equal(t, "thinking,role,content,reasoning,custom,reasoning_content=r/r;"+
		"thinking,role,reasoning_content=t/t;"+
		"thinking,role,content,reasoning_content=u/u;"+
		"role,content=/;", text)

	msgs := []Message{{Role: "assistant", Content: Text("4"), Thinking: Text("add")}}
	text, err = tmpl.Render(msgs, nil, false, nil)
	require.NoError(t, err)
	assert.Equal(t, "thinking,role,content,reasoning_content=add/add;", text)
}

func TestUnknownRolesAreRefused(t *testing.T) {
	tmpl, err := Compile(`{% for m in messages %}{% if m.role == 'ipython' %}py{% elif m.role == 'user' %}u{% endif %}{% endfor %}`)
	require.NoError(t, err)
	out, err := tmpl.Render([]Message{{Role: "user"}, {Role: "ipython"}, {Role: "tool"}}, nil, false, nil)
	require.NoError(t, err)
	assert.Equal(t, "upy", out)
	_, err = tmpl.Render([]Message{{Role: "user"}, {Role: "wizard", Content: Text("x")}}, nil, false, nil)
	require.ErrorContains(t, err, `messages[1] has role "wizard", which this chat template does not render`)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	_, err = tmpl.RenderJSON([]json.RawMessage{json.RawMessage(`{"content": "no role"}`)}, nil, false, nil)
	require.ErrorContains(t, err, "messages[0] has no role string")
	_, err = tmpl.RenderJSON([]json.RawMessage{json.RawMessage(`"text"`)}, nil, false, nil)
	require.ErrorContains(t, err, "messages[0] must be a JSON object")
}

// TestRewriterParsesRealTemplates checks that every tag of the templates we test against
// transformers goes through the expression rewriter (none kept as written).
func TestRewriterParsesRealTemplates(t *testing.T) {
	sources := map[string]string{}
	for _, name := range []string{"llama3_tools.jinja", "harmony_style.jinja", "constructs.jinja"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "tests", "chat_templates", name))
		require.NoError(t, err)
		sources[name] = string(data)
	}
	for _, name := range []string{"qwen25_style.jinja", "qwen_xml_style.jinja"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		sources[name] = string(data)
	}
	root := filepath.Join("..", "..", "build", "testdata")
	for _, family := range []string{"qwen3", "llama3_1", "deepseek_v3", "gemma3"} {
		cfg, err := tokenizer.LoadConfig(filepath.Join(root, family))
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s tokenizer config missing: CI must run make testdata: %v", family, err)
			}
			t.Logf("skipping %s: %v (run make testdata)", family, err)
			continue
		}
		sources[family] = cfg.ChatTemplate
	}
	for name, src := range sources {
		_, _, unparsed := rewriteFilters(normalizeSource(src))
		assert.Empty(t, unparsed, name)
	}
}

func TestRenderErrorNamesTheMessage(t *testing.T) {
	// DeepSeek V3's template concatenates tool-call arguments as text; Python raises
	// TypeError for a dict there, and UndefinedError for a null content.
	tmpl, err := Compile(`{% for m in messages %}{% if m.tool_calls is defined %}{{ 'args: ' + m.tool_calls[0].function.arguments }}{% else %}{{ '>' + m.content }}{% endif %}{% endfor %}`)
	require.NoError(t, err)
	_, err = tmpl.Render([]Message{{Role: "user", Content: Text("hi")},
		{Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f", Arguments: json.RawMessage(`{"city": "Paris"}`)}}}}}, nil, false, nil)
	require.ErrorContains(t, err, `once messages[1] (role "assistant") is included`)
	require.ErrorContains(t, err, `can only concatenate str (not "dict") to str`)
	_, err = tmpl.Render([]Message{{Role: "user", Content: Text("hi")}, {Role: "assistant"}, {Role: "user", Content: Text("x")}}, nil, false, nil)
	require.ErrorContains(t, err, `once messages[1] (role "assistant") is included`)
	require.ErrorContains(t, err, "'>' + m.content with a missing value")
}
