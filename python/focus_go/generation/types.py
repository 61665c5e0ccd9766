"""Records that cross between policies, parsers and environments.

``GenerateResult`` is one model response; ``SamplingParams`` the generation controls (unset
fields fall back to the ``DEFAULT_*`` constants here); ``TokenChunk`` and ``ToolTurn`` are
the actions parsers produce; ``PreparedPrompt`` is one rendered request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Optional, Tuple, TypeAlias, Union

if TYPE_CHECKING:
    from .policy import PolicyFormat

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


@dataclass(frozen=True)
class NativeToolCall:
    """A structured tool call returned by a model backend, separate from completion text."""

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
    """A parsed assistant response: visible text, reasoning, and structured tool calls."""

    text: str
    tool_calls: Tuple[ToolCall, ...] = field(default_factory=tuple)
    reasoning: str = ""


@dataclass(frozen=True)
class TokenChunk:
    """One generated segment: its original token ids and whether the model finished.

    ``finished=False`` means generation can continue from that prefix; ``finished=True``
    tells a final-answer environment to grade the completed response."""

    tokens: Tuple[TokenId, ...]
    finished: bool


@dataclass
class SamplingParams:
    """Generation controls for one request.

    ``None`` means "use the default": ``DEFAULT_TEMPERATURE``, ``DEFAULT_MAX_TOKENS`` and
    ``DEFAULT_TOP_P`` for those three, and the server's neutral setting for the rest. The
    Go transports always send every field explicitly, because servers otherwise fill unset
    fields from the model's generation config. ``logprobs=0`` asks for the sampled token's
    log probability only, which training needs."""

    temperature: Optional[float] = DEFAULT_TEMPERATURE
    max_tokens: Optional[int] = DEFAULT_MAX_TOKENS
    top_p: Optional[float] = DEFAULT_TOP_P
    top_k: Optional[int] = None
    stop: Optional[List[str]] = None
    logprobs: Optional[int] = None
    prompt_logprobs: Optional[int] = None
    repetition_penalty: Optional[float] = None
    seed: Optional[int] = None


@dataclass
class GenerateResult:
    """One model response: generated tokens, text, probabilities and stopping information.

    ``tokens`` are the exact generated ids, ``logprobs`` their behaviour log probabilities
    (aligned 1:1), ``prefix_tokens`` the prompt they continue. A token the server gave no
    finite logprob keeps the value it stands for, never 0 or a stand-in: ``nan`` where
    SGLang sent null (its JSON writes -inf and NaN alike as null) or vLLM sent null (NaN),
    ``-inf`` where vLLM wrote its -9999.0 floor; ``entropy`` averages the finite ones, and a
    collection trains no actor on such a response. ``stop_reason`` is ``"stop"`` (EOS, stop
    token or stop string, named by ``matched_stop``: a token id, the stop text, or None),
    ``"length"`` or ``"abort"``. ``exact_generation`` is False when the ids were estimated
    (API backends)."""

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


@dataclass(frozen=True)
class PreparedPrompt:
    """The messages, tool schemas and exact tokens of one generation request.

    ``exact_continuation`` marks a prompt whose tokens continue a checkpoint's exact prefix
    unchanged (``Segments``), rather than a fresh rendering of the conversation."""

    tokens: Tuple[TokenId, ...]
    format: "PolicyFormat[Any]"
    _messages: Tuple[Message, ...]
    _tools: Tuple[Dict[str, Any], ...]
    exact_continuation: bool = False

    @property
    def messages(self) -> List[Message]:
        return [dict(m) for m in self._messages]

    @property
    def tools(self) -> List[Dict[str, Any]]:
        return [dict(t) for t in self._tools]
