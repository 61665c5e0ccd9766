// Package binding owns the contract between the Python package and the Go library: the
// JSON inputs that cross the C ABI (a collection spec, a policy's config, sampling
// parameters, the requests of the parse, render and grade calls), decoded strictly, and
// the schema that publishes them. Decode reads an input only after checking every object
// key in it against the keys its Go type declares (the json tags, found once by
// reflection), so a misspelt or unsupported setting is an error naming the key and the
// keys allowed ("collection spec: unknown key "max_retriez" ...") instead of a value that
// silently keeps its zero. Schema lists every published input with its fields, types and
// defaults, the configuration rules' kinds and defaults (core/rules) and the trainer
// record keys (core/export); the library exports it as focus_schema, the Python package
// reads it (focus_go/_schema.py), and testdata/schema.json pins it.
//
// It is pure Go (no cgo) so that it is tested on its own; capi's decodeJSON calls Decode
// for every JSON input. Everything here is fixed once the package is initialised (the
// key sets are cached per Go type); Decode and Schema are safe for concurrent use.
package binding
