// Package parse turns one generated result (text, token ids, finish reason, structured tool
// calls) into the action an environment consumes: a TokenChunk for exact-token segments, the
// stripped text, or a ToolTurn (visible text, reasoning, tool calls) read from the model's
// own tool-call dialect: Hermes JSON blocks (Qwen2.5, Qwen3), Qwen XML function blocks
// (Qwen3.5, Qwen3-Coder), or a backend's structured (native) calls.
//
// Reasoning is separated before tool calls are read: text inside <think>...</think> (or
// before a lone </think>, when the prompt already opened the think block) is Reasoning, and
// a <tool_call> drafted while thinking is not a call. Tool-call blocks are the matches of
// ToolCallPattern, the documented TOOL_CALL regex <tool_call>(.*?)</tool_call> with DOTALL
// semantics; an unclosed <tool_call> (a turn cut off by the length limit) is not a call and
// stays in Text.
//
// Malformed calls do not fail the parse. A block that cannot be decoded (invalid JSON, no
// name, no <function=...> tag, a repeated parameter) becomes a ToolCall whose Error says what
// was wrong, with the best name found and the raw block as Arguments. A trainer wants the
// environment to see the broken call, answer it with an error message and penalise it, not
// to lose the whole branch; ToolTurn.Malformed reports whether any call is broken. Only a
// result that cannot be an action of the requested kind at all is an error (a token chunk
// whose finish reason is neither "stop" nor "length", as status.Backend).
//
// Everything here is a pure function of its input: parsers hold no mutable state and are
// safe for concurrent use.
package parse
