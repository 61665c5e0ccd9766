package search

import "github.com/focus-go/focus-go/core/prepare"

// The critic-free preset (docs/signal.md §C): for a user without a
// trustworthy critic, Selective(8, 4) with value_refinement scored against a
// constant prediction, the tree's group baseline as the actor estimator (no
// advantage reads a critic) and visitation-weighted records. Chosen on the
// per-token benchmark (`make bench-signal`, methods "/free"): the best area of
// the six critic-free rules measured at both budgets.
const (
	// CriticFreeBudget and CriticFreeWarmup are the preset's tree size.
	CriticFreeBudget = 8
	CriticFreeWarmup = 4
	// CriticFreeScore is the preset's Selective score.
	CriticFreeScore = ScoreValueRefinement
	// CriticFreeStopAlike is the preset's stop_alike.
	CriticFreeStopAlike = false
	// CriticFreeEstimator is the preset's actor estimator.
	CriticFreeEstimator = prepare.TreeGroupBaselineName
	// CriticFreePrediction is the constant critic the preset collects with,
	// in [0, 1] units of the reward range (the range's middle).
	CriticFreePrediction = 0.5
	// CriticFreeVisitationWeights says whether the preset's records carry
	// the visitation weights.
	CriticFreeVisitationWeights = true
)

// CriticFree returns the preset's search: Selective(CriticFreeBudget,
// CriticFreeWarmup) with CriticFreeScore and CriticFreeStopAlike.
func CriticFree() Config {
	c := Selective(CriticFreeBudget, CriticFreeWarmup)
	c.Score, c.StopAlike = CriticFreeScore, CriticFreeStopAlike
	return c
}
