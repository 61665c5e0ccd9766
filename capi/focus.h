/*
 * focus.h: the C ABI of libfocus.so, the Go core of focus-go.
 *
 * This hand-written header is the contract; capi/*.go includes it, so the compiler rejects
 * an export whose Go signature drifts from the declaration here.
 *
 * Conventions
 * - Every function except focus_abi_version, focus_live_handles and the *_free functions
 *   returns a focus_status: FOCUS_OK (0) or an error code. On error, if `err` is not NULL,
 *   *err receives the error as a JSON object (a focus_bytes, see below):
 *   {"message": the UTF-8 message, "field": the configuration field the error is about},
 *   "field" only when the error is about one (ABI 7; before, *err was the bare message).
 *   Go panics are recovered and returned as FOCUS_ERR_INTERNAL.
 * - Every string and byte payload crosses with its length, in both directions, so a NUL
 *   byte is ordinary data (a prompt, a decoded token, a tool call or an error message may
 *   hold one). Inputs are `char *p, size_t p_len` (p may be NULL when p_len is 0).
 *   Outputs are a focus_bytes the caller provides: the library sets data (malloc'd) and len;
 *   data[len] is a NUL the length does not count, so a text known to hold none also reads
 *   as a C string. The caller frees data with focus_string_free.
 * - Handles are opaque non-zero uint64 values. Zero is never valid; a freed or unknown
 *   handle gives FOCUS_ERR_INVALID_HANDLE, never a crash. Each handle is released exactly
 *   once with focus_handle_release.
 * - Whoever allocates frees: focus_bytes data with focus_string_free, buffers returned
 *   through `void **out` (and id and logprob arrays) with focus_buffer_free.
 * - Configuration and metadata cross as JSON; token ids and logprobs cross as flat arrays.
 * - Every function is safe to call from several threads at once.
 */
#ifndef FOCUS_H
#define FOCUS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on every incompatible change; the Python loader refuses a mismatch. */
#define FOCUS_ABI_VERSION 7

typedef int32_t focus_status;
typedef uint64_t focus_handle;

/* A byte string the library returns: len bytes at data, then a NUL not counted in len.
 * Free data with focus_string_free. */
typedef struct {
    char *data;
    size_t len;
} focus_bytes;

/* Status codes (core/status in Go; focus_go.errors in Python). Never renumbered. */
#define FOCUS_OK 0
#define FOCUS_ERR_INTERNAL 1
#define FOCUS_ERR_INVALID_ARGUMENT 2
#define FOCUS_ERR_INVALID_HANDLE 3
#define FOCUS_ERR_TIMEOUT 4
#define FOCUS_ERR_CANCELLED 5
#define FOCUS_ERR_BACKEND 6
#define FOCUS_ERR_COLLECTION 7
#define FOCUS_ERR_NOT_FOUND 8

/* --- library ---------------------------------------------------------------------- */

/* The ABI version this library was built with (FOCUS_ABI_VERSION). */
int32_t focus_abi_version(void);

/* The library's release version, e.g. "0.1.0". */
focus_status focus_version(focus_bytes *out, focus_bytes *err);

/* --- memory and handles ----------------------------------------------------------- */

void focus_string_free(char *s);
void focus_buffer_free(void *p);

/* Releases a handle of any kind (closing what it owns). */
focus_status focus_handle_release(focus_handle h, focus_bytes *err);

/* Number of live handles, for leak checks in tests. */
int64_t focus_live_handles(void);

/* --- ABI self-test ---------------------------------------------------------------- */
/* Used by the test suites to exercise the boundary itself: error transport, panic
 * recovery, handle lifetimes and concurrent calls. Only a library built with the Go build
 * tag focus_selftest (`make selftest-lib`: build/selftest/libfocus.so) exports them; the
 * shipped libfocus.so (`make lib`) has none. */

/* Panics inside Go with `message` (message_len bytes); returns FOCUS_ERR_INTERNAL carrying
 * it. */
