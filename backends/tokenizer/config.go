package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/focus-go/focus-go/core/status"
)

// ChatTemplateFileName is where newer transformers versions save the chat template,
// beside tokenizer_config.json instead of inside it.
const ChatTemplateFileName = "chat_template.jinja"

// ChatTemplateDirName is the folder beside tokenizer_config.json where transformers saves
// named chat templates, one NAME.jinja file each.
const ChatTemplateDirName = "additional_chat_templates"

// DefaultTemplate is the name transformers uses for the template to apply when
// tokenizer_config.json lists several named ones.
const DefaultTemplate = "default"

// Config is the part of tokenizer_config.json that chat rendering needs.
type Config struct {
	// ChatTemplate is the template transformers would apply: the string form, or the
	// entry named "default" of the list form ("" if there is none).
	ChatTemplate string
	// ChatTemplates holds every named template of the list form ({name, template}); for
	// the string form it holds that one template under "default".
	ChatTemplates map[string]string
	// Special token strings, "" when unset. Both the plain string and the
	// {"content": ...} object forms are read.
	BOSToken, EOSToken, PadToken, UNKToken string
	// AdditionalSpecialTokens in file order.
	AdditionalSpecialTokens []string
	// AddBOSToken and AddEOSToken are the tokenizer's add_bos_token/add_eos_token flags.
	AddBOSToken, AddEOSToken bool
	// AddedTokens is added_tokens_decoder keyed by token id.
	AddedTokens map[uint32]AddedToken
	// TruncationSide is the end truncation cuts ("left" or "right"; "" means right).
	TruncationSide string
}

// AddedToken is one entry of added_tokens_decoder.
type AddedToken struct {
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	Lstrip     bool   `json:"lstrip"`
	Rstrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	SingleWord bool   `json:"single_word"`
}

// SpecialTokens returns the special-token variables transformers passes to a chat template
// (its special_tokens_map: bos_token, eos_token, unk_token, pad_token, and
// additional_special_tokens), leaving out the ones that are unset as transformers does.
func (c *Config) SpecialTokens() map[string]any {
	out := map[string]any{}
	for name, v := range map[string]string{"bos_token": c.BOSToken, "eos_token": c.EOSToken, "unk_token": c.UNKToken, "pad_token": c.PadToken} {
		if v != "" {
			out[name] = v
		}
	}
	if len(c.AdditionalSpecialTokens) > 0 {
		list := make([]any, len(c.AdditionalSpecialTokens))
		for i, s := range c.AdditionalSpecialTokens {
			list[i] = s
		}
		out["additional_special_tokens"] = list
	}
	return out
}

