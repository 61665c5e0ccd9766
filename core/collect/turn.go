package collect

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/status"
)

// Turns selects the whole-turn chat context: one policy call per assistant
// turn, which is one segment (one edge, one checkpoint after it). The reply
// is read by Parser into the env's action; the env's observation messages
// (tool results) become conditioning tokens rendered with the chat template.
//
// The exact prefix is never rendered again. What a turn appends after the
// reply is computed by the append rule: with S = Messages + one stand-in
// assistant message, the conditioning text is
//
//	close' + render(S + observation messages, add_generation_prompt)[len(render(S)):]
//
// where close is what the template writes after an assistant message's
// content (ChatML: "<|im_end|>\n") and close' is close without the part the
// reply already generated (its last token, when that token's text starts
// close: the EOS "<|im_end|>" leaves "\n"; a reply cut at max_tokens gets all
// of close). The rendering with the new messages must start with the
// rendering without them — the template may only append. If it rewrites
// what came before (Qwen3's template drops the think block of assistant
// turns before the latest user query, so a user message after a turn
// rewrites that turn), the rollout fails with an error that says so; tool
// messages do not move Qwen3's latest user query and pass. The stand-in
// carries a non-empty reasoning_content so that templates which render an
// assistant turn differently when it is the last message (Qwen3 writes an
// empty think block only then) render it the same way in both renderings.
// The stand-in has no tool_calls: templates that need an assistant's
// tool-call ids to render tool messages are not supported.
//
// Observations: Messages are rendered by the rule; Text is one user message;
// exact Tokens are appended unchanged (the env then owns the glue). A done
// step adds only what it shows, without a generation prompt. An env's reset
// observation belongs in Messages (the first prompt is rendered from them;
// RootMessages places it there),
// so a non-empty reset observation without exact tokens is rejected.
type Turns struct {
	// Parser reads a reply (KindTool: a tool-call dialect; KindText: text).
	Parser action.Parser
	// Template renders chat messages with the model's chat template (and
	// the keyword arguments the prompt was rendered with).
	Template Template
	// Messages are the root conversation PromptTokens was rendered from
	// (with add_generation_prompt), one JSON object per message.
	Messages []json.RawMessage
	// Tools are the tool schemas the prompt was rendered with (nil: none).
	Tools []json.RawMessage
}

// Template renders a conversation (one JSON object per message) and tool
// schemas (nil: none) with a model's chat template. chat.Template bound to
// its keyword arguments satisfies it through a small adapter (backends/chat Codec.Turns).
// It must be safe for concurrent use.
type Template interface {
	Render(messages, tools []json.RawMessage, addGenerationPrompt bool) (string, error)
}

// The stand-in assistant message of the append rule. Its content marks where
// the template's close text begins.
const (
	standInContent   = "FOCUS_TURN_REPLY"
	standInReasoning = "FOCUS_TURN_REASONING"
)

// turnRenderer applies the append rule; it is immutable once built and safe
// for concurrent use.
type turnRenderer struct {
	turns *Turns
	codec Codec
	base  []json.RawMessage // Messages + the stand-in
	text  string            // render(base, no generation prompt)
	close string            // what the template writes after the stand-in's content
}

func newTurnRenderer(t *Turns, codec Codec) (*turnRenderer, error) {
	standIn, _ := json.Marshal(map[string]string{"role": "assistant", "content": standInContent, "reasoning_content": standInReasoning})
	r := &turnRenderer{turns: t, codec: codec}
	r.base = append(append(make([]json.RawMessage, 0, len(t.Messages)+1), t.Messages...), standIn)
	text, err := t.Template.Render(r.base, t.Tools, false)
	if err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "collect: whole-turn context: render the root messages and an assistant turn")
	}
	i := strings.LastIndex(text, standInContent)
	if i < 0 {
		return nil, status.Errorf(status.InvalidArgument, "collect: whole-turn context: the chat template does not write an assistant message's content (rendered %.200q); cannot tell where an assistant turn ends", text)
	}
	r.text, r.close = text, text[i+len(standInContent):]
	return r, nil
}

