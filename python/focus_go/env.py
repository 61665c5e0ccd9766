"""Environments: what an agent acts on.

Subclass ``Env``: ``step(action)`` applies one action and returns a ``Step``; ``reset()``
may return an extra observation shown before the first turn; ``fork()`` returns an
independent copy for a new branch (default ``copy.deepcopy``). Methods may be sync or
async. ``action`` declares what ``step`` consumes: ``"text"`` (the reply's text),
``"tool"`` (a ToolTurn) or ``"tokens"`` (an exact TokenChunk); ``Step`` is one of the
plain types of ``focus_go.types``, re-exported here. With the whole-turn
context (``Agent(context=None)``) a step's observation may be a list of chat messages
(``{"role": "tool", "content": ...}``), rendered with the model's chat template; a text
observation is one user message there. ``ToolEnv`` (``focus_go.tools``) runs Python tools.

A Python Env is served to the Go engine through the remote bridge (the engine puts a
request on a queue; the collection's poll takes it and your method runs in asyncio); the
built-in ``MathEnv`` runs natively in Go when its ``decode`` is a focus-go tokenizer's.
"""

from __future__ import annotations

import copy
import json
from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Union

from . import _lib
from .errors import ConfigError
from .types import ActionKind, Message, Step, TokenChunk


class Env(ABC):
    """Base class for environments: what an agent acts on.

    Subclass it and implement ``step``; override ``reset``, ``fork`` and ``tool_schemas``
    where the defaults do not fit. Methods may be synchronous or ``async``.

    The class attribute ``action`` declares what ``step`` consumes: ``"text"`` (the reply's
    text, a ``str``; the default), ``"tool"`` (a ``ToolTurn``) or ``"tokens"`` (a
    ``TokenChunk`` of exact token ids). The agent checks that its context produces that
    kind. With the whole-turn context (``Agent(context=None)``) a step's observation may be
    a list of chat messages such as ``{"role": "tool", "content": ...}``, rendered with the
    model's chat template; a text observation is one user message there.

    Example:
        ```python
        from focus import Env, Step

        class Echo(Env):
            action = "text"

            def step(self, action):
                return Step(reward=float("42" in action), done=True)
        ```
    """

    action: ClassVar[ActionKind] = "text"

    def reset(self) -> Union[str, List[Message], None]:
        """Start an episode.

        Returns:
            An extra observation shown after the problem's prompt, before the first turn
                (text, or chat messages with the whole-turn context), or None when the prompt
                says it all (the default).
        """
        return None

    @abstractmethod
    def step(self, action: Any) -> Step:
        """Apply one action.

        Args:
            action: What the agent's parser produced, of the kind ``action`` declares.

        Returns:
            The observation to show next, the reward on this step, whether the episode
                ended, and free-form info.
        """

    def fork(self) -> "Env":
        """Copy the environment for a new branch of the tree.

        Returns:
            An independent copy in the same state; the default is ``copy.deepcopy(self)``.
        """
        return copy.deepcopy(self)

    def tool_schemas(self) -> List[Dict[str, Any]]:
        """The tool schemas shown to the model in the prompt.

        The whole-turn context passes them to the chat template as ``tools``.

        Returns:
            OpenAI-style function schemas; none by default (``ToolEnv`` lists its tools).
        """
        return []


def grade_math(text: str, label: str) -> bool:
    """Whether the last ``\\boxed{...}`` in ``text`` equals ``label`` (itself either a bare
    answer or ``\\boxed{...}``) after normalisation: spaces, ``$``, ``\\left``/``\\right``,
    ``\\text{}``, trailing periods are ignored, ``\\dfrac`` is ``\\frac``, and numbers
    compare by value (``0.5 == 1/2 == \\frac{1}{2}``). The grader is the Go core's."""
    return bool(_grade(text, label)["correct"])


def _grade(text: str, label: str) -> Dict[str, Any]:
    """The Go grader's verdict: {"answer", "correct", "reward", "done", "info"}, where
    reward, done and info are the step that ends a MathEnv episode with ``text``."""
    try:
        text_arg, label_arg = text.encode("utf-8"), label.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate: JSON carries it as an escape, which the Go side reads as U+FFFD.
        data = json.dumps({"text": text, "label": label}).encode()
        return json.loads(_lib.call_string("focus_math_grade", data, len(data)))
    return json.loads(_lib.call_string("focus_math_grade_text", text_arg, len(text_arg), label_arg, len(label_arg)))


class MathEnv(Env):
    """A final-answer math environment over exact token chunks (``"tokens"`` actions).

    Each step appends the chunk's tokens. When the model finishes (``finished=True``), the
    whole response is decoded with ``decode`` and its last ``\\boxed{...}`` is graded
    against ``label``: reward 1.0 or 0.0, the episode ends, and ``info`` holds
    ``{"answer", "label", "correct"}``. Unfinished chunks give reward 0 and continue.

    Answers are compared after normalisation: spaces, ``$``, ``\\left`` / ``\\right``,
    ``\\text{}`` and trailing periods are ignored, ``\\dfrac`` is ``\\frac``, and
    numbers compare by value (``0.5``, ``1/2`` and ``\\frac{1}{2}`` are equal). With the
    ``decode`` of a focus-go policy or tokenizer the whole episode runs in the native
    core, without Python calls.

    Args:
        label: The reference answer, bare (``5``) or boxed (``\\boxed{5}``).
        decode: Turns token ids into text, usually the policy's ``decode``.

    Raises:
        ConfigError: ``label`` is None.
    """

    action: ClassVar[ActionKind] = "tokens"

    def __init__(self, label: str, decode: Callable[[Sequence[int]], str]) -> None:
        if label is None:
            raise ConfigError("MathEnv: label is None; MathEnv grades the final answer against a reference answer label")
        self.label = label
        self.decode = decode
        self.tokens: List[int] = []

    def step(self, action: TokenChunk) -> Step:
        self.tokens.extend(action.tokens)
        if not action.finished:
            return Step()
        graded = _grade(self.decode(self.tokens), str(self.label))
        return Step(reward=float(graded["reward"]), done=bool(graded["done"]), info=graded["info"])

    def fork(self) -> "MathEnv":
        twin = MathEnv(self.label, self.decode)
        twin.tokens = list(self.tokens)
        return twin
