"""The plain types every layer of focus-go shares: the floor of the package.

This module imports nothing else of ``focus_go`` (a test checks it), so any module may
import it and no import circle can pass through it. It holds records and names only: no
Go calls, no I/O, no validation that needs the package's errors. Each type is documented
at its public home too, which re-exports it from here (``focus_go.backends``,
``focus_go.generation.types``, ``focus_go.integrations``, ``focus_go.env``,
``focus_go.tree``, ``focus_go.export``); import from whichever you like, the objects are
the same.

What flows where:

- A training item: ``Problem`` (prompt, label, id, metadata) goes from your data loader or
  trainer integration into ``Collector.collect``.
- Generation: ``Message`` (one chat message) and ``TokenId`` (one token id) make up a
  request; its controls, ``SamplingParams`` (checked by the Go rules when built, so defined
  in ``focus_go.generation.types``), fall back to ``DEFAULT_TEMPERATURE``,
  ``DEFAULT_MAX_TOKENS`` and ``DEFAULT_TOP_P`` for unset fields;
  ``GenerateResult`` is one model response (exact ids, logprobs, stop reason), carrying
  any ``NativeToolCall`` an API backend returned. The rendered request itself,
  ``PreparedPrompt``, holds its ``PolicyFormat`` and so lives in
  ``focus_go.generation.format``.
- Actions: a parser turns a ``GenerateResult`` into an action of one ``ActionKind``: the
  reply's text (``str``), a ``ToolTurn`` (text, reasoning and ``ToolCall`` s) or a
  ``TokenChunk`` (exact ids and whether the model finished).
- Environments: ``Env.step(action)`` returns a ``Step`` (observation, reward, done, info).
- Outcomes: a collection's failures are ``Failure`` s, ``(node_id, message)`` pairs.
- Records: every training record names its destination ``Lane`` ("actor" or "critic")
  under ``LANE_KEY`` and the estimator that prepared it under ``ESTIMATOR_KEY``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Dict, List, Literal, Mapping, Optional, Tuple, TypeAlias, Union

DEFAULT_MAX_TOKENS = 512
"""Output-token limit used when sampling parameters leave it unspecified."""

DEFAULT_TEMPERATURE = 0.7
"""Sampling temperature used when no explicit value is supplied."""

DEFAULT_TOP_P = 1.0
"""Nucleus-sampling probability used when no explicit value is supplied."""

TokenId: TypeAlias = int
"""An integer identifying one token in the policy's tokenizer vocabulary."""

ActionKind: TypeAlias = Literal["text", "tool", "tokens"]
"""What an action is: the reply's text, a tool-calling turn, or an exact token chunk."""

Message: TypeAlias = Dict[str, Any]
"""One chat message: ``role``, ``content`` and optionally ``reasoning_content``,
``tool_calls``, ``tool_call_id`` and ``name``, as in Hugging Face chat templates."""

Lane: TypeAlias = Literal["actor", "critic"]
"""A training record's destination: ``"actor"`` (policy training) or ``"critic"`` (value
training)."""

LANE_KEY = "lane"
"""The metadata field distinguishing actor records from critic records."""

ESTIMATOR_KEY = "estimator"
"""The metadata field naming the estimator that prepared a training record."""


@dataclass(frozen=True)
class Problem:
    """One training item: the prompt the policy sees, a label that stays out of the prompt
    (typically a reference answer the environment grades against), an id recorded in
    exported metadata, and free-form metadata.

    Example:
        ```python
        from focus.integrations import Problem

        problem = Problem("Solve 3x + 7 = 22.", r"\\boxed{5}", id="linear")
        ```

    Attributes:
        prompt: The user message (a string) or a list of chat messages.
        label: What the environment grades against; never shown to the policy.
        id: An identifier copied into every exported record as ``problem_id``.
        metadata: Free-form data for your own use.
    """

    prompt: Any
    label: Any = None
    id: Any = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class NativeToolCall:
    """A structured tool call returned by a model backend, separate from completion text.

    Attributes:
        name: The function name.
        arguments: The arguments as a JSON string.
        call_id: The backend's id for the call, which links the tool's reply to it.
    """

    name: str
    arguments: str
    call_id: str = ""


@dataclass(frozen=True)
class ToolCall:
    """A parsed tool's name and JSON argument string.

    ``error`` is empty for a well-formed call. A call the parser could not decode (invalid
    JSON, no name, arguments that are not a JSON object, ...) keeps the best name found,
    the raw call text as ``arguments`` and says in ``error`` what was wrong; ToolEnv
    answers such a call with an error message instead of running the tool."""

    name: str
    arguments: str
    call_id: str = ""
    error: str = ""

    @property
    def malformed(self) -> bool:
        """Whether the call could not be decoded (``error`` says why)."""
        return bool(self.error)


