package openai

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// BytesPerToken is the estimate behind native token accounting: about four bytes of UTF-8
// text per token, the usual rule of thumb for BPE vocabularies on English text and code.
const BytesPerToken = 4

// EstimateTokens gives text estimated token ids: one per BytesPerToken bytes (rounded up),
// each id packing those bytes little-endian (the last one zero-padded). The count is the
// estimate; the packing makes the ids decodable (DecodeEstimate), so a policy's decode()
// still shows the text. They are not any model's vocabulary and must never train a model.
func EstimateTokens(text string) []uint32 {
	b := []byte(text)
	out := make([]uint32, 0, (len(b)+BytesPerToken-1)/BytesPerToken)
	for len(b) > 0 {
		var chunk [BytesPerToken]byte
		n := copy(chunk[:], b)
		out = append(out, binary.LittleEndian.Uint32(chunk[:]))
		b = b[n:]
	}
	return out
}

// DecodeEstimate is the text behind estimated ids: their bytes, padding removed. Text that
// held NUL characters loses them; invalid UTF-8 (ids that were never estimates) becomes
// U+FFFD.
func DecodeEstimate(ids []uint32) string {
	var b bytes.Buffer
	var chunk [BytesPerToken]byte
	for _, id := range ids {
		binary.LittleEndian.PutUint32(chunk[:], id)
		b.Write(bytes.TrimRight(chunk[:], "\x00"))
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}

// RenderEstimate is the text whose estimate stands for a prompt: each message as
// "role: content" on its own line(s), tool calls and tool schemas as JSON. It is what the
// estimate counts, not what the API sees (the server applies its own template).
func RenderEstimate(messages []Message, tools []map[string]any) string {
	var b strings.Builder
	if len(tools) > 0 {
		b.WriteString("tools: ")
		b.Write(mustJSON(tools))
		b.WriteByte('\n')
	}
	for _, m := range messages {
		b.WriteString(m.Role)
		b.WriteString(": ")
		b.WriteString(m.text())
		for _, c := range m.ToolCalls {
			b.WriteByte('\n')
			b.Write(mustJSON(map[string]string{"name": c.Function.Name, "arguments": c.arguments()}))
		}
		b.WriteByte('\n')
	}
	return b.String()
}
