"""Records that cross between policies, parsers and environments.

``GenerateResult`` is one model response; ``SamplingParams`` the generation controls (unset
fields fall back to the ``DEFAULT_*`` constants here); ``TokenChunk`` and ``ToolTurn`` are
the actions parsers produce; ``PreparedPrompt`` is one rendered request.

This module keeps their documented import path. The plain records are defined in
``focus_go.types`` (the package's floor, which imports nothing of focus-go) and
``PreparedPrompt`` beside the ``PolicyFormat`` it holds, in ``focus_go.generation.format``;
modules of the package import them from there. ``SamplingParams`` is defined here, above
the floor, because it checks its values with the Go rules when it is built.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Dict, List, Optional

from .. import _rules
from ..types import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
    ActionKind,
    GenerateResult,
    Message,
    NativeToolCall,
    TokenChunk,
    TokenId,
    ToolCall,
    ToolTurn,
)
from .format import PreparedPrompt


# Each SamplingParams class's field defaults, for _from_engine.
_FIELD_DEFAULTS: Dict[type, Dict[str, Any]] = {}


@dataclass
class SamplingParams:
    """Generation controls for a request: temperature, output length, log probabilities and more.

    ``None`` means "use the default": ``DEFAULT_TEMPERATURE``, ``DEFAULT_MAX_TOKENS`` and
    ``DEFAULT_TOP_P`` for those three, and the server's neutral setting for the rest. The
    token-level backends send every field explicitly, because servers otherwise fill unset
    fields from the model's generation config. The values are checked when the object is
    built, ``dataclasses.replace`` included.

    Example:
        ```python
        from focus.backends import SamplingParams

        params = SamplingParams(temperature=0.7, max_tokens=512, logprobs=0)
        ```

    Args:
        temperature: The sampling temperature.
        max_tokens: The most tokens to generate. With ``Segments`` the segment length sets
            it instead.
        top_p: The nucleus-sampling probability, in (0, 1].
        top_k: Sample from the ``top_k`` most likely tokens only.
        stop: Strings that end generation.
        logprobs: How many top log probabilities to return per generated token; 0 returns
            the sampled token's own log probability only, which training needs.
        prompt_logprobs: How many top log probabilities to return per prompt token.
        repetition_penalty: The server's repetition penalty.
        seed: The sampling seed.
        stop_token_ids: Token ids that end generation when sampled (SGLang and vLLM; the
            OpenAI policies refuse it).

    Raises:
        ConfigError: A value is out of range; the message names the field.
    """

    temperature: Optional[float] = DEFAULT_TEMPERATURE
    max_tokens: Optional[int] = DEFAULT_MAX_TOKENS
    top_p: Optional[float] = DEFAULT_TOP_P
    top_k: Optional[int] = None
    stop: Optional[List[str]] = None
    logprobs: Optional[int] = None
    prompt_logprobs: Optional[int] = None
    repetition_penalty: Optional[float] = None
    seed: Optional[int] = None
    # Beyond the spec's fields: token ids that end generation when sampled (SGLang's and
    # vLLM's ``stop_token_ids``; the OpenAI chat policies refuse it).
    stop_token_ids: Optional[List[int]] = None

    def __post_init__(self) -> None:
        _rules.check("sampling", {f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def _from_engine(cls, values: Dict[str, Any]) -> "SamplingParams":
        """The params of a request the Go engine sends a Python policy: the engine checked
        them with the same rule, so they are not checked again (a call into Go per
        segment). Keys that are not fields are ignored."""
        defaults = _FIELD_DEFAULTS.get(cls)
        if defaults is None:  # once per class: fields() costs more than the rest
            defaults = _FIELD_DEFAULTS[cls] = {f.name: f.default for f in fields(cls)}
        obj = cls.__new__(cls)
        obj.__dict__.update(defaults)
        obj.__dict__.update({k: v for k, v in values.items() if k in defaults})
        return obj


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
