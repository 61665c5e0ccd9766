// Package bridge owns the remote-object bridge (docs/architecture.md, "How a
// collection runs"): the queue through which Python objects (a custom
// Completion, a Python Env subclass, a Python critic function) serve engine
// calls without Go ever calling into Python. The engine side calls Call (or
// uses the Policy, Env and Critic stand-ins here, which satisfy the
// core/collect interfaces); each call becomes a Request that the Python side
// takes with a poll through the C ABI (PollMany: every queued request in one
// wake-up; the poll is a ticketed call awaited on the event loop, so no thread
// waits), serves, and answers with Resolve (Answer) or Fail by id.
//
// Wire format: a Request is {"id", "kind", "object", "payload"}; object is
// the Python side's handle for the object the call is addressed to, and
// payload and replies are JSON. The kinds and their payloads are:
//
//	"policy.generate" {"params": SamplingParams, "id": "request id"} + Request.Tokens (the prefix)
//	                  -> {"tokens", "logprobs", "text", "stop_reason",
//	                      "matched_stop"?, "top_logprobs"?, "prompt_tokens"?,
//	                      "cached_tokens"?, "abort_message"?, "exact"?}
//	                  ("exact" is Policy.is_exact(result); absent means true, false
//	                  makes the edge inexact: no actor training from it)
//	                  (or "tokens" and "logprobs" beside the JSON in Reply.Tokens and
//	                  Reply.Logprobs: token ids and logprobs cross the C ABI as arrays)
//	"env.reset"       {} -> {"observation": {"text", "tokens"?} | null}
//	"env.step"        {"action": {"kind": "tokens", "finished": bool} + Request.Tokens (the ids)
//	                           | {"kind": "text", "text": str}
//	                           | {"kind": "tool", "text", "reasoning", "tool_calls": [{"name", "arguments", "call_id", "error"}]},
//	                   "fork": true?}
//	                  -> {"observation": {"text", "tokens"?, "messages"?} | null, "reward": float,
//	                      "done": bool, "info": any, "object": int?}
//	                  ("messages": chat messages such as {"role": "tool", "content"},
//	                  which the whole-turn context renders with the chat template; with
//	                  "fork": true, a step that is not done also forks the env after
//	                  stepping and returns the fork's handle in "object": Env.StepFork)
//	"env.fork"        {} -> {"object": int}   (the new env's handle)
//	"critic.score"    {"contexts": [str]} -> {"values": [float]}
//
// SamplingParams is core/generate's JSON form (temperature, max_tokens,
// top_p, top_k, stop, stop_token_ids, logprobs, prompt_logprobs,
// repetition_penalty, seed; unset fields are omitted). Two kinds are
// notifications, which expect no reply (a Resolve of their id fails
// harmlessly): "env.close" {} (drop the env object), and "cancel", whose ID
// is that of an earlier request the engine no longer waits for (its context
// ended after the request was polled); a request cancelled before anyone
// polled it is simply withdrawn from the queue.
//
// Concurrency and resources: a Bridge is safe for concurrent use by any
// number of callers and pollers. Call blocks until the request is resolved
// or failed, its context ends (it then returns at once) or the bridge is
// closed. Close fails every pending call with status.Cancelled; pollers then
// receive the remaining notifications (a "cancel" for each call they were
// serving, queued "env.close"s) and after them ErrClosed. Close is
// idempotent. Unknown, duplicate or late
// Resolve/Fail ids return a status.InvalidHandle error and never panic.
package bridge
