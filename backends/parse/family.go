package parse

import (
	"strings"

	"github.com/focus-go/focus-go/core/status"
)

// Family is a model family whose tool-call dialect a profile reads.
type Family struct {
	Name    string // e.g. "Llama 3"
	Profile string // the profile whose parser reads its tool calls
}

// families, in the order they are tried: an earlier entry wins when a name or template matches
// several (DeepSeek-R1-Distill-Qwen is a DeepSeek template, Qwen3-Coder is not Qwen3's).
var families = []struct {
	Family
	names    []string // lowercase substrings of a model name or path
	template []string // substrings of its chat template, all of which must occur
}{
	{Family{"gpt-oss", ProfileHarmony}, []string{"gpt-oss", "gpt_oss", "gptoss"}, []string{"<|channel|>"}},
	{Family{"DeepSeek V3", ProfileDeepSeekV3}, []string{"deepseek-v3", "deepseek_v3", "deepseekv3", "deepseek-r1", "deepseek_r1", "deepseekr1"},
		[]string{dsCallsBegin}},
	{Family{"Qwen3.5 / Qwen3-Coder", ProfileQwenXML}, []string{"qwen3.5", "qwen3_5", "qwen3-5", "qwen3.6", "qwen3_6", "qwen3-6", "qwen3-coder", "qwen3_coder"},
		[]string{toolCallOpen, fnOpen}},
	{Family{"Qwen2.5 / Qwen3 / Hermes", ProfileHermes}, []string{"qwen2", "qwen3", "qwq", "hermes"}, []string{toolCallOpen}},
	{Family{"Llama 4", ProfilePythonic}, []string{"llama-4", "llama4", "llama_4"}, []string{"<|header_start|>"}},
	{Family{"Llama 3", ProfileLlama3JSON}, []string{"llama-3", "llama3", "llama_3"}, []string{"<|start_header_id|>"}},
	{Family{"Gemma 3", ProfilePythonic}, []string{"gemma-3", "gemma3", "gemma_3"}, []string{"<start_of_turn>"}},
}

// FamilyFor recognises the model family from what the model directory holds before its
// name: the chat template its tokenizer ships ("" when there is none) decides when it is
// of a known family, and the model name or path only when it is not. A fine-tune named
// after its base, or a local folder named after another model, therefore gets the parser
// of the template that renders its prompts (FamilyByName tells a caller whether the name
// disagrees, to say so). A model of no supported family is a status.InvalidArgument error
// naming the profiles to choose from: binding some other family's parser would read its
// tool calls as no calls at all.
func FamilyFor(model, chatTemplate string) (Family, error) {
	if f, ok := FamilyByTemplate(chatTemplate); ok {
		return f, nil
	}
	if f, ok := FamilyByName(model); ok {
		return f, nil
	}
	return Family{}, status.Errorf(status.InvalidArgument,
		"parse: cannot tell the tool-call dialect of model %q: neither its chat template nor its name is of a supported family "+
			"(Qwen, Llama 3, Llama 4, DeepSeek V3, Gemma 3, gpt-oss); pass profile= one of %s for tool calls, "+
			"or text / token_chunk for replies without tool calls", model, strings.Join(toolProfiles, ", "))
}

// FamilyByName is the family a model name or path names, if any.
func FamilyByName(model string) (Family, bool) {
	m := strings.ToLower(model)
	for _, f := range families {
		for _, n := range f.names {
			if strings.Contains(m, n) {
				return f.Family, true
			}
		}
	}
	return Family{}, false
}

// FamilyByTemplate is the family whose markers a chat template writes, if any.
func FamilyByTemplate(chatTemplate string) (Family, bool) {
	if chatTemplate == "" {
		return Family{}, false
	}
	for _, f := range families {
		all := true
		for _, t := range f.template {
			all = all && strings.Contains(chatTemplate, t)
		}
		if all {
			return f.Family, true
		}
	}
	return Family{}, false
}
