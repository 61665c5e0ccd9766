// Package tree owns the search tree that one FOCUS collection builds for one
// problem: nodes (checkpoints), the edges that reached them as exact token
// spans, rewards, terminal/truncated/failed states and critic predictions,
// plus the collection statistics the engine records. It also owns the tree's
// lossless JSON form and the structural validation applied when a tree is
// read or handed to preparation.
//
// A Tree is plain data and is not safe for concurrent mutation: the engine
// that grows it serialises AddChild and field updates under its own lock.
// Any number of goroutines may read a tree (accessors, Validate, Marshal)
// while nothing writes to it. Pointers returned by Node are invalidated by
// AddChild, which may move the node slice. The package does no I/O beyond the
// io.Reader/io.Writer a caller passes to Decode/Encode.
package tree
