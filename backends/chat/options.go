package chat

import (
	"sort"
	"strings"
	"unicode"

	"github.com/ardanlabs/jinja"
	"github.com/focus-go/focus-go/core/status"
)

// Options are the parameters of transformers' apply_chat_template that are not template
// variables, as far as focus-go honours them (SplitOptions refuses the others by name).
type Options struct {
	// ChatTemplate replaces the model's template for this rendering: a Jinja source, or the
	// name of one of the model's named templates ("" keeps the default).
	ChatTemplate string
	// Continue is the final message's field that the rendering leaves open for the model
	// to continue (continue_final_message: "content" for True), "" for none.
	Continue string
	// MaxLength truncates the token ids (not the text) to this many, 0 for no truncation
	// (truncation=True with max_length=N; the tokenizer_config's truncation_side picks the end).
	MaxLength int
}

// optionNames are apply_chat_template's own parameters: a keyword argument of one of these
// names is an option, never a template variable, and each is honoured or refused here.
var optionNames = map[string]bool{
	"chat_template": true, "continue_final_message": true, "truncation": true, "max_length": true,
	"sanitize_control_tokens": true, "padding": true, "return_tensors": true, "return_dict": true,
	"return_assistant_tokens_mask": true, "tokenizer_kwargs": true, "tokenize": true, "conversation": true,
}

// SplitOptions separates apply_chat_template's options from the template variables in
// kwargs. An option left at transformers' default (None, False, "do_not_pad", an empty
// dict) is dropped; one focus-go cannot honour identically is an InvalidArgument error that
// names it, says why and what to do instead.
func SplitOptions(kwargs map[string]any) (Options, map[string]any, error) {
	var o Options
	vars := make(map[string]any, len(kwargs))
	names := make([]string, 0, len(kwargs))
	for k := range kwargs {
		names = append(names, k)
	}
	sort.Strings(names) // the first bad option reported is always the same one
	truncation := false
	for _, k := range names {
		if !optionNames[k] {
			vars[k] = kwargs[k]
			continue
		}
		v, err := toValue(k, kwargs[k])
		if err != nil {
			return o, nil, err
		}
		if v.IsNone() || v.IsUndefined() || (v.IsBool() && !v.AsBool()) {
			continue
		}
		refuse := func(what string) error {
			return status.Errorf(status.InvalidArgument, "chat: apply_chat_template option %s=%s: %s", k, pyRepr(v), what)
		}
		switch k {
		case "chat_template":
			if !v.IsString() || v.AsString() == "" {
				return o, nil, refuse("expected a Jinja template source or the name of one of the model's named templates")
			}
			o.ChatTemplate = v.AsString()
		case "continue_final_message":
			switch {
			case v.IsBool():
				o.Continue = "content"
			case v.IsString() && v.AsString() != "":
				o.Continue = v.AsString()
			default:
				return o, nil, refuse("expected True (continue the final message's content) or the name of the field to continue, such as \"reasoning_content\"")
			}
		case "truncation":
			switch {
			case v.IsBool(), v.IsString() && (v.AsString() == "longest_first" || v.AsString() == "only_first"):
				truncation = true
			case v.IsString() && v.AsString() == "do_not_truncate":
			default:
				return o, nil, refuse("expected True, False, \"longest_first\", \"only_first\" or \"do_not_truncate\"")
			}
		case "max_length":
			if !v.IsInt() || v.AsInt() <= 0 {
				return o, nil, refuse("expected a positive number of tokens")
			}
			o.MaxLength = int(v.AsInt())
		case "padding":
			if v.IsString() && v.AsString() == "do_not_pad" {
				continue
			}
			return o, nil, refuse("focus-go renders one conversation to unpadded ids and does not pad; leave padding unset and pad the ids yourself")
		case "tokenizer_kwargs":
			if v.IsDict() && v.AsDict().Len() == 0 {
				continue
			}
			return o, nil, refuse("focus-go encodes the rendered text exactly as apply_chat_template does by default and takes no tokenizer arguments; leave it unset")
		case "sanitize_control_tokens":
			return o, nil, refuse("not supported: control tokens written in messages, tools or template variables are encoded as control tokens; remove them from the text instead, or leave the option unset")
		case "return_tensors":
			return o, nil, refuse("not supported: focus-go returns lists of ids; leave it unset and convert the list yourself")
		case "return_assistant_tokens_mask":
			return o, nil, refuse("not supported: focus-go does not compute assistant masks ({% generation %} blocks); leave it unset")
		case "tokenize", "return_dict":
			return o, nil, refuse("this chooses what apply_chat_template returns, so it is an argument of HFTokenizer.apply_chat_template, not a template variable; pass it there")
		case "conversation":
			return o, nil, refuse("the conversation is passed as the messages, not as a keyword argument")
		}
	}
	switch {
	case truncation && o.MaxLength == 0:
		return o, nil, status.Errorf(status.InvalidArgument, "chat: apply_chat_template option truncation=True needs max_length=N: focus-go does not read a model_max_length to truncate to")
	case !truncation && o.MaxLength > 0:
		return o, nil, status.Errorf(status.InvalidArgument, "chat: apply_chat_template option max_length=%d has no effect without truncation=True (transformers ignores it then, and focus-go does not pad to it); set truncation=True or leave max_length unset", o.MaxLength)
	}
	return o, vars, nil
}