focus_status focus_selftest_panic(char *message, size_t message_len, focus_bytes *err);

/* Parses `json` (len bytes) and keeps the value behind a new handle. */
focus_status focus_selftest_box(char *json, size_t len, focus_handle *out, focus_bytes *err);

/* Returns the boxed value of `h` re-encoded as JSON. */
focus_status focus_selftest_unbox(focus_handle h, focus_bytes *out, focus_bytes *err);

/* A benchmark tree shaped like a Selective search (rollouts x segments edges of `tokens`
 * generated tokens); the handle is a tree. */
focus_status focus_selftest_search_tree(int64_t rollouts, int64_t segments, int64_t tokens,
                                        uint64_t seed, focus_handle *out, focus_bytes *err);

/* Starts a pprof CPU profile of the library's Go code into the file at `path` (n bytes),
 * or with an empty path stops the running one and closes its file (benchmarks profile a
 * collection driven from Python with it). */
focus_status focus_selftest_cpu_profile(char *path, size_t n, focus_bytes *err);

/* --- action parsing (backends/parse) -------------------------------------------- */

/* Parses one response with the parser a profile names ("qwen_xml", "hermes",
 * "llama3_json", "deepseek_v3", "pythonic", "harmony", "native", "text", "token_chunk").
 * request: {"result": {"tokens", "text", "stop_reason", "native_tool_calls": [{"name",
 * "arguments", "call_id"}]}, "tools": [schema...]}. *out: {"kind", "text" | "tool_turn":
 * {"text", "tool_calls": [{"name", "arguments", "call_id", "error"}], "reasoning"} |
 * "chunk": {"tokens", "finished"}}; a call's "error" is "" unless it is malformed (then it
 * says why, and "arguments" is the raw call text). */
focus_status focus_parse(char *profile, size_t profile_len, char *request, size_t len, focus_bytes *out,
                         focus_bytes *err);

/* Splits a completion into reasoning, visible text and the bodies of its <tool_call>
 * blocks: *out = {"text", "reasoning", "blocks": [...]}. */
focus_status focus_tool_blocks(char *text, size_t len, focus_bytes *out, focus_bytes *err);

/* The model family and tool-call profile of a model: request {"model", "chat_template"}
 * (the template is read when the name does not tell); *out = {"family", "profile"}. An
 * unknown family is an error naming the profiles to choose from. */
focus_status focus_profile_resolve(char *request, size_t len, focus_bytes *out, focus_bytes *err);

/* --- tokenizer and chat template (backends/tokenizer, backends/chat) -------------- */

/* Loads a model's tokenizer.json and chat template from a local directory or the local
 * Hugging Face cache (never downloads). The handle owns the tokenizer. */
focus_status focus_codec_load(char *model, size_t model_len, focus_handle *out, focus_bytes *err);

/* *out = {"source", "vocab_size", "special_tokens": {...}, "special_ids": [...],
 * "chat_template"}. */
focus_status focus_codec_info(focus_handle codec, focus_bytes *out, focus_bytes *err);

/* Encodes text; *ids is freed with focus_buffer_free. */
focus_status focus_codec_encode(focus_handle codec, char *text, size_t len, int32_t add_special,
                                uint32_t **ids, size_t *count, focus_bytes *err);

focus_status focus_codec_decode(focus_handle codec, uint32_t *ids, size_t count,
                                int32_t skip_special, focus_bytes *out, focus_bytes *err);

/* Renders a conversation with the chat template and encodes it. request:
 * {"messages": [...], "tools": [...] | null, "add_generation_prompt": bool, "kwargs": {...}}.
 * *out = {"text", "tokens": [...]}. */
focus_status focus_codec_render(focus_handle codec, char *request, size_t len, focus_bytes *out,
                                focus_bytes *err);

/* --- calls that wait ------------------------------------------------------------ */

