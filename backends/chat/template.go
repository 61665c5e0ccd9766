package chat

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
	"github.com/focus-go/focus-go/backends/tokenizer"
	"github.com/focus-go/focus-go/core/status"
)

// Template is a compiled chat template. It is immutable and safe for concurrent Render.
type Template struct {
	tmpl    *jinja.Template
	source  string
	globals map[string]jinja.Value // special tokens and strftime_now, below the caller's kwargs
	roles   map[string]bool        // the message roles Render accepts (see Render)
}

// isRoleName reports whether a template string literal could name a role: a short word.
func isRoleName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isIdentByte(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// Option configures Compile and FromConfig.
type Option func(*options)

type options struct {
	special map[string]any
	now     func() time.Time
}

// WithSpecialTokens sets the special-token variables the template sees (bos_token,
// eos_token, ..., as tokenizer.Config.SpecialTokens returns them).
func WithSpecialTokens(tokens map[string]any) Option {
	return func(o *options) { o.special = tokens }
}

// WithClock sets the clock behind strftime_now (default time.Now, local time like Python's
// datetime.now()); tests pin it.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// reserved are the names transformers passes itself; a keyword argument of the same name
// is a TypeError there and an InvalidArgument error here. ("documents" is one too, but
// apply_chat_template takes it as an argument and passes it on: it is a template variable.)
var reserved = map[string]bool{"messages": true, "tools": true, "add_generation_prompt": true}

// Compile parses a chat template source.
func Compile(source string, opts ...Option) (*Template, error) {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	rewritten, literals, _ := rewriteFilters(normalizeSource(source))
	tmpl, err := jinja.Compile(rewritten)
	if err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "chat: cannot compile the chat template")
	}
	roles := map[string]bool{"system": true, "user": true, "assistant": true, "tool": true}
	for lit := range literals {
		if isRoleName(lit) {
			roles[lit] = true
		}
	}
	t := &Template{tmpl: tmpl, source: source, globals: map[string]jinja.Value{}, roles: roles}
	for name, v := range o.special {
		val, err := toValue(name, v)
		if err != nil {
			return nil, err
		}
		t.globals[name] = val
	}
	t.globals[tojsonFilter] = jinja.NewCallable("tojson", tojson)
	t.globals[mapFilter] = jinja.NewCallable("map", pyMap)
	t.globals[strFilter] = jinja.NewCallable("print", printValue)
	t.globals[addFunc] = jinja.NewCallable("+", pyAdd)
	t.globals[inFunc] = jinja.NewCallable("in", pyIn)
	t.globals[iterableFunc] = jinja.NewCallable("iterable", pyIterable)
	t.globals[methodFunc] = jinja.NewCallable("method", pyDictMethod)
	now := o.now
	t.globals["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Value{}, status.Errorf(status.InvalidArgument, "strftime_now: expected one format string, got %d arguments", len(args))
		}
		return jinja.NewString(Strftime(now(), args[0].AsString())), nil
	})
	return t, nil
}

// FromConfig compiles the default chat template of a tokenizer_config.json, with its
// special tokens.
func FromConfig(cfg *tokenizer.Config, opts ...Option) (*Template, error) {
	if cfg.ChatTemplate == "" {
		names := make([]string, 0, len(cfg.ChatTemplates))
		for name := range cfg.ChatTemplates {
			names = append(names, name)
		}
		return nil, status.Errorf(status.NotFound, "chat: tokenizer_config.json has no default chat_template (named templates: %v)", names)
	}
	return Compile(cfg.ChatTemplate, append([]Option{WithSpecialTokens(cfg.SpecialTokens())}, opts...)...)
}

// Source is the template source as given to Compile.
func (t *Template) Source() string { return t.source }

