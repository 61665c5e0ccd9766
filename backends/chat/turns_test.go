package chat_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/backends/chat"
	"github.com/focus-go/focus-go/backends/tokenizer"
	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/sim"
)

// replyPolicy writes one fixed reply per turn (ending with its EOS token).
type replyPolicy struct {
	replies [][]uint32
}

func (p *replyPolicy) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	ids := p.replies[0]
	if len(p.replies) > 1 {
		p.replies = p.replies[1:]
	}
	return &generate.Result{Tokens: ids, Logprobs: make([]float64, len(ids)), StopReason: generate.StopReasonStop, ExactGeneration: true}, nil
}

// messagesEnv answers the first turn with fixed messages and ends on the second.
type messagesEnv struct {
	messages []json.RawMessage
	steps    int
}

func (e *messagesEnv) Reset(ctx context.Context) (collect.Observation, error) {
	return collect.Observation{}, nil
}

func (e *messagesEnv) Step(ctx context.Context, a action.Action) (collect.Step, error) {
	e.steps++
	if e.steps > 1 {
		return collect.Step{Done: true}, nil
	}
	return collect.Step{Observation: collect.Observation{Messages: e.messages}}, nil
}

func (e *messagesEnv) Fork(ctx context.Context) (collect.Env, error) { c := *e; return &c, nil }
func (e *messagesEnv) Close()                                        {}

const calcTool = `{"type": "function", "function": {"name": "calculator", "description": "Evaluate an arithmetic expression.", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}`

