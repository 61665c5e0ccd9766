package mathenv

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/action"
)

// Under collect.Env's ownership rule an action's chunk is read-only and may be kept: Step
// keeps the chunk's tokens as they are (no copy) and never writes to them, and forks that
// share them stay independent.
func TestStepKeepsTheChunkWithoutCopyingOrWritingIt(t *testing.T) {
	ctx := context.Background()
	first := []uint32{}
	for _, b := range []byte("The answer is ") {
		first = append(first, uint32(b))
	}
	want := slices.Clone(first)
	e := New(`\boxed{5}`, byteDecode)
	_, err := e.Step(ctx, action.Action{Kind: action.KindTokens, Chunk: &action.TokenChunk{Tokens: first}})
	require.NoError(t, err)
	assert.True(t, &e.last.tokens[0] == &first[0], "the chunk is kept, not copied")

	a, err := e.Fork(ctx)
	require.NoError(t, err)
	b, err := e.Fork(ctx)
	require.NoError(t, err)
	right, wrong := []uint32{}, []uint32{}
	for _, c := range []byte(`\boxed{5}`) {
		right = append(right, uint32(c))
	}
	for _, c := range []byte(`\boxed{6}`) {
		wrong = append(wrong, uint32(c))
	}
	sa, err := a.Step(ctx, action.Action{Kind: action.KindTokens, Chunk: &action.TokenChunk{Tokens: right, Finished: true}})
	require.NoError(t, err)
	sb, err := b.Step(ctx, action.Action{Kind: action.KindTokens, Chunk: &action.TokenChunk{Tokens: wrong, Finished: true}})
	require.NoError(t, err)
	assert.Equal(t, Correct, sa.Reward)
	assert.Equal(t, Wrong, sb.Reward)
	assert.Equal(t, want, first, "Step never writes to a chunk it was given")
	assert.Equal(t, append(slices.Clone(want), right...), a.(*Env).Tokens())
	assert.Equal(t, append(slices.Clone(want), wrong...), b.(*Env).Tokens())
	assert.Len(t, e.Tokens(), len(want), "the forks' steps leave the original as it was")
}

// An unfinished step allocates only its list cell.
func TestUnfinishedStepAllocatesOnlyItsListCell(t *testing.T) {
	ctx := context.Background()
	chunk := &action.TokenChunk{Tokens: make([]uint32, 256)}
	act := action.Action{Kind: action.KindTokens, Chunk: chunk}
	e := New(`\boxed{5}`, byteDecode)
	allocs := testing.AllocsPerRun(100, func() {
		e.last = nil
		if _, err := e.Step(ctx, act); err != nil {
			t.Fatal(err)
		}
	})
	assert.Equal(t, 1.0, allocs)
}