/* The calls that wait (focus_policy_generate, focus_policy_startup_check,
 * focus_openai_generate, focus_collection_poll, focus_collection_wait) take a `ticket`.
 * With ticket 0 the call blocks until it is done. With any other ticket (the caller's id
 * for the call, unique among its calls in flight) the call starts and
 * returns FOCUS_OK at once, or an error if it could not start (then nothing more happens).
 * When a started call ends, its outputs and *err are written, so the memory they point to
 * must stay valid until then, and (ticket, status) joins the process's completion queue.
 *
 * focus_async_wait takes up to `max` finished calls from the queue into tickets[] and
 * codes[] (*n of them), waiting up to timeout_ms for the first (forever if negative); *n is
 * 0 when the time passes. The queue is process-wide. focus_async_fd gives a file
 * descriptor (the read end of a non-blocking pipe, owned by the library) that is readable
 * whenever calls were posted since it was last read: an event loop watches it, reads what
 * is there, then drains the queue with timeout_ms 0 until *n is 0.
 * focus_async_cancel makes a call in flight end promptly with FOCUS_ERR_CANCELLED; it is
 * still posted, so its outputs are freed in one place. An unknown or finished ticket is
 * ignored. */
focus_status focus_async_wait(int64_t timeout_ms, size_t max, uint64_t *tickets,
                              focus_status *codes, size_t *n, focus_bytes *err);
focus_status focus_async_fd(int *fd, focus_bytes *err);
focus_status focus_async_cancel(uint64_t ticket, focus_bytes *err);

/* --- Go-native token policies (backends/sglang, backends/vllm) ---------------------- */

/* config: {"backend": "sglang" | "vllm", "base_url", "model", "served_model", "api_key",
 * "headers": {...}, "timeout": seconds, "max_concurrency", "max_retries"}. */
focus_status focus_policy_open(char *config, size_t len, focus_handle *out, focus_bytes *err);

/* Generates a continuation of the exact prefix. params: SamplingParams as JSON
 * (temperature, max_tokens, top_p, top_k, stop, stop_token_ids, logprobs, prompt_logprobs,
 * repetition_penalty, seed; absent = default). The result: *generated ids in *tokens and
 * their logprobs in *logprobs (free each with focus_buffer_free; NULL when none), the rest
 * of the GenerateResult as JSON in *out (its "tokens", "logprobs" and "prefix_tokens" are
 * null: the prefix is the caller's). See "calls that wait" for ticket. */
focus_status focus_policy_generate(focus_handle policy, uint64_t ticket, uint32_t *prefix,
                                   size_t count, char *params, size_t len, focus_bytes *out,
                                   uint32_t **tokens, double **logprobs, size_t *generated,
                                   focus_bytes *err);

/* Contacts the server (health, model info); *out describes it as JSON. Ticket as above.
 * With several server URLs every replica is checked; *out is the first one's description
 * with "fleet": the capacity (requests in flight allowed) and each replica's. */
focus_status focus_policy_startup_check(focus_handle policy, uint64_t ticket, focus_bytes *out,
                                        focus_bytes *err);

/* Waits until the policy's requests in flight (plus those waiting and those reserved by
 * earlier admissions) drop below its capacity, then reserves `width` requests for the
 * next tree (its warmup) and returns the admission in *admission: release it (focus_release)
 * when the tree's collection has ended. Ticket as above (core/fleet). */
focus_status focus_policy_admit(focus_handle policy, uint64_t ticket, int64_t width,
                                focus_handle *admission, focus_bytes *err);

/* The policy's scheduling state as JSON: capacity, in_flight, queued, reserved,
 * peak_in_flight, admitted, routing, replicas [{name, capacity, in_flight, served, failed,
 * down}]. */
focus_status focus_policy_load(focus_handle policy, focus_bytes *out, focus_bytes *err);

/* --- trees, preparation, export (core/tree, core/prepare, core/export) ------------- */
/* reward: RewardConfig JSON {"gamma", "critic_weight", "reward_min", "reward_max",
 * "truncated_reward", "truncation"}; len 0 means the defaults. */

