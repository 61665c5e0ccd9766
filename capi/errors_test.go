package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/capi/binding"
	"github.com/focus-go/focus-go/core/status"
)

// An error reaches the caller's *err as {"message", "field"}: the message as it was, and
// the configuration field it is about, omitted when none (Python's ConfigError.field).
func TestErrorPayload(t *testing.T) {
	_, budget := binding.Check(binding.KindSelective, []byte(`{"budget": 0, "warmup": 0}`))
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"a field", budget, `{"message":"Selective: budget is 0, must be >= 1","field":"budget"}`},
		{"wrapped", fmt.Errorf("collect: %w", status.FieldErrorf(status.InvalidArgument, "sampling", "top_p", "%v must be in (0, 1]", 2.0)),
			`{"message":"collect: sampling: top_p 2 must be in (0, 1]","field":"top_p"}`},
		{"no field", status.Errorf(status.NotFound, "tokenizer: no tokenizer.json in /m"), `{"message":"tokenizer: no tokenizer.json in /m"}`},
		{"plain", errors.New("boom"), `{"message":"boom"}`},
		{"NUL and quotes", errors.New("a\x00b \"c\" <d>"), `{"message":"a\u0000b \"c\" <d>"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := errorPayload(tt.err.Error(), status.FieldOf(tt.err))
			assert.Equal(t, tt.want, string(data))
			var back struct{ Message, Field string }
			require.NoError(t, json.Unmarshal(data, &back))
			assert.Equal(t, tt.err.Error(), back.Message)
			assert.Equal(t, status.FieldOf(tt.err), back.Field)
		})
	}
	// Bytes that are not UTF-8 become U+FFFD, as the caller's UTF-8 decoding made them.
	var back struct{ Message string }
	require.NoError(t, json.Unmarshal(errorPayload("bad \xff byte", ""), &back))
	assert.Equal(t, "bad \ufffd byte", back.Message)
}
