package tokenizer

import (
	"testing"

	jsoniter "github.com/json-iterator/go"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFromUTF8Lossy(t *testing.T) {
	// Expected values are Rust's String::from_utf8_lossy (Unicode "maximal subpart"
	// replacement), which differs from strings.ToValidUTF8 on every multi-byte case here.
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"valid", "naïve 你好 🙂", "naïve 你好 🙂"},
		{"truncated 3-byte before ascii", "\xE2\x82A", "\uFFFDA"},
		{"truncated 4-byte at end", "ok\xF0\x9F\x98", "ok\uFFFD"},
		{"overlong lead", "\xC0\x80", "\uFFFD\uFFFD"},
		{"surrogate", "\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"above U+10FFFF", "\xF4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"overlong E0", "\xE0\x80\x80", "\uFFFD\uFFFD\uFFFD"},
		{"two truncated in a row", "\xF0\x9F\x98\xF0\x9F", "\uFFFD\uFFFD"},
		{"lone continuations", "\x80\x80a\xBF", "\uFFFD\uFFFDa\uFFFD"},
		{"bad bytes", "\xFF\xFE", "\uFFFD\uFFFD"},
		{"split emoji around ascii", "\xF0\x9FA\x98\x80", "\uFFFDA\uFFFD\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fromUTF8Lossy([]byte(tt.in)))
		})
	}
}

func TestByteLevelTableFallbacks(t *testing.T) {
	// Each edit takes the tiny tokenizer outside what the Go table reproduces exactly; it
	// must still load and decode, through Rust.
	tests := []struct {
		name string
		edit func(doc map[string]any)
	}{
		{"no decoder", func(doc map[string]any) { doc["decoder"] = nil }},
		{"other decoder", func(doc map[string]any) {
			doc["decoder"] = map[string]any{"type": "Sequence", "decoders": []any{
				map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true}, map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0}}}
		}},
		{"byte fallback", func(doc map[string]any) { doc["model"].(map[string]any)["byte_fallback"] = true }},
		{"added token id Rust reassigns", func(doc map[string]any) {
			doc["added_tokens"].([]any)[0].(map[string]any)["id"] = 999
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := map[string]any{}
			require.NoError(t, jsoniter.Unmarshal(tinyBPE(t), &doc))
			tt.edit(doc)
			data, err := jsoniter.Marshal(doc)
			require.NoError(t, err)
			tk, err := FromBytes(data)
			require.NoError(t, err)
			defer tk.Close()
			assert.False(t, tk.HasFastDecode())
			_, err = tk.Decode([]uint32{104, 105}, false)
			require.NoError(t, err)
		})
	}
	tk, err := FromBytes(tinyBPE(t))
	require.NoError(t, err)
	defer tk.Close()
	assert.True(t, tk.HasFastDecode(), "the tiny tokenizer itself takes the Go path")
	require.NoError(t, tk.Close())
	_, err = tk.Decode([]uint32{104}, false)
	assert.ErrorContains(t, err, "used after Close")
}