@dataclass(frozen=True)
class ToolTurn:
    """A parsed assistant response: visible text, reasoning, and structured tool calls.

    Tool-call parsers produce it and ``ToolEnv`` consumes it: a turn with tool calls runs
    them, a turn without ends the episode with ``text`` as the answer.

    Attributes:
        text: The visible text, without reasoning and tool-call blocks.
        tool_calls: The calls, in the order the model wrote them.
        reasoning: The reasoning (thinking) text, if the model wrote any.
    """

    text: str
    tool_calls: Tuple[ToolCall, ...] = field(default_factory=tuple)
    reasoning: str = ""


@dataclass(frozen=True)
class TokenChunk:
    """One generated segment: its original token ids and whether the model finished.

    ``finished=False`` means generation can continue from that prefix; ``finished=True``
    tells a final-answer environment to grade the completed response.

    Attributes:
        tokens: The generated token ids, exactly as sampled.
        finished: Whether the model ended its response (a stop finish rather than the
            segment's length limit).
    """

    tokens: Tuple[TokenId, ...]
    finished: bool


@dataclass
class GenerateResult:
    """One model response: generated tokens, text, probabilities and stopping information.

    Backends return it; the agent parses it into an action. A token the server gave no
    finite log probability keeps the value it stands for, never 0 or a stand-in: ``nan``
    where SGLang or vLLM sent null, ``-inf`` where vLLM wrote its -9999.0 floor. A
    collection trains no actor on such a response.

    Attributes:
        tokens: The exact generated token ids.
        prefix_tokens: The prompt tokens the response continues.
        text: The decoded response text.
        stop_reason: ``"stop"`` (end of sequence, a stop token or a stop string),
            ``"length"`` (the token limit) or ``"abort"``.
        matched_stop: What stopped a ``"stop"`` finish: a token id, the stop text, or None.
        logprobs: The behaviour log probability of each generated token, aligned with
            ``tokens``.
        top_logprobs: Per generated token, the most likely alternatives and their log
            probabilities, when requested.
        prompt_logprobs: Log probabilities of the prompt tokens, when requested.
        prompt_top_logprobs: The most likely alternatives at each prompt position, when
            requested.
        entropy: The negative mean of the finite log probabilities, an estimate of the
            response's per-token entropy.
        exact_generation: False when the token ids were estimated (API backends), so the
            response cannot train the actor.
        native_tool_calls: The structured tool calls of an API backend, or None.
        native_output: An API backend's raw output items.
    """

    tokens: Tuple[TokenId, ...] = field(default_factory=tuple)
    prefix_tokens: Tuple[TokenId, ...] = field(default_factory=tuple)
    text: str = ""
    stop_reason: str = "stop"
    matched_stop: Union[int, str, None] = None
    logprobs: List[float] = field(default_factory=list)
    top_logprobs: Optional[List[Dict[str, float]]] = None
    prompt_logprobs: List[Optional[float]] = field(default_factory=list)
    prompt_top_logprobs: Optional[List[Optional[Dict[str, float]]]] = None
    entropy: float = 0.0
    exact_generation: bool = True
    native_tool_calls: Optional[Tuple[NativeToolCall, ...]] = None
    native_output: Tuple[Dict[str, Any], ...] = ()


@dataclass
class Step:
    """The result of one environment step.

    Attributes:
        observation: What to show the model next: text, a list of chat messages (with the
            whole-turn context), or None.
        reward: The reward on this step's edge of the tree.
        done: Whether the episode ended.
        info: Free-form information about the step.
    """

    observation: Union[str, List[Message], None] = None
    reward: float = 0.0
    done: bool = False
    info: Dict[str, Any] = field(default_factory=dict)


class Failure(tuple):
    """One failure of a collection: a ``(node_id, message)`` pair, as ``Batch.failures``
    lists them. ``aborted`` is True for a rollout whose generation the server aborted
    (finish reason "abort"), which trainers treat as an aborted sample, not a reward."""

    def __new__(cls, node_id: int, message: str, aborted: bool = False) -> "Failure":
        self = super().__new__(cls, (node_id, message))
        self.aborted = aborted
        return self

    def __repr__(self) -> str:
        return f"Failure({self[0]!r}, {self[1]!r}{', aborted=True' if self.aborted else ''})"


__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TEMPERATURE",
    "DEFAULT_TOP_P",
    "ESTIMATOR_KEY",
    "LANE_KEY",
    "ActionKind",
    "Failure",
    "GenerateResult",
    "Lane",
    "Message",
    "NativeToolCall",
    "Problem",
    "Step",
    "TokenChunk",
    "TokenId",
    "ToolCall",
    "ToolTurn",
]
