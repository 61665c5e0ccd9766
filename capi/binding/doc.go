// Package binding owns the contract between the Python package and the Go library: the
// JSON inputs that cross the C ABI, the configuration rules and defaults, and the schema
// that publishes them.
//
// Inputs. Decode reads a JSON input (a collection spec, a policy's config, sampling
// parameters, the requests of the parse, render and grade calls) only after checking every
// object key and value in it, at any depth, against its Go type (core/strictjson: the json
// tags, found once by reflection), so a misspelt, unsupported or differently cased setting
// is an error naming the key and the keys allowed (`collection spec: unknown key
// "max_retriez", did you mean "max_retries"? ...`) instead of a value that silently keeps
// its zero, and NaN or a value of the wrong type is an error naming its path. Inputs lists the
// published inputs with the C exports that read them; capi's decodeJSON calls Decode for
// every input.
//
// Rules. Check validates (and normalises) one configuration object the binding declares
// (Selective, Independent, Segments, Agent, Critic.constant, a min_abs_advantage
// threshold, a record layout, SamplingParams "sampling", RewardConfig "reward") with the
// Validate methods of the Go config types that own each rule (search.Config,
// collect.AgentLimits, collect.ConstantCritic, export.Options,
// generate.SamplingParams.Resolve, prepare.RewardConfig), and DefaultValues lists the
// library's defaults (the Go constants), which the command line reads for its flags. The
// binding checks each object once, at construction, so an error arrives early and names
// the field in the binding's own spelling ("Independent: n is 0, must be >= 1"); the engine
// checks the same rules again when a collection starts, with the same code.
//
// Schema. Build lists every published input with each object type's fields, types and
// defaults, the rule kinds and defaults, and the trainer record keys (core/export); the
// library exports it as focus_schema, the Python package reads it (focus_go/_schema.py),
// and testdata/schema.json pins it (go test ./capi/binding -update rewrites the file).
//
// It is pure Go (no cgo) so that it is tested on its own. Everything here is a pure
// function of its input or fixed once the package is initialised (the key sets are cached
// per Go type); Decode, Check and Build are safe for concurrent use.
package binding
