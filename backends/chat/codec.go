package chat

import (
	"encoding/json"
	"sort"

	"github.com/focus-go/focus-go/backends/tokenizer"
	"github.com/focus-go/focus-go/core/status"
)

// Prompt is a rendered conversation and its exact token ids.
type Prompt struct {
	Text   string
	Tokens []uint32
}

// Codec renders conversations with a model's chat template and encodes them with the same
// model's tokenizer.
type Codec struct {
	template  *Template // nil when the model has no default chat template
	tokenizer *tokenizer.Tokenizer
	config    *tokenizer.Config
	dir       string // where Load found the files ("" for NewCodec)
	owned     bool   // Load opened the tokenizer, so Close frees it
}

// NewCodec pairs a template with a tokenizer. The caller keeps ownership of tok: Close on
// this Codec does not close it.
func NewCodec(tmpl *Template, tok *tokenizer.Tokenizer) *Codec {
	return &Codec{template: tmpl, tokenizer: tok}
}

// Load resolves model (a local directory or a Hugging Face model id in the local cache; see
// tokenizer.Resolve), loads its tokenizer.json and compiles its default chat template
// (tokenizer.LoadConfig: chat_template.jinja, or tokenizer_config.json's chat_template). A
// model without a default template loads too: it encodes and decodes, and rendering a
// conversation is an error that names the directory. The Codec owns the tokenizer: Close
// it when done.
func Load(model string, opts ...Option) (*Codec, error) {
	dir, err := tokenizer.Resolve(model)
	if err != nil {
		return nil, err
	}
	cfg, err := tokenizer.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	var tmpl *Template
	if cfg.ChatTemplate != "" {
		if tmpl, err = FromConfig(cfg, opts...); err != nil {
			return nil, err
		}
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	return &Codec{template: tmpl, tokenizer: tok, config: cfg, dir: dir, owned: true}, nil
}

// Template is the codec's compiled chat template, nil when the model has none (see
// RequireTemplate).
func (c *Codec) Template() *Template { return c.template }

// TemplateSource is the chat template's source, "" when the model has none.
func (c *Codec) TemplateSource() string {
	if c.template == nil {
		return ""
	}
	return c.template.Source()
}

// RequireTemplate is the chat template, or a NotFound error naming the model directory
// when it has none: rendering a conversation needs one, encoding and decoding do not.
func (c *Codec) RequireTemplate() (*Template, error) {
	if c.template != nil {
		return c.template, nil
	}
	var named []string
	if c.config != nil {
		for name := range c.config.ChatTemplates {
			named = append(named, name)
		}
		sort.Strings(named)
	}
	return nil, status.Errorf(status.NotFound,
		"chat: %s has no default chat template (neither %s nor a chat_template in %s; named templates: %v), so it cannot render a conversation; it can still encode and decode text",
		c.where(), tokenizer.ChatTemplateFileName, tokenizer.ConfigFileName, named)
}

func (c *Codec) where() string {
	if c.dir == "" {
		return "the tokenizer"
	}
	return c.dir
}

// Tokenizer is the codec's tokenizer.
func (c *Codec) Tokenizer() *tokenizer.Tokenizer { return c.tokenizer }

// Config is the tokenizer_config.json the codec was loaded from (nil for NewCodec).
func (c *Codec) Config() *tokenizer.Config { return c.config }

// Encode renders the conversation (see Template.Render) and encodes the text to token ids
// with addSpecial=false, as apply_chat_template(tokenize=True) does: the template already
// wrote every special token it wants, and those become their special ids.
func (c *Codec) Encode(messages []Message, tools []json.RawMessage, addGenerationPrompt bool, kwargs map[string]any) (Prompt, error) {
	return c.encode(func(t *Template) (string, error) { return t.Render(messages, tools, addGenerationPrompt, kwargs) })
}

// EncodeJSON is Encode for messages given as JSON objects (see Template.RenderJSON), with
// kwargs as transformers' apply_chat_template takes them: its options (SplitOptions:
// chat_template, continue_final_message, truncation with max_length; the others refused
// by name) and the template variables. Like apply_chat_template, it refuses an empty
// conversation. Truncation cuts the ids, never the text (the text is what
// apply_chat_template(tokenize=False) returns).
func (c *Codec) EncodeJSON(messages []json.RawMessage, tools []json.RawMessage, addGenerationPrompt bool, kwargs map[string]any) (Prompt, error) {
	if len(messages) == 0 {
		return Prompt{}, status.Errorf(status.InvalidArgument, "chat: cannot apply the chat template to an empty conversation; give at least one message")
	}
	opts, vars, err := SplitOptions(kwargs)
	if err != nil {
		return Prompt{}, err
	}
	tmpl, err := c.templateFor(opts.ChatTemplate)
	if err != nil {
		return Prompt{}, err
	}
	text, err := tmpl.render(messages, tools, addGenerationPrompt, vars, opts.Continue)
	if err != nil {
		return Prompt{}, err
	}
	ids, err := c.tokenizer.Encode(text, false)
	if err != nil {
		return Prompt{}, err
	}
	if opts.MaxLength > 0 && len(ids) > opts.MaxLength {
		if c.config != nil && c.config.TruncationSide == "left" {
			ids = ids[len(ids)-opts.MaxLength:]
		} else {
			ids = ids[:opts.MaxLength]
		}
	}
	return Prompt{Text: text, Tokens: ids}, nil
}

// templateFor is the template a chat_template option selects: the codec's own for "", the
// model's template of that name when it has one, else the option compiled as a template
// source (as transformers' get_chat_template reads it).
func (c *Codec) templateFor(override string) (*Template, error) {
	if override == "" {
		return c.RequireTemplate()
	}
	var special map[string]any
	if c.config != nil {
		special = c.config.SpecialTokens()
		if named, ok := c.config.ChatTemplates[override]; ok && len(c.config.ChatTemplates) > 1 {
			override = named
		}
	}
	tmpl, err := Compile(override, WithSpecialTokens(special))
	if err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "chat: apply_chat_template option chat_template")
	}
	return tmpl, nil
}

// encode renders with the codec's template (an error when the model has none) and encodes
// the text.
func (c *Codec) encode(render func(*Template) (string, error)) (Prompt, error) {
	tmpl, err := c.RequireTemplate()
	if err != nil {
		return Prompt{}, err
	}
	text, err := render(tmpl)
	if err != nil {
		return Prompt{}, err
	}
	ids, err := c.tokenizer.Encode(text, false)
	if err != nil {
		return Prompt{}, err
	}
	return Prompt{Text: text, Tokens: ids}, nil
}

// Decode turns ids back into text with the codec's tokenizer.
func (c *Codec) Decode(ids []uint32, skipSpecial bool) (string, error) {
	return c.tokenizer.Decode(ids, skipSpecial)
}

// Close frees the tokenizer if Load opened it. It is safe to call more than once.
func (c *Codec) Close() error {
	if !c.owned {
		return nil
	}
	return c.tokenizer.Close()
}

// Continuation is the prompt of the next exact-token request from a checkpoint: the
// checkpoint's exact token prefix unchanged, followed by any further exact segments (for
// example conditioning tokens an environment appended), in a new slice. It never renders
// or re-encodes text, so the ids the policy conditions on are exactly the ids it already
// saw and that the trainer will score (see the package documentation).
func Continuation(prefix []uint32, segments ...[]uint32) []uint32 {
	n := len(prefix)
	for _, s := range segments {
		n += len(s)
	}
	out := make([]uint32, 0, n)
	out = append(out, prefix...)
	for _, s := range segments {
		out = append(out, s...)
	}
	return out
}
