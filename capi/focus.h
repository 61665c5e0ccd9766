/*
 * focus.h: the C ABI of libfocus.so, the Go core of focus-go.
 *
 * This hand-written header is the contract; capi/*.go includes it, so the compiler rejects
 * an export whose Go signature drifts from the declaration here.
 *
 * Conventions
 * - Every function except focus_abi_version, focus_live_handles and the *_free functions
 *   returns a focus_status: FOCUS_OK (0) or an error code. On error, if `err` is not NULL,
 *   *err receives a NUL-terminated UTF-8 message that the caller frees with
 *   focus_string_free. Go panics are recovered and returned as FOCUS_ERR_INTERNAL.
 * - Handles are opaque non-zero uint64 values. Zero is never valid; a freed or unknown
 *   handle gives FOCUS_ERR_INVALID_HANDLE, never a crash. Each handle is released exactly
 *   once with focus_handle_release.
 * - Whoever allocates frees: strings returned through `char **out` are freed with
 *   focus_string_free, buffers returned through `void **out` with focus_buffer_free.
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
#define FOCUS_ABI_VERSION 1

typedef int32_t focus_status;
typedef uint64_t focus_handle;

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
focus_status focus_version(char **out, char **err);

/* --- memory and handles ----------------------------------------------------------- */

void focus_string_free(char *s);
void focus_buffer_free(void *p);

/* Releases a handle of any kind (closing what it owns). */
focus_status focus_handle_release(focus_handle h, char **err);

/* Number of live handles, for leak checks in tests. */
int64_t focus_live_handles(void);

/* --- ABI self-test ---------------------------------------------------------------- */
/* Used by the test suites to exercise the boundary itself: error transport, panic
 * recovery, handle lifetimes and concurrent calls. */

/* Panics inside Go with `message`; returns FOCUS_ERR_INTERNAL carrying it. */
focus_status focus_selftest_panic(char *message, char **err);

/* Parses `json` (len bytes) and keeps the value behind a new handle. */
focus_status focus_selftest_box(char *json, size_t len, focus_handle *out, char **err);

/* Returns the boxed value of `h` re-encoded as JSON. */
focus_status focus_selftest_unbox(focus_handle h, char **out, char **err);

/* --- action parsing (backends/parse) -------------------------------------------- */

/* Parses one response with the parser a profile names ("qwen_xml", "hermes", "native",
 * "text", "token_chunk"). request: {"result": {"tokens", "text", "stop_reason",
 * "native_tool_calls": [{"name", "arguments", "call_id"}]}, "tools": [schema...]}.
 * *out: {"kind", "text" | "tool_turn": {"text", "tool_calls", "reasoning"} |
 * "chunk": {"tokens", "finished"}}. */
focus_status focus_parse(char *profile, char *request, size_t len, char **out, char **err);

/* Splits a completion into reasoning, visible text and the bodies of its <tool_call>
 * blocks: *out = {"text", "reasoning", "blocks": [...]}. */
focus_status focus_tool_blocks(char *text, size_t len, char **out, char **err);

/* The tool-call profile a model name implies ("qwen_xml" or "hermes"). */
focus_status focus_profile_for_model(char *model, char **out, char **err);

/* --- tokenizer and chat template (backends/tokenizer, backends/chat) -------------- */

/* Loads a model's tokenizer.json and chat template from a local directory or the local
 * Hugging Face cache (never downloads). The handle owns the tokenizer. */
focus_status focus_codec_load(char *model, focus_handle *out, char **err);

/* *out = {"source", "vocab_size", "special_tokens": {...}, "special_ids": [...],
 * "chat_template"}. */
focus_status focus_codec_info(focus_handle codec, char **out, char **err);

/* Encodes text; *ids is freed with focus_buffer_free. */
focus_status focus_codec_encode(focus_handle codec, char *text, size_t len, int32_t add_special,
                                uint32_t **ids, size_t *count, char **err);

focus_status focus_codec_decode(focus_handle codec, uint32_t *ids, size_t count,
                                int32_t skip_special, char **out, char **err);

/* Renders a conversation with the chat template and encodes it. request:
 * {"messages": [...], "tools": [...] | null, "add_generation_prompt": bool, "kwargs": {...}}.
 * *out = {"text", "tokens": [...]}. */
focus_status focus_codec_render(focus_handle codec, char *request, size_t len, char **out,
                                char **err);

#ifdef __cplusplus
}
#endif

#endif /* FOCUS_H */
