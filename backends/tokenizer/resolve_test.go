package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/focus-go/focus-go/core/status"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeModel puts the two tokenizer files into dir (tokenizer.json only when full is false).
func writeModel(t *testing.T, dir string, full bool) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), []byte(`{}`), 0o644))
	if full {
		require.NoError(t, os.WriteFile(filepath.Join(dir, ConfigFileName), []byte(`{"chat_template": "x"}`), 0o644))
	}
}

func TestResolve(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HUGGINGFACE_HUB_CACHE", "")

	local := filepath.Join(t.TempDir(), "my-model")
	writeModel(t, local, true)
	partial := filepath.Join(t.TempDir(), "partial")
	writeModel(t, partial, false)

	// Qwen/Qwen3-8B: refs/main points at rev-main although rev-new is newer.
	repo := filepath.Join(cache, "models--Qwen--Qwen3-8B")
	writeModel(t, filepath.Join(repo, "snapshots", "rev-main"), true)
	writeModel(t, filepath.Join(repo, "snapshots", "rev-new"), true)
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(repo, "snapshots", "rev-main", FileName), old, old))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "refs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "refs", "main"), []byte("rev-main\n"), 0o644))

	// org/other: no refs; the newest complete snapshot wins, an incomplete one is skipped.
	other := filepath.Join(cache, "models--org--other")
	writeModel(t, filepath.Join(other, "snapshots", "a"), true)
	writeModel(t, filepath.Join(other, "snapshots", "b"), false)
	require.NoError(t, os.Chtimes(filepath.Join(other, "snapshots", "a", FileName), old, old))
	writeModel(t, filepath.Join(other, "snapshots", "c"), true)

	// org/broken: refs/main names a snapshot without tokenizer_config.json.
	broken := filepath.Join(cache, "models--org--broken")
	writeModel(t, filepath.Join(broken, "snapshots", "r1"), false)
	require.NoError(t, os.MkdirAll(filepath.Join(broken, "refs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(broken, "refs", "main"), []byte("r1"), 0o644))

	tests := []struct {
		name    string
		model   string
		want    string
		code    status.Code
		errPart string
	}{
		{"local directory", local, local, status.OK, ""},
		{"local directory missing config", partial, "", status.NotFound, "has no tokenizer_config.json"},
		{"cache prefers refs/main", "Qwen/Qwen3-8B", filepath.Join(repo, "snapshots", "rev-main"), status.OK, ""},
		{"cache newest complete snapshot", "org/other", filepath.Join(other, "snapshots", "c"), status.OK, ""},
		{"cache incomplete", "org/broken", "", status.NotFound, "refs/main"},
		{"not cached", "org/absent", "", status.NotFound, filepath.Join(cache, "models--org--absent", "snapshots")},
		{"empty", "", "", status.InvalidArgument, "empty model name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, err := Resolve(tt.model)
			assert.Equal(t, tt.code, status.CodeOf(err))
			if tt.errPart != "" {
				assert.ErrorContains(t, err, tt.errPart)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, dir)
		})
	}
}

func TestCacheDir(t *testing.T) {
	tests := []struct {
		name                        string
		hubCache, legacy, home, xdg string
		want                        string
	}{
		{"HF_HUB_CACHE", "/a/hub", "/legacy", "/h", "/x", "/a/hub"},
		{"legacy HUGGINGFACE_HUB_CACHE", "", "/legacy", "/h", "/x", "/legacy"},
		{"HF_HOME", "", "", "/h", "/x", "/h/hub"},
		{"XDG_CACHE_HOME", "", "", "", "/x", "/x/huggingface/hub"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HF_HUB_CACHE", tt.hubCache)
			t.Setenv("HUGGINGFACE_HUB_CACHE", tt.legacy)
			t.Setenv("HF_HOME", tt.home)
			t.Setenv("XDG_CACHE_HOME", tt.xdg)
			assert.Equal(t, tt.want, CacheDir())
		})
	}
	t.Run("home default", func(t *testing.T) {
		for _, k := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"} {
			t.Setenv(k, "")
		}
		t.Setenv("HOME", "/home/u")
		assert.Equal(t, "/home/u/.cache/huggingface/hub", CacheDir())
	})
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		check   func(t *testing.T, c *Config)
		errPart string
	}{
		{"qwen string forms", `{"chat_template": "{{ x }}", "bos_token": null, "eos_token": "<|im_end|>",
			"pad_token": "<|endoftext|>", "add_bos_token": false,
			"additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
			"added_tokens_decoder": {"151643": {"content": "<|endoftext|>", "lstrip": false, "normalized": false,
				"rstrip": false, "single_word": false, "special": true},
				"151665": {"content": "<tool_response>", "special": false}}}`,
			func(t *testing.T, c *Config) {
				assert.Equal(t, "{{ x }}", c.ChatTemplate)
				assert.Equal(t, map[string]string{"default": "{{ x }}"}, c.ChatTemplates)
				assert.Equal(t, "", c.BOSToken)
				assert.Equal(t, "<|im_end|>", c.EOSToken)
				assert.Equal(t, AddedToken{Content: "<|endoftext|>", Special: true}, c.AddedTokens[151643])
				assert.Equal(t, []uint32{151643}, c.SpecialIDs())
				assert.Equal(t, map[string]any{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
					"additional_special_tokens": []any{"<|im_start|>", "<|im_end|>"}}, c.SpecialTokens())
			}, ""},
		{"object token forms and named templates", `{"chat_template": [{"name": "tool_use", "template": "T"},
			{"name": "default", "template": "D"}], "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
			"eos_token": {"content": "</s>"}, "unk_token": "<unk>", "add_bos_token": true,
			"additional_special_tokens": [{"content": "<x>"}]}`,
			func(t *testing.T, c *Config) {
				assert.Equal(t, "D", c.ChatTemplate)
				assert.Equal(t, "T", c.ChatTemplates["tool_use"])
				assert.Equal(t, "<s>", c.BOSToken)
				assert.Equal(t, "</s>", c.EOSToken)
				assert.Equal(t, "<unk>", c.UNKToken)
				assert.True(t, c.AddBOSToken)
				assert.Equal(t, []string{"<x>"}, c.AdditionalSpecialTokens)
			}, ""},
		{"named without default", `{"chat_template": [{"name": "rag", "template": "R"}]}`,
			func(t *testing.T, c *Config) {
				assert.Equal(t, "", c.ChatTemplate)
				assert.Equal(t, "R", c.ChatTemplates["rag"])
			}, ""},
		{"no template", `{}`, func(t *testing.T, c *Config) { assert.Empty(t, c.ChatTemplate) }, ""},
		{"bad json", `{`, nil, "cannot parse tokenizer_config.json"},
		{"bad template", `{"chat_template": 3}`, nil, "chat_template must be a string or a list"},
		{"template entry without name", `{"chat_template": [{"template": "x"}]}`, nil, "chat_template[0] needs both"},
		{"bad token", `{"eos_token": 5}`, nil, "eos_token must be a string or an object"},
		{"bad added key", `{"added_tokens_decoder": {"x": {"content": "a"}}}`, nil, `key "x" is not a token id`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.json))
			if tt.errPart != "" {
				assert.ErrorContains(t, err, tt.errPart)
				assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
				return
			}
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestLoadConfigFromDirectory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ConfigFileName), []byte(`{"eos_token": "</s>"}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ChatTemplateFileName), []byte("{{ messages }}"), 0o644))
	c, err := LoadConfig(dir)
	require.NoError(t, err)
	assert.Equal(t, "{{ messages }}", c.ChatTemplate, "chat_template.jinja fills in a missing template")
	assert.Equal(t, "</s>", c.EOSToken)

	_, err = LoadConfig(filepath.Join(dir, "absent"))
	assert.Equal(t, status.NotFound, status.CodeOf(err))
	assert.ErrorContains(t, err, "cannot read")
}

// transformers' from_pretrained: chat template files beside tokenizer_config.json take the
// place of every template in the JSON (PreTrainedTokenizerBase._from_pretrained).
func TestLoadConfigTemplateFilesWinOverTheJSON(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write(ConfigFileName, `{"chat_template": [{"name": "default", "template": "JSON"}, {"name": "rag", "template": "JSON-RAG"}]}`)
	c, err := LoadConfig(dir)
	require.NoError(t, err)
	assert.Equal(t, "JSON", c.ChatTemplate, "no files: the JSON's template")

	write(ChatTemplateFileName, "FILE")
	for _, path := range []string{dir, filepath.Join(dir, ConfigFileName)} {
		c, err = LoadConfig(path)
		require.NoError(t, err)
		assert.Equal(t, "FILE", c.ChatTemplate, "chat_template.jinja wins (%s)", path)
		assert.Equal(t, map[string]string{"default": "FILE"}, c.ChatTemplates, "and replaces the JSON's named ones")
	}

	write(filepath.Join(ChatTemplateDirName, "tool_use.jinja"), "FILE-TOOLS")
	c, err = LoadConfig(dir)
	require.NoError(t, err)
	assert.Equal(t, "FILE", c.ChatTemplate)
	assert.Equal(t, map[string]string{"default": "FILE", "tool_use": "FILE-TOOLS"}, c.ChatTemplates)

	require.NoError(t, os.Remove(filepath.Join(dir, ChatTemplateFileName)))
	c, err = LoadConfig(dir)
	require.NoError(t, err)
	assert.Equal(t, "", c.ChatTemplate, "named files alone leave no default, as in transformers")
	assert.Equal(t, map[string]string{"tool_use": "FILE-TOOLS"}, c.ChatTemplates)

	require.NoError(t, os.Mkdir(filepath.Join(dir, ChatTemplateFileName), 0o755))
	_, err = LoadConfig(dir)
	assert.ErrorContains(t, err, "cannot read chat template")
}

func ExampleParseConfig() {
	cfg, _ := ParseConfig([]byte(`{"chat_template": [{"name": "default", "template": "{{ messages }}"}],
		"eos_token": {"content": "<|im_end|>"}, "bos_token": null}`))
	fmt.Printf("%q %q %q\n", cfg.ChatTemplate, cfg.EOSToken, cfg.BOSToken)
	// Output: "{{ messages }}" "<|im_end|>" ""
}