// SpecialIDs lists the ids of added tokens marked special, ascending.
func (c *Config) SpecialIDs() []uint32 {
	var ids []uint32
	for id, t := range c.AddedTokens {
		if t.Special {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// LoadConfig reads tokenizer_config.json from a file path or a model directory, with the
// chat template files saved beside it, as transformers' from_pretrained reads them: when
// chat_template.jinja (the default template) or additional_chat_templates/NAME.jinja
// (named ones) exist, they take the place of every template in the JSON. A file that
// exists but cannot be read is an error, not a silent fallback to the JSON's template.
func LoadConfig(path string) (*Config, error) {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		path = filepath.Join(path, ConfigFileName)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, status.Wrap(status.NotFound, err, "tokenizer: cannot read %s", path)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "tokenizer: %s", path)
	}
	files, err := templateFiles(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	if len(files) > 0 {
		cfg.ChatTemplates = files
		cfg.ChatTemplate = files[DefaultTemplate]
	}
	return cfg, nil
}

// templateFiles reads dir's chat_template.jinja (as "default") and
// additional_chat_templates/*.jinja (by file name); none is an empty map.
func templateFiles(dir string) (map[string]string, error) {
	out := map[string]string{}
	read := func(name, file string) error {
		data, err := os.ReadFile(file)
		if err != nil {
			return status.Wrap(status.InvalidArgument, err, "tokenizer: cannot read chat template %s", file)
		}
		out[name] = string(data)
		return nil
	}
	file := filepath.Join(dir, ChatTemplateFileName)
	if _, err := os.Stat(file); err == nil {
		if err := read(DefaultTemplate, file); err != nil {
			return nil, err
		}
	}
	named, err := filepath.Glob(filepath.Join(dir, ChatTemplateDirName, "*.jinja"))
	if err != nil {
		return nil, status.Wrap(status.Internal, err, "tokenizer: listing %s", ChatTemplateDirName)
	}
	for _, file := range named {
		if err := read(strings.TrimSuffix(filepath.Base(file), ".jinja"), file); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ParseConfig parses tokenizer_config.json content.
func ParseConfig(data []byte) (*Config, error) {
	var raw struct {
		ChatTemplate            json.RawMessage            `json:"chat_template"`
		BOSToken                json.RawMessage            `json:"bos_token"`
		EOSToken                json.RawMessage            `json:"eos_token"`
		PadToken                json.RawMessage            `json:"pad_token"`
		UNKToken                json.RawMessage            `json:"unk_token"`
		AdditionalSpecialTokens []json.RawMessage          `json:"additional_special_tokens"`
		AddBOSToken             *bool                      `json:"add_bos_token"`
		AddEOSToken             *bool                      `json:"add_eos_token"`
		AddedTokensDecoder      map[string]json.RawMessage `json:"added_tokens_decoder"`
		TruncationSide          string                     `json:"truncation_side"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "tokenizer: cannot parse tokenizer_config.json")
	}
	cfg := &Config{ChatTemplates: map[string]string{}, AddedTokens: map[uint32]AddedToken{}}
	if err := cfg.readTemplates(raw.ChatTemplate); err != nil {
		return nil, err
	}
	var err error
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *string
	}{{"bos_token", raw.BOSToken, &cfg.BOSToken}, {"eos_token", raw.EOSToken, &cfg.EOSToken},
		{"pad_token", raw.PadToken, &cfg.PadToken}, {"unk_token", raw.UNKToken, &cfg.UNKToken}} {
		if *f.dst, err = tokenString(f.name, f.raw); err != nil {
			return nil, err
		}
	}
	for i, r := range raw.AdditionalSpecialTokens {
		s, err := tokenString("additional_special_tokens["+strconv.Itoa(i)+"]", r)
		if err != nil {
			return nil, err
		}
		cfg.AdditionalSpecialTokens = append(cfg.AdditionalSpecialTokens, s)
	}
	cfg.TruncationSide = raw.TruncationSide
	cfg.AddBOSToken = raw.AddBOSToken != nil && *raw.AddBOSToken
	cfg.AddEOSToken = raw.AddEOSToken != nil && *raw.AddEOSToken
	for key, r := range raw.AddedTokensDecoder {
		id, err := strconv.ParseUint(key, 10, 32)
		if err != nil {
			return nil, status.Errorf(status.InvalidArgument, "tokenizer: added_tokens_decoder key %q is not a token id", key)
		}
		var t AddedToken
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, status.Wrap(status.InvalidArgument, err, "tokenizer: added_tokens_decoder[%s] is not a token object", key)
		}
		cfg.AddedTokens[uint32(id)] = t
	}
	return cfg, nil
}

// readTemplates reads chat_template: a string, null, or a list of {name, template}.
func (c *Config) readTemplates(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var single string
	if err := json.Unmarshal(raw, &single); err == nil {
		c.ChatTemplate = single
		c.ChatTemplates[DefaultTemplate] = single
		return nil
	}
	var named []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return status.Errorf(status.InvalidArgument, "tokenizer: chat_template must be a string or a list of {name, template} objects, got %.60s", raw)
	}
	for i, t := range named {
		if t.Name == nil || t.Template == nil {
			return status.Errorf(status.InvalidArgument, "tokenizer: chat_template[%d] needs both name and template", i)
		}
		c.ChatTemplates[*t.Name] = *t.Template
	}
	c.ChatTemplate = c.ChatTemplates[DefaultTemplate]
	return nil
}

// tokenString reads a special token in either form: "<s>" or {"content": "<s>", ...}.
func tokenString(field string, raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", status.Errorf(status.InvalidArgument, "tokenizer: %s must be a string or an object with \"content\", got %.60s", field, raw)
	}
	return *obj.Content, nil
}
