package prepare

import (
	"fmt"
	"math"

	"github.com/focus-go/focus-go/core/status"
)

// Truncation modes of RewardConfig.
const (
	// TruncationTerminal treats a truncated path as terminal: V* = 0.
	TruncationTerminal = "terminal"
	// TruncationBootstrap sets V* of a truncated node to its critic prediction;
	// valid only if the critic sees the remaining budget.
	TruncationBootstrap = "bootstrap"
)

// MaxCriticWeight is the largest allowed kappa.
const MaxCriticWeight = 64

// RewardConfig holds the reward and value settings of preparation
// (ALGORITHM.md §5.1–5.4). CriticWeight is kappa, the critic prior's strength
// in pseudo-branches.
type RewardConfig struct {
	Gamma           float64 `json:"gamma"`
	CriticWeight    float64 `json:"critic_weight"`
	RewardMin       float64 `json:"reward_min"`
	RewardMax       float64 `json:"reward_max"`
	TruncatedReward float64 `json:"truncated_reward"`
	Truncation      string  `json:"truncation"`
}

// DefaultRewardConfig returns gamma 1, kappa 1, rewards in [0, 1], truncated
// paths terminal with reward 0.
func DefaultRewardConfig() RewardConfig {
	return RewardConfig{Gamma: 1, CriticWeight: 1, RewardMin: 0, RewardMax: 1, TruncatedReward: 0, Truncation: TruncationTerminal}
}

// Validate checks every field's range; a violation is a *status.FieldError
// classified status.InvalidArgument: "prepare: reward config gamma: is 2, must be in
// (0, 1]".
func (c RewardConfig) Validate() error {
	if err := c.validate(); err != nil {
		return status.Wrap(status.InvalidArgument, err, "prepare")
	}
	return nil
}

// fieldError is a RewardConfig field out of range.
func fieldError(field, format string, args ...any) *status.FieldError {
	return &status.FieldError{Config: "reward config", Field: field, Reason: fmt.Sprintf(format, args...)}
}

func (c RewardConfig) validate() *status.FieldError {
	for _, f := range [...]struct {
		name string
		v    float64
	}{{"gamma", c.Gamma}, {"critic_weight", c.CriticWeight}, {"reward_min", c.RewardMin}, {"reward_max", c.RewardMax}, {"truncated_reward", c.TruncatedReward}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fieldError(f.name, "is %g, must be finite", f.v)
		}
	}
	switch {
	case c.Gamma <= 0 || c.Gamma > 1:
		return fieldError("gamma", "is %g, must be in (0, 1]", c.Gamma)
	case c.CriticWeight < 0 || c.CriticWeight > MaxCriticWeight:
		return fieldError("critic_weight", "is %g, must be in [0, %d]", c.CriticWeight, MaxCriticWeight)
	case c.RewardMin >= c.RewardMax:
		return fieldError("reward_min", "is %g, must be below reward_max %g", c.RewardMin, c.RewardMax)
	case c.Truncation != TruncationTerminal && c.Truncation != TruncationBootstrap:
		return fieldError("truncation", "is %q, must be %q or %q", c.Truncation, TruncationTerminal, TruncationBootstrap)
	}
	return nil
}
