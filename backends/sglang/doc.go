// Package sglang is the token-exact policy transport for SGLang's native POST /generate, and
// equally for an sglang-router / SGLang Model Gateway or Slime's router in front of several
// SGLang workers (they proxy /generate unchanged). It sends the exact request shape Slime
// sends (input_ids, return_logprob true, logprob_start_len -1, no_stop_trim true,
// skip_special_tokens false, spaces_between_special_tokens false, rid) with every sampling
// field set explicitly, and reads the generated ids from meta_info.output_token_logprobs
// (the source of truth; the top-level output_ids is only cross-checked, because some builds
// prepend prompt tokens to it).
//
// An "abort" finish (the server or an /abort_request ended the request) is not an error:
// Generate returns the partial Result with StopReason "abort" and AbortMessage set, which
// the caller turns into an ABORTED sample (Slime re-submits those with max tokens reduced
// by what was generated). Every other contract breach (too many tokens, missing or
// misaligned logprobs, unknown finish reason, bad JSON) is a status.Backend error; a prompt
// that does not fit the context window is status.InvalidArgument matching
// transport.ErrContextLength.
//
// A Client is safe for concurrent use; its requests share one connection pool and one
// concurrency limit (see package transport). Close it when done.
package sglang
