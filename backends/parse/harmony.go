package parse

import (
	"regexp"
	"strings"

	"github.com/focus-go/focus-go/core/action"
)

// Harmony markers (special tokens of the gpt-oss vocabulary).
const (
	hStart   = "<|start|>"
	hChannel = "<|channel|>"
	hMessage = "<|message|>"
	hEnd     = "<|end|>"
	hCall    = "<|call|>"
	hReturn  = "<|return|>"
)

var (
	harmonyRecipient = regexp.MustCompile(`(?:^|[\s>])to=([^\s<]+)`)
	harmonyChannel   = regexp.MustCompile(`<\|channel\|>\s*([^\s<]+)`)
)

// ParseHarmony reads a gpt-oss reply in the harmony format: a sequence of messages
//
//	<|channel|>analysis<|message|>...<|end|>
//	<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
//	<|start|>assistant<|channel|>final<|message|>...<|return|>
//
// (the first header has no <|start|>assistant: the generation prompt wrote it). A message
// with a recipient (to=functions.NAME, in the header before or after the channel) is a
// tool call of NAME (other recipients, such as browser.search, keep their full name) with
// the message as its arguments, which must be a JSON object (empty: {}). Analysis messages
// are Reasoning; final messages are Text, or, when there is none, the commentary messages
// without a recipient (preambles shown to the user), as vLLM reads them; several are
// joined by blank lines. The text must keep the special
// tokens (decode with skip_special_tokens=False): without <|message|> markers the whole
// reply is Text. The last message may lack its end token (a server strips the stop token
// <|call|> or <|return|>); when the finish reason is "length" an unterminated tool-call
// message is a call cut off mid-way, so it is not a call and its text stays in Text.
func ParseHarmony(r action.Result) action.ToolTurn {
	s := r.Text
	if !strings.Contains(s, hMessage) {
		return action.ToolTurn{Text: strings.TrimSpace(s)}
	}
	var text, preamble, reasoning []string
	var calls []action.ToolCall
	add := func(parts *[]string, s string) {
		if s = strings.TrimSpace(s); s != "" {
			*parts = append(*parts, s)
		}
	}
	for s != "" {
		m := strings.Index(s, hMessage)
		if m < 0 {
			add(&text, strings.ReplaceAll(s, hStart, ""))
			break
		}
		header := s[:m]
		body := s[m+len(hMessage):]
		end, next, terminated := len(body), len(body), false
		for _, stop := range []string{hEnd, hCall, hReturn, hStart} {
			if i := strings.Index(body, stop); i >= 0 && i < end {
				end, terminated = i, stop != hStart
				next = i
				if stop != hStart {
					next = i + len(stop)
				}
			}
		}
		content := body[:end]
		s = body[next:]

		channel := ""
		if c := harmonyChannel.FindStringSubmatch(header); c != nil {
			channel = c[1]
		}
		recipient := ""
		if c := harmonyRecipient.FindStringSubmatch(header); c != nil {
			recipient = c[1]
		}
		switch {
		case recipient != "":
			if !terminated && r.StopReason == "length" {
				add(&text, header+hMessage+content)
				continue
			}
			calls = append(calls, harmonyCall(recipient, content))
		case channel == "analysis":
			add(&reasoning, content)
		case channel == "commentary":
			add(&preamble, content)
		default: // final, or no channel
			add(&text, content)
		}
	}
	if len(text) == 0 {
		text = preamble
	}
	return action.ToolTurn{Text: strings.Join(text, "\n\n"), ToolCalls: calls, Reasoning: strings.Join(reasoning, "\n\n")}
}

func harmonyCall(recipient, content string) action.ToolCall {
	name := strings.TrimPrefix(recipient, "functions.")
	args := strings.TrimSpace(content)
	switch {
	case name == "":
		return action.ToolCall{Arguments: args, Error: "tool call has an empty function name"}
	case args == "":
		args = "{}"
	case !isJSONObject([]byte(args)):
		return action.ToolCall{Name: name, Arguments: args, Error: "arguments are not a JSON object"}
	}
	return action.ToolCall{Name: name, Arguments: args}
}
