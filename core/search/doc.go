// Package search owns the branch-selection rule of FOCUS (ALGORITHM.md §5.7):
// the Selective and Independent search configurations, the candidate set C of
// a round, the scores that rank candidates (the actor-gradient scores of
// docs/signal.md, "critic_adaptive", "gradient_variance" and
// "shallow_first"; "value_refinement", "posterior_variance" and "uniform";
// and "value_refinement_per_token", the default, with the stop_alike rule), the greedy per-round plan with virtual counts and tiers, and
// the seeded hash H that gives sampler seeds and tie-breaks. It
// decides where to branch; running rollouts, spending budget and scoring
// checkpoints with the critic belong to the collection engine (core/collect).
//
// Everything here is a pure, deterministic function of its arguments: the
// same tree, configuration, round and seed give the same plan on every
// platform and run, whatever order the tree's nodes were added in (ties break
// by a hash of each node's path of child indices, never by node id). The
// functions only read the tree, so any number of goroutines may call them
// while nothing mutates it; the engine holds its tree lock across a call.
package search
