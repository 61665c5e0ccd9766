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
	act := chunk("The answer is ", false)
	first := act.Chunk.Tokens
	want := slices.Clone(first)
	e := New(`\boxed{5}`, byteDecode)
	_, err := e.Step(ctx, act)
	require.NoError(t, err)
	assert.True(t, &e.last.tokens[0] == &first[0], "the chunk is kept, not copied")

	a, err := e.Fork(ctx)
	require.NoError(t, err)
	b, err := e.Fork(ctx)
	require.NoError(t, err)
	right, wrong := chunk(`\boxed{5}`, true), chunk(`\boxed{6}`, true)
	sa, err := a.Step(ctx, right)
	require.NoError(t, err)
	sb, err := b.Step(ctx, wrong)
	require.NoError(t, err)
	assert.Equal(t, Correct, sa.Reward)
	assert.Equal(t, Wrong, sb.Reward)
	assert.Equal(t, want, first, "Step never writes to a chunk it was given")
	assert.Equal(t, append(slices.Clone(want), right.Chunk.Tokens...), a.(*Env).Tokens())
	assert.Equal(t, append(slices.Clone(want), wrong.Chunk.Tokens...), b.(*Env).Tokens())
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
