// Package prepare turns a searched tree into training data: it owns the
// reward configuration, the direct-branch backup and refined values of
// ALGORITHM.md §5.3–5.4 (TreeValues), critic targets (§5.5), the actor
// advantage estimators (DirectBranchTd §5.6, GroupBaseline) and the Batch that
// collects both with collection statistics and failures.
//
// Every function is pure and deterministic: the same tree and configuration
// give the same numbers bit for bit, because all sums run in a fixed order
// (node ids, children in launch order). TreeValues, Batch and the samples are
// immutable after construction and safe for concurrent reads. Prepared
// ActorSamples and CriticSamples reference the tree instead of copying token
// contexts or context texts, so the
// tree's existing nodes must not be modified while the batch is in use
// (appending new nodes is harmless); Go's garbage collector keeps the tree
// alive as long as a sample refers to it.
package prepare
