// Package tree owns the search tree that one FOCUS collection builds for one
// problem: nodes (checkpoints), the edges that reached them as exact token
// spans, rewards, terminal/truncated/failed states and critic predictions,
// plus the collection statistics the engine records. It also owns the tree's
// lossless JSON form and the structural validation applied when a tree is
// read or handed to preparation.
//
// An edge marked Inexact (the policy's ids or behaviour logprobs were not
// exact) holds conditioning tokens only: validation refuses a trainable token
// on it, and preparation makes no actor sample for it.
//
// Validation comes in two parts. The per-token span checks (trainable and
// log-probability slices as long as the tokens, finite log-probabilities, no
// generated token in the prompt) are made once, as a node enters the tree
// through AddChild or Unmarshal/Decode, which record the span arrays they
// checked and how many of their tokens are trainable (EdgeTrainable reports
// those counts without reading the masks again). The structural and scalar checks (ids, parents and children,
// cycles, depths, finite rewards and critic predictions, terminal flags,
// UTF-8 strings, statistics) cost O(nodes) and are repeated by Revalidate,
// which preparation and search call on every use. Revalidate re-reads the
// tokens of the root and of every node whose spans are not the recorded ones:
// a tree built as a literal (Tree{Nodes: ...}), a node added by other means,
// or a span slice that was replaced or resized since. Validate always checks
// everything. The rule that makes this sound: the token, trainable and
// log-probability arrays of a non-root node's spans must not be written
// after the node enters the tree; replace the slices instead, and the node is
// checked again. Critic, rewards, flags, strings and Stats may be updated
// freely, since they are checked on every call.
//
// A Tree is plain data and is not safe for concurrent mutation: the engine
// that grows it serialises AddChild and field updates under its own lock.
// Any number of goroutines may read a tree (accessors, Validate, Revalidate,
// Marshal)
// while nothing writes to it. Pointers returned by Node are invalidated by
// AddChild, which may move the node slice. The package does no I/O beyond the
// io.Reader/io.Writer a caller passes to Decode/Encode.
package tree
