package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
	"github.com/focus-go/focus-go/core/status"
)

// Message is one chat message in the OpenAI / transformers shape. Its JSON form uses the
// same field names, so a JSON list of messages decodes straight into []Message.
type Message struct {
	Role string `json:"role"`
	// Content is the message text; nil is JSON null (an assistant turn that only calls
	// tools). Multimodal content lists are not supported.
	Content *string `json:"content"`
	// ReasoningContent is the assistant's thinking; nil leaves the key out, so templates
	// that test `message.reasoning_content is defined` see it undefined. Thinking is the
	// same under the name transformers 5 and gpt-oss templates read; either one is given
	// to the template under both names, as transformers does.
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	Thinking         *string    `json:"thinking,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	Name             string     `json:"name,omitempty"`
}

// ToolCall is one tool call of an assistant message.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // left out when empty, as in transformers
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and its arguments.
type FunctionCall struct {
	Name string `json:"name"`
	// Arguments is raw JSON: an object (rendered as an insertion-ordered dict, which is what
	// `arguments|tojson` and `arguments|items` in templates expect) or a JSON string (rendered
	// as that string, as transformers does when it is given the OpenAI string form).
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Text returns a pointer to s, for Message.Content and Message.ReasoningContent literals.
func Text(s string) *string { return &s }

// ParseMessages decodes a JSON list of messages.
func ParseMessages(data []byte) ([]Message, error) {
	var msgs []Message
	if err := json.Unmarshal(data, &msgs); err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "chat: messages must be a JSON list of {role, content, ...} objects")
	}
	return msgs, nil
}

// ParseMessageObjects splits a JSON list of messages into its raw objects, for
// Template.RenderJSON, which passes every key of each to the template.
func ParseMessageObjects(data []byte) ([]json.RawMessage, error) {
	var msgs []json.RawMessage
	if err := json.Unmarshal(data, &msgs); err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "chat: messages must be a JSON list of {role, content, ...} objects")
	}
	return msgs, nil
}

// ParseTools decodes a JSON list of tool schemas, keeping each schema's raw JSON (and so
// its key order).
func ParseTools(data []byte) ([]json.RawMessage, error) {
	if len(bytes.TrimSpace(data)) == 0 || string(bytes.TrimSpace(data)) == "null" {
		return nil, nil
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(data, &tools); err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "chat: tools must be a JSON list of tool schemas")
	}
	return tools, nil
}

// value converts a message into the dict a template sees: its JSON form (so unset
// optional fields are missing keys) normalised as transformers does (see messageValue).
func (m Message) value(index int) (jinja.Value, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return jinja.Value{}, status.Wrap(status.InvalidArgument, err, "chat: messages[%d]", index)
	}
	return messageValue(raw, index)
}

// reasoningFields are the names a message's reasoning is passed under, in transformers'
// order of preference (_REASONING_FIELDS in its chat_template_utils.py).
var reasoningFields = []string{"reasoning_content", "thinking", "reasoning"}

// messageValue converts one JSON message object into the dict the template sees, as
// transformers 5's apply_chat_template does: every key is passed through in its order,
// keys whose value is null are dropped (a null content becomes a missing content), and a
// message with reasoning under any of reasoning_content, thinking or reasoning gets it
// under both thinking (first, unless already present) and reasoning_content (in place, or
// last), which is what Qwen-style and gpt-oss-style templates read.
func messageValue(raw json.RawMessage, index int) (jinja.Value, error) {
	v, err := DecodeJSON(raw)
	if err != nil {
		return jinja.Value{}, status.Wrap(status.InvalidArgument, err, "chat: messages[%d]", index)
	}
	if !v.IsDict() {
		return jinja.Value{}, status.Errorf(status.InvalidArgument, "chat: messages[%d] must be a JSON object, got %.80s", index, raw)
	}
	in := v.AsDict()
	var reasoning *jinja.Value
	for _, name := range reasoningFields {
		if r, ok := in.Get(name); ok && !r.IsNone() {
			reasoning = &r
			break
		}
	}
	out := jinja.NewDict()
	d := out.AsDict()
	if reasoning != nil {
		d.Set("thinking", *reasoning)
	}
	for _, k := range in.Keys {
		item, _ := in.Get(k)
		if item.IsNone() {
			continue
		}
		if reasoning != nil && (k == "thinking" || k == "reasoning_content") {
			item = *reasoning
		}
		d.Set(k, item)
	}
	if reasoning != nil {
		d.Set("reasoning_content", *reasoning)
	}
	return out, nil
}

// DecodeJSON decodes one JSON value into a template value, keeping object keys in their
// written order (a repeated key keeps its first position and its last value, like Python's
// json.loads). Integers stay integers.
func DecodeJSON(data []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	var refused *status.Error
	if errors.As(err, &refused) { // valid JSON holding a value templates cannot take
		return jinja.Value{}, err
	}
	if err != nil {
		return jinja.Value{}, status.Wrap(status.InvalidArgument, err, "chat: invalid JSON %.80q", data)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return jinja.Value{}, status.Errorf(status.InvalidArgument, "chat: invalid JSON %.80q: data after the first value", data)
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := jinja.NewDict()
			d := v.AsDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				key, ok := kt.(string)
				if !ok {
					return jinja.Value{}, errors.New("object key is not a string")
				}
				item, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				d.Set(key, item)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			return v, nil
		case '[':
			items := []jinja.Value{}
			for dec.More() {
				item, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, item)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			return jinja.NewList(items), nil
		}
		return jinja.Value{}, errors.New("unexpected " + t.String())
	case json.Number:
		if !strings.ContainsAny(string(t), ".eE") {
			n, err := t.Int64()
			if err != nil { // Python keeps it an exact int; the engine has no such number
				return jinja.Value{}, status.Errorf(status.InvalidArgument,
					"integer %.40s is beyond the 64-bit range a chat template can render exactly; pass it as a string", t)
			}
			return jinja.NewInt(n), nil
		}
		f, err := t.Float64()
		if err != nil {
			return jinja.Value{}, status.Errorf(status.InvalidArgument, "number %.40s is out of range", t)
		}
		return jinja.NewFloat(f), nil
	default:
		return jinja.FromGoValue(t), nil
	}
}

// toValue converts a keyword argument: json.RawMessage keeps its key order, []Message and
// Message become message dicts, anything else goes through jinja.FromGoValue (map keys
// sorted).
func toValue(name string, x any) (jinja.Value, error) {
	switch v := x.(type) {
	case json.RawMessage:
		if len(v) == 0 { // a JSON null decoded into a RawMessage: Python's None
			return jinja.None(), nil
		}
		val, err := DecodeJSON(v)
		if err != nil {
			return jinja.Value{}, status.Wrap(status.InvalidArgument, err, "chat: keyword argument %s", name)
		}
		return val, nil
	case nil:
		return jinja.None(), nil
	case jinja.Value:
		return v, nil
	case Message:
		return v.value(0)
	case []Message:
		items := make([]jinja.Value, len(v))
		for i, m := range v {
			mv, err := m.value(i)
			if err != nil {
				return jinja.Value{}, err
			}
			items[i] = mv
		}
		return jinja.NewList(items), nil
	case []any:
		items := make([]jinja.Value, len(v))
		for i, item := range v {
			iv, err := toValue(name+"["+strconv.Itoa(i)+"]", item)
			if err != nil {
				return jinja.Value{}, err
			}
			items[i] = iv
		}
		return jinja.NewList(items), nil
	case int32:
		return jinja.NewInt(int64(v)), nil
	case uint32:
		return jinja.NewInt(int64(v)), nil
	case float32:
		return jinja.NewFloat(float64(v)), nil
	}
	out := jinja.FromGoValue(x)
	if out.IsUndefined() {
		return out, status.Errorf(status.InvalidArgument, "chat: keyword argument %s has unsupported type %T", name, x)
	}
	return out, nil
}
