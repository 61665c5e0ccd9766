package fleet

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
)

func checked(model, tokenizer string) Check {
	return func(context.Context) (Checked, error) {
		return Checked{Info: model, Capacity: 4, Model: model, Tokenizer: tokenizer}, nil
	}
}

func TestStartupCheckRefusesReplicasOfAnotherModel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     Check
		match string
	}{
		{"model", checked("Qwen/Qwen3-8B", "tok"), `replica 2 of 2 (b) serves model "Qwen/Qwen3-8B", but replica 1 (a) serves "Qwen/Qwen3-4B"`},
		{"tokenizer", checked("Qwen/Qwen3-4B", "other"), `replica 2 of 2 (b) serves tokenizer "other", but replica 1 (a) serves "tok"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := New(Config{Replicas: []Replica{
				{Name: "a", Policy: newGated(), Check: checked("Qwen/Qwen3-4B", "tok")},
				{Name: "b", Policy: newGated(), Check: tc.b},
			}})
			require.NoError(t, err)
			_, err = f.StartupCheck(context.Background())
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tc.match)
		})
	}
}

func TestStartupCheckRecordsEveryReplicasModel(t *testing.T) {
	f, err := New(Config{Replicas: []Replica{
		{Name: "a", Policy: newGated(), Check: checked("m", "")},
		{Name: "b", Policy: newGated(), Check: checked("m", "")},
		{Name: "c", Policy: newGated(), Check: checked("", "")}, // a router that does not say
	}})
	require.NoError(t, err)
	_, err = f.StartupCheck(context.Background())
	require.NoError(t, err)
	var models []string
	for _, r := range f.Load().Replicas {
		models = append(models, r.Model)
	}
	assert.Equal(t, []string{"m", "m", ""}, models)
}

func TestStartupCheckComparesModelNamesByTheirLastElement(t *testing.T) {
	f, err := New(Config{Replicas: []Replica{
		{Name: "a", Policy: newGated(), Check: checked("/models/Qwen3-4B/", "")},
		{Name: "b", Policy: newGated(), Check: checked("Qwen/Qwen3-4B", "")},
	}})
	require.NoError(t, err)
	_, err = f.StartupCheck(context.Background())
	require.NoError(t, err)
}
