package action

import (
	"errors"
	"testing"

	"github.com/focus-go/focus-go/core/status"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTokenChunk(t *testing.T) {
	tests := []struct {
		reason   string
		finished bool
		errPart  string
	}{
		{"stop", true, ""},
		{"length", false, ""},
		{"abort", false, `finish reason "abort": the server aborted the generation`},
		{"tool_calls", false, `"tool_calls"`},
		{"", false, `finish reason ""`},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			tokens := append(make([]uint32, 0, 4), 10, 20)
			chunk, err := ParseTokenChunk(Result{Tokens: tokens, StopReason: tt.reason})
			if tt.errPart != "" {
				assert.ErrorContains(t, err, tt.errPart)
				assert.Equal(t, status.Backend, status.CodeOf(err))
				assert.Equal(t, tt.reason == "abort", errors.Is(err, ErrAborted))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, TokenChunk{Tokens: []uint32{10, 20}, Finished: tt.finished}, chunk)
			// The chunk is the result's tokens (read-only for both), capped at their length:
			// an append to the chunk copies and leaves the result's spare capacity alone.
			assert.True(t, &tokens[0] == &chunk.Tokens[0], "the chunk shares the result's tokens")
			assert.Equal(t, 2, cap(chunk.Tokens))
			_ = append(chunk.Tokens, 30)
			assert.Equal(t, []uint32{10, 20, 0}, tokens[:3])
		})
	}
}

func TestTextParser(t *testing.T) {
	a, err := TextParser{}.Parse(Result{Text: "  The answer is 4.\n", StopReason: "stop"})
	require.NoError(t, err)
	assert.Equal(t, Action{Kind: KindText, Text: "The answer is 4."}, a)
	assert.Equal(t, KindText, TextParser{}.Kind())
	assert.False(t, KeepsSpecialTokens(TextParser{}))
}

func TestTokenChunkParser(t *testing.T) {
	a, err := TokenChunkParser{}.Parse(Result{Tokens: []uint32{1, 2}, StopReason: "length"})
	require.NoError(t, err)
	assert.Equal(t, KindTokens, a.Kind)
	assert.Equal(t, &TokenChunk{Tokens: []uint32{1, 2}}, a.Chunk)
	_, err = TokenChunkParser{}.Parse(Result{StopReason: "abort"})
	assert.ErrorIs(t, err, ErrAborted)
}

func TestMalformed(t *testing.T) {
	turn := ToolTurn{ToolCalls: []ToolCall{{Name: "f", Arguments: "{}"}}}
	assert.False(t, turn.Malformed())
	turn.ToolCalls = append(turn.ToolCalls, ToolCall{Arguments: "{", Error: "tool call is not a JSON object"})
	assert.True(t, turn.Malformed())
}