// TestWholeTurnRealTemplates runs the whole-turn context (Codec.Turns) with the simulator's (Qwen2.5-style) chat template and the real Qwen3 one,
// both over the real Qwen3 tokenizer (their ChatML specials are the same).
func TestWholeTurnRealTemplates(t *testing.T) {
	dir := filepath.Join("..", "..", "build", "testdata", "qwen3")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Skip("build/testdata/qwen3 is missing (make testdata)")
	}
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	defer tok.Close()
	cfg, err := tokenizer.LoadConfig(dir)
	require.NoError(t, err)
	qwen3, err := chat.FromConfig(cfg)
	require.NoError(t, err)
	simTmpl, err := chat.Compile(sim.ChatTemplate())
	require.NoError(t, err)
	templates := map[string]*chat.Template{"sim": simTmpl, "qwen3": qwen3}

	tool := json.RawMessage(`{"role":"tool","name":"calculator","content":"4"}`)
	user := json.RawMessage(`{"role":"user","content":"and now 3+3?"}`)
	root := []json.RawMessage{json.RawMessage(`{"role":"system","content":"Be brief."}`), json.RawMessage(`{"role":"user","content":"What is 2+2?"}`)}
	const call = "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2+2\"}}\n</tool_call>"
	const toolTail = "\n<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
	noThinking := map[string]json.RawMessage{"enable_thinking": json.RawMessage(`false`)}
	tests := []struct {
		name     string
		template string
		kwargs   map[string]json.RawMessage
		reply    string // the generated turn, without its EOS
		obs      []json.RawMessage
		want     string // the conditioning text; "" = the rollout fails
	}{
		{"sim tool", "sim", nil, call, []json.RawMessage{tool}, toolTail},
		{"sim two tools", "sim", nil, call, []json.RawMessage{tool, tool}, "\n<|im_start|>user\n<tool_response>\n4\n</tool_response>\n<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>assistant\n"},
		{"sim user", "sim", nil, "I'll check.", []json.RawMessage{user}, "\n<|im_start|>user\nand now 3+3?<|im_end|>\n<|im_start|>assistant\n"},
		{"qwen3 thinking tool", "qwen3", nil, "<think>\nAdd them.\n</think>\n\n" + call, []json.RawMessage{tool}, toolTail},
		{"qwen3 non-thinking tool", "qwen3", noThinking, call, []json.RawMessage{tool}, toolTail + "<think>\n\n</think>\n\n"},
		// A new user query makes Qwen3 drop the think blocks of earlier turns: history rewritten.
		{"qwen3 user rewrites", "qwen3", nil, "<think>\nAdd them.\n</think>\n\n4", []json.RawMessage{user}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turns, err := chat.NewCodec(templates[tt.template], tok).Turns("hermes", root, json.RawMessage("["+calcTool+"]"), tt.kwargs)
			require.NoError(t, err)
			prompt, err := turns.Template.Render(root, turns.Tools, true)
			require.NoError(t, err)
			promptIDs, err := tok.Encode(prompt, false)
			require.NoError(t, err)
			reply, err := tok.Encode(tt.reply+"<|im_end|>", false)
			require.NoError(t, err)
			final, err := tok.Encode("Done.<|im_end|>", false)
			require.NoError(t, err)

			ccfg := collect.Config{
				ProblemID: "p", PromptTokens: promptIDs, PromptText: prompt, Segments: 64,
				Search: search.Independent(1), Reward: prepare.DefaultRewardConfig(),
				Codec: tok, Turns: turns, AllowPartial: true,
			}
			res, err := collect.Run(context.Background(), ccfg, &replyPolicy{replies: [][]uint32{reply, final}}, &messagesEnv{messages: tt.obs}, nil)
			require.NoError(t, err)
			if tt.want == "" {
				require.Len(t, res.Failures, 1)
				assert.Contains(t, res.Failures[0].Message, "rewrites the conversation when 1 message(s) with roles [user]")
				return
			}
			require.Empty(t, res.Failures)
			require.Len(t, res.Tree.Nodes, 3)
			turn := res.Tree.Nodes[1]
			assert.Equal(t, tt.reply+"<|im_end|>"+tt.want, turn.Text)
			assert.Equal(t, tt.want, turn.Observation)
			assert.Equal(t, len(reply), turn.GeneratedTokens())

			// Where the template writes the reply back unchanged, the exact context is
			// the template's own rendering of the whole conversation.
			if tt.kwargs == nil {
				msg, _ := json.Marshal(map[string]string{"role": "assistant", "content": tt.reply})
				full, err := turns.Template.Render(append(append(append([]json.RawMessage{}, root...), msg), tt.obs...), turns.Tools, true)
				require.NoError(t, err)
				ctxText, err := tok.Decode(res.Tree.ContextTokens(1), false)
				require.NoError(t, err)
				assert.Equal(t, full, ctxText)
				assert.True(t, strings.HasSuffix(ctxText, "<|im_start|>assistant\n"))
			}
		})
	}
}

// TestTurnsOptions: the whole-turn context renders with a chat_template= override and
// refuses the options that apply to one prompt only (issue #46).
func TestTurnsOptions(t *testing.T) {
	dir := filepath.Join("..", "..", "build", "testdata", "qwen3")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Skip("build/testdata/qwen3 is missing (make testdata)")
	}
	codec, err := chat.Load(dir)
	require.NoError(t, err)
	defer codec.Close()
	root := []json.RawMessage{json.RawMessage(`{"role":"user","content":"hi"}`)}
	override := map[string]json.RawMessage{"chat_template": json.RawMessage(`"{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"`)}
	turns, err := codec.Turns("hermes", root, nil, override)
	require.NoError(t, err)
	text, err := turns.Template.Render(root, nil, false)
	require.NoError(t, err)
	assert.Equal(t, "[user] hi\n", text)
	for name, kwargs := range map[string]map[string]json.RawMessage{
		"continue": {"continue_final_message": json.RawMessage(`true`)},
		"truncate": {"truncation": json.RawMessage(`true`), "max_length": json.RawMessage(`4`)},
	} {
		_, err := codec.Turns("hermes", root, nil, kwargs)
		assert.ErrorContains(t, err, "apply to one prompt, not to a collection", name)
	}
	_, err = codec.Turns("hermes", root, nil, map[string]json.RawMessage{"padding": json.RawMessage(`"longest"`)})
	assert.ErrorContains(t, err, `option padding='longest'`)
}