/* A tree from its JSON form (validated); the handle owns it. */
focus_status focus_tree_from_json(char *json, size_t len, focus_handle *out, focus_bytes *err);
focus_status focus_tree_to_json(focus_handle tree, focus_bytes *out, focus_bytes *err);
/* *out = {"problem_id", "nodes" (count), "stats"}: what a caller reads without the nodes. */
focus_status focus_tree_summary(focus_handle tree, focus_bytes *out, focus_bytes *err);

/* *out = {"backup": {id: G_bar}, "refined": {id: V*}, "count": {id: n_s}}. */
focus_status focus_tree_values(focus_handle tree, char *reward, size_t len, focus_bytes *out, focus_bytes *err);

/* *out = [{"node_id", "context", "target", "diagnostics"}, ...]. */
focus_status focus_critic_targets(focus_handle tree, char *reward, size_t len, focus_bytes *out,
                                  focus_bytes *err);

/* *out = {"nodes", "variance", "squared_error", "inverse_count"}: the tree's sums behind
 * kappa_hat (ALGORITHM.md §5.4; docs/signal.md §R), over its critic targets. */
focus_status focus_critic_fit(focus_handle tree, char *reward, size_t len, focus_bytes *out, focus_bytes *err);
/* The critic rule (docs/signal.md §R). request: {"threshold", "min_nodes", "decay" (each
 * optional: the defaults), "state": {"fit": {...}, "batches"}, "batch": [fit, ...] (optional:
 * observed first), "base_kappa"}. *out = {"rule", "state", "choice": {"estimator", "kappa",
 * "measured", "kappa_hat", "tau_hat2", "sigma_hat2", "nodes"}}. */
focus_status focus_critic_rule(char *request, size_t len, focus_bytes *out, focus_bytes *err);

/* Prepares a batch with the named estimator ("DirectBranchTd", "GroupBaseline", or ""
 * for critic targets only). *out is the batch handle; *summary is its metadata as JSON:
 * {"problem_id", "reward_config", "stats", "failures", "n_actor", "n_critic"}. The samples
 * themselves cross as columns (focus_batch_columns), critic contexts and actor spans on
 * demand (focus_batch_critic_contexts, focus_batch_spans). */
focus_status focus_prepare(focus_handle tree, char *reward, size_t len, char *estimator, size_t estimator_len,
                           focus_handle *out, focus_bytes *summary, focus_bytes *err);

/* A batch's samples column-wise in one buffer (*blob, *size bytes; free it with
 * focus_buffer_free). *layout (JSON) gives n_actor, n_critic, estimators, the diagnostic
 * names actor_diagnostics and critic_diagnostics (every sample of a lane has the same
 * names; a batch whose samples differ is refused) and, per section, its byte offset and
 * element count: actor_node_id, actor_group_id (i64), actor_weight, actor_visitation (f64),
 * actor_search_pass (i64, -1 = none), actor_estimator (i32 index into estimators),
 * actor_diagnostics (f64, n_actor rows of len(actor_diagnostics)), critic_node_id (i64),
 * critic_target (f64), critic_diagnostics (f64, n_critic rows). */
focus_status focus_batch_columns(focus_handle batch, focus_bytes *layout, void **blob, size_t *size,
                                 focus_bytes *err);

/* Every critic sample's context text in one buffer (free it with focus_buffer_free):
 * *layout gives n_critic and sections offsets (i64, n_critic + 1) and context (UTF-8 bytes;
 * sample i's text is context[offsets[i]:offsets[i+1]]). */
focus_status focus_batch_critic_contexts(focus_handle batch, focus_bytes *layout, void **blob,
                                         size_t *size, focus_bytes *err);

/* A batch from Python-made samples with explicit spans. */
focus_status focus_batch_from_json(char *json, size_t len, focus_handle *out, focus_bytes *err);

/* The full-context spans of actor sample `sample` in one buffer (free it with
 * focus_buffer_free): *layout gives n_spans and sections offsets (i64, n_spans + 1), tokens
 * (u32), trainable (u8) and logprobs (f64); span k is [offsets[k]:offsets[k+1]] of each. */
