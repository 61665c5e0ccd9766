// Package export turns a prepared Batch into the records trainers consume and
// renders trees and batches for people. It owns the binding record layout and
// the one definition of its keys (ActorRecord and CriticRecord, whose JSON
// tags give ActorKeys and CriticKeys: one actor record per generated span,
// one critic record per target; Options.Layout = LayoutPaths cuts the actor
// records per root-to-leaf path instead, with per-token advantages, PathRecord
// and PathKeys: paths.go), the flat columnar encoding (Encode;
// EncodeShared stores each shared context once), the one binary format
// batches cross the C boundary in (Blob: BatchColumns, CriticContexts,
// SampleSpans, RecordsBlob), the tree -> records pipeline (FromTree: prepare
// then export in one call, what the integrations and the command line use),
// and the text and HTML renderings (FormatTree, FormatEdges, Describe,
// WriteHTML). JSONL files are written by the Python wrapper's one writer.
//
// All functions are pure: they read the batch and tree they are given and
// return new values, so they are safe for concurrent use as long as nobody
// mutates those inputs meanwhile. A Flat owns its slices; records returned by
// Flat.ActorRecord share memory with it. A Blob references the slices it
// lays out until WriteTo copies them into the caller's buffer. Writers are
// the caller's; the package does no I/O of its own.
package export
