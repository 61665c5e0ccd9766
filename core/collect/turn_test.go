package collect

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/backends/parse"
	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
)

// The whole-turn tests speak a one-byte-per-token chat format with ChatML's
// specials as single ids (chatMLCodec): each message renders as
// "<role>content" + turnEnd + "\n", the generation prompt is "<assistant>",
// and the policy's EOS is the special token turnEnd.
const turnEnd = "<|im_end|>"

// byteTemplate is a ChatML-like template over byteCodec. With rewrite, it
// drops the reasoning of assistant messages before the last user message,
// as Qwen3's template drops their think blocks.
type byteTemplate struct{ rewrite bool }

type testMessage struct {
	Role      string `json:"role"`
	Content   string `json:"content"`
	Reasoning string `json:"reasoning_content"`
}

func (b byteTemplate) Render(messages, tools []json.RawMessage, gen bool) (string, error) {
	msgs := make([]testMessage, len(messages))
	lastUser := -1
	for i, raw := range messages {
		if err := json.Unmarshal(raw, &msgs[i]); err != nil {
			return "", err
		}
		if msgs[i].Role == "user" {
			lastUser = i
		}
	}
	var s strings.Builder
	if len(tools) > 0 {
		s.WriteString("<tools>")
		for _, t := range tools {
			s.Write(t)
		}
		s.WriteString(turnEnd + "\n")
	}
	for i, m := range msgs {
		s.WriteString("<" + m.Role + ">")
		if m.Reasoning != "" && !(b.rewrite && i < lastUser) {
			s.WriteString("[" + m.Reasoning + "]")
		}
		s.WriteString(m.Content + turnEnd + "\n")
	}
	if gen {
		s.WriteString("<assistant>")
	}
	return s.String(), nil
}

var rootMessages = []json.RawMessage{json.RawMessage(`{"role":"user","content":"add 2 and 2"}`)}

// turnPolicy calls the "calc" tool until the context holds `calls` tool
// results, then answers "answer N" where N is a seeded bit; it ends every
// reply with turnEnd and a "stop" finish. It records every request's prompt.
type turnPolicy struct {
	calls   int
	cut     bool // end the first reply at max_tokens instead
	mu      sync.Mutex
	prompts [][]uint32
}

func (p *turnPolicy) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	p.mu.Lock()
	p.prompts = append(p.prompts, append([]uint32(nil), req.Tokens...))
	p.mu.Unlock()
	prefix, _ := chatMLCodec{}.Decode(req.Tokens, false)
	seed := uint64(*req.Params.Seed)
	var text string
	if strings.Count(prefix, "<tool>") < p.calls {
		text = fmt.Sprintf(`<tool_call>{"name": "calc", "arguments": {"x": "2+%d"}}</tool_call>`, splitmix(seed)%3)
	} else {
		text = fmt.Sprintf("answer %d", splitmix(seed)%2)
	}
	ids, _ := chatMLCodec{}.Encode(text+turnEnd, false)
	stop := generate.StopReasonStop
	if max := *req.Params.MaxTokens; p.cut || len(ids) > max {
		ids, stop = ids[:min(len(ids), max, 12)], generate.StopReasonLength
	}
	text, _ = chatMLCodec{}.Decode(ids, false)
	res := &generate.Result{Tokens: ids, Logprobs: make([]float64, len(ids)), Text: text, StopReason: stop, ExactGeneration: true}
	for i := range res.Logprobs {
		res.Logprobs[i] = -0.5
	}
	return res, nil
}

// toolEnv answers each tool call with a tool message and ends the episode on
// a turn without calls, with reward 1 for "answer 1". observe, when set,
// replaces the observation of a call.
type toolEnv struct {
	steps   int
	observe func(calls []action.ToolCall) Observation
	actions *[]action.Action
	mu      *sync.Mutex
}

func newToolEnv() *toolEnv { return &toolEnv{actions: &[]action.Action{}, mu: &sync.Mutex{}} }

func (e *toolEnv) Reset(ctx context.Context) (Observation, error) { return Observation{}, nil }

