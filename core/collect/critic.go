package collect

import (
	"context"
	"math"

	"github.com/focus-go/focus-go/core/status"
)

// ConstantCritic predicts Value for every checkpoint (Critic.constant in Python). Value
// must be finite; Score reports a non-finite Value as status.InvalidArgument. It needs no
// server, so it lives beside the Critic interface; value servers are in backends/critic.
type ConstantCritic struct {
	Value float64
}

// Score returns Value once per context.
func (c ConstantCritic) Score(ctx context.Context, contexts []string) ([]float64, error) {
	if math.IsNaN(c.Value) || math.IsInf(c.Value, 0) {
		return nil, status.Errorf(status.InvalidArgument, "critic: constant value %v is not finite", c.Value)
	}
	if err := ctx.Err(); err != nil {
		return nil, status.Wrap(status.CodeOf(err), err, "critic: constant")
	}
	out := make([]float64, len(contexts))
	for i := range out {
		out[i] = c.Value
	}
	return out, nil
}