focus_status focus_batch_spans(focus_handle batch, int64_t sample, focus_bytes *layout, void **blob,
                               size_t *size, focus_bytes *err);

/* kind "describe" (Batch.describe) or "edges" (format_edges). */
focus_status focus_batch_text(focus_handle batch, char *kind, size_t kind_len, focus_bytes *out, focus_bytes *err);

/* format_tree; batch may be 0. */
focus_status focus_format_tree(focus_handle tree, focus_handle batch, focus_bytes *out, focus_bytes *err);

/* A self-contained HTML picture of the tree; batch may be 0. */
focus_status focus_tree_html(focus_handle tree, char *reward, size_t len, focus_handle batch,
                             focus_bytes *out, focus_bytes *err);

/* Trainer records of a batch, column-wise in one buffer (*blob, *size bytes; free it with
 * focus_buffer_free). *layout (JSON) gives problem_id, group_index, estimators, weight_versions, n_actor,
 * n_critic, actor_keys and critic_keys (the record keys, in order) and, per section, its byte offset and element count: base, delta_offsets (i64)
 * and delta_tokens (u32) (actor record i's tokens are record base[i]'s tokens, none when -1,
 * then delta_tokens[delta_offsets[i]:delta_offsets[i+1]]),
 * span_start, span_offsets (i64), span_mask (u8), span_logprobs, advantage (f64), node_id,
 * search_pass (i64, -1 = none), estimator (i32 index into estimators), response_start (i64: where
 * each record's trained response starts in its tokens), return (f64: the rewards on its path
 * from the root through its edge), finished (u8: its edge ends a finished rollout),
 * off_policy_tokens (i64: how many tokens of its response an earlier collection this tree was
 * resumed from generated), weight_version_offsets (i64) and weight_version (i32 index into
 * weight_versions: actor record i's weight versions are those at
 * weight_version[weight_version_offsets[i]:weight_version_offsets[i+1]], the distinct versions
 * of the edges holding its response, in path order), critic_offsets (i64),
 * critic_context (UTF-8 bytes), critic_target (f64), critic_node_id (i64). min_abs_advantage
 * 0 keeps every record. record_layout (UTF-8, len 0 = "spans"): "spans" (one actor record per
 * generated span) or "paths" (one per root-to-leaf path, export.LayoutPaths); the layout JSON
 * names it ("layout"), and "paths" adds span_advantages (f64, aligned with span_mask) and the
 * key "advantages" to actor_keys. visitation_weights non-zero exports each actor advantage
 * multiplied by its sample's visitation factor (export.Options.VisitationWeights). */
focus_status focus_batch_export(focus_handle batch, int64_t group_index, double min_abs_advantage,
                                char *record_layout, size_t record_layout_len, int32_t visitation_weights,
                                focus_bytes *layout, void **blob, size_t *size, focus_bytes *err);

/* A collected tree's trainer records in one call: focus_prepare with the reward config and
 * estimator, then focus_batch_export, without a batch handle. The layout adds the batch's
 * "stats" and "failures", the tree's finished "rollouts" ([{node_id, return, done,
 * segments}], node order) and "sampled_tokens" (its edges' generated tokens), and a section
 * sample_weight (f64, every actor sample's advantage, records under min_abs_advantage
 * included). codec (a chat codec handle, 0 = none) decodes each actor record's response
 * (its tokens from response_start on) once, with skip_special_tokens non-zero leaving special
 * tokens out: sections response_text_offsets (i64, n_actor+1) and response_text (UTF-8). */
focus_status focus_tree_export(focus_handle tree, char *reward, size_t len, char *estimator,
                               size_t estimator_len, int64_t group_index, double min_abs_advantage,
                               char *record_layout, size_t record_layout_len, int32_t visitation_weights,
                               focus_handle codec, int32_t skip_special_tokens,
                               focus_bytes *layout, void **blob, size_t *size, focus_bytes *err);

/* --- the simulated inference server (sim/) -------------------------------------- */

