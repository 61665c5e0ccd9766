package mathenv

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/status"
)

// byteDecode treats every token id as one byte, so tests write responses as
// strings.
func byteDecode(ids []uint32) (string, error) {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b), nil
}

func chunk(s string, finished bool) action.Action {
	ids := make([]uint32, len(s))
	for i := range s {
		ids[i] = uint32(s[i])
	}
	return action.Action{Kind: action.KindTokens, Chunk: &action.TokenChunk{Tokens: ids, Finished: finished}}
}

func TestEnvEpisode(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string // the last one is finished
		label  string
		reward float64
		info   string
	}{
		{"correct across chunks", []string{"x = 5, so \\bo", "xed{5}"}, `\boxed{5}`, Correct, `{"answer":"5","label":"\\boxed{5}","correct":true}`},
		{"answer split at boundary", []string{"\\boxed{1", "/2}"}, "0.5", Correct, `{"answer":"1/2","label":"0.5","correct":true}`},
		{"wrong", []string{"\\boxed{4}"}, "5", Wrong, `{"answer":"4","label":"5","correct":false}`},
		{"no answer", []string{"five"}, "5", Wrong, `{"answer":null,"label":"5","correct":false}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			env := New(tt.label, byteDecode)
			obs, err := env.Reset(ctx)
			require.NoError(t, err)
			assert.True(t, obs.Empty())
			for i, c := range tt.chunks {
				last := i == len(tt.chunks)-1
				step, err := env.Step(ctx, chunk(c, last))
				require.NoError(t, err)
				assert.Equal(t, last, step.Done)
				if !last {
					assert.Zero(t, step.Reward)
					continue
				}
				assert.Equal(t, tt.reward, step.Reward)
				assert.JSONEq(t, tt.info, string(step.Info))
			}
			_, err = env.Step(ctx, chunk("more", true))
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err), "a finished episode takes no more steps")
			_, err = env.Reset(ctx)
			require.NoError(t, err)
			assert.Empty(t, env.Tokens())
		})
	}
}

func TestEnvForkIsIndependent(t *testing.T) {
	ctx := context.Background()
	env := New("7", byteDecode)
	_, err := env.Step(ctx, chunk("\\boxed{", false))
	require.NoError(t, err)
	a, err := env.Fork(ctx)
	require.NoError(t, err)
	b, err := env.Fork(ctx)
	require.NoError(t, err)

	sa, err := a.Step(ctx, chunk("7}", true))
	require.NoError(t, err)
	sb, err := b.Step(ctx, chunk("8}", true))
	require.NoError(t, err)
	assert.Equal(t, Correct, sa.Reward)
	assert.Equal(t, Wrong, sb.Reward)
	assert.Equal(t, "\\boxed{", string(mustDecode(env.Tokens())), "the snapshot is unchanged")
	_, err = env.Step(ctx, chunk("7}", true))
	require.NoError(t, err, "the snapshot can still finish its own episode")
	env.Close()
}

func mustDecode(ids []uint32) string {
	s, _ := byteDecode(ids)
	return s
}

func TestEnvErrors(t *testing.T) {
	ctx := context.Background()
	_, err := New("5", byteDecode).Step(ctx, action.Action{Kind: action.KindText, Text: "5"})
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.Contains(t, err.Error(), `expected "tokens"`)

	_, err = New("5", nil).Step(ctx, chunk("\\boxed{5}", true))
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))

	failing := func([]uint32) (string, error) {
		return "", status.Errorf(status.Backend, "tokenizer: id 999999 out of range")
	}
	_, err = New("5", failing).Step(ctx, chunk("x", true))
	assert.Equal(t, status.Backend, status.CodeOf(err))
	assert.True(t, strings.Contains(err.Error(), "out of range"))

	plain := func([]uint32) (string, error) { return "", errors.New("boom") }
	_, err = New("5", plain).Step(ctx, chunk("x", true))
	assert.Error(t, err)
}

func TestEnvTokensKeepStepOrderAcrossForks(t *testing.T) {
	ctx := context.Background()
	env := New("7", byteDecode)
	for _, s := range []string{"ab", "", "cd"} {
		_, err := env.Step(ctx, chunk(s, false))
		require.NoError(t, err)
	}
	fork, err := env.Fork(ctx)
	require.NoError(t, err)
	_, err = fork.Step(ctx, chunk("ef", false))
	require.NoError(t, err)
	_, err = env.Step(ctx, chunk("xy", false))
	require.NoError(t, err)
	assert.Equal(t, "abcdef", mustDecode(fork.(*Env).Tokens()))
	assert.Equal(t, "abcdxy", mustDecode(env.Tokens()))
}

func TestGradeEpisode(t *testing.T) {
	answer := func(s string) *string { return &s }
	tests := []struct {
		name, text, label string
		want              Graded
	}{
		{"correct", `so \boxed{5}`, "5", Graded{Reward: Correct, Done: true, Info: StepInfo{Answer: answer("5"), Label: "5", Correct: true}}},
		{"boxed label", `\boxed{\frac{1}{2}}`, `\boxed{0.5}`, Graded{Reward: Correct, Done: true, Info: StepInfo{Answer: answer(`\frac{1}{2}`), Label: `\boxed{0.5}`, Correct: true}}},
		{"wrong", `\boxed{4}`, "5", Graded{Reward: Wrong, Done: true, Info: StepInfo{Answer: answer("4"), Label: "5"}}},
		{"no answer", "I give up", "5", Graded{Reward: Wrong, Done: true, Info: StepInfo{Label: "5"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, GradeEpisode(tc.text, tc.label))
		})
	}
}

// An Env grades its episode against a label it prepared once; the result must be
// GradeEpisode's for every response and label.
func TestEnvGradesAsGradeEpisode(t *testing.T) {
	for _, tt := range gradeCases {
		t.Run(tt.name, func(t *testing.T) {
			env := New(tt.label, byteDecode)
			st, err := env.Step(context.Background(), chunk(tt.response, true))
			require.NoError(t, err)
			want := GradeEpisode(tt.response, tt.label)
			assert.Equal(t, want.Reward, st.Reward)
			assert.Equal(t, want.Done, st.Done)
			info, err := json.Marshal(want.Info)
			require.NoError(t, err)
			assert.JSONEq(t, string(info), string(st.Info))
			assert.Equal(t, tt.correct, want.Info.Correct)
		})
	}
}
