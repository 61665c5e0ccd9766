package collect

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
)

func TestConstantCritic(t *testing.T) {
	tests := []struct {
		name    string
		value   float64
		n       int
		wantErr status.Code
	}{
		{"half", 0.5, 3, status.OK},
		{"no contexts", 0.25, 0, status.OK},
		{"nan", math.NaN(), 1, status.InvalidArgument},
		{"inf", math.Inf(1), 1, status.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConstantCritic{tt.value}.Score(context.Background(), make([]string, tt.n))
			require.Equal(t, tt.wantErr, status.CodeOf(err), "%v", err)
			if tt.wantErr != status.OK {
				return
			}
			require.Len(t, got, tt.n)
			for _, v := range got {
				assert.Equal(t, tt.value, v)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ConstantCritic{0.5}.Score(ctx, []string{"a"})
	assert.Equal(t, status.Cancelled, status.CodeOf(err))
}

func TestCheckCriticValues(t *testing.T) {
	require.NoError(t, CheckCriticValues([]float64{0.5, -1}, 2))
	err := CheckCriticValues([]float64{0.5}, 2)
	assert.EqualError(t, err, "returned 1 values for 2 contexts; expected one value per context")
	assert.Equal(t, status.Backend, status.CodeOf(err))
	assert.EqualError(t, CheckCriticValues([]float64{0, math.NaN()}, 2), "value 1 is NaN, not finite")
	assert.EqualError(t, CheckCriticValues([]float64{math.Inf(-1)}, 1), "value 0 is -Inf, not finite")
}
