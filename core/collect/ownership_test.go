package collect

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/search"
)

// keepingEnv is nopEnv that keeps every token chunk it is given, as MathEnv does (one
// list for all forks, which the engine steps from several goroutines).
type keepingEnv struct {
	mu   *sync.Mutex
	kept *[][]uint32
}

func (e keepingEnv) Reset(context.Context) (Observation, error) { return Observation{}, nil }
func (e keepingEnv) Step(_ context.Context, a action.Action) (Step, error) {
	e.mu.Lock()
	*e.kept = append(*e.kept, a.Chunk.Tokens)
	e.mu.Unlock()
	if a.Chunk.Finished {
		return Step{Reward: 1, Done: true}, nil
	}
	return Step{}, nil
}
func (e keepingEnv) Fork(context.Context) (Env, error) { return e, nil }
func (keepingEnv) Close()                              {}

// The ownership rule of Policy and Env: a Result's Tokens and Logprobs become the
// tree's edge and the Env's action as they are (no copies), and the engine writes to
// none of them, so a policy may hand out the same arrays again (benchPolicy answers
// every segment with one of two shared results).
func TestResultArraysAreSharedAndNeverWritten(t *testing.T) {
	pol := newBenchPolicy(promptLen)
	wantTokens, wantLogprobs := slices.Clone(pol.more.Tokens), slices.Clone(pol.more.Logprobs)
	var kept [][]uint32
	run, err := Run(context.Background(), baseConfig(search.Selective(4, 2)), pol, keepingEnv{mu: &sync.Mutex{}, kept: &kept}, ConstantCritic{Value: 0.5})
	require.NoError(t, err)
	res := run.Tree
	require.Greater(t, res.Len(), 4)
	shared := func(a, b []uint32) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }
	for _, n := range res.Nodes[1:] {
		span := n.Spans[0]
		from := pol.more
		if n.Done {
			from = pol.final
		}
		assert.True(t, shared(span.Tokens, from.Tokens), "node %d: the edge's tokens are the result's", n.ID)
		assert.True(t, &span.Logprobs[0] == &from.Logprobs[0], "node %d: the edge's logprobs are the result's", n.ID)
		// Capacity capped at the length: appending to an edge can never write into the
		// policy's arrays (or into whatever follows them).
		assert.Equal(t, len(span.Tokens), cap(span.Tokens), "node %d", n.ID)
		assert.Equal(t, len(span.Logprobs), cap(span.Logprobs), "node %d", n.ID)
	}
	require.NotEmpty(t, kept)
	for _, k := range kept {
		assert.True(t, shared(k, pol.more.Tokens) || shared(k, pol.final.Tokens), "the env's chunk is the result's tokens")
		assert.Equal(t, len(k), cap(k))
	}
	assert.Equal(t, wantTokens, pol.more.Tokens, "the engine never writes to a result's tokens")
	assert.Equal(t, wantLogprobs, pol.more.Logprobs, "the engine never writes to a result's logprobs")
	require.NoError(t, res.Validate())
}
