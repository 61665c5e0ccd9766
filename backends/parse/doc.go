// Package parse holds the tool-call dialects: each turns one generated result (text, token
// ids, finish reason, structured tool calls; core/action.Result) into the action.ToolTurn
// (visible text, reasoning, tool calls) an environment consumes, read from the model's own
// tool-call dialect. The vocabulary (Action, Kind, ToolTurn, ToolCall, TokenChunk, the
// Parser interface) and the two dialect-free parsers (token chunks and text) are the
// engine's own, in core/action; this package implements action.Parser for each dialect and
// names every parser by profile (ForProfile). Each dialect has a profile: hermes (Hermes
// JSON blocks: Qwen2.5, Qwen3, Hermes fine-tunes), qwen_xml (Qwen XML function blocks:
// Qwen3.5, Qwen3-Coder), llama3_json (Llama 3.1-3.3 JSON calls), deepseek_v3 (DeepSeek V3 /
// R1 call blocks), pythonic (Python call lists: Gemma 3, Llama 4), harmony (gpt-oss
// channels) and native (a backend's structured calls). FamilyFor recognises a model's
// family from its chat template (from its name only when the template does not tell) and
// names the profile; a model of no known family is an error, never a silent guess, because another family's parser reads its calls
// as no calls.
//
// Reasoning is separated before tool calls are read: text inside <think>...</think> (or
// before a lone </think>, when the prompt already opened the think block) is Reasoning, and
// a call drafted while thinking is not a call (harmony keeps reasoning in its analysis
// channel instead). A call whose end marker is missing (a turn cut off by the length limit:
// an unclosed <tool_call>, a DeepSeek block without <｜tool▁call▁end｜>) is not a call and
// stays in Text. Blocks end at the closing tag the markup can follow, so text that looks
// like a tag inside a JSON string or a Qwen XML value does not cut a call short.
//
// Malformed calls do not fail the parse. A call that cannot be decoded (invalid JSON, no
// name, arguments that are not a JSON object, a repeated parameter, a pythonic list that
// does not parse) becomes a ToolCall whose Error says what was wrong, with the best name
// found and the raw call text as Arguments. A trainer wants the environment to see the
// broken call, answer it with an error message and penalise it, not to lose the whole
// branch or to run a tool with garbage; ToolTurn.Malformed reports whether any call is
// broken. Only a result that cannot be an action of the requested kind at all is an error
// (a token chunk whose finish reason is neither "stop" nor "length", as status.Backend).
//
// Everything here is a pure function of its input: parsers hold no mutable state and are
// safe for concurrent use.
package parse
