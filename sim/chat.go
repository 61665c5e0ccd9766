package sim

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"github.com/ardanlabs/jinja"
	"github.com/focus-go/focus-go/core/status"
)

// chatTemplate is the generated model's chat template: ChatML with Qwen2.5-style (Hermes)
// tool calling. Tools are listed as JSON lines inside <tools></tools> in the system turn;
// assistant tool calls render as <tool_call>{"name": ..., "arguments": ...}</tool_call>;
// tool results go back in a user turn inside <tool_response></tool_response>.
const chatTemplate = `{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content }}
    {%- else %}
        {{- 'You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {%- if tool_call.arguments is string %}
                {{- tool_call.arguments }}
            {%- else %}
                {{- tool_call.arguments | tojson }}
            {%- endif %}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
`

// ChatTemplate is the Jinja chat template written into the generated tokenizer_config.json.
func ChatTemplate() string { return chatTemplate }

// compileTemplate compiles src, falling back to the simulator's own template when src is
// empty or uses Jinja the Go engine cannot compile.
func compileTemplate(src string) (*jinja.Template, error) {
	if src != "" {
		if t, err := jinja.Compile(src); err == nil {
			return t, nil
		}
	}
	t, err := jinja.Compile(chatTemplate)
	if err != nil {
		return nil, status.Wrap(status.Internal, err, "sim: compiling the built-in chat template")
	}
	return t, nil
}

// toolCallText is the Hermes-style call the model writes. The malformed variant leaves
// the argument string unterminated, so its arguments are not valid JSON.
func toolCallText(name, param, value string, malformed bool) string {
	args := "{}"
	if param != "" {
		v, _ := json.Marshal(value)
		p, _ := json.Marshal(param)
		args = "{" + string(p) + ": " + string(v) + "}"
		if malformed {
			args = "{" + string(p) + ": " + string(v[:len(v)-1]) + "}"
		}
	} else if malformed {
		args = "{"
	}
	n, _ := json.Marshal(name)
	return "<tool_call>\n{\"name\": " + string(n) + ", \"arguments\": " + args + "}\n</tool_call>"
}

// toolSpec is what the model takes from a tool definition: its name and the string
// parameter it fills with the problem's expression ("" when there is none).
type toolSpec struct{ name, param string }

// parseTools reads the tool JSON lines of the last <tools> block in a rendered prompt.
func parseTools(ctx string) []toolSpec {
	i := strings.LastIndex(ctx, "<tools>")
	if i < 0 {
		return nil
	}
	body := ctx[i+len("<tools>"):]
	if j := strings.Index(body, "</tools>"); j >= 0 {
		body = body[:j]
	}
	var out []toolSpec
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var t struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
			Function   *struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal([]byte(line), &t) != nil {
			continue
		}
		if t.Function != nil {
			t.Name, t.Parameters = t.Function.Name, t.Function.Parameters
		}
		if t.Name == "" {
			continue
		}
		out = append(out, toolSpec{name: t.Name, param: stringParam(t.Parameters)})
	}
	return out
}

// stringParam picks the parameter to fill: the first required string property, else the
// first string property by name.
func stringParam(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return ""
	}
	isString := func(name string) bool {
		p, ok := s.Properties[name]
		if !ok {
			return false
		}
		switch t := p.Type.(type) {
		case string:
			return t == "string"
		case []any:
			for _, x := range t {
				if x == "string" {
					return true
				}
			}
		}
		return false
	}
	for _, r := range s.Required {
		if isString(r) {
			return r
		}
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if isString(n) {
			return n
		}
	}
	return ""
}

// parsedCall is one tool call found in generated text; arguments stay a string, which may
// be invalid JSON when the model wrote a malformed call.
type parsedCall struct{ name, arguments string }

var nameRe = regexp.MustCompile(`"name"\s*:\s*"([^"]*)"`)

// splitToolCalls separates <tool_call> blocks from the rest of the text.
func splitToolCalls(text string) (string, []parsedCall) {
	var calls []parsedCall
	var rest strings.Builder
	for {
		i := strings.Index(text, "<tool_call>")
		if i < 0 {
			rest.WriteString(text)
			break
		}
		rest.WriteString(text[:i])
		body := text[i+len("<tool_call>"):]
		j := strings.Index(body, "</tool_call>")
		if j >= 0 {
			text = body[j+len("</tool_call>"):]
			body = body[:j]
		} else {
			text = ""
		}
		body = strings.TrimSpace(body)
		var call struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if json.Unmarshal([]byte(body), &call) == nil && call.Name != "" {
			args := string(call.Arguments)
			if len(call.Arguments) > 0 && call.Arguments[0] == '"' {
				_ = json.Unmarshal(call.Arguments, &args)
			}
			if args == "" {
				args = "{}"
			}
			calls = append(calls, parsedCall{name: call.Name, arguments: args})
			continue
		}
		// Malformed: recover the name and hand the raw argument text on, as an API would.
		m := nameRe.FindStringSubmatch(body)
		if m == nil {
			rest.WriteString("<tool_call>" + body)
			continue
		}
		args := ""
		if k := strings.Index(body, `"arguments":`); k >= 0 {
			args = strings.TrimSpace(body[k+len(`"arguments":`):])
			args = strings.TrimSuffix(args, "}")
		}
		calls = append(calls, parsedCall{name: m[1], arguments: args})
	}
	return strings.TrimSpace(rest.String()), calls
}
