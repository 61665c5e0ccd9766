package binding_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/capi/binding"
	"github.com/focus-go/focus-go/core/status"
)

// TestCriticRuleRefusesImpossibleFits: a state or a batch fit no trees could have given
// (a variance above nodes/4 made the rule trust the critic fully) is refused naming it.
func TestCriticRuleRefusesImpossibleFits(t *testing.T) {
	tests := []struct {
		name, request, field, message string
	}{
		{"variance above nodes/4 in the state", `{"state": {"fit": {"nodes": 8, "variance": 5, "squared_error": 1, "inverse_count": 4}, "batches": 1}}`,
			"state.fit.variance", "critic rule: state.fit.variance is 5 with nodes 8, an impossible pooled fit; at most nodes/4 = 2 is required"},
		{"variance above nodes/4 in a batch", `{"batch": [{"nodes": 1, "variance": 0.25, "inverse_count": 1}, {"nodes": 4, "variance": 100, "squared_error": 0, "inverse_count": 1}]}`,
			"batch[1].variance", "critic rule: batch[1].variance is 100 with nodes 4, an impossible pooled fit"},
		{"inverse count above nodes", `{"state": {"fit": {"nodes": 2, "variance": 0.5, "inverse_count": 9}}}`,
			"state.fit.inverse_count", "critic rule: state.fit.inverse_count is 9 with nodes 2, an impossible pooled fit; at most nodes = 2 is required"},
		{"negative batches", `{"state": {"batches": -1}}`, "state.batches", "critic rule: state.batches is -1; an integer >= 0 is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req binding.CriticRuleRequest
			require.NoError(t, binding.Decode("critic rule request", []byte(tt.request), &req))
			_, err := binding.CriticRule(req)
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tt.message)
			assert.Equal(t, tt.field, status.FieldOf(err))
		})
	}
	// The bound itself is a possible fit, and the rule measures from it.
	var req binding.CriticRuleRequest
	require.NoError(t, binding.Decode("critic rule request", []byte(`{"state": {"fit": {"nodes": 8, "variance": 2, "squared_error": 1, "inverse_count": 4}, "batches": 1}, "base_kappa": 1}`), &req))
	answer, err := binding.CriticRule(req)
	require.NoError(t, err)
	assert.True(t, answer.Choice.Measured)
}
