"""Action parsers: decode a GenerateResult into what an environment's ``step()`` consumes."""

from ..types import ToolCall
from .base import TOOL_CALL, ActionParser, tool_turn
from .parsers import (
    HermesToolCallParser,
    NativeToolCallParser,
    QwenXMLToolCallParser,
    TextActionParser,
    TokenChunkParser,
)

__all__ = [
    "TOOL_CALL",
    "ActionParser",
    "HermesToolCallParser",
    "NativeToolCallParser",
    "QwenXMLToolCallParser",
    "TextActionParser",
    "TokenChunkParser",
    "ToolCall",
    "tool_turn",
]
