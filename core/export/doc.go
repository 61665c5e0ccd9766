// Package export turns a prepared Batch into the records trainers consume and
// renders trees and batches for people. It owns the binding record layout
// (one actor record per generated span, one critic record per target), the
// flat columnar encoding (Encode; EncodeShared, which stores each shared
// context once, is what crosses the C boundary), JSONL writing, and the
// text and HTML renderings (FormatTree, FormatEdges, Describe, WriteHTML).
//
// All functions are pure: they read the batch and tree they are given and
// return new values, so they are safe for concurrent use as long as nobody
// mutates those inputs meanwhile. A Flat owns its slices; records returned by
// Flat.ActorRecord share memory with it. Writers are the caller's; the
// package does no I/O of its own.
package export
