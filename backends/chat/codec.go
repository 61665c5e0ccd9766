package chat

import (
	"encoding/json"

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
	template  *Template
	tokenizer *tokenizer.Tokenizer
	config    *tokenizer.Config
	owned     bool // Load opened the tokenizer, so Close frees it
}

// NewCodec pairs a template with a tokenizer. The caller keeps ownership of tok: Close on
// this Codec does not close it.
func NewCodec(tmpl *Template, tok *tokenizer.Tokenizer) *Codec {
	return &Codec{template: tmpl, tokenizer: tok}
}

// Load resolves model (a local directory or a Hugging Face model id in the local cache; see
// tokenizer.Resolve), loads its tokenizer.json and compiles the default chat template of its
// tokenizer_config.json. The Codec owns the tokenizer: Close it when done.
func Load(model string, opts ...Option) (*Codec, error) {
	dir, err := tokenizer.Resolve(model)
	if err != nil {
		return nil, err
	}
	cfg, err := tokenizer.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	tmpl, err := FromConfig(cfg, opts...)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	return &Codec{template: tmpl, tokenizer: tok, config: cfg, owned: true}, nil
}

// Template is the codec's compiled chat template.
func (c *Codec) Template() *Template { return c.template }

// Tokenizer is the codec's tokenizer.
func (c *Codec) Tokenizer() *tokenizer.Tokenizer { return c.tokenizer }

// Config is the tokenizer_config.json the codec was loaded from (nil for NewCodec).
func (c *Codec) Config() *tokenizer.Config { return c.config }

// Encode renders the conversation (see Template.Render) and encodes the text to token ids
// with addSpecial=false, as apply_chat_template(tokenize=True) does: the template already
// wrote every special token it wants, and those become their special ids.
func (c *Codec) Encode(messages []Message, tools []json.RawMessage, addGenerationPrompt bool, kwargs map[string]any) (Prompt, error) {
	text, err := c.template.Render(messages, tools, addGenerationPrompt, kwargs)
	if err != nil {
		return Prompt{}, err
	}
	ids, err := c.tokenizer.Encode(text, false)
	if err != nil {
		return Prompt{}, err
	}
	return Prompt{Text: text, Tokens: ids}, nil
}

// EncodeJSON is Encode for messages given as JSON objects (see Template.RenderJSON). Like
// transformers' apply_chat_template, it refuses an empty conversation.
func (c *Codec) EncodeJSON(messages []json.RawMessage, tools []json.RawMessage, addGenerationPrompt bool, kwargs map[string]any) (Prompt, error) {
	if len(messages) == 0 {
		return Prompt{}, status.Errorf(status.InvalidArgument, "chat: cannot apply the chat template to an empty conversation; give at least one message")
	}
	text, err := c.template.RenderJSON(messages, tools, addGenerationPrompt, kwargs)
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
