// Package critic owns the value server a collection can score checkpoints with
// (Critic.http in Python): HTTP, spoken to over POST {"contexts": [...]} ->
// {"values": [...]}. It satisfies the engine's Critic interface (core/collect):
// Score(ctx, contexts) returns one finite prediction per context, in order, or
// an error classified with a core/status code; a server that answers with the
// wrong number of values or a non-finite value is a status.Backend error naming
// what it sent (the check is the engine's own, collect.CheckCriticValues). The
// constant critic (Critic.constant) needs no server and is the engine's own
// too: collect.ConstantCritic.
//
// Concurrency and resources: the critic is safe for concurrent use. It owns one
// pooled backends/transport client (connection reuse, bounded retries of
// transient failures, cancellation through the context); Close releases its
// idle connections, after which Score fails.
package critic
