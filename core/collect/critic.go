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

// Validate reports a non-finite Value (status.InvalidArgument). Score applies it, and
// the binding's Critic.constant applies it at construction (capi/binding).
func (c ConstantCritic) Validate() error {
	if math.IsNaN(c.Value) || math.IsInf(c.Value, 0) {
		return status.Errorf(status.InvalidArgument, "critic: constant value %v is not finite", c.Value)
	}
	return nil
}

// Score returns Value once per context.
func (c ConstantCritic) Score(ctx context.Context, contexts []string) ([]float64, error) {
	if err := c.Validate(); err != nil {
		return nil, err
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

// CheckCriticValues is the one check of a critic's reply to n contexts: exactly n
// values, all finite. The engine applies it to every Critic's reply; a critic that
// speaks to a server (backends/critic, a Python critic through core/bridge) applies it
// too, wrapping the error with its name. The error is a status.Backend error that says
// what was wrong ("returned 1 values for 2 contexts; ...", "value 0 is NaN, not finite").
func CheckCriticValues(values []float64, n int) error {
	if len(values) != n {
		return status.Errorf(status.Backend, "returned %d values for %d contexts; expected one value per context", len(values), n)
	}
	for i, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return status.Errorf(status.Backend, "value %d is %v, not finite", i, v)
		}
	}
	return nil
}