func (e *toolEnv) Step(ctx context.Context, a action.Action) (Step, error) {
	e.mu.Lock()
	*e.actions = append(*e.actions, a)
	e.mu.Unlock()
	if a.Kind != action.KindTool || a.Turn == nil {
		return Step{}, status.Errorf(status.InvalidArgument, "tool env: action kind %q", a.Kind)
	}
	e.steps++
	if len(a.Turn.ToolCalls) == 0 {
		r := 0.0
		if a.Turn.Text == "answer 1" {
			r = 1
		}
		return Step{Reward: r, Done: true}, nil
	}
	if e.observe != nil {
		return Step{Observation: e.observe(a.Turn.ToolCalls)}, nil
	}
	var obs Observation
	for _, c := range a.Turn.ToolCalls {
		msg, _ := json.Marshal(map[string]string{"role": "tool", "content": "result of " + c.Arguments})
		obs.Messages = append(obs.Messages, msg)
	}
	return Step{Observation: obs}, nil
}

func (e *toolEnv) Fork(ctx context.Context) (Env, error) {
	c := *e
	return &c, nil
}

func (e *toolEnv) Close() {}

func turnConfig(sc search.Config, tmpl Template) Config {
	cfg := baseConfig(sc)
	prompt, _ := tmpl.Render(rootMessages, nil, true)
	cfg.PromptTokens, _ = chatMLCodec{}.Encode(prompt, false)
	cfg.PromptText = prompt
	cfg.Segments = 128
	cfg.Codec = chatMLCodec{}
	cfg.Turns = &Turns{Parser: parse.HermesParser{}, Template: tmpl, Messages: rootMessages}
	return cfg
}

func TestTurnsToolEpisode(t *testing.T) {
	pol := &turnPolicy{calls: 1}
	env := newToolEnv()
	cfg := turnConfig(search.Selective(8, 4), byteTemplate{})
	res, err := Run(context.Background(), cfg, pol, env, &fakeCritic{})
	require.NoError(t, err)
	tr := res.Tree
	require.NoError(t, tr.Validate())
	assert.Equal(t, 8, tr.Stats.Rollouts)

	const conditioning = "\n<tool>result of {\"x\": \"2+"
	leaves, branched := 0, false
	for id := 1; id < len(tr.Nodes); id++ {
		nd := &tr.Nodes[id]
		require.Empty(t, nd.Failed)
		require.Len(t, nd.Spans, 1)
		span := nd.Spans[0]
		text, _ := chatMLCodec{}.Decode(span.Tokens, false)
		genText, _ := chatMLCodec{}.Decode(span.Tokens[:nd.GeneratedTokens()], false)
		gen := nd.GeneratedTokens()
		for i, tr := range span.Trainable {
			assert.Equal(t, i < gen, tr, "node %d token %d: only generated tokens are trainable", id, i)
			if !tr {
				assert.Zero(t, span.Logprobs[i], "no behaviour logprob on conditioning")
			}
		}
		if nd.Done {
			leaves++
			assert.Equal(t, 2, nd.Depth, "tool call, then the answer")
			assert.Regexp(t, `^answer [01]`+regexp.QuoteMeta(turnEnd)+`$`, text, "a final turn gets no conditioning")
			assert.Equal(t, nd.Reward == 1, strings.HasPrefix(text, "answer 1"))
			continue
		}
		// The tool turn: generated call + EOS, then the rest of the template's
		// close ("\n"), the tool message and the next generation prompt.
		cond := text[len(genText):]
		assert.True(t, strings.HasSuffix(genText, turnEnd))
		assert.True(t, strings.HasPrefix(cond, conditioning), "node %d conditioning %q", id, cond)
		assert.True(t, strings.HasSuffix(text, "\"}"+turnEnd+"\n<assistant>"), "node %d: %q", id, text)
		assert.Equal(t, cond, nd.Observation)
		if len(nd.Children) > 1 {
			branched = true
		}
	}
	assert.Equal(t, 8, leaves)
	assert.True(t, branched, "the search branched from a turn checkpoint")

	// Prefix preservation: every second-turn request is exactly the root
	// prompt, the first reply and its conditioning, never a re-rendering.
	for _, p := range pol.prompts {
		if len(p) == len(cfg.PromptTokens) {
			continue
		}
		found := false
		for id := 1; id < len(tr.Nodes); id++ {
			if !tr.Nodes[id].Terminal() && assert.ObjectsAreEqual(tr.ContextTokens(id), p) {
				found = true
			}
		}
		assert.True(t, found, "request %q is the exact context of a turn checkpoint", p)
	}

	// Actions reach the env parsed, without the EOS.
	for _, a := range *env.actions {
		require.Equal(t, action.KindTool, a.Kind)
		assert.NotContains(t, a.Turn.Text, turnEnd)
	}
}

