"""Records that cross between policies, parsers and environments.

``GenerateResult`` is one model response; ``SamplingParams`` the generation controls (unset
fields fall back to the ``DEFAULT_*`` constants here); ``TokenChunk`` and ``ToolTurn`` are
the actions parsers produce; ``PreparedPrompt`` is one rendered request.

This module keeps their documented import path. The plain records are defined in
``focus_go.types`` (the package's floor, which imports nothing of focus-go) and
``PreparedPrompt`` beside the ``PolicyFormat`` it holds, in ``focus_go.generation.format``;
modules of the package import them from there.
"""

from __future__ import annotations

from ..types import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
    ActionKind,
    GenerateResult,
    Message,
    NativeToolCall,
    SamplingParams,
    TokenChunk,
    TokenId,
    ToolCall,
    ToolTurn,
)
from .format import PreparedPrompt

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TEMPERATURE",
    "DEFAULT_TOP_P",
    "ActionKind",
    "GenerateResult",
    "Message",
    "NativeToolCall",
    "PreparedPrompt",
    "SamplingParams",
    "TokenChunk",
    "TokenId",
    "ToolCall",
    "ToolTurn",
]
