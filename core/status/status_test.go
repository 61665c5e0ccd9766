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

func TestFieldError(t *testing.T) {
	search := &FieldError{Config: "search config", Field: "budget", Reason: "is 0, must be >= 1"}
	tests := []struct {
		name  string
		err   error
		text  string
		field string
		code  Code
	}{
		{"named by its config", search, "search config budget: is 0, must be >= 1", "budget", Internal},
		{"wrapped with a code", Wrap(InvalidArgument, search, "search"), "search: search config budget: is 0, must be >= 1", "budget", InvalidArgument},
		{"named by the caller", FieldErrorf(InvalidArgument, "Selective", "warmup", "is %d, must be in [1, budget=%d]", 8, 4),
			"Selective: warmup is 8, must be in [1, budget=4]", "warmup", InvalidArgument},
		{"no lead", FieldErrorf(InvalidArgument, "", "min_abs_advantage", "is %g, must be >= 0", -1.0),
			"min_abs_advantage is -1, must be >= 0", "min_abs_advantage", InvalidArgument},
		{"through fmt", fmt.Errorf("collect: %w", FieldErrorf(InvalidArgument, "sampling", "top_p", "%v must be in (0, 1]", 2.0)),
			"collect: sampling: top_p 2 must be in (0, 1]", "top_p", InvalidArgument},
		{"the outermost field", FieldErrorf(InvalidArgument, "Independent", "n", "is 0, must be >= 1"), "Independent: n is 0, must be >= 1", "n", InvalidArgument},
		{"not about a field", Errorf(InvalidArgument, "collect: prompt has no tokens"), "collect: prompt has no tokens", "", InvalidArgument},
		{"plain", errors.New("boom"), "boom", "", Internal},
		{"nil", nil, "", "", OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.field, FieldOf(tt.err))
			assert.Equal(t, tt.code, CodeOf(tt.err))
			if tt.err != nil {
				assert.Equal(t, tt.text, tt.err.Error())
			}
		})
	}
}

func ExampleFieldOf() {
	err := FieldErrorf(InvalidArgument, "Selective", "budget", "is %d, must be >= 1", 0)
	fmt.Printf("%s (field %q)\n", err, FieldOf(err))
	// Output: Selective: budget is 0, must be >= 1 (field "budget")
}
