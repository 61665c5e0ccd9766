package search

import "github.com/focus-go/focus-go/core/prepare"

// The critic-free preset (docs/signal.md §C): for a user without a
// trustworthy critic, a small Selective tree scored against a constant
// prediction, with the tree's group baseline as the actor estimator, so that
// no advantage reads a critic. Chosen on the per-token benchmark (`make
// bench-signal`, methods "/free").
const (
	// CriticFreeBudget and CriticFreeWarmup are the preset's tree size.
	CriticFreeBudget = 8
	CriticFreeWarmup = 4
	// CriticFreeScore is the preset's Selective score.
	CriticFreeScore = ScoreValueRefinementPerToken
	// CriticFreeStopAlike is the preset's stop_alike.
	CriticFreeStopAlike = true
	// CriticFreeEstimator is the preset's actor estimator.
	CriticFreeEstimator = prepare.TreeGroupBaselineName
	// CriticFreePrediction is the constant critic the preset collects with,
	// in [0, 1] units of the reward range (the range's middle).
	CriticFreePrediction = 0.5
	// CriticFreeVisitationWeights says whether the preset's records carry
	// the visitation weights.
	CriticFreeVisitationWeights = false
)

// CriticFree returns the preset's search: Selective(CriticFreeBudget,
// CriticFreeWarmup) with CriticFreeScore and CriticFreeStopAlike.
func CriticFree() Config {
	c := Selective(CriticFreeBudget, CriticFreeWarmup)
	c.Score, c.StopAlike = CriticFreeScore, CriticFreeStopAlike
	return c
}
