// Package critic owns the native value models a collection scores checkpoints
// with (Critic.constant and Critic.http in Python): Constant, which gives every
// checkpoint the same prediction, and HTTP, a value server spoken to over
// POST {"contexts": [...]} -> {"values": [...]}. Both satisfy the engine's
// Critic interface (core/collect): Score(ctx, contexts) returns one finite
// prediction per context, in order, or an error classified with a core/status
// code; a server that answers with the wrong number of values or a
// non-finite value is a status.Backend error naming what it sent (the check
// is the engine's own, collect.CheckCriticValues).
//
// Concurrency and resources: both critics are safe for concurrent use. An
// HTTP critic owns one pooled backends/transport client (connection reuse,
// bounded retries of transient failures, cancellation through the context);
// Close releases its idle connections, after which Score fails.
package critic
