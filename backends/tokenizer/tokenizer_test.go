package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	jsoniter "github.com/json-iterator/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// byteLevelAlphabet is GPT-2's bytes_to_unicode: printable bytes map to themselves, the
// rest to code points from 256 up, so every byte has a visible one-rune token.
func byteLevelAlphabet() []string {
	out := make([]string, 256)
	next := 256
	for b := 0; b < 256; b++ {
		if (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255) {
			out[b] = string(rune(b))
		} else {
			out[b] = string(rune(next))
			next++
		}
	}
	return out
}

// tinyBPE writes a byte-level BPE tokenizer.json: 256 byte tokens, a few merges, and the
// ChatML special tokens, the same shape as a Qwen tokenizer at a fraction of the size.
func tinyBPE(t testing.TB) []byte {
	t.Helper()
	alphabet := byteLevelAlphabet()
	vocab := map[string]int{}
	for i, s := range alphabet {
		vocab[s] = i
	}
	merges := [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"b", "o"}, {"x", "ed"}, {"e", "d"}}
	for _, m := range merges {
		if _, ok := vocab[m[0]+m[1]]; !ok {
			vocab[m[0]+m[1]] = len(vocab)
		}
	}
	special := []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
	added := []map[string]any{}
	for i, s := range special {
		added = append(added, map[string]any{"id": len(vocab) + i, "content": s, "single_word": false,
			"lstrip": false, "rstrip": false, "normalized": false, "special": true})
	}
	doc := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added,
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges},
	}
	data, err := jsoniter.Marshal(doc)
	require.NoError(t, err)
	return data
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	tk, err := FromBytes(tinyBPE(t))
	require.NoError(t, err)
	defer tk.Close()

	tests := []struct {
		name string
		text string
	}{
		{"ascii", "the boxed answer"},
		{"math", `3x + 7 = 22, so \boxed{5}`},
		{"unicode", "naïve 你好 🙂"},
		{"specials", "<|im_start|>user\nhi<|im_end|>\n"},
		{"empty", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ids, err := tk.Encode(tt.text, false)
			require.NoError(t, err)
			text, err := tk.Decode(ids, false)
			require.NoError(t, err)
			assert.Equal(t, tt.text, text)
		})
	}
}

func TestEncodeUsesMergesAndSpecialTokens(t *testing.T) {
	tk, err := FromBytes(tinyBPE(t))
	require.NoError(t, err)
	defer tk.Close()

	ids, err := tk.Encode(" the", false)
	require.NoError(t, err)
	assert.Len(t, ids, 1, "Ġt + he should merge into one token")

	ids, err = tk.Encode("<|im_end|>", false)
	require.NoError(t, err)
	assert.Equal(t, []uint32{264}, ids) // 256 bytes + 6 merges + endoftext, im_start
	assert.Equal(t, 265, tk.VocabSize())

	skipped, err := tk.Decode([]uint32{263, 104, 264}, true)
	require.NoError(t, err)
	assert.Equal(t, "h", skipped)

	_, err = tk.Decode([]uint32{104, 265}, false)
	assert.ErrorContains(t, err, "token 265 at position 1 is outside the vocabulary (size 265)")
}

func TestLoadFromDirectoryAndErrors(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), tinyBPE(t), 0o644))
	tk, err := Load(dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, FileName), tk.Source())
	require.NoError(t, tk.Close())
	require.NoError(t, tk.Close(), "Close twice is fine")
	_, err = tk.Encode("x", false)
	assert.ErrorContains(t, err, "used after Close")

	_, err = Load(filepath.Join(dir, "missing"))
	assert.ErrorContains(t, err, "cannot read")
	_, err = FromBytes([]byte(`{"model": 3}`))
	assert.ErrorContains(t, err, "cannot parse tokenizer.json")
}

func TestConcurrentEncode(t *testing.T) {
	tk, err := FromBytes(tinyBPE(t))
	require.NoError(t, err)
	defer tk.Close()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				text := fmt.Sprintf("worker %d step %d: the boxed value", g, i)
				ids, err := tk.Encode(text, false)
				assert.NoError(t, err)
				back, err := tk.Decode(ids, false)
				assert.NoError(t, err)
				assert.Equal(t, text, back)
			}
		}(g)
	}
	wg.Wait()
}

func ExampleTokenizer_Encode() {
	tk, _ := FromBytes(tinyBPE(&testing.T{}))
	defer tk.Close()
	ids, _ := tk.Encode("the", false)
	text, _ := tk.Decode(ids, false)
	fmt.Println(len(ids), text)
	// Output: 2 the
}

// NUL bytes are ordinary text at the Rust boundary: a binding that passes C strings
// truncates "a\x00b" to "a" when encoding and returns "" for a decoded text holding one.
func TestNULBytesRoundTrip(t *testing.T) {
	tk, err := FromBytes(tinyBPE(t))
	require.NoError(t, err)
	defer tk.Close()

	for _, tt := range []struct {
		text string
		ids  []uint32 // ids 0-255 are the single bytes
	}{
		{"a\x00b", []uint32{'a', 0, 'b'}},
		{"\x00", []uint32{0}},
		{"\x00\x00<|im_end|>\x00", []uint32{0, 0, 264, 0}},
	} {
		ids, err := tk.Encode(tt.text, false)
		require.NoError(t, err)
		assert.Equal(t, tt.ids, ids, "encode %q", tt.text)
		for _, skip := range []bool{false, true} {
			want := tt.text
			if skip {
				want = strings.ReplaceAll(want, "<|im_end|>", "")
			}
			got, err := tk.Decode(ids, skip)
			require.NoError(t, err)
			assert.Equal(t, want, got, "decode (Go table) %v skip=%v", ids, skip)
			rust, err := tk.tk.decode(ids, skip)
			require.NoError(t, err)
			assert.Equal(t, want, rust, "decode (Rust) %v skip=%v", ids, skip)
		}
	}
}

func TestEncodeRejectsInvalidUTF8(t *testing.T) {
	tk, err := FromBytes(tinyBPE(t))
	require.NoError(t, err)
	defer tk.Close()
	_, err = tk.Encode("a\xffb", false)
	assert.ErrorContains(t, err, "not valid UTF-8")
}

// The real families' ids for "a\x00b" (PyPI tokenizers 0.23.3), when build/testdata has them.
func TestNULBytesRealTokenizers(t *testing.T) {
	for family, want := range map[string][]uint32{
		"qwen3":  {64, 188, 65},
		"gemma3": {236746, 238, 236763}, // not byte-level: decodes in Rust
	} {
		dir := filepath.Join("..", "..", "build", "testdata", family)
		if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI is set but %s is missing: %v", dir, err)
			}
			t.Logf("skipping %s: %v", family, err)
			continue
		}
		tk, err := Load(dir)
		require.NoError(t, err)
		ids, err := tk.Encode("a\x00b", false)
		require.NoError(t, err)
		assert.Equal(t, want, ids, family)
		text, err := tk.Decode(ids, false)
		require.NoError(t, err)
		assert.Equal(t, "a\x00b", text, family)
		require.NoError(t, tk.Close())
	}
}
