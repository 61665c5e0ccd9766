package search

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/focus-go/focus-go/core/status"
)

// Scores a Config may name (ALGORITHM.md §5.7.4).
const (
	// ScoreValueRefinement is the reduction of the critic target's mean
	// squared error that one more branch buys (ALGORITHM.md §5.7.4; the
	// default score of the original recipe).
	ScoreValueRefinement = "value_refinement"
	// ScorePosteriorVariance is p(1-p)/((kappa_sel+n)(kappa_sel+n+1)), the
	// Beta posterior variance of the node's value.
	ScorePosteriorVariance = "posterior_variance"
	// ScoreUniform treats every candidate alike (Tree-GRPO); see Gain.
	ScoreUniform = "uniform"
	// ScoreGradientVariance aims at the actor's gradient rather than the
	// critic target: the expected reduction of the visitation-weighted policy
	// gradient's variance that one more branch buys (docs/signal.md §S); see
	// GradientGain. Shallow checkpoints, the root included, score highest.
	ScoreGradientVariance = "gradient_variance"
	// ScoreShallowFirst ranks checkpoints by depth before gain: depth-1
	// checkpoints first, then the root, then deeper ones, each tier ordered
	// by the gradient_variance gain (docs/signal.md §F). A branch below a
	// depth-1 checkpoint c shrinks the critic's share of V*(c), which the
	// root edge into c carries; see ShallowTier.
	ScoreShallowFirst = "shallow_first"
	// ScoreCriticAdaptive is gradient_variance on a tree whose critic looks
	// reliable and shallow_first on one whose critic looks noisy: the tiers
	// apply when the critic-error estimate over the root's children,
	// CriticErrorAtDepthOne, exceeds CriticAdaptiveThreshold (docs/signal.md
	// §F). The default from 2026-12-02 to 2026-12-04.
	ScoreCriticAdaptive = "critic_adaptive"
	// ScoreValueRefinementPerToken is "value_refinement" per generated token:
	// the gain divided by the tokens a rollout from the checkpoint is expected
	// to generate (ExpectedRolloutTokens), so a deep checkpoint, whose branch
	// reuses a long prefix and generates little, pays for less (docs/signal.md
	// §P). The default (DefaultScore).
	ScoreValueRefinementPerToken = "value_refinement_per_token"
	// ScoreEntropy is listed by ALGORITHM.md but not supported: it needs the
	// policy's token entropies after each checkpoint, which the tree does not
	// record. Validate rejects it with that explanation.
	ScoreEntropy = "entropy"
)

// Defaults of Selective and Independent: ALGORITHM.md §5.8's, except the
// tree size, the score and stop_alike, which the per-token benchmark replaced
// on 2026-12-04 (docs/signal.md §D).
const (
	DefaultBudget      = 8
	DefaultWarmup      = 4
	DefaultPerPass     = 4
	DefaultMaxChildren = 4
	DefaultIndependent = 16
	// DefaultScore is Selective's score: with DefaultBudget, DefaultWarmup
	// and DefaultStopAlike, the rule with the best area of learning per
	// generated token on the benchmark of docs/signal.md §B
	// (docs/learning-signal.md). The bindings read them from capi/binding.
	DefaultScore = ScoreValueRefinementPerToken
	// DefaultStopAlike is Selective's stop_alike: a tree whose warmup
	// returns are all alike stops after its warmup.
	DefaultStopAlike = true
)

// Config mirrors Python's Selective(budget=8, warmup=4, *, per_pass=4,
// max_children=4, min_remaining=None, score="value_refinement_per_token",
// seed=0, stop_alike=True) and
// Independent(n=16, *, seed=0).
type Config struct {
	// Budget is B, the rollouts (generate-until-terminal calls) per tree;
	// warmup rollouts, branches, failures and retries each cost one.
	Budget int `json:"budget"`
	// Warmup is W, the independent rollouts from the root before any branch.
	Warmup int `json:"warmup"`
	// PerPass is the round size R: picks planned per branching round.
	PerPass int `json:"per_pass"`
	// MaxChildren caps |ch(s)| + v_s of every checkpoint except the root.
	MaxChildren int `json:"max_children"`
	// MinRemaining is the generated-token headroom T_max - tokens(s) a
	// checkpoint needs to be branched from; 0 means Limits.SegmentTokens (L).
	MinRemaining int `json:"min_remaining"`
	// Score names the candidate score; see the Score* constants.
	Score string `json:"score"`
	// Seed feeds H for sampler seeds and tie-breaks.
	Seed uint64 `json:"seed"`
	// StopAlike stops the tree after its warmup when every finished warmup
	// rollout has the same return (at least two of them): a problem the
	// policy always solves, or never does, teaches a group baseline nothing,
	// and its remaining budget is left unspent (Stats.BudgetUnspent)
	// (docs/signal.md §P). Selective only.
	StopAlike bool `json:"stop_alike"`
	// Independent marks Independent(n): Budget = Warmup = n rollouts from the
	// root and no branching rounds (GRPO-style groups).
	Independent bool `json:"independent"`
}

// Selective returns Selective(budget, warmup) with the documented defaults
// for the rest: per_pass 4, max_children 4, min_remaining = L, score
// DefaultScore, stop_alike DefaultStopAlike, seed 0.
func Selective(budget, warmup int) Config {
	return Config{
		Budget: budget, Warmup: warmup,
		PerPass: DefaultPerPass, MaxChildren: DefaultMaxChildren,
		Score: DefaultScore, StopAlike: DefaultStopAlike,
	}
}

// Independent returns Independent(n): n rollouts from the root, no branching.
// The round fields keep Selective's defaults so the Config still validates;
// no round ever runs because warmup spends the whole budget.
func Independent(n int) Config {
	c := Selective(n, n)
	c.Independent = true
	c.StopAlike = false // no rounds to stop
	return c
}