func TestTurnsDeterministic(t *testing.T) {
	run := func(seed uint64) string {
		sc := search.Selective(8, 4)
		sc.Seed = seed
		res, err := Run(context.Background(), turnConfig(sc, byteTemplate{}), &turnPolicy{calls: 2}, newToolEnv(), &fakeCritic{})
		require.NoError(t, err)
		return string(marshalDeterministic(t, res.Tree))
	}
	assert.Equal(t, run(3), run(3))
	assert.NotEqual(t, run(3), run(4))
}

func TestTurnsRewritingTemplateFailsTheRollout(t *testing.T) {
	tests := []struct {
		name    string
		observe func(calls []action.ToolCall) Observation
		want    string
	}{
		{"user message", func([]action.ToolCall) Observation {
			return Observation{Messages: []json.RawMessage{json.RawMessage(`{"role":"user","content":"go on"}`)}}
		}, "roles [user]"},
		{"text becomes a user message", func([]action.ToolCall) Observation { return Observation{Text: "go on"} }, "roles [user]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newToolEnv()
			env.observe = tt.observe
			cfg := turnConfig(search.Independent(2), byteTemplate{rewrite: true})
			cfg.AllowPartial = true
			res, err := Run(context.Background(), cfg, &turnPolicy{calls: 1}, env, nil)
			require.NoError(t, err)
			require.Len(t, res.Failures, 2)
			for _, f := range res.Failures {
				assert.Contains(t, f.Message, "env: observation: the chat template rewrites the conversation")
				assert.Contains(t, f.Message, tt.want)
			}
		})
	}
	t.Run("tool messages pass the same template", func(t *testing.T) {
		res, err := Run(context.Background(), turnConfig(search.Independent(2), byteTemplate{rewrite: true}), &turnPolicy{calls: 1}, newToolEnv(), nil)
		require.NoError(t, err)
		assert.Empty(t, res.Failures)
	})
}

func TestTurnsCutReplyIsClosed(t *testing.T) {
	// A reply cut at max_tokens has no EOS: the engine writes the template's
	// whole close before the next message. Its unclosed call is no call, so
	// the env ends the episode; exact observation tokens pass unchanged.
	env := newToolEnv()
	cfg := turnConfig(search.Independent(1), byteTemplate{})
	cfg.Segments = 12
	res, err := Run(context.Background(), cfg, &turnPolicy{calls: 1}, env, nil)
	require.NoError(t, err)
	require.Len(t, res.Tree.Nodes, 2)
	assert.True(t, res.Tree.Nodes[1].Done)
	assert.Empty(t, (*env.actions)[0].Turn.ToolCalls)

	r, err := newTurnRenderer(cfg.Turns, chatMLCodec{})
	require.NoError(t, err)
	cut, _ := chatMLCodec{}.Encode("<tool_ca", false)
	ids, text, err := r.conditioning(cut, Step{Observation: Observation{Messages: rootMessages[:0]}})
	require.NoError(t, err)
	assert.Equal(t, turnEnd+"\n<assistant>", text, "close + the next generation prompt")
	assert.Len(t, ids, len(text)-len(turnEnd)+1)
	ids, text, err = r.conditioning(cut, Step{Observation: Observation{Tokens: []uint32{7, 8}}})
	require.NoError(t, err)
	assert.Equal(t, []uint32{7, 8}, ids)
	assert.Equal(t, "\a\b", text)
}

