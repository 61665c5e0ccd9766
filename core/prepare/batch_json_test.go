package prepare_test

import (
	"testing"

	jsoniter "github.com/json-iterator/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

// TestDecodeBatch reads the batch a Python caller builds straight into the
// real types: explicit spans, search pass null as unknown, critic contexts,
// failures.
func TestDecodeBatch(t *testing.T) {
	b, err := prepare.DecodeBatch([]byte(`{"problem_id": "p",
		"actor": [{"node_id": 3, "group_id": 1, "estimator": "Custom", "weight": -0.5, "diagnostics": {"z": 1, "a": 2},
		           "search_pass": null, "spans": [{"tokens": [1, 2], "trainable": [false, true], "logprobs": [0, -0.25]}]},
		          {"node_id": 4, "group_id": 1, "estimator": "Custom", "weight": 0.5, "diagnostics": {}, "search_pass": 2, "spans": []}],
		"critic": [{"node_id": 1, "context": "ctx", "target": 0.75, "diagnostics": {}}],
		"failures": [{"node_id": 5, "message": "boom"}]}`))
	require.NoError(t, err)
	assert.Equal(t, "p", b.ProblemID)
	require.Len(t, b.Actor, 2)
	a := &b.Actor[0]
	assert.Equal(t, 3, a.NodeID)
	assert.Equal(t, 1, a.GroupID)
	assert.Equal(t, "Custom", a.Estimator)
	assert.Equal(t, -0.5, a.Weight)
	assert.Equal(t, []string{"z", "a"}, a.Diagnostics.Names(), "diagnostics keep their order")
	assert.Equal(t, prepare.NoSearchPass, a.SearchPass)
	assert.Nil(t, a.Tree())
	assert.Equal(t, []tree.PackedSequence{{Tokens: []uint32{1, 2}, Trainable: []bool{false, true}, Logprobs: []float64{0, -0.25}}}, a.Spans())
	assert.Equal(t, 2, b.Actor[1].SearchPass)
	assert.Zero(t, b.Actor[1].NumSpans())
	require.Len(t, b.Critic, 1)
	assert.Equal(t, "ctx", b.Critic[0].Context())
	assert.Equal(t, []prepare.Failure{{NodeID: 5, Message: "boom"}}, b.Failures)
}

func TestDecodeBatchErrors(t *testing.T) {
	_, err := prepare.DecodeBatch([]byte(`{"actor": [{"spans": []}, {"spans": [{"tokens": [1], "trainable": [], "logprobs": [0]}]}]}`))
	require.Error(t, err)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.Contains(t, err.Error(), "batch: actor[1].spans[0] has 1 tokens, 0 trainable flags and 1 logprobs; as many flags and logprobs as tokens are required")
	assert.Equal(t, "actor[1].spans[0]", status.FieldOf(err))

	for _, tt := range []struct{ data, message string }{
		{`{"actor": 3}`, "batch: actor is the number 3; a list is required"},
		{`{"actor": [{"node_id": 1, "weight": NaN}]}`, "batch: actor[0].weight is NaN; a finite number is required"},
		{`{"actor": [{"node_id": 1, "Weight": 1}]}`, `batch: unknown key "Weight" in actor[0] (keys are case-sensitive), did you mean "weight"?`},
		{`{"actor": [{"spans": [{"logprobs": [-Infinity]}]}]}`, "batch: actor[0].spans[0].logprobs[0] is -Infinity; a finite number is required"},
		{`{"critic": [{"node_id": 1, "target": 1e999}]}`, "batch: critic[0].target is 1e999, beyond the range of a 64-bit float; a finite number is required"},
		{`{"critic": [{"diagnostics": {"a": 1, "a": 2}}]}`, "batch: critic[0].diagnostics.a is given twice; one value per key is required"},
		{`{"critic": [{"diagnostics": [1]}]}`, "batch: critic[0].diagnostics is a list; an object is required"},
		{`{"failures": [{"node_id": "5"}]}`, `batch: failures[0].node_id is the string "5"; an integer is required`},
		{`{"actor": [{"node_id": 1}`, "batch: bad JSON at byte 25 (in actor): the input ends before the value is complete"},
	} {
		_, err = prepare.DecodeBatch([]byte(tt.data))
		require.Error(t, err, tt.data)
		assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
		assert.Contains(t, err.Error(), tt.message)
	}
}

// An actor sample encodes with its spans materialised and decodes back to an
// explicit sample with the same spans and numbers.
func TestActorSampleJSON(t *testing.T) {
	tr := treetest.Search(8, 2, 4, 2)
	b, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	for i := range b.Actor {
		data, err := jsoniter.Marshal(b.Actor[i])
		require.NoError(t, err)
		var back prepare.ActorSample
		require.NoError(t, jsoniter.Unmarshal(data, &back))
		assert.Equal(t, b.Actor[i].Spans(), back.Spans())
		assert.Equal(t, b.Actor[i].NodeID, back.NodeID)
		assert.Equal(t, b.Actor[i].SearchPass, back.SearchPass)
		assert.Equal(t, b.Actor[i].Weight, back.Weight)
		assert.Equal(t, b.Actor[i].Diagnostics.Values(), back.Diagnostics.Values())
	}
}
