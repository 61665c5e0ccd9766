// Package session runs one collection as an object with a lifecycle: a Spec describes
// the collection as data (the collect.Config plus which policy, env and critic to use,
// in the JSON the Python package sends), New builds its parts, Start runs collect.Run in
// a goroutine, and Cancel, Wait, Result and Close follow it to the end. The remote parts
// (Python objects) are served through the session's bridge: Poll takes their requests,
// Resolve, Answer and Fail answer them. The C ABI's focus_collect_* exports and the
// benchmarks' Go load generator both drive collections through this one type.
//
// Parts implemented outside core (Go-native policies, the HTTP critic, the chat codec
// and the whole-turn context it renders) are supplied by a Resolver, so that core
// imports no backends package; capi implements it over its handle table.
//
// A Session is safe for concurrent use. It owns its bridge and the parts it opened (an
// HTTP critic): Close cancels the collection, waits for it to end and releases them,
// once. The parts a Resolver returns otherwise stay the caller's.
package session
