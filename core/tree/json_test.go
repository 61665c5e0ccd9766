package tree_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

func TestJSONRoundTripLossless(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 300 {
		tr := treetest.Random(r, treetest.Options{Rollouts: 1 + i%16, PFailed: 0.2, PTruncated: 0.2, PCancelled: 0.1, PNoCritic: 0.3, PShaping: 0.3})
		tr.Stats = tree.Stats{Rollouts: 3, BudgetUnspent: 1, GeneratedTokens: 99, PrefixTokensReused: 7, WallSeconds: 1.0 / 3, PolicySeconds: math.Pi}
		tr.Nodes[len(tr.Nodes)-1].Observation = "obs \"quoted\" <tag> \u2028"
		data, err := tree.Marshal(tr)
		require.NoError(t, err)
		back, err := tree.Unmarshal(data)
		require.NoError(t, err)
		require.Equal(t, tr, back)
		var buf bytes.Buffer
		require.NoError(t, tree.Encode(&buf, back))
		require.Equal(t, data, buf.Bytes(), "encoding is deterministic")
		again, err := tree.Decode(&buf)
		require.NoError(t, err)
		require.Equal(t, tr, again)
	}
}

func TestJSONFieldNames(t *testing.T) {
	data, err := tree.Marshal(small(t))
	require.NoError(t, err)
	for _, key := range []string{`"problem_id":"p1"`, `"nodes":[`, `"id":0`, `"parent":-1`, `"children":[1,3]`, `"depth":0`,
		`"spans":[{"tokens":[1,2],"trainable":[false,false],"logprobs":[0,0]}]`, `"reward":0`, `"text":"Q:"`, `"observation":""`,
		`"done":false`, `"truncated":false`, `"failed":""`, `"critic":null`, `"search_pass":0`,
		`"stats":{"rollouts":0,"budget_unspent":0,"generated_tokens":0,"prefix_tokens_reused":0,"wall_seconds":0,"policy_seconds":0,` +
			`"finished_rollouts":0,"successes":0,"all_failed":false,"truncated_rollouts":0,"outcomes_differ":false}`} {
		assert.Contains(t, string(data), key)
	}
}

// An edge's weight version is kept through a round trip and left out when not known.
func TestJSONKeepsTheWeightVersion(t *testing.T) {
	tr := small(t)
	data, err := tree.Marshal(tr)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "weight_version")
	tr.Nodes[1].WeightVersion = "step-20"
	data, err = tree.Marshal(tr)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"weight_version":"step-20"`)
	back, err := tree.Unmarshal(data)
	require.NoError(t, err)
	assert.Equal(t, "step-20", back.Nodes[1].WeightVersion)
	assert.Equal(t, "", back.Nodes[2].WeightVersion)
}

func TestUnmarshalBadInput(t *testing.T) {
	valid, err := tree.Marshal(small(t))
	require.NoError(t, err)
	doc := string(valid)
	tests := []struct {
		name    string
		json    string
		node    int // -1: a decode error without a node
		field   string
		message string
	}{
		{"not json", `{"nodes": [`, -1, "", "tree: decode"},
		{"unknown field", strings.Replace(doc, `"reward":1`, `"rewards":1`, 1), -1, "", "rewards"},
		{"missing parent", strings.Replace(doc, `"parent":1,`, ``, 1), 2, "parent", "missing"},
		{"missing id", strings.Replace(doc, `"id":3,`, ``, 1), 3, "id", "missing"},
		{"unknown parent", strings.Replace(doc, `"parent":1,`, `"parent":42,`, 1), 2, "parent", "unknown node 42"},
		{"token too large", strings.Replace(doc, `"tokens":[6]`, `"tokens":[4294967296]`, 1), -1, "", "tree: decode"},
		{"nan reward", strings.Replace(doc, `"reward":1`, `"reward":NaN`, 1), -1, "", "tree: decode"},
		{"huge reward", strings.Replace(doc, `"reward":1`, `"reward":1e999`, 1), -1, "", "tree: decode"},
		{"mismatched lengths", strings.Replace(doc, `"trainable":[true],"logprobs":[-0.5]`, `"trainable":[true],"logprobs":[-0.5,0]`, 1), 2, "spans[0].logprobs", "2 entries for 1 tokens"},
		{"cycle", cycleJSON(t), 1, "parent", "cycle 1 -> 2 -> 1"},
		{"empty", `{}`, -1, "nodes", "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tree.Unmarshal([]byte(tc.json))
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tc.message)
			var ve *tree.ValidationError
			if tc.field == "" {
				assert.False(t, errors.As(err, &ve), err.Error())
				return
			}
			require.True(t, errors.As(err, &ve), err.Error())
			assert.Equal(t, tc.node, ve.NodeID, err.Error())
			assert.Equal(t, tc.field, ve.Field, err.Error())
		})
	}
}

// cycleJSON encodes small() with nodes 1 and 2 made each other's parents,
// bypassing Marshal's validation.
func cycleJSON(t *testing.T) string {
	tr := small(t)
	tr.Nodes[0].Children = []int{3}
	tr.Nodes[1].Parent = 2
	tr.Nodes[2].Children = []int{1}
	tr.Nodes[2].Done = false
	data, err := json.Marshal(tr)
	require.NoError(t, err)
	return string(data)
}

func FuzzUnmarshal(f *testing.F) {
	for _, tr := range []*tree.Tree{
		treetest.Random(rand.New(rand.NewPCG(1, 2)), treetest.Options{Rollouts: 3, PFailed: 0.3, PTruncated: 0.3}),
		treetest.Chains([]float64{1, 0}, 2, 2, 0.5),
	} {
		data, err := tree.Marshal(tr)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte(`{"nodes":[{"id":0,"parent":-1,"depth":0,"children":[1]},{"id":1,"parent":0,"depth":1,"done":true,"reward":0.5}]}`))
	f.Add([]byte(`{"nodes":[{"id":0,"parent":1,"depth":0,"children":[1]},{"id":1,"parent":0,"depth":1,"children":[0]}]}`))
	f.Add([]byte(`{"problem_id":"\ud800","nodes":[{"id":0,"parent":-1,"depth":0,"critic":1e308}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := tree.Unmarshal(data)
		if err != nil {
			return
		}
		out, err := tree.Marshal(tr)
		require.NoError(t, err, "a tree that decoded and validated must encode")
		back, err := tree.Unmarshal(out)
		require.NoError(t, err)
		require.Equal(t, tr, back)
		for id := range tr.Nodes {
			require.Len(t, tr.ContextTokens(id), tr.ContextLen(id))
		}
	})
}
