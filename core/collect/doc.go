// Package collect owns the collection engine of FOCUS (docs/architecture.md,
// "How a collection runs"; ALGORITHM.md §5.1-5.2 and §5.7): it grows one
// problem's search tree by running rollouts of segments with a Policy in an
// Env, scoring checkpoints with a Critic, and branching where search.Plan
// says, under a budget of rollouts. A segment is either L exact tokens (Segments(L), the default) or
// one whole assistant turn of a chat (Config.Turns: the reply is parsed into
// a tool or text action, and the env's tool messages are rendered with the
// chat template by an append-only rule that never re-renders the exact
// prefix; see Turns). It owns the three collaborator
// interfaces (Policy, Env, Critic) and the Codec it decodes and encodes
// with; native implementations live in backends/ and core/mathenv, remote
// (Python) ones in core/bridge.
//
// Only exact responses train the actor: a result whose ExactGeneration is
// false, or with a generated token without a finite logprob (NaN: the server
// sent none; -Inf), becomes an edge marked tree.Node.Inexact with the reason,
// whose tokens are conditioning only; the rollout goes on, its rewards and
// critic targets count, and preparation makes no actor sample for it.
//
// Concurrency and resources: Run may be called concurrently
// for different problems; one call's collaborators must not be shared with
// another call unless they are safe for concurrent use (the HTTP policies
// and critics are; envs never are, so build one per problem). Within a call
// every rollout of a round runs in its own goroutine, so a Policy must be
// safe for concurrent use; the Critic is called one batch at a time, and an
// Env is never called from two goroutines at once. Run returns only after every goroutine it started has
// ended, and it closes every env fork it made (checkpoint snapshots are
// released as soon as their checkpoint can no longer be branched from). The
// returned tree belongs to the caller.
//
// Package core/session (a sibling, since it also uses core/bridge and
// core/mathenv, which are built on this package) runs one collection as an
// object with a lifecycle (a declarative Spec, Start, Cancel, Wait, Result);
// the C ABI and the benchmarks' load generator collect through it.
package collect