/* Starts a simulated SGLang / vLLM / OpenAI server on 127.0.0.1 (a free port). config: the
 * sim.Config JSON ({"seed", "latency": {"first_token", "per_token", ...}, "faults": [...],
 * ...}; len 0 = defaults). *info = {"url", "model_dir", "model_name", "eos", "problems"}.
 * Releasing the handle stops the server. */
focus_status focus_sim_start(char *config, size_t len, focus_handle *out, focus_bytes *info, focus_bytes *err);

/* Request and token counters as JSON. */
focus_status focus_sim_stats(focus_handle sim, focus_bytes *out, focus_bytes *err);

/* Replaces the fault rules (a JSON list of sim.Fault). */
focus_status focus_sim_set_faults(focus_handle sim, char *faults, size_t len, focus_bytes *err);

/* --- configuration rules (capi/binding) ------------------------------------------- */

/* Validates one configuration object of the binding: kind is "Selective", "Independent",
 * "Segments", "Agent", "Critic.constant" or "min_abs_advantage"; config is a JSON object of
 * its fields (non-finite numbers as "NaN", "Infinity", "-Infinity"). *out = the normalised
 * object (for Selective and Independent the engine's search config). A violation is
 * FOCUS_ERR_INVALID_ARGUMENT with a message naming the field. */
focus_status focus_rules_check(char *kind, size_t kind_len, char *config, size_t len, focus_bytes *out, focus_bytes *err);

/* The root conversation of a collection: request {"system_prompt", "prompt" (a string or a
 * list of messages), "observation" (what env.reset() returned: a string, a list of messages
 * or null)}; *out = the messages (JSON array), the reset observation placed by the one rule
 * (core/collect.RootMessages). */
focus_status focus_rules_root_messages(char *request, size_t len, focus_bytes *out, focus_bytes *err);

/* The library's defaults as JSON: {"selective", "independent", "segments", "agent", "reward",
 * "sampling", "scores", "truncations"}. */
focus_status focus_rules_defaults(focus_bytes *out, focus_bytes *err);

/* --- the binding's schema (capi/binding) ---------------------------------------------- */

/* The contract between the library and its bindings as JSON: {"inputs" (every JSON input:
 * its name, the functions that read it, its type), "types" (each object type's fields:
 * name, type, default where the library decides one), "rules" ({"kinds", "defaults"}: what
 * focus_rules_check accepts and focus_rules_defaults returns), "records" ({"actor",
 * "critic", "path_extra"}: the trainer record keys in order)}. Every JSON input is decoded
 * strictly: a key its type does not declare is FOCUS_ERR_INVALID_ARGUMENT naming the key
 * and the keys allowed. */
focus_status focus_schema(focus_bytes *out, focus_bytes *err);

/* --- math grading (core/mathenv) ----------------------------------------------------- */

/* Grades the last \boxed{...} of a response against a label: request {"text", "label"},
 * *out = {"answer", "correct", "reward", "done", "info"}: the answer ("" if none), whether it
 * is correct, and the step that ends a MathEnv episode with this response (reward 1.0 or
 * 0.0, done, info {"answer" (null if none), "label", "correct"}), as the native MathEnv's. */
focus_status focus_math_grade(char *request, size_t len, focus_bytes *out, focus_bytes *err);
/* focus_math_grade with the text and the label as UTF-8 strings (pointer + length each)
 * instead of a JSON request; same *out. */
focus_status focus_math_grade_text(char *text, size_t text_len, char *label, size_t label_len,
                                   focus_bytes *out, focus_bytes *err);

/* --- collection (core/collect, core/bridge) --------------------------------------- */

