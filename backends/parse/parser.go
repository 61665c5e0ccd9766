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
	ProfileLlama3JSON = "llama3_json"
	ProfileDeepSeekV3 = "deepseek_v3"
	ProfilePythonic   = "pythonic"
	ProfileHarmony    = "harmony"
	ProfileNative     = "native"
	ProfileText       = "text"
	ProfileTokenChunk = "token_chunk"
)

// toolProfiles are the profiles that read tool calls.
var toolProfiles = []string{ProfileQwenXML, ProfileHermes, ProfileLlama3JSON, ProfileDeepSeekV3, ProfilePythonic, ProfileHarmony, ProfileNative}

// Profiles lists every profile name ForProfile takes.
func Profiles() []string {
	return append(append([]string(nil), toolProfiles...), ProfileText, ProfileTokenChunk)
}

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

// Llama3JSONParser parses Llama 3 JSON tool calls (ParseLlama3JSON).
type Llama3JSONParser struct{}

func (Llama3JSONParser) Kind() Kind { return KindTool }

func (Llama3JSONParser) Parse(r Result) (Action, error) {
	t := ParseLlama3JSON(r)
	return Action{Kind: KindTool, Turn: &t}, nil
}

// DeepSeekV3Parser parses DeepSeek V3 tool calls (ParseDeepSeekV3).
type DeepSeekV3Parser struct{}

func (DeepSeekV3Parser) Kind() Kind { return KindTool }

func (DeepSeekV3Parser) Parse(r Result) (Action, error) {
	t := ParseDeepSeekV3(r)
	return Action{Kind: KindTool, Turn: &t}, nil
}

// PythonicParser parses pythonic tool-call lists (ParsePythonic).
type PythonicParser struct{}

func (PythonicParser) Kind() Kind { return KindTool }

func (PythonicParser) Parse(r Result) (Action, error) {
	t := ParsePythonic(r)
	return Action{Kind: KindTool, Turn: &t}, nil
}

// HarmonyParser parses gpt-oss harmony replies (ParseHarmony). It reads the special
// tokens of the reply, so its text must be decoded with them (KeepsSpecialTokens).
type HarmonyParser struct{}

func (HarmonyParser) Kind() Kind { return KindTool }

func (HarmonyParser) Parse(r Result) (Action, error) {
	t := ParseHarmony(r)
	return Action{Kind: KindTool, Turn: &t}, nil
}

// KeepsSpecialTokens reports that the harmony markers are special tokens.
func (HarmonyParser) KeepsSpecialTokens() bool { return true }

// KeepsSpecialTokens reports whether p reads special tokens in a reply's text, so a caller
// decoding token ids for it must not skip them.
func KeepsSpecialTokens(p Parser) bool {
	k, ok := p.(interface{ KeepsSpecialTokens() bool })
	return ok && k.KeepsSpecialTokens()
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
	case ProfileLlama3JSON:
		return Llama3JSONParser{}, nil
	case ProfileDeepSeekV3:
		return DeepSeekV3Parser{}, nil
	case ProfilePythonic:
		return PythonicParser{}, nil
	case ProfileHarmony:
		return HarmonyParser{}, nil
	case ProfileNative:
		return NativeParser{}, nil
	case ProfileText:
		return TextParser{}, nil
	case ProfileTokenChunk:
		return TokenChunkParser{}, nil
	}
	return nil, status.Errorf(status.InvalidArgument, "parse: unknown profile %q, expected one of %s", profile, strings.Join(Profiles(), ", "))
}
