package parse

import (
	"encoding/json"
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

// Profile names, as PolicyFormat.resolve(profile=...) takes them.
const (
	ProfileQwenXML    = "qwen_xml"
	ProfileHermes     = "hermes"
	ProfileNative     = "native"
	ProfileText       = "text"
	ProfileTokenChunk = "token_chunk"
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

// HermesParser parses Hermes JSON tool calls (ParseHermes).
type HermesParser struct{}

func (HermesParser) Kind() Kind { return KindTool }

func (HermesParser) Parse(r Result) (Action, error) {
	t := ParseHermes(r)
	return Action{Kind: KindTool, Turn: &t}, nil
}

// QwenXMLParser parses Qwen XML tool calls (QwenXML.Parse), typed by the prompt's tools.
type QwenXMLParser struct{ QwenXML }

func (QwenXMLParser) Kind() Kind { return KindTool }

func (p QwenXMLParser) Parse(r Result) (Action, error) {
	t := p.QwenXML.Parse(r)
	return Action{Kind: KindTool, Turn: &t}, nil
}

// NativeParser passes a backend's structured tool calls through (ParseNative).
type NativeParser struct{}

func (NativeParser) Kind() Kind { return KindTool }

func (NativeParser) Parse(r Result) (Action, error) {
	t := ParseNative(r)
	return Action{Kind: KindTool, Turn: &t}, nil
}

// ForProfile returns the parser a profile names; tools are the prompt's tool schemas, used
// by qwen_xml to type parameter values (ignored by the others).
func ForProfile(profile string, tools []json.RawMessage) (Parser, error) {
	switch profile {
	case ProfileQwenXML:
		return QwenXMLParser{QwenXML{Tools: tools}}, nil
	case ProfileHermes:
		return HermesParser{}, nil
	case ProfileNative:
		return NativeParser{}, nil
	case ProfileText:
		return TextParser{}, nil
	case ProfileTokenChunk:
		return TokenChunkParser{}, nil
	}
	return nil, status.Errorf(status.InvalidArgument, "parse: unknown profile %q, expected one of qwen_xml, hermes, native, text, token_chunk", profile)
}

// ProfileForModel infers the tool-call dialect from a model name or path: Qwen3.5, Qwen3.6
// and Qwen3-Coder write Qwen XML calls; other models (Qwen2.5, Qwen3, Hermes-format
// fine-tunes) write Hermes JSON calls.
func ProfileForModel(model string) string {
	m := strings.ToLower(model)
	for _, xml := range []string{"qwen3.5", "qwen3_5", "qwen3-5", "qwen3.6", "qwen3_6", "qwen3-6", "qwen3-coder", "qwen3_coder"} {
		if strings.Contains(m, xml) {
			return ProfileQwenXML
		}
	}
	return ProfileHermes
}