// conditioning is what follows a reply (its generated ids) given the env's
// step: exact observation tokens as they are; otherwise the append rule on
// the observation's messages (and its text, as one user message). A done step
// with nothing to show adds nothing; a step that continues always closes the
// turn and opens the next one, even without messages.
func (r *turnRenderer) conditioning(reply []uint32, step Step) ([]uint32, string, error) {
	obs := step.Observation
	if obs.Tokens != nil {
		text := obs.Text
		if text == "" && len(obs.Tokens) > 0 {
			var err error
			if text, err = r.codec.Decode(obs.Tokens, false); err != nil {
				return nil, "", err
			}
		}
		return obs.Tokens, text, nil
	}
	if step.Done && obs.Empty() {
		return nil, "", nil
	}
	msgs := append(append(make([]json.RawMessage, 0, len(r.base)+len(obs.Messages)+1), r.base...), obs.Messages...)
	if obs.Text != "" {
		user, _ := json.Marshal(map[string]string{"role": "user", "content": obs.Text})
		msgs = append(msgs, user)
	}
	full, err := r.turns.Template.Render(msgs, r.turns.Tools, !step.Done)
	if err != nil {
		return nil, "", fmt.Errorf("render the observation messages with the chat template: %w", err)
	}
	if !strings.HasPrefix(full, r.text) {
		return nil, "", fmt.Errorf("the chat template rewrites the conversation when %s follow an assistant turn "+
			"(the rendering with them diverges from the rendering without them at byte %d: %.60q instead of %.60q); "+
			"the whole-turn context keeps the exact token prefix and can only append "+
			"(Qwen3-style templates drop earlier think blocks after a new user message: answer with tool messages)",
			describeMessages(msgs[len(r.base):]), commonPrefix(full, r.text), tail(full, r.text), tail(r.text, full))
	}
	closing := r.close
	if n := len(reply); n > 0 {
		last, err := r.codec.Decode(reply[n-1:], false)
		if err != nil {
			return nil, "", err
		}
		if last != "" && strings.HasPrefix(closing, last) {
			closing = closing[len(last):]
		}
	}
	text := closing + full[len(r.text):]
	ids, err := r.codec.Encode(text, false)
	if err != nil {
		return nil, "", err
	}
	return ids, text, nil
}

func commonPrefix(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// tail is a from where it stops agreeing with b.
func tail(a, b string) string { return a[commonPrefix(a, b):] }

// describeMessages names the roles of the appended messages, for errors.
func describeMessages(msgs []json.RawMessage) string {
	if len(msgs) == 0 {
		return "no messages"
	}
	roles := make([]string, len(msgs))
	for i, m := range msgs {
		var v struct {
			Role string `json:"role"`
		}
		if json.Unmarshal(m, &v) != nil || v.Role == "" {
			roles[i] = "?"
		} else {
			roles[i] = v.Role
		}
	}
	return fmt.Sprintf("%d message(s) with roles [%s]", len(msgs), strings.Join(roles, ", "))
}

// turnAction parses a whole-turn reply. The parser reads the reply's text
// without special tokens (the EOS is not part of the answer); "stop" and
// "length" finishes are both turns (a turn cut at max_tokens is parsed as
// written: an unclosed tool call is no call), anything else is an error.
func (r *turnRenderer) turnAction(tokens []uint32, stopReason string) (action.Action, error) {
	if stopReason == "abort" {
		return action.Action{}, action.ErrAborted
	}
	if stopReason != "stop" && stopReason != "length" {
		return action.Action{}, status.Errorf(status.Backend, "finish reason %q cannot end an assistant turn, expected \"stop\" or \"length\"", stopReason)
	}
	// Most dialects read the reply without special tokens (the EOS is not part of the
	// answer); harmony's channel markers are special tokens, so it reads them all.
	text, err := r.codec.Decode(tokens, !action.KeepsSpecialTokens(r.turns.Parser))
	if err != nil {
		return action.Action{}, fmt.Errorf("decode the reply: %w", err)
	}
	return r.turns.Parser.Parse(action.Result{Tokens: tokens, Text: text, StopReason: stopReason})
}
