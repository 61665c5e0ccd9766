package openai

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/status"
)

// Message is one focus chat message (focus.generation.types.Message): role, content, and
// optionally tool_calls (assistant), tool_call_id (tool), name and reasoning_content.
type Message struct {
	Role string `json:"role"`
	// Content is a JSON string, null, or an array of content parts, passed on as given.
	Content          json.RawMessage   `json:"content,omitempty"`
	ToolCalls        []ToolCallMessage `json:"tool_calls,omitempty"`
	ToolCallID       string            `json:"tool_call_id,omitempty"`
	Name             string            `json:"name,omitempty"`
	ReasoningContent string            `json:"reasoning_content,omitempty"`
}

// ToolCallMessage is one entry of an assistant message's tool_calls.
type ToolCallMessage struct {
	ID       string `json:"id"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name string `json:"name"`
		// Arguments is a JSON string (the API's form) or a JSON object (the form Hugging
		// Face chat templates take); either is sent as the API's string.
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// arguments is the call's arguments as the API's JSON string.
func (c ToolCallMessage) arguments() string {
	raw := bytes.TrimSpace(c.Function.Arguments)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// text is the content as plain text: a string, the concatenated text of parts, or "".
func (m Message) text() string {
	raw := bytes.TrimSpace(m.Content)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
}

var knownRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// Validate checks what both APIs require of a conversation before any request is made:
// known roles; assistant tool calls with an id and a function name, ids unique in the
// conversation; and every tool call answered by exactly one tool message that follows its
// assistant message directly (only tool messages in between) before any other turn. A tool
// message that answers no earlier call, or answers one twice, is an error. Calls still
// unanswered at the end of the conversation are allowed here (the environment has not
// replied yet); Client.Generate refuses them. Errors name the message index.
func Validate(messages []Message) error {
	seen := map[string]int{} // call id -> index of the assistant message that made it
	pending := map[string]bool{}
	pendingFrom := -1
	for i, m := range messages {
		if !knownRoles[m.Role] {
			return status.Errorf(status.InvalidArgument, "%s: message %d has role %q, expected one of assistant, developer, system, tool, user", Name, i, m.Role)
		}
		if m.Role != "tool" && len(pending) > 0 {
			return status.Errorf(status.InvalidArgument,
				"%s: message %d (%s) comes before the tool call(s) %s of message %d are answered; each call needs one tool message right after its assistant message",
				Name, i, m.Role, ids(pending), pendingFrom)
		}
		switch m.Role {
		case "assistant":
			if len(m.ToolCalls) > 0 {
				pendingFrom = i
			}
			for j, c := range m.ToolCalls {
				if c.ID == "" {
					return status.Errorf(status.InvalidArgument, "%s: message %d tool_calls[%d] has no id; tool replies are linked by it", Name, i, j)
				}
				if c.Function.Name == "" {
					return status.Errorf(status.InvalidArgument, "%s: message %d tool_calls[%d] (id %q) has no function name", Name, i, j, c.ID)
				}
				if k, dup := seen[c.ID]; dup {
					return status.Errorf(status.InvalidArgument, "%s: message %d repeats tool call id %q of message %d; ids must be unique", Name, i, c.ID, k)
				}
				seen[c.ID] = i
				pending[c.ID] = true
			}
		case "tool":
			if m.ToolCallID == "" {
				return status.Errorf(status.InvalidArgument, "%s: message %d is a tool reply without tool_call_id", Name, i)
			}
			if pending[m.ToolCallID] {
				delete(pending, m.ToolCallID)
				continue
			}
			if k, ok := seen[m.ToolCallID]; ok {
				return status.Errorf(status.InvalidArgument, "%s: message %d answers tool call %q of message %d a second time or after another turn", Name, i, m.ToolCallID, k)
			}
			return status.Errorf(status.InvalidArgument, "%s: message %d is a tool reply to %q, which no earlier assistant message called", Name, i, m.ToolCallID)
		}
	}
	return nil
}

// requireAnswered refuses a conversation that ends with unanswered tool calls: both APIs
// reject it, and a new reply could not be placed after it.
func requireAnswered(messages []Message) error {
	pending := map[string]bool{}
	from := -1
	for i, m := range messages {
		for _, c := range m.ToolCalls {
			pending[c.ID], from = true, i
		}
		if m.Role == "tool" {
			delete(pending, m.ToolCallID)
		}
	}
	if len(pending) > 0 {
		return status.Errorf(status.InvalidArgument, "%s: the conversation ends with tool call(s) %s of message %d unanswered; add a tool message for each",
			Name, ids(pending), from)
	}
	return nil
}

func ids(set map[string]bool) string {
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, `"`+id+`"`)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// opensWithSystem reports whether the conversation brings its own system prompt.
func opensWithSystem(messages []Message) bool {
	return len(messages) > 0 && (messages[0].Role == "system" || messages[0].Role == "developer")
}

// chatTool is a tool schema in Chat's nested shape.
func chatTool(t map[string]any) map[string]any {
	if _, nested := t["function"]; nested || t["type"] != "function" {
		return t
	}
	fn := map[string]any{}
	for k, v := range t {
		if k != "type" {
			fn[k] = v
		}
	}
	return map[string]any{"type": "function", "function": fn}
}

// flatTool is a tool schema in the Responses API's flat shape.
func flatTool(t map[string]any) map[string]any {
	fn, ok := t["function"].(map[string]any)
	if !ok {
		return t
	}
	out := map[string]any{"type": "function"}
	for k, v := range fn {
		out[k] = v
	}
	return out
}

// rawOrString is the message content to send: as given, or "" when absent.
func rawOrString(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`""`)
	}
	return raw
}

func mustJSON(v any) json.RawMessage {
	b, err := transport.JSON.Marshal(v)
	if err != nil {
		panic(err) // only strings and maps of strings reach here
	}
	return b
}