// Render renders messages and tool schemas (nil: no tools, which the template sees as
// None) into prompt text. addGenerationPrompt opens the assistant turn; kwargs are extra
// template variables such as "enable_thinking": false. See RenderJSON for the rules.
func (t *Template) Render(messages []Message, tools []json.RawMessage, addGenerationPrompt bool, kwargs map[string]any) (string, error) {
	raw := make([]json.RawMessage, len(messages))
	for i, m := range messages {
		for j, c := range m.ToolCalls {
			if len(c.Function.Arguments) > 0 && !json.Valid(c.Function.Arguments) {
				return "", status.Errorf(status.InvalidArgument, "chat: messages[%d].tool_calls[%d].function.arguments is not valid JSON: %.80q", i, j, c.Function.Arguments)
			}
		}
		data, err := json.Marshal(m)
		if err != nil {
			return "", status.Wrap(status.InvalidArgument, err, "chat: messages[%d]", i)
		}
		raw[i] = data
	}
	return t.RenderJSON(raw, tools, addGenerationPrompt, kwargs)
}

// RenderJSON renders messages given as JSON objects, passed to the template with every
// key in its written order, as transformers passes message dicts: null-valued keys are
// dropped and reasoning is aliased (see messageValue).
//
// Roles: a message whose role is not one of system, user, assistant and tool, nor a
// string the template itself writes in a tag (such as 'ipython' or 'developer'), is
// refused with an error naming the message. transformers hands any role to the template,
// and a template that never compares against a role drops such a message without a word;
// refusing it keeps a typo from silently vanishing from the prompt.
//
// kwargs are template variables; "documents" is the template's documents. An option of
// apply_chat_template (see SplitOptions) set to anything but its default is refused here:
// Codec.EncodeJSON is what honours them.
func (t *Template) RenderJSON(messages []json.RawMessage, tools []json.RawMessage, addGenerationPrompt bool, kwargs map[string]any) (string, error) {
	opts, vars, err := SplitOptions(kwargs)
	if err != nil {
		return "", err
	}
	if opts != (Options{}) {
		return "", status.Errorf(status.InvalidArgument, "chat: chat_template, continue_final_message and truncation are options of a whole rendering (HFTokenizer.apply_chat_template, ChatCodec), which this one (a chat template given its variables only) does not take")
	}
	return t.render(messages, tools, addGenerationPrompt, vars, "")
}

// render is RenderJSON with kwargs holding template variables only and, when cont is not
// "", the final message's field cont left open (continue_final_message).
func (t *Template) render(messages []json.RawMessage, tools []json.RawMessage, addGenerationPrompt bool, kwargs map[string]any, cont string) (string, error) {
	if cont != "" && addGenerationPrompt {
		return "", status.Errorf(status.InvalidArgument, "chat: continue_final_message and add_generation_prompt cannot both be set: continue the final message, or open a new assistant turn after it")
	}
	data := make(map[string]jinja.Value, len(t.globals)+len(kwargs)+4)
	for k, v := range t.globals {
		data[k] = v
	}
	for k, x := range kwargs {
		if reserved[k] {
			return "", status.Errorf(status.InvalidArgument, "chat: keyword argument %q is set by Render itself", k)
		}
		v, err := toValue(k, x)
		if err != nil {
			return "", err
		}
		data[k] = v
	}
	msgs := make([]jinja.Value, len(messages))
	for i, raw := range messages {
		v, err := messageValue(raw, i)
		if err != nil {
			return "", err
		}
		if err := t.checkRole(v, i); err != nil {
			return "", err
		}
		msgs[i] = v
	}
	final := ""
	if cont != "" && len(msgs) > 0 {
		var err error
		if final, err = t.markContinue(msgs, cont); err != nil {
			return "", err
		}
	}
	data["messages"] = jinja.NewList(msgs)
	data["tools"] = jinja.None()
	if tools != nil {
		list := make([]jinja.Value, len(tools))
		for i, raw := range tools {
			v, err := DecodeJSON(raw)
			if err != nil {
				return "", status.Wrap(status.InvalidArgument, err, "chat: tools[%d]", i)
			}
			list[i] = v
		}
		data["tools"] = jinja.NewList(list)
	}
	if _, ok := data["documents"]; !ok {
		data["documents"] = jinja.None()
	}
	data["add_generation_prompt"] = jinja.NewBool(addGenerationPrompt)

	text, err := t.renderValues(data)
	if err != nil {
		if at := t.failingMessage(data, msgs, err); at >= 0 {
			role, _ := msgs[at].AsDict().Get("role")
			return "", status.Wrap(status.InvalidArgument, err, "chat: rendering the chat template failed once messages[%d] (role %q) is included", at, role.AsString())
		}
		return "", status.Wrap(status.InvalidArgument, err, "chat: rendering the chat template failed")
	}
	if cont != "" {
		return cutContinue(text, final)
	}
	return text, nil
}