// Validate checks 1 <= warmup <= budget, per_pass >= 1, max_children >= 1,
// min_remaining >= 0, a known score, and budget == warmup for Independent. A
// violation is a *status.FieldError naming the field in Python's spelling (budget,
// warmup, per_pass, max_children, min_remaining, score), classified
// status.InvalidArgument: "search: search config budget: is 0, must be >= 1".
func (c Config) Validate() error {
	if err := c.validate(); err != nil {
		return status.Wrap(status.InvalidArgument, err, "search")
	}
	return nil
}

// MaxBudget bounds a tree's budget (and so its warmup, per_pass and max_children): far
// more rollouts than one tree is ever given, small enough that what a collection
// allocates per rollout fits any machine.
const MaxBudget = 1 << 20

// MaxTokens bounds every token limit (T_max, L, min_remaining): far past any model's
// context, small enough that a buffer of that many tokens fits any machine.
const MaxTokens = 1 << 24

func (c Config) validate() *status.FieldError {
	switch {
	case c.Budget < 1:
		return fieldError("budget", "is %d, must be >= 1", c.Budget)
	case c.Budget > MaxBudget:
		return fieldError("budget", "is %d, must be <= %d rollouts per tree", c.Budget, MaxBudget)
	case c.Warmup < 1:
		return fieldError("warmup", "is %d, must be in [1, budget=%d]", c.Warmup, c.Budget)
	case c.Warmup > c.Budget:
		return fieldError("warmup", "is %d, must be in [1, budget=%d]: warmup (%d) must not exceed budget (%d)", c.Warmup, c.Budget, c.Warmup, c.Budget)
	case c.Independent && c.Warmup != c.Budget:
		return fieldError("warmup", "is %d, Independent(n) runs n rollouts from the root so warmup must equal budget=%d", c.Warmup, c.Budget)
	case c.PerPass < 1:
		return fieldError("per_pass", "is %d, must be >= 1", c.PerPass)
	case c.PerPass > MaxBudget:
		return fieldError("per_pass", "is %d, must be <= %d", c.PerPass, MaxBudget)
	case c.MaxChildren < 1:
		return fieldError("max_children", "is %d, must be >= 1", c.MaxChildren)
	case c.MaxChildren > MaxBudget:
		return fieldError("max_children", "is %d, must be <= %d", c.MaxChildren, MaxBudget)
	case c.MinRemaining < 0:
		return fieldError("min_remaining", "is %d, must be >= 0 tokens (0 = the segment length)", c.MinRemaining)
	case c.MinRemaining > MaxTokens:
		return fieldError("min_remaining", "is %d, must be <= %d tokens", c.MinRemaining, MaxTokens)
	}
	switch {
	case slices.Contains(ScoreNames, c.Score):
		return nil
	case c.Score == ScoreEntropy:
		return fieldError("score", "%q is not supported: it needs the policy's token entropies after each checkpoint, "+
			"which the tree does not record; use %s", c.Score, scoreList())
	default:
		return fieldError("score", "is %q, must be %s", c.Score, scoreList())
	}
}

// ScoreNames lists the scores a Config may name, in the order error messages and
// the bindings list them.
var ScoreNames = []string{ScoreValueRefinement, ScorePosteriorVariance, ScoreUniform, ScoreGradientVariance, ScoreShallowFirst, ScoreCriticAdaptive, ScoreValueRefinementPerToken}

// scoreList is ScoreNames quoted: "a", "b" or "c".
func scoreList() string {
	q := make([]string, len(ScoreNames))
	for i, s := range ScoreNames {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// fieldError is a Config or Limits field out of range.
func fieldError(field, format string, args ...any) *status.FieldError {
	return &status.FieldError{Config: "search config", Field: field, Reason: fmt.Sprintf(format, args...)}
}

// MinRemainingTokens is min_remaining in tokens: MinRemaining, or the
// segment length L when it is 0 (Python's None).
func (c Config) MinRemainingTokens(lim Limits) int {
	if c.MinRemaining > 0 {
		return c.MinRemaining
	}
	return lim.SegmentTokens
}

// Limits are the agent's limits the rule needs.
type Limits struct {
	// MaxTotalTokens is T_max (Agent.max_total_tokens, default 8192): the
	// generated policy tokens allowed on one root-to-leaf path.
	MaxTotalTokens int `json:"max_total_tokens"`
	// SegmentTokens is L (Segments(n), default 256), the default min_remaining.
	SegmentTokens int `json:"segment_tokens"`
}

// DefaultLimits are T_max = 8192 and L = 256.
func DefaultLimits() Limits { return Limits{MaxTotalTokens: 8192, SegmentTokens: 256} }

// Validate checks that both limits are positive; a violation is a
// *status.FieldError classified status.InvalidArgument.
func (l Limits) Validate() error {
	switch {
	case l.MaxTotalTokens < 1:
		return status.Wrap(status.InvalidArgument, fieldError("max_total_tokens", "is %d, must be >= 1", l.MaxTotalTokens), "search")
	case l.MaxTotalTokens > MaxTokens:
		return status.Wrap(status.InvalidArgument, fieldError("max_total_tokens", "is %d, must be <= %d", l.MaxTotalTokens, MaxTokens), "search")
	case l.SegmentTokens < 1:
		return status.Wrap(status.InvalidArgument, fieldError("segment_tokens", "is %d, must be >= 1", l.SegmentTokens), "search")
	case l.SegmentTokens > MaxTokens:
		return status.Wrap(status.InvalidArgument, fieldError("segment_tokens", "is %d, must be <= %d", l.SegmentTokens, MaxTokens), "search")
	}
	return nil
}