func TestTurnsConfigErrors(t *testing.T) {
	ok := turnConfig(search.Independent(1), byteTemplate{})
	tests := []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"no parser", func(c *Config) { c.Turns.Parser = nil }, "needs a parser and a chat template"},
		{"token chunks", func(c *Config) { c.Turns.Parser = action.TokenChunkParser{} }, "expected a tool or text parser"},
		{"no messages", func(c *Config) { c.Turns.Messages = nil }, "root messages"},
		{"no codec", func(c *Config) { c.Codec = nil }, "needs a codec"},
		{"template without content", func(c *Config) { c.Turns.Template = blankTemplate{} }, "does not write an assistant message's content"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			turns := *ok.Turns
			cfg.Turns = &turns
			tt.edit(&cfg)
			_, err := Run(context.Background(), cfg, &turnPolicy{}, newToolEnv(), nil)
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

type blankTemplate struct{}

func (blankTemplate) Render(messages, tools []json.RawMessage, gen bool) (string, error) {
	return "<conversation>", nil
}

func TestSegmentsRejectMessageObservations(t *testing.T) {
	env := newFakeEnv()
	env.step = func(e *fakeEnv, c *action.TokenChunk) (Step, error, bool) {
		return Step{Observation: Observation{Messages: rootMessages}}, nil, true
	}
	cfg := baseConfig(search.Independent(1))
	cfg.AllowPartial = true
	res, err := Run(context.Background(), cfg, newPolicy(10), env, nil)
	require.NoError(t, err)
	require.Len(t, res.Failures, 1)
	assert.Contains(t, res.Failures[0].Message, "need the whole-turn chat context")
}

// chatMLCodec is byteCodec with the ChatML specials as single ids.
type chatMLCodec struct{}

var chatMLSpecials = []string{"<|im_start|>", "<|im_end|>"}

func (chatMLCodec) Encode(text string, addSpecial bool) ([]uint32, error) {
	var ids []uint32
	for len(text) > 0 {
		special := false
		for i, s := range chatMLSpecials {
			if strings.HasPrefix(text, s) {
				ids, text, special = append(ids, uint32(1000+i)), text[len(s):], true
				break
			}
		}
		if !special {
			ids, text = append(ids, uint32(text[0])), text[1:]
		}
	}
	return ids, nil
}

func (chatMLCodec) Decode(ids []uint32, skipSpecial bool) (string, error) {
	var b strings.Builder
	for _, id := range ids {
		if id >= 1000 {
			if !skipSpecial {
				b.WriteString(chatMLSpecials[id-1000])
			}
			continue
		}
		b.WriteByte(byte(id))
	}
	return b.String(), nil
}

// resetEnv shows an observation before the first turn.
type resetEnv struct {
	*toolEnv
	obs Observation
}

func (e resetEnv) Reset(ctx context.Context) (Observation, error) { return e.obs, nil }

func TestTurnsResetObservation(t *testing.T) {
	tests := []struct {
		name string
		obs  Observation
		err  string
	}{
		{"text is rejected", Observation{Text: "hello"}, "put the reset observation there"},
		{"messages are rejected", Observation{Messages: rootMessages}, "put the reset observation there"},
		{"exact tokens pass", Observation{Tokens: []uint32{'h', 'i'}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := turnConfig(search.Independent(1), byteTemplate{})
			res, err := Run(context.Background(), cfg, &turnPolicy{calls: 1}, resetEnv{newToolEnv(), tt.obs}, nil)
			if tt.err != "" {
				require.Error(t, err)
				assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "hi", res.Tree.Root().Observation)
		})
	}
}

// skipRecorder is a codec that records whether a decode skipped special tokens.
type skipRecorder struct {
	chatMLCodec
	skipped *[]bool
}

func (c skipRecorder) Decode(ids []uint32, skipSpecial bool) (string, error) {
	*c.skipped = append(*c.skipped, skipSpecial)
	return c.chatMLCodec.Decode(ids, skipSpecial)
}

// TestTurnActionKeepsSpecialTokensForHarmony: harmony's channel markers are special
// tokens, so the reply is decoded with them; the other dialects read it without.
func TestTurnActionKeepsSpecialTokensForHarmony(t *testing.T) {
	for _, tt := range []struct {
		parser action.Parser
		skip   bool
	}{{parse.HermesParser{}, true}, {parse.HarmonyParser{}, false}, {parse.Llama3JSONParser{}, true}} {
		var skipped []bool
		r := &turnRenderer{turns: &Turns{Parser: tt.parser}, codec: skipRecorder{skipped: &skipped}}
		_, err := r.turnAction([]uint32{'h', 'i', 1001}, "stop")
		require.NoError(t, err)
		assert.Equal(t, []bool{tt.skip}, skipped, "%T", tt.parser)
	}
}
