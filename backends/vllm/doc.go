// Package vllm is the token-exact policy transport for vLLM's OpenAI-compatible
// POST /v1/completions with a token-id prompt. It asks for the exact generated ids both ways
// vLLM offers them: "return_token_ids": true (vLLM ≥ 0.10.2, choices[].token_ids) and
// "return_tokens_as_token_ids": true with "logprobs": N (≥ 0.8.0, "token_id:N" strings in
// logprobs.tokens; older servers need the --return-tokens-as-token-ids flag). token_ids wins
// when present and is cross-checked against the strings. Every sampling field is sent
// explicitly, with skip_special_tokens false and include_stop_str_in_output true so that
// the text matches the ids.
//
// An "abort" finish is not an error: Generate returns the partial Result with StopReason
// "abort", which the caller turns into an ABORTED sample. Every other contract breach (too
// many tokens, missing or misaligned logprobs, no token ids, unknown finish reason, bad
// JSON) is a status.Backend error; a prompt that does not fit the context window is
// status.InvalidArgument matching transport.ErrContextLength; an unknown model is
// status.NotFound.
//
// A Client is safe for concurrent use; its requests share one connection pool and one
// concurrency limit (see package transport). StartupCheck may run concurrently with
// Generate: the served model name it learns is swapped in atomically. Close it when done.
package vllm
