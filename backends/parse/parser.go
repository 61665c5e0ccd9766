package parse

import (
	"encoding/json"
	"strings"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/status"
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

// HermesParser parses Hermes JSON tool calls (ParseHermes).
type HermesParser struct{}

func (HermesParser) Kind() action.Kind { return action.KindTool }

func (HermesParser) Parse(r action.Result) (action.Action, error) {
	t := ParseHermes(r)
	return action.Action{Kind: action.KindTool, Turn: &t}, nil
}

// QwenXMLParser parses Qwen XML tool calls (QwenXML.Parse), typed by the prompt's tools.
type QwenXMLParser struct{ QwenXML }

func (QwenXMLParser) Kind() action.Kind { return action.KindTool }

func (p QwenXMLParser) Parse(r action.Result) (action.Action, error) {
	t := p.QwenXML.Parse(r)
	return action.Action{Kind: action.KindTool, Turn: &t}, nil
}

// Llama3JSONParser parses Llama 3 JSON tool calls (ParseLlama3JSON).
type Llama3JSONParser struct{}

func (Llama3JSONParser) Kind() action.Kind { return action.KindTool }

func (Llama3JSONParser) Parse(r action.Result) (action.Action, error) {
	t := ParseLlama3JSON(r)
	return action.Action{Kind: action.KindTool, Turn: &t}, nil
}

// DeepSeekV3Parser parses DeepSeek V3 tool calls (ParseDeepSeekV3).
type DeepSeekV3Parser struct{}

func (DeepSeekV3Parser) Kind() action.Kind { return action.KindTool }

func (DeepSeekV3Parser) Parse(r action.Result) (action.Action, error) {
	t := ParseDeepSeekV3(r)
	return action.Action{Kind: action.KindTool, Turn: &t}, nil
}

// PythonicParser parses pythonic tool-call lists (ParsePythonic).
type PythonicParser struct{}

func (PythonicParser) Kind() action.Kind { return action.KindTool }

func (PythonicParser) Parse(r action.Result) (action.Action, error) {
	t := ParsePythonic(r)
	return action.Action{Kind: action.KindTool, Turn: &t}, nil
}

// HarmonyParser parses gpt-oss harmony replies (ParseHarmony). It reads the special
// tokens of the reply, so its text must be decoded with them (KeepsSpecialTokens).
type HarmonyParser struct{}

func (HarmonyParser) Kind() action.Kind { return action.KindTool }

func (HarmonyParser) Parse(r action.Result) (action.Action, error) {
	t := ParseHarmony(r)
	return action.Action{Kind: action.KindTool, Turn: &t}, nil
}

// KeepsSpecialTokens reports that the harmony markers are special tokens.
func (HarmonyParser) KeepsSpecialTokens() bool { return true }

// NativeParser passes a backend's structured tool calls through (ParseNative).
type NativeParser struct{}

func (NativeParser) Kind() action.Kind { return action.KindTool }

func (NativeParser) Parse(r action.Result) (action.Action, error) {
	t := ParseNative(r)
	return action.Action{Kind: action.KindTool, Turn: &t}, nil
}

// ForProfile returns the parser a profile names; tools are the prompt's tool schemas, used
// by qwen_xml to type parameter values (ignored by the others).
func ForProfile(profile string, tools []json.RawMessage) (action.Parser, error) {
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
		return action.TextParser{}, nil
	case ProfileTokenChunk:
		return action.TokenChunkParser{}, nil
	}
	return nil, status.Errorf(status.InvalidArgument, "parse: unknown profile %q, expected one of %s", profile, strings.Join(Profiles(), ", "))
}