// continueTag is what transformers appends to the continued field to find where it ends.
const continueTag = "CONTINUE_FINAL_MESSAGE_TAG "

// markContinue tags the final message's field for continue_final_message and returns the
// text whose end the rendering is cut at (transformers' render_jinja_template).
func (t *Template) markContinue(msgs []jinja.Value, field string) (string, error) {
	fail := func(format string, args ...any) error {
		return status.Errorf(status.InvalidArgument, "chat: continue_final_message=%q: "+format, append([]any{field}, args...)...)
	}
	last := msgs[len(msgs)-1].AsDict()
	final, ok := last.Get(field)
	if !ok || final.IsNone() {
		return "", fail("the final message has no %q to continue", field)
	}
	fields := []string{field}
	for _, r := range reasoningFields {
		if r == field { // reasoning is copied under several names: tag each copy of it
			fields = fields[:0]
			for _, name := range reasoningFields {
				if v, ok := last.Get(name); ok && v.Equals(final) {
					fields = append(fields, name)
				}
			}
		}
	}
	named := false
	for _, f := range fields {
		named = named || strings.Contains(t.source, f)
	}
	if !named {
		return "", fail("the chat template never reads that field; continue one it renders, such as \"content\"")
	}
	if final.IsList() {
		items := final.AsList().Items
		for i := len(items) - 1; i >= 0; i-- {
			if !items[i].IsDict() {
				continue
			}
			block := items[i].AsDict()
			if text, ok := block.Get("text"); ok && text.IsString() {
				block.Set("text", jinja.NewString(text.AsString()+continueTag))
				return text.AsString(), nil
			}
		}
		return "", fail("the final message has no text part to continue")
	}
	if !final.IsString() {
		return "", fail("the final message's %s is %s, not text (transformers raises TypeError: it can only continue a string)", field, pyTypeName(final))
	}
	for _, f := range fields {
		last.Set(f, jinja.NewString(final.AsString()+continueTag))
	}
	return final.AsString(), nil
}

// cutContinue ends a rendering where the continued text ends, as transformers does.
func cutContinue(text, final string) (string, error) {
	tag := strings.TrimSpace(continueTag)
	if !strings.Contains(text, strings.TrimSpace(final)) || !strings.Contains(text, tag) {
		return "", status.Errorf(status.InvalidArgument,
			"chat: continue_final_message: the final message does not appear in the rendered chat (the chat template changes or drops part of it), so there is no end to continue from; final message %.80q", strings.TrimSpace(final))
	}
	at := strings.LastIndex(text, tag)
	if strings.HasPrefix(text[at:], continueTag) {
		return text[:at], nil
	}
	return strings.TrimRightFunc(text[:at], unicode.IsSpace), nil
}
