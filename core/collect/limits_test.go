package collect

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
)

func TestAgentLimits(t *testing.T) {
	tests := []struct {
		name          string
		limits        AgentLimits
		field, reason string
	}{
		{"defaults", DefaultAgentLimits(), "", ""},
		{"ones", AgentLimits{1, 1, 1}, "", ""},
		{"segments", AgentLimits{0, 64, 8192}, "segments", "is 0, must be >= 1"},
		{"max_segments", AgentLimits{256, -2, 8192}, "max_segments", "is -2, must be >= 1"},
		{"max_total_tokens", AgentLimits{256, 64, 0}, "max_total_tokens", "is 0, must be >= 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.limits.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var le *status.FieldError
			require.True(t, errors.As(err, &le), "%v", err)
			assert.Equal(t, tc.field, le.Field)
			assert.Equal(t, tc.reason, le.Reason)
			assert.Equal(t, "agent limit "+tc.field+": "+tc.reason, err.Error())
		})
	}
	// Config.Validate applies the same rule after filling zeros with defaults.
	cfg := Config{PromptTokens: []uint32{1}, MaxSegments: -1}
	err := cfg.Validate()
	assert.EqualError(t, err, "collect: max_segments is -1, must be >= 1 (0 = 64)")
	assert.Equal(t, "max_segments", status.FieldOf(err))
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
}
