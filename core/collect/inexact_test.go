package collect

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
)

// An inexact response (ids not the sampled ones, or a token without a finite logprob)
// becomes an edge with no trainable token, marked Inexact with the reason; preparation
// then emits no actor sample for it, lists it in the failures, and keeps every critic
// target.
func TestInexactResponsesTrainNoActor(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(res *generate.Result)
		reason string
	}{
		{name: "not token-exact", mutate: func(res *generate.Result) { res.ExactGeneration = false },
			reason: "not token-exact (exact=False or exact_generation=False)"},
		{name: "null logprob from the server", mutate: func(res *generate.Result) { res.Logprobs[1] = math.NaN() },
			reason: "the server gave no finite logprob for 1 of"},
		{name: "-inf logprob", mutate: func(res *generate.Result) { res.Logprobs[0] = math.Inf(-1) },
			reason: "logprob -Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol := newPolicy(300)
			pol.mutate = tt.mutate
			res, err := Run(context.Background(), baseConfig(search.Independent(3)), pol, newFakeEnv(), &fakeCritic{})
			require.NoError(t, err)
			tr := res.Tree
			require.Greater(t, len(tr.Nodes), 1)
			for id := 1; id < len(tr.Nodes); id++ {
				nd := &tr.Nodes[id]
				assert.Contains(t, nd.Inexact, tt.reason, "node %d", id)
				assert.Zero(t, nd.GeneratedTokens(), "node %d: an inexact edge has no trainable token", id)
				for _, sp := range nd.Spans {
					for _, lp := range sp.Logprobs {
						assert.Zero(t, lp, "node %d: conditioning tokens carry logprob 0.0", id)
					}
				}
			}
			require.NoError(t, tr.Validate())

			b, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
			require.NoError(t, err)
			assert.Empty(t, b.Actor, "no actor sample from an inexact edge")
			assert.NotEmpty(t, b.Critic, "critic targets are kept")
			require.Len(t, b.Failures, len(tr.Nodes)-1)
			for _, f := range b.Failures {
				assert.True(t, strings.HasPrefix(f.Message, "inexact edge: "), f.Message)
				assert.Contains(t, f.Message, tt.reason)
			}
			assert.Equal(t, len(b.Failures), b.Stats.Failures)
		})
	}
}

// Exact responses are unaffected: every edge trains the actor.
func TestExactResponsesTrainTheActor(t *testing.T) {
	res, err := Run(context.Background(), baseConfig(search.Independent(3)), newPolicy(300), newFakeEnv(), &fakeCritic{})
	require.NoError(t, err)
	b, err := prepare.Prepare(res.Tree, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	assert.Len(t, b.Actor, len(res.Tree.Nodes)-1)
	assert.Empty(t, b.Failures)
	for id := 1; id < len(res.Tree.Nodes); id++ {
		assert.Empty(t, res.Tree.Nodes[id].Inexact)
	}
}
