// Package strictjson owns how the library reads the JSON its users give it: trees, batches,
// collection specs and the states a collection resumes from, the critic rule's state,
// every configuration that crosses the C ABI. Decode checks a document against the Go type
// it decodes into before decoding it, and refuses anything that would load as something
// else than what was written, with a message that names the field's path, what was wrong
// and what is allowed:
//
//	tree: nodes[2].reward is NaN; a finite number is required
//	tree: unknown key "Reward" in nodes[0] (keys are case-sensitive), did you mean "reward"? (allowed: ...)
//	batch: actor[0].spans[1].tokens[3] is -1; an integer in [0, 4294967295] is required
//	critic rule request: bad JSON at byte 41 (in state.fit): the input ends before the value is complete
//
// Keys match exactly: a key that the type does not declare, one that differs from a
// declared key only in case included, is an *UnknownKeyError; a key given twice is refused.
// NaN, Infinity and -Infinity (which Python's json module writes, and JSON does not allow)
// and numbers beyond a float's range (1e999) are named as such; an integer field refuses a
// fraction and a value outside its type's range; a string, boolean, list or object field
// refuses a value of another JSON type, and a number, string or boolean field refuses null.
// Only after the check passes is the document decoded (json-iterator, with the standard
// library's rules), so a type's own UnmarshalJSON sees only input that passed.
//
// Everything here is a pure function of its input; the key sets are derived once per Go type
// and cached. A Decoder is safe for concurrent use.
package strictjson
