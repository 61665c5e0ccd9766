// Package rules is where the Python binding's configuration objects are decided:
// Check validates (and normalises) one object the binding declares — Selective,
// Independent, Segments, Agent, Critic.constant, a min_abs_advantage threshold,
// SamplingParams ("sampling"), RewardConfig ("reward") — with the Validate methods
// of the Go config types that own each rule (search.Config, collect.AgentLimits,
// collect.ConstantCritic, export.Options, generate.SamplingParams.Resolve,
// prepare.RewardConfig),
// and Defaults lists the library's defaults (the Go constants), which the
// command line reads for its flags. The binding checks each object once, at
// construction, so an error arrives early and names the field in the binding's
// own spelling ("Independent: n is 0, must be >= 1"); the engine checks the same
// rules again when a collection starts, with the same code.
//
// Everything here is a pure function of its input; safe for concurrent use.
package rules
