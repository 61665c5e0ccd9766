package tree_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
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
		{"not json", `{"nodes": [`, -1, "", "tree: bad JSON at byte 11 (in nodes): the input ends before the value is complete"},
		{"cut off", doc[:len(doc)/2], -1, "", "tree: bad JSON at byte"},
		{"unknown field", strings.Replace(doc, `"reward":1`, `"rewards":1`, 1), -1, "",
			`tree: unknown key "rewards" in nodes[2], did you mean "reward"? (allowed: children, critic, depth, done, failed, id, inexact, observation, off_policy, parent, reward, search_pass, spans, text, truncated, weight_version)`},
		{"a key in another case", strings.Replace(doc, `"reward":1`, `"reward":1,"Reward":0`, 1), -1, "",
			`tree: unknown key "Reward" in nodes[2] (keys are case-sensitive), did you mean "reward"?`},
		{"a key in another case first", strings.Replace(doc, `"reward":1`, `"Reward":0,"reward":1`, 1), -1, "", `tree: unknown key "Reward" in nodes[2]`},
		{"a key twice", strings.Replace(doc, `"reward":1`, `"reward":1,"reward":0`, 1), -1, "", "tree: nodes[2].reward is given twice; one value per key is required"},
		{"missing parent", strings.Replace(doc, `"parent":1,`, ``, 1), 2, "parent", "tree: node 2 parent: missing; an integer is required"},
		{"missing id", strings.Replace(doc, `"id":3,`, ``, 1), 3, "id", "missing"},
		{"unknown parent", strings.Replace(doc, `"parent":1,`, `"parent":42,`, 1), 2, "parent", "unknown node 42"},
		{"fractional parent", strings.Replace(doc, `"parent":1,`, `"parent":1.5,`, 1), -1, "", "tree: nodes[2].parent is 1.5; an integer or null is required"},
		{"token too large", strings.Replace(doc, `"tokens":[6]`, `"tokens":[4294967296]`, 1), -1, "",
			"tree: nodes[2].spans[0].tokens[0] is 4294967296, out of range; an integer in [0, 4294967295] is required"},
		{"negative token", strings.Replace(doc, `"tokens":[6]`, `"tokens":[-6]`, 1), -1, "", "tree: nodes[2].spans[0].tokens[0] is -6; an integer in [0, 4294967295] is required"},
		{"nan reward", strings.Replace(doc, `"reward":1`, `"reward":NaN`, 1), -1, "", "tree: nodes[2].reward is NaN; a finite number is required"},
		{"infinite critic", strings.Replace(doc, `"critic":null,"search_pass":0},{"id":3`, `"critic":Infinity,"search_pass":0},{"id":3`, 1), -1, "",
			"tree: nodes[2].critic is Infinity; a finite number or null is required"},
		{"-Infinity logprob", strings.Replace(doc, `"logprobs":[-0.5]`, `"logprobs":[-Infinity]`, 1), -1, "", "tree: nodes[2].spans[0].logprobs[0] is -Infinity; a finite number is required"},
		{"huge reward", strings.Replace(doc, `"reward":1`, `"reward":1e999`, 1), -1, "", "tree: nodes[2].reward is 1e999, beyond the range of a 64-bit float; a finite number is required"},
		{"null reward", strings.Replace(doc, `"reward":1`, `"reward":null`, 1), -1, "", "tree: nodes[2].reward is null; a finite number is required"},
		{"string flag", strings.Replace(doc, `"done":true`, `"done":"true"`, 1), -1, "", `tree: nodes[2].done is the string "true"; true or false is required`},
		{"nodes an object", `{"nodes": {"id": 0}}`, -1, "", "tree: nodes is an object; a list is required"},
		{"spans not a list of objects", strings.Replace(doc, `"spans":[{"tokens":[6],"trainable":[true],"logprobs":[-0.5]}]`, `"spans":[[6]]`, 1), -1, "",
			"tree: nodes[2].spans[0] is a list; an object is required"},
		{"stats a list", strings.Replace(doc, `"stats":{`, `"stats":[{`, 1) + "]", -1, "", "tree: stats is a list; an object is required"},
		{"two trees", doc + doc, -1, "", "tree: bad JSON at byte " + strconv.Itoa(len(doc)) + ": more data follows the JSON value"},
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

// BenchmarkUnmarshal reads a 64-rollout tree of 256-token spans: the strict check is one
// extra pass over the bytes, before the decode.
func BenchmarkUnmarshal(b *testing.B) {
	data, err := tree.Marshal(treetest.Random(rand.New(rand.NewPCG(3, 4)), treetest.Options{Rollouts: 64, MaxSpanTokens: 256}))
	require.NoError(b, err)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tree.Unmarshal(data); err != nil {
			b.Fatal(err)
		}
	}
}
