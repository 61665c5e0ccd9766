"""The parser interface and the tool-call block helpers it shares."""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from typing import Callable, ClassVar, Generic, Optional, TypeVar

from ... import _lib
from ...types import ActionKind, GenerateResult, ToolCall, ToolTurn

A = TypeVar("A")

TOOL_CALL = re.compile("<tool_call>(.*?)</tool_call>", re.DOTALL)
"""Matches serialized tool-call blocks in a model completion; group 1 is the block body."""


class ActionParser(ABC, Generic[A]):
    """Decodes a ``GenerateResult`` into the action type an environment's ``step()`` consumes.

    Subclass it and implement ``parse`` for an environment whose actions are neither text,
    tool calls nor token chunks, and bind it in a ``PolicyFormat`` or pass it as
    ``Agent(parser=...)``.

    Example:
        ```python
        from focus.generation.parsing import ActionParser

        class IntegerAction(ActionParser[int]):
            def parse(self, result):
                return int(result.text.strip())
        ```

    Attributes:
        trainable: Whether the parser keeps exact token provenance, so that its responses
            can train the actor.
        requires_native_channel: Whether it needs a backend's structured tool calls.
        action: The ``ActionKind`` it produces; None for a task-defined action.
    """

    trainable: ClassVar[bool] = True
    requires_native_channel: ClassVar[bool] = False
    action: ClassVar[Optional[ActionKind]] = None

    @abstractmethod
    def parse(self, result: GenerateResult) -> A:
        """Return the action a response expresses.

        Args:
            result: The model's response.

        Returns:
            The action, or a task-defined malformed one when the response expresses none.
        """


def tool_turn(text: str, decode: Callable[[str], ToolCall]) -> ToolTurn:
    """Parse a completion into a tool-calling turn, decoding each ``<tool_call>`` block.

    Reasoning (``<think>...</think>``) is split off first, so a call drafted while thinking
    is never executed; the visible text is what remains, stripped.

    Args:
        text: The completion text.
        decode: Turns one block's body into a ``ToolCall``.

    Returns:
        The turn: visible text, tool calls in order, and reasoning.
    """
    data = text.encode("utf-8")
    split = json.loads(_lib.call_string("focus_tool_blocks", data, len(data)))
    calls = tuple(decode(block) for block in split["blocks"] or ())
    return ToolTurn(text=split["text"], tool_calls=calls, reasoning=split["reasoning"])
