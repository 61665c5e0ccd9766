package status

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCodeOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Code
	}{
		{"nil", nil, OK},
		{"typed", Errorf(InvalidArgument, "budget must be >= 1, got %d", 0), InvalidArgument},
		{"wrapped typed", fmt.Errorf("collect: %w", Errorf(Backend, "sglang: 503")), Backend},
		{"deadline", fmt.Errorf("policy: %w", context.DeadlineExceeded), Timeout},
		{"cancelled", context.Canceled, Cancelled},
		{"outermost wins", Wrap(Collection, context.Canceled, "branch 3 failed"), Collection},
		{"plain", errors.New("boom"), Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, CodeOf(tt.err))
		})
	}
}

func TestWrapKeepsCause(t *testing.T) {
	cause := errors.New("connection refused")
	err := Wrap(Backend, cause, "sglang %s", "http://127.0.0.1:1")
	assert.ErrorIs(t, err, cause)
	assert.Equal(t, "sglang http://127.0.0.1:1: connection refused", err.Error())
	assert.Nil(t, Wrap(Backend, nil, "unused"))
}

func ExampleCodeOf() {
	err := fmt.Errorf("prepare: %w", Errorf(InvalidArgument, "node 3: reward is NaN"))
	fmt.Println(CodeOf(err), "-", err)
	// Output: invalid argument - prepare: node 3: reward is NaN
}