// failingMessage names the message a render error comes from: the last message of the
// shortest prefix of the conversation that fails with the same error (-1 when only
// the whole conversation fails differently). It runs only on the error path.
func (t *Template) failingMessage(data map[string]jinja.Value, msgs []jinja.Value, err error) int {
	for k := 1; k <= len(msgs); k++ {
		if k == len(msgs) {
			return k - 1
		}
		data["messages"] = jinja.NewList(msgs[:k])
		_, perr := t.renderValues(data)
		if perr != nil && perr.Error() == err.Error() {
			data["messages"] = jinja.NewList(msgs)
			return k - 1
		}
	}
	data["messages"] = jinja.NewList(msgs)
	return -1
}

// checkRole applies RenderJSON's role rule to one message.
func (t *Template) checkRole(msg jinja.Value, index int) error {
	role, ok := msg.AsDict().Get("role")
	if !ok || !role.IsString() {
		return status.Errorf(status.InvalidArgument, "chat: messages[%d] has no role string (expected one of %s)", index, t.roleList())
	}
	if !t.roles[role.AsString()] {
		return status.Errorf(status.InvalidArgument, "chat: messages[%d] has role %q, which this chat template does not render (expected one of %s)", index, role.AsString(), t.roleList())
	}
	return nil
}

func (t *Template) roleList() string {
	names := make([]string, 0, len(t.roles))
	for r := range t.roles {
		names = append(names, r)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// renderValues runs the template, turning a panic inside the engine (a template using a
// construct the Go engine mishandles) into an error instead of crashing the collector.
func (t *Template) renderValues(data map[string]jinja.Value) (text string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = status.Errorf(status.Internal, "chat: template engine panic: %v", r)
		}
	}()
	return t.tmpl.RenderValues(data)
}

// normalizeSource applies what Jinja2's lexer does before parsing with transformers'
// settings: "\r\n" and "\r" become "\n", and (keep_trailing_newline=False) one trailing
// newline is dropped.
func normalizeSource(s string) string {
	if strings.ContainsRune(s, '\r') {
		s = strings.ReplaceAll(s, "\r\n", "\n")
		s = strings.ReplaceAll(s, "\r", "\n")
	}
	return strings.TrimSuffix(s, "\n")
}

// Strftime formats t like Python's datetime.strftime in the C locale, with glibc's "%-"
// (no padding) flag, of a naive local time (%Z and %z are empty). Unknown directives are copied through unchanged, as glibc does.
func Strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		pad := true
		if format[i] == '-' && i+1 < len(format) {
			pad = false
			i++
		}
		num := func(n, width int) {
			s := strconv.Itoa(n)
			if pad {
				for len(s) < width {
					s = "0" + s
				}
			}
			b.WriteString(s)
		}
		switch format[i] {
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'd':
			num(t.Day(), 2)
		case 'e':
			s := strconv.Itoa(t.Day())
			if pad && len(s) < 2 {
				s = " " + s
			}
			b.WriteString(s)
		case 'm':
			num(int(t.Month()), 2)
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			num(h, 2)
		case 'M':
			num(t.Minute(), 2)
		case 'S':
			num(t.Second(), 2)
		case 'f':
			num(t.Nanosecond()/1000, 6)
		case 'j':
			num(t.YearDay(), 3)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'u':
			w := int(t.Weekday())
			if w == 0 {
				w = 7
			}
			b.WriteString(strconv.Itoa(w))
		case 'Z', 'z':
			// transformers formats a naive datetime.now(), whose zone fields are empty.
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'D':
			b.WriteString(t.Format("01/02/06"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if !pad {
				b.WriteByte('-')
			}
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
