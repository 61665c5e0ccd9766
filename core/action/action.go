// Package action is the engine's vocabulary for what a policy's reply means to an
// environment: an Action of one Kind (the reply's text, a tool-calling ToolTurn, or an
// exact-token TokenChunk), the Result fields a Parser reads, and the Parser interface that
// turns one into the other. It also holds the two parsers that need no dialect:
// ParseTokenChunk (exact-token segments) and ParseText (the stripped text). The tool-call
// dialects (Hermes, Qwen XML, Llama 3 JSON, DeepSeek V3, pythonic, harmony, native) and the
// profile and model-family tables live in backends/parse, which implements Parser.
//
// Everything here is a plain value or a pure function: safe for concurrent use.
package action

import (
	"strings"

	"github.com/focus-go/focus-go/core/status"
)

// Kind is what an action is (ActionKind in Python).
type Kind string

const (
	KindText   Kind = "text"   // the reply's text
	KindTool   Kind = "tool"   // a tool-calling turn
	KindTokens Kind = "tokens" // an exact token chunk
)

// Action is one parsed action; Kind says which field is set.
type Action struct {
	Kind  Kind
	Text  string      // KindText
	Turn  *ToolTurn   // KindTool
	Chunk *TokenChunk // KindTokens
}

// Parser turns a Result into an Action of its Kind.
type Parser interface {
	Kind() Kind
	Parse(r Result) (Action, error)
}

// Result is the part of a generated response the parsers read (GenerateResult in Python).
type Result struct {
	// Tokens are the generated token ids.
	Tokens []uint32
	// Text is the generated text.
	Text string
	// StopReason is the finish reason: "stop" (EOS, a stop string or stop token),
	// "length" (max_tokens reached), "abort", "tool_calls", ...
	StopReason string
	// NativeToolCalls are a backend's structured tool calls (OpenAI tool_calls), if any.
	NativeToolCalls []ToolCall
}

// TokenChunk is one exact-token segment: the generated ids and whether the model finished
// its response (false: generation can continue from this prefix). Tokens are read-only:
// the engine's chunks share them with the policy's result and the tree's edge (see
// collect.Env), so whoever receives a chunk may keep the slice but must not write to it.
type TokenChunk struct {
	Tokens   []uint32
	Finished bool
}

// ToolCall is one tool call: the function name and its arguments as a JSON object string.
type ToolCall struct {
	Name      string
	Arguments string
	CallID    string
	// Error is empty for a well-formed call. Otherwise it says why the call could not be
	// decoded; Name is the best name found ("" if none) and Arguments the raw block text.
	Error string
}

// Malformed reports whether the call could not be decoded.
func (c ToolCall) Malformed() bool { return c.Error != "" }

// ToolTurn is a parsed assistant turn: visible text, tool calls in order, and reasoning.
type ToolTurn struct {
	Text      string
	ToolCalls []ToolCall
	Reasoning string
}

// Malformed reports whether any tool call of the turn could not be decoded.
func (t ToolTurn) Malformed() bool {
	for _, c := range t.ToolCalls {
		if c.Malformed() {
			return true
		}
	}
	return false
}

// ErrAborted is returned for a response the server aborted (finish reason "abort"): the
// generation was cut off by the server or its router, not finished by the model. Callers
// test for it with errors.Is; trainers treat such a branch as aborted, not as a reward.
var ErrAborted error = &status.Error{Code: status.Backend, Msg: "parse: finish reason \"abort\": the server aborted the generation"}

// ParseTokenChunk reads an exact-token segment: a "stop" finish is a finished chunk, a
// "length" finish an unfinished one (the search may branch there); any other finish reason
// is a status.Backend error, because the segment's tokens are not a clean cut. The chunk's
// Tokens are r.Tokens themselves, not a copy (capacity capped at the length, so an append
// to them copies); TokenChunk's read-only rule applies to both.
func ParseTokenChunk(r Result) (TokenChunk, error) {
	var finished bool
	switch r.StopReason {
	case "stop":
		finished = true
	case "length":
		finished = false
	case "abort":
		return TokenChunk{}, ErrAborted
	default:
		return TokenChunk{}, status.Errorf(status.Backend, "parse: finish reason %q cannot end a token chunk, expected \"stop\" or \"length\"", r.StopReason)
	}
	return TokenChunk{Tokens: r.Tokens[:len(r.Tokens):len(r.Tokens)], Finished: finished}, nil
}

// ParseText is the completion text with surrounding whitespace removed.
func ParseText(r Result) string { return strings.TrimSpace(r.Text) }

// TokenChunkParser parses exact-token segments (ParseTokenChunk).
type TokenChunkParser struct{}

func (TokenChunkParser) Kind() Kind { return KindTokens }

func (TokenChunkParser) Parse(r Result) (Action, error) {
	c, err := ParseTokenChunk(r)
	if err != nil {
		return Action{}, err
	}
	return Action{Kind: KindTokens, Chunk: &c}, nil
}

// TextParser parses the stripped completion text (ParseText).
type TextParser struct{}

func (TextParser) Kind() Kind { return KindText }

func (TextParser) Parse(r Result) (Action, error) {
	return Action{Kind: KindText, Text: ParseText(r)}, nil
}

// KeepsSpecialTokens reports whether p reads special tokens in a reply's text, so a caller
// decoding token ids for it must not skip them.
func KeepsSpecialTokens(p Parser) bool {
	k, ok := p.(interface{ KeepsSpecialTokens() bool })
	return ok && k.KeepsSpecialTokens()
}