/* Starts collecting one tree in the background. config (JSON): problem_id, prompt_tokens,
 * prompt_text, segments, max_segments, max_total_tokens, sampling (SamplingParams), search
 * ({"budget", "warmup", "per_pass", "max_children", "min_remaining", "score", "seed",
 * "independent"}), reward (RewardConfig), allow_partial, max_retries, policy_timeout,
 * env_timeout, critic_timeout (seconds), codec (handle, 0 = none), and the parts:
 * "policy": {"kind": "native", "handle"} | {"kind": "remote", "object"},
 * "env": {"kind": "math", "label"} | {"kind": "remote", "object"},
 * "critic": null | {"kind": "constant", "value"} | {"kind": "http", "url", "timeout"}
 *           | {"kind": "remote", "object"},
 * "turn": null (exact-token segments) | {"parser": a tool profile other than "native" | "text",
 *         "messages": [root chat messages], "tools": [schemas] | null,
 *         "template_kwargs": {...}}: the whole-turn chat context (one assistant turn per
 *         segment, segments = the turn's max_tokens; needs codec).
 * Remote parts are served by polling the collection (see core/bridge for the request
 * kinds and payloads). Releasing the handle cancels the collection and waits for it. */
focus_status focus_collect_start(char *config, size_t len, focus_handle *out, focus_bytes *err);

/* The next requests for remote parts, oldest first, at most max (at least one):
 * *out = [{"id", "kind", "object", "payload", "tokens"?}]. A policy.generate request's
 * prefix and an env.step token action's ids are not in its payload: "tokens": [start, end)
 * indexes *tokens (*n_tokens ids, all the polled requests' ids; free with
 * focus_buffer_free; NULL when empty). Returns
 * FOCUS_ERR_TIMEOUT when none came within timeout_ms (negative: without limit; poll again)
 * and FOCUS_ERR_CANCELLED once the collection has finished (stop polling). ticket: see
 * "calls that wait". */
focus_status focus_collection_poll(focus_handle collection, uint64_t ticket, int64_t timeout_ms,
                                   int32_t max, focus_bytes *out, uint32_t **tokens, size_t *n_tokens,
                                   focus_bytes *err);

/* Answers request `id` with a JSON payload, or fails it with a status code and message. */
focus_status focus_collection_resolve(focus_handle collection, uint64_t id, char *payload,
                                      size_t len, focus_bytes *err);
/* Answers policy.generate request `id`: n generated ids and their logprobs as arrays, the
 * rest of the result ("text", "stop_reason", "matched_stop", ...) as a JSON payload. */
focus_status focus_collection_resolve_generate(focus_handle collection, uint64_t id,
                                               uint32_t *tokens, double *logprobs, size_t n,
                                               char *payload, size_t len, focus_bytes *err);
/* Answers n requests in one call, in order, as focus_collection_resolve and
 * focus_collection_resolve_generate would one by one. Answer i is request ids[i]; its JSON
 * payload is payload[payload_ends[i-1], payload_ends[i]) (payload_ends[-1] is 0: the ends
 * are non-decreasing offsets into the payload_len bytes); generated[i] is -1 for a JSON
 * answer (resolve), or the number of generated ids and logprobs (resolve_generate) it takes
 * next from tokens and logprobs, which hold n_tokens of each (the counts must add up to
 * n_tokens). The arrays are checked whole before anything is answered
 * (FOCUS_ERR_INVALID_ARGUMENT). A request the engine no longer waits for, which resolve
 * would refuse with FOCUS_ERR_INVALID_HANDLE, is skipped; *answered (if not NULL) counts
 * the requests answered. */
focus_status focus_collection_answer(focus_handle collection, size_t n, uint64_t *ids, char *payload,
                                     size_t payload_len, uint64_t *payload_ends, int64_t *generated,
                                     uint32_t *tokens, double *logprobs, size_t n_tokens, size_t *answered,
                                     focus_bytes *err);
focus_status focus_collection_fail(focus_handle collection, uint64_t id, int32_t code,
                                   char *message, size_t message_len, focus_bytes *err);

/* Asks the collection to stop; it then finishes with FOCUS_ERR_CANCELLED and the partial tree. */
focus_status focus_collection_cancel(focus_handle collection, focus_bytes *err);

/* Waits up to timeout_ms (negative: without limit) for the collection to end; *done = 1 if
 * it has. ticket: see "calls that wait". */
