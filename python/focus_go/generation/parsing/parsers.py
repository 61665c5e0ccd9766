"""The built-in action parsers. Each one runs the Go parser (the tool-call dialects of
backends/parse, the token-chunk and text parsers of core/action), so the Go collection
engine and a Python caller parse identically."""

from __future__ import annotations

import json
from typing import Any, ClassVar, Dict, Mapping, Sequence, Tuple

from ... import _lib
from ...types import GenerateResult, TokenChunk, ToolCall, ToolTurn
from .base import ActionParser


def _parse(profile: str, result: GenerateResult, tools: Sequence[Mapping[str, Any]] = ()) -> Dict[str, Any]:
    native = [
        {"name": c.name, "arguments": c.arguments, "call_id": c.call_id}
        for c in result.native_tool_calls or ()
    ]
    request = {
        "result": {
            "tokens": list(result.tokens),
            "text": result.text,
            "stop_reason": result.stop_reason,
            "native_tool_calls": native,
        },
        "tools": list(tools),
    }
    data = json.dumps(request).encode("utf-8")
    return json.loads(_lib.call_string("focus_parse", *_lib.text_arg(profile), data, len(data)))


def _turn(action: Dict[str, Any]) -> ToolTurn:
    turn = action["tool_turn"]
    calls = tuple(
        ToolCall(c["name"], c["arguments"], c["call_id"], c.get("error") or "") for c in turn["tool_calls"] or ()
    )
    return ToolTurn(text=turn["text"], tool_calls=calls, reasoning=turn["reasoning"])


class TokenChunkParser(ActionParser[TokenChunk]):
    """Extracts a generated segment's original token ids and whether the response finished.

    A length finish gives ``finished=False``, a stop finish ``finished=True``; any other
    finish reason raises ``BackendError``. ``Segments`` uses this parser and sets the
    generation limit, and every response is checked against that limit before it is parsed.
    """

    action: ClassVar = "tokens"

    def parse(self, result: GenerateResult) -> TokenChunk:
        chunk = _parse("token_chunk", result)["chunk"]
        return TokenChunk(tokens=tuple(chunk["tokens"] or ()), finished=chunk["finished"])


class TextActionParser(ActionParser[str]):
    """Uses the stripped completion text as the environment's action.

    The agent uses it for an environment that reads text, even when the policy's format
    parses tool calls.
    """

    action: ClassVar = "text"

    def parse(self, result: GenerateResult) -> str:
        return _parse("text", result)["text"]


class HermesToolCallParser(ActionParser[ToolTurn]):
    """Reads Hermes-style JSON tool-call blocks (``<tool_call>{"name": ..., "arguments":
    {...}}</tool_call>``) and separates them from reasoning and visible text. A malformed
    block still becomes a ToolCall (best name found, raw block as ``arguments``, the reason
    in ``error``), so the environment can answer or penalise it instead of losing the
    branch."""

    action: ClassVar = "tool"

    def parse(self, result: GenerateResult) -> ToolTurn:
        return _turn(_parse("hermes", result))


class QwenXMLToolCallParser(ActionParser[ToolTurn]):
    """Reads Qwen3.5-style XML tool calls (``<function=NAME><parameter=ARG>VALUE``) and
    converts them to JSON arguments. Given the prompt's tool schemas, each parameter value
    takes its declared JSON type; without them, JSON literals are recognised and anything
    else stays a string."""

    action: ClassVar = "tool"

    def __init__(self, tools: Sequence[Mapping[str, Any]] = ()) -> None:
        self._tools: Tuple[Mapping[str, Any], ...] = tuple(tools)

    def parse(self, result: GenerateResult) -> ToolTurn:
        return _turn(_parse("qwen_xml", result, self._tools))


class Llama3JSONToolCallParser(ActionParser[ToolTurn]):
    """Reads Llama 3.1 / 3.2 / 3.3 JSON tool calls (``{"name": ..., "parameters": {...}}``,
    possibly after ``<|python_tag|>``, parallel calls separated by ``;``)."""

    action: ClassVar = "tool"

    def parse(self, result: GenerateResult) -> ToolTurn:
        return _turn(_parse("llama3_json", result))


class DeepSeekV3ToolCallParser(ActionParser[ToolTurn]):
    """Reads DeepSeek V3 / R1 tool calls (``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function
    <｜tool▁sep｜>NAME`` and a fenced JSON block, and the V3.1 form without the fence)."""

    action: ClassVar = "tool"

    def parse(self, result: GenerateResult) -> ToolTurn:
        return _turn(_parse("deepseek_v3", result))


class PythonicToolCallParser(ActionParser[ToolTurn]):
    """Reads pythonic tool-call lists (``[get_weather(city='Paris'), search(q="x")]``), the
    format Gemma 3 writes when its prompt defines functions and Llama 4 writes between
    ``<|python_start|>`` and ``<|python_end|>``; argument values are Python literals."""

    action: ClassVar = "tool"

    def parse(self, result: GenerateResult) -> ToolTurn:
        return _turn(_parse("pythonic", result))


class HarmonyToolCallParser(ActionParser[ToolTurn]):
    """Reads gpt-oss harmony replies: ``commentary to=functions.NAME`` messages are tool
    calls, the analysis channel is ``ToolTurn.reasoning`` and the final channel the text.
    The result's text must keep the special tokens (token backends decode with
    ``skip_special_tokens=False``)."""

    action: ClassVar = "tool"

    def parse(self, result: GenerateResult) -> ToolTurn:
        return _turn(_parse("harmony", result))


class NativeToolCallParser(ActionParser[ToolTurn]):
    """Converts a backend's structured tool calls (``GenerateResult.native_tool_calls``)
    into a ToolTurn for ToolEnv."""

    action: ClassVar = "tool"
    requires_native_channel: ClassVar[bool] = True
    trainable: ClassVar[bool] = False

    def parse(self, result: GenerateResult) -> ToolTurn:
        return _turn(_parse("native", result))
