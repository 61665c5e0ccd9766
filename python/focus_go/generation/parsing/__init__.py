"""Action parsers: decode a GenerateResult into what an environment's ``step()`` consumes."""

from ...types import ToolCall
from .base import TOOL_CALL, ActionParser, tool_turn
from .parsers import (
    DeepSeekV3ToolCallParser,
    HarmonyToolCallParser,
    HermesToolCallParser,
    Llama3JSONToolCallParser,
    PythonicToolCallParser,
    NativeToolCallParser,
    QwenXMLToolCallParser,
    TextActionParser,
    TokenChunkParser,
)

__all__ = [
    "TOOL_CALL",
    "ActionParser",
    "DeepSeekV3ToolCallParser",
    "HarmonyToolCallParser",
    "HermesToolCallParser",
    "Llama3JSONToolCallParser",
    "PythonicToolCallParser",
    "NativeToolCallParser",
    "QwenXMLToolCallParser",
    "TextActionParser",
    "TokenChunkParser",
    "ToolCall",
    "tool_turn",
]