focus_status focus_collection_wait(focus_handle collection, uint64_t ticket, int64_t timeout_ms,
                                   int32_t *done, focus_bytes *err);

/* The collection's live counters, readable at any time without waiting (also after it
 * ended): *out = {"budget", "rollouts_launched", "rollouts_finished", "rollouts_failed",
 * "segments", "generated_tokens", "elapsed_seconds", "tokens_per_second", "eta_seconds"
 * (null until a rollout finished, and once done), "done"}. Once done, rollouts_finished and
 * generated_tokens equal the tree's stats "rollouts" and "generated_tokens". */
focus_status focus_collection_progress(focus_handle collection, focus_bytes *out, focus_bytes *err);

/* The finished collection's tree (*tree = a new tree handle, 0 if none) and outcome:
 * *out = {"code", "message", "field" (as in *err, only when there is one),
 * "failures": [{"node_id", "message"}]}. */
focus_status focus_collection_result(focus_handle collection, focus_handle *tree, focus_bytes *out,
                                     focus_bytes *err);

/* --- native API policies (OpenAI) and SGLang wire helpers (capi/openai.go) --------- */
/* An OpenAI Chat Completions or Responses client. config = {"api": "chat" | "responses",
 * "model", "base_url", "api_key", "headers", "system_prompt", "reasoning_effort", "timeout"
 * (seconds), "max_concurrency", "max_retries", "env": {"OPENAI_API_KEY", "OPENAI_BASE_URL"}}.
 * An empty base_url and api_key come from env; the default base URL needs a key. The handle
 * is released with focus_handle_release. */
focus_status focus_openai_open(char *config, size_t len, focus_handle *out, focus_bytes *err);

/* One request: request = {"messages", "tools", "tool_choice", "params"}; *out = {"id",
 * "text", "reasoning", "tool_calls": [{"name", "arguments", "call_id"}], "stop_reason",
 * "finish_reason", "tokens" (estimated), "logprobs", "top_logprobs", "entropy",
 * "native_output", "prompt_tokens", "completion_tokens", "cached_tokens",
 * "reasoning_tokens"}. See "calls that wait" for ticket. */
focus_status focus_openai_generate(focus_handle policy, uint64_t ticket, char *request,
                                   size_t len, focus_bytes *out, focus_bytes *err);

/* Checks a conversation's roles and tool-call / tool-reply ordering (no request). */
focus_status focus_openai_validate(char *messages, size_t len, focus_bytes *err);

/* Estimated token accounting for models without a local tokenizer: request = {"messages",
 * "tools"} or {"text"}; *out = {"text", "tokens"}. focus_native_decode inverts it. */
focus_status focus_native_estimate(char *request, size_t len, focus_bytes *out, focus_bytes *err);
focus_status focus_native_decode(uint32_t *ids, size_t count, focus_bytes *out, focus_bytes *err);

/* The SGLang /generate body for prefix and params (JSON SamplingParams), for a caller that
 * sends it itself (Slime's post); *out is the JSON body. */
focus_status focus_sglang_request(uint32_t *prefix, size_t count, char *params, size_t len,
                                  focus_bytes *out, focus_bytes *err);

/* Parses and validates a /generate reply to that request; the result comes back as
 * focus_policy_generate returns it. */
focus_status focus_sglang_parse(char *body, size_t body_len, uint32_t *prefix, size_t count,
                                char *params, size_t len, focus_bytes *out, uint32_t **tokens,
                                double **logprobs, size_t *generated, focus_bytes *err);

/* Checks a token-exact result {"tokens", "logprobs", "stop_reason"} from an SDK backend:
 * a known stop reason, at most max_tokens tokens, one finite logprob per token. backend
 * prefixes the error. */
focus_status focus_result_validate(char *backend, size_t backend_len, char *result, size_t len, int64_t max_tokens,
                                   focus_bytes *err);

#ifdef __cplusplus
}
#endif

#endif /* FOCUS_H */
