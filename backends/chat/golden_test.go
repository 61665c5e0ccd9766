package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/focus-go/focus-go/backends/tokenizer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// golden is testdata/qwen3_golden.json, written by testdata/make_golden.py from Python's
// jinja2 (set up as transformers sets it up) and tokenizers.
type golden struct {
	Now             string            `json:"now"`
	SpecialTokens   json.RawMessage   `json:"special_tokens"`
	Qwen3Template   string            `json:"qwen3_chat_template"`
	InlineTemplates map[string]string `json:"inline_templates"`
	Cases           []goldenCase      `json:"cases"`
}

type goldenCase struct {
	Name                string          `json:"name"`
	Template            string          `json:"template"`
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	Kwargs              map[string]any  `json:"kwargs"`
	Text                *string         `json:"text"`
	IDs                 []uint32        `json:"ids"`
	Error               string          `json:"error"`
}

func loadGolden(t *testing.T) golden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "qwen3_golden.json"))
	require.NoError(t, err)
	var g golden
	require.NoError(t, json.Unmarshal(data, &g))
	require.NotEmpty(t, g.Cases)
	return g
}

// qwen3Dir is where `make testdata` (testdata/fetch-tokenizers.sh) puts the real Qwen3 tokenizer files;
// FOCUS_QWEN3_DIR overrides it.
func qwen3Dir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("FOCUS_QWEN3_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "build", "testdata", "qwen3")
	}
	if _, err := os.Stat(filepath.Join(dir, tokenizer.FileName)); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Qwen3 tokenizer not found in %s: CI must fetch it (make testdata)", dir)
		}
		t.Skipf("Qwen3 tokenizer not found in %s: run backends/chat/testdata/fetch-tokenizers.sh build/testdata (make test does)", dir)
	}
	return dir
}

// goldenTemplates compiles every template the golden cases use, with the golden clock.
func goldenTemplates(t *testing.T, g golden) map[string]*Template {
	t.Helper()
	now, err := time.ParseInLocation("2006-01-02T15:04:05", g.Now, time.Local)
	require.NoError(t, err)
	var special map[string]any
	require.NoError(t, json.Unmarshal(g.SpecialTokens, &special))
	opts := []Option{WithSpecialTokens(special), WithClock(func() time.Time { return now })}

	sources := map[string]string{"qwen3": g.Qwen3Template}
	for _, name := range []string{"qwen25_style.jinja", "qwen_xml_style.jinja"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		sources[name] = string(data)
	}
	for name, src := range g.InlineTemplates {
		sources["inline:"+name] = src
	}
	out := map[string]*Template{}
	for name, src := range sources {
		tmpl, err := Compile(src, opts...)
		require.NoError(t, err, name)
		out[name] = tmpl
	}
	return out
}

func (c goldenCase) inputs(t *testing.T) ([]Message, []json.RawMessage) {
	t.Helper()
	msgs, err := ParseMessages(c.Messages)
	require.NoError(t, err)
	tools, err := ParseTools(c.Tools)
	require.NoError(t, err)
	if strings.TrimSpace(string(c.Tools)) == "[]" {
		tools = []json.RawMessage{} // an empty list is not None: keep the distinction
	}
	return msgs, tools
}

// TestGoldenText renders every golden conversation and compares the text byte for byte.
// It needs only the golden file (which embeds the Qwen3 template).
func TestGoldenText(t *testing.T) {
	g := loadGolden(t)
	templates := goldenTemplates(t, g)
	for _, c := range g.Cases {
		t.Run(c.Name, func(t *testing.T) {
			tmpl := templates[c.Template]
			require.NotNil(t, tmpl, "unknown template %q", c.Template)
			msgs, tools := c.inputs(t)
			text, err := tmpl.Render(msgs, tools, c.AddGenerationPrompt, c.Kwargs)
			if c.Error != "" {
				require.Error(t, err, "Python failed with %s", c.Error)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, c.Text)
			assert.Equal(t, *c.Text, text)
		})
	}
}

// TestGoldenIDs encodes every golden conversation with the real Qwen3 tokenizer and
// compares the ids with Python tokenizers' encode(text, add_special_tokens=False).
func TestGoldenIDs(t *testing.T) {
	dir := qwen3Dir(t)
	g := loadGolden(t)
	templates := goldenTemplates(t, g)
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	defer tok.Close()
	for _, c := range g.Cases {
		if c.Error != "" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			msgs, tools := c.inputs(t)
			prompt, err := NewCodec(templates[c.Template], tok).Encode(msgs, tools, c.AddGenerationPrompt, c.Kwargs)
			require.NoError(t, err)
			assert.Equal(t, *c.Text, prompt.Text)
			assert.Equal(t, c.IDs, prompt.Tokens)
		})
	}
}

// TestLoadQwen3 loads the real model directory through Load (Resolve + config + template)
// and checks one rendering and the special-token ids.
func TestLoadQwen3(t *testing.T) {
	dir := qwen3Dir(t)
	g := loadGolden(t)
	codec, err := Load(dir)
	require.NoError(t, err)
	defer codec.Close()
	assert.Equal(t, g.Qwen3Template, codec.Template().Source())
	assert.Equal(t, "<|im_end|>", codec.Config().EOSToken)

	var plain goldenCase
	for _, c := range g.Cases {
		if c.Name == "plain" {
			plain = c
		}
	}
	msgs, tools := plain.inputs(t)
	prompt, err := codec.Encode(msgs, tools, true, nil)
	require.NoError(t, err)
	assert.Equal(t, plain.IDs, prompt.Tokens)
	assert.Equal(t, uint32(151644), prompt.Tokens[0], "<|im_start|> is one special id")

	back, err := codec.Decode(prompt.Tokens, false)
	require.NoError(t, err)
	assert.Equal(t, prompt.Text, back)

	// Concurrent renders and encodes agree with the serial result.
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				p, err := codec.Encode(msgs, tools, true, nil)
				assert.NoError(t, err)
				assert.Equal(t, prompt.Tokens, p.Tokens)
			}
		}()
	}
	wg.Wait()
}
