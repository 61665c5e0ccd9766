// Package mathenv owns the built-in math environment (MathEnv in Python): an
// exact-token episode that accumulates the policy's token chunks and, when a
// chunk is finished, decodes everything generated, takes the last
// \boxed{...} answer and grades it against the problem's label by
// normalised string or exact numeric equality (reward 1.0 or 0.0, done). It
// also exports the grading itself (LastBoxed, Normalize, Equal, Grade) so
// other environments and tools can grade the same way.
//
// Concurrency and resources: an Env is one episode's state and is not safe
// for concurrent use; the collection engine never shares one between
// goroutines. Fork returns an independent copy (the token history is copied,
// the label and decode function are shared; decode must be safe for
// concurrent use, as tokenizers are). An Env holds no resources and Close is
// a no-op. The grading functions are pure and safe for concurrent use.
package mathenv
