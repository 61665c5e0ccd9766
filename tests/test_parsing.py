"""Action parsers through the Go core, and the generation.txt parser examples."""

from __future__ import annotations

import json

import pytest

from focus_go.errors import BackendError
from focus_go.generation.parsing import (
    ActionParser,
    HermesToolCallParser,
    NativeToolCallParser,
    QwenXMLToolCallParser,
    TextActionParser,
    TokenChunkParser,
    ToolCall,
)
from focus_go.generation.parsing.base import TOOL_CALL, tool_turn
from focus_go.generation.types import GenerateResult, NativeToolCall, TokenChunk, ToolTurn


def test_token_chunk_parser_maps_finish_reasons():
    parser = TokenChunkParser()
    assert parser.parse(GenerateResult(tokens=(10, 20), stop_reason="length")) == TokenChunk((10, 20), False)
    assert parser.parse(GenerateResult(tokens=(7,), stop_reason="stop")) == TokenChunk((7,), True)
    with pytest.raises(BackendError, match="abort"):
        parser.parse(GenerateResult(tokens=(1,), stop_reason="abort"))
    assert parser.action == "tokens" and parser.trainable


def test_text_parser_strips():
    assert TextActionParser().parse(GenerateResult(text="  42 \n")) == "42"


def test_hermes_parser_reads_calls_and_reasoning():
    text = (
        "<think>I should look it up.</think>Let me check.\n"
        '<tool_call>\n{"name": "search", "arguments": {"q": "3x + 7 = 22", "k": 2}}\n</tool_call>'
    )
    turn = HermesToolCallParser().parse(GenerateResult(text=text))
    assert turn.reasoning == "I should look it up."
    assert turn.text == "Let me check."
    assert len(turn.tool_calls) == 1
    call = turn.tool_calls[0]
    assert call.name == "search"
    assert json.loads(call.arguments) == {"q": "3x + 7 = 22", "k": 2}


def test_hermes_malformed_call_is_kept_for_the_environment():
    turn = HermesToolCallParser().parse(GenerateResult(text='<tool_call>{"name": "search", "arguments": {</tool_call>'))
    assert len(turn.tool_calls) == 1
    assert turn.tool_calls[0].name == "search"
    with pytest.raises(ValueError):
        json.loads(turn.tool_calls[0].arguments)


def test_qwen_xml_parser_types_values_from_schema():
    tools = [
        {
            "type": "function",
            "function": {
                "name": "zip_lookup",
                "parameters": {
                    "type": "object",
                    "properties": {"zip": {"type": "string"}, "radius": {"type": "integer"}},
                },
            },
        }
    ]
    text = (
        "<tool_call>\n<function=zip_lookup>\n<parameter=zip>\n02139\n</parameter>\n"
        "<parameter=radius>\n5\n</parameter>\n</function>\n</tool_call>"
    )
    turn = QwenXMLToolCallParser(tools).parse(GenerateResult(text=text))
    assert turn.tool_calls[0].name == "zip_lookup"
    assert json.loads(turn.tool_calls[0].arguments) == {"zip": "02139", "radius": 5}


def test_native_parser_passes_structured_calls():
    result = GenerateResult(
        text="",
        stop_reason="tool_calls",
        native_tool_calls=(NativeToolCall("add", '{"a": 1, "b": 2}', "call_1"),),
    )
    turn = NativeToolCallParser().parse(result)
    assert turn.tool_calls == (ToolCall("add", '{"a": 1, "b": 2}', "call_1"),)
    assert NativeToolCallParser.requires_native_channel


def test_tool_turn_with_custom_decoder():
    def decode(block: str) -> ToolCall:
        name, _, args = block.strip().partition(" ")
        return ToolCall(name, json.dumps({"raw": args}))

    turn = tool_turn("ok <tool_call>add 1 2</tool_call> done", decode)
    assert turn == ToolTurn(text="ok  done", tool_calls=(ToolCall("add", '{"raw": "1 2"}'),))
    assert TOOL_CALL.findall("<tool_call>a</tool_call><tool_call>\nb</tool_call>") == ["a", "\nb"]


def test_spec_example_custom_action_parser():
    # generation.txt, ActionParser
    class IntegerAction(ActionParser[int]):
        def parse(self, result):
            return int(result.text.strip())

    parser = IntegerAction()
    assert parser.parse(GenerateResult(text=" 12 ")) == 12
    assert parser.trainable and not parser.requires_native_channel and parser.action is None


def test_unknown_profile_is_a_config_error():
    from focus_go import _lib
    from focus_go.errors import ConfigError

    data = b'{"result": {}}'
    with pytest.raises(ConfigError, match="unknown profile"):
        _lib.call_string("focus_parse", *_lib.text_arg("klingon"), data, len(data))
