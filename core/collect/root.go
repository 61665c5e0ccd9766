package collect

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/focus-go/focus-go/core/status"
)

// RootMessages is the root conversation a caller renders the first prompt from, and
// the one rule for where an env's reset observation goes when the prompt is rendered
// from chat messages (the binding renders it so in both contexts): after the system
// prompt (omitted when "") come the problem's prompt (a JSON string is one user
// message; a JSON array holds the messages themselves, each an object) and then the
// reset observation: text is appended to the last message's content, after a blank
// line, when that message is a user message whose content is a string, and is a new
// user message otherwise; a JSON array of messages is appended as it is; null or ""
// adds nothing. Messages are returned as given, their keys in their order.
//
// (A reset observation given to the engine instead, by an env that Run resets
// itself, is conditioning after PromptTokens with exact-token segments and an error
// with Turns: see Run.)
func RootMessages(systemPrompt string, prompt, observation json.RawMessage) ([]json.RawMessage, error) {
	var messages []json.RawMessage
	if systemPrompt != "" {
		messages = append(messages, textMessage("system", systemPrompt))
	}
	switch kind, text, list := jsonShape(prompt); kind {
	case "string":
		messages = append(messages, textMessage("user", text))
	case "array":
		if err := checkMessages("problem prompt", list); err != nil {
			return nil, err
		}
		messages = append(messages, list...)
	default:
		return nil, status.Errorf(status.InvalidArgument, "problem prompt must be a string or a list of messages, got a JSON %s", kind)
	}
	switch kind, text, list := jsonShape(observation); kind {
	case "null", "missing":
	case "string":
		if text == "" {
			break
		}
		if n := len(messages); n > 0 {
			if merged, ok := appendUserText(messages[n-1], "\n\n"+text); ok {
				messages[n-1] = merged
				break
			}
		}
		messages = append(messages, textMessage("user", text))
	case "array":
		if err := checkMessages("env.reset() observation", list); err != nil {
			return nil, err
		}
		messages = append(messages, list...)
	default:
		return nil, status.Errorf(status.InvalidArgument, "env.reset() returned a JSON %s, expected str, list of messages or None", kind)
	}
	return messages, nil
}

// checkMessages refuses a list of messages with an entry that is not a JSON object.
func checkMessages(what string, list []json.RawMessage) error {
	for i, m := range list {
		if k, _, _ := jsonShape(m); k != "object" {
			return status.Errorf(status.InvalidArgument, "%s: message %d is a JSON %s, expected an object", what, i, k)
		}
	}
	return nil
}

func textMessage(role, content string) json.RawMessage {
	data, _ := json.Marshal(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{role, content})
	return data
}

// jsonShape classifies raw: "missing", "null", "string" (with its value), "array"
// (with its elements), "object", "number", "bool" or "invalid".
func jsonShape(raw json.RawMessage) (kind, text string, list []json.RawMessage) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "missing", "", nil
	}
	switch raw[0] {
	case 'n':
		return "null", "", nil
	case '"':
		if json.Unmarshal(raw, &text) == nil {
			return "string", text, nil
		}
	case '[':
		if json.Unmarshal(raw, &list) == nil {
			return "array", "", list
		}
	case '{':
		if json.Valid(raw) {
			return "object", "", nil
		}
	case 't', 'f':
		return "bool", "", nil
	default:
		if json.Valid(raw) {
			return "number", "", nil
		}
	}
	return "invalid", "", nil
}

// appendUserText returns message with suffix appended to its string content, when it
// is a user message with string content, keeping its keys in their order.
func appendUserText(message json.RawMessage, suffix string) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(message))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	type member struct {
		key   string
		value json.RawMessage
	}
	var members []member
	role, content := "", -1
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, false
		}
		switch key {
		case "role":
			_ = json.Unmarshal(value, &role)
		case "content":
			content = len(members)
		}
		members = append(members, member{key, value})
	}
	if role != "user" || content < 0 {
		return nil, false
	}
	var text string
	if json.Unmarshal(members[content].value, &text) != nil {
		return nil, false // not a string: parts, or null
	}
	members[content].value, _ = json.Marshal(text + suffix)
	var out bytes.Buffer
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			out.WriteByte(',')
		}
		key, _ := json.Marshal(m.key)
		fmt.Fprintf(&out, "%s:%s", key, m.value)
	}
	out.WriteByte('}')
	return out.Bytes(), true
}
