package chat

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/focus-go/focus-go/backends/tokenizer"
	"github.com/focus-go/focus-go/core/status"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdataDir is a real family's tokenizer directory (make testdata); absent, the test
// skips, or fails under CI.
func testdataDir(t *testing.T, family string) string {
	t.Helper()
	dir := filepath.Join("..", "..", "build", "testdata", family)
	if _, err := os.Stat(filepath.Join(dir, tokenizer.FileName)); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but %s is missing (make testdata): %v", dir, err)
		}
		t.Skipf("%s is missing (make testdata)", dir)
	}
	return dir
}

// gpt-oss ships its template as chat_template.jinja, so its tokenizer_config.json alone
// has none: the codec still encodes and decodes, and only rendering fails, naming the
// directory.
func TestLoadWithoutChatTemplate(t *testing.T) {
	dir := testdataDir(t, "gptoss")
	codec, err := Load(dir)
	require.NoError(t, err)
	defer codec.Close()
	assert.Nil(t, codec.Template())
	assert.Equal(t, "", codec.TemplateSource())

	ids, err := codec.Tokenizer().Encode("Hello\x00world", false)
	require.NoError(t, err)
	text, err := codec.Decode(ids, false)
	require.NoError(t, err)
	assert.Equal(t, "Hello\x00world", text)

	_, err = codec.Encode([]Message{{Role: "user", Content: Text("hi")}}, nil, true, nil)
	assert.Equal(t, status.NotFound, status.CodeOf(err))
	assert.ErrorContains(t, err, dir)
	assert.ErrorContains(t, err, "no default chat template")
	_, err = codec.RequireTemplate()
	assert.ErrorContains(t, err, "chat_template.jinja")
}

// A Hugging Face snapshot's chat_template.jinja is the template, over the JSON's.
func TestLoadChatTemplateFile(t *testing.T) {
	src := testdataDir(t, "gptoss")
	dir := t.TempDir()
	abs, err := filepath.Abs(filepath.Join(src, tokenizer.FileName))
	require.NoError(t, err)
	require.NoError(t, os.Symlink(abs, filepath.Join(dir, tokenizer.FileName)))
	config, err := os.ReadFile(filepath.Join(src, tokenizer.ConfigFileName))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, tokenizer.ConfigFileName), config, 0o644))
	const source = "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
	require.NoError(t, os.WriteFile(filepath.Join(dir, tokenizer.ChatTemplateFileName), []byte(source), 0o644))

	codec, err := Load(dir)
	require.NoError(t, err)
	defer codec.Close()
	assert.Equal(t, source, codec.TemplateSource())
	prompt, err := codec.Encode([]Message{{Role: "user", Content: Text("hi")}}, nil, false, nil)
	require.NoError(t, err)
	assert.Equal(t, "<|start|>user<|message|>hi<|end|>", prompt.Text)
	want, err := codec.Tokenizer().Encode(prompt.Text, false)
	require.NoError(t, err)
	assert.Equal(t, want, prompt.Tokens)
	assert.Len(t, prompt.Tokens, 5, "<|start|>, user, <|message|>, hi, <|end|>")
}
