"""The agent: a policy acting on an environment under a context manager and limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from . import _rules
from .env import Env
from .errors import ConfigError
from .generation.parsing import ActionParser
from .generation.policy import Policy
from .generation.types import SamplingParams
from .types import ActionKind


@dataclass(frozen=True)
class Segments:
    """Exact-token segments: every policy call continues the checkpoint's exact token
    prefix with ``max_tokens = tokens``, parsed by TokenChunkParser (a stop finish is
    ``finished=True``, a length finish ``finished=False``, where the search may branch);
    every response is checked to have at most ``tokens`` tokens and aligned logprobs."""

    tokens: int = 256
    action: ClassVar[ActionKind] = "tokens"

    def __post_init__(self) -> None:
        _rules.check("Segments", {"tokens": self.tokens})  # the Go rule: tokens >= 1


class Agent:
    """A policy acting on an environment.

    ``context`` decides what one segment is: None (the default) is the whole-turn chat
    context, one assistant turn per segment (for ``"tool"`` and ``"text"`` environments
    such as ToolEnv: the reply is parsed into the env's action, tool messages are rendered
    with the chat template after the exact token prefix, each turn's max_tokens is the
    sampling ``max_tokens``); ``Segments(n)`` is n exact tokens (for ``"tokens"``
    environments such as MathEnv);
    ``max_segments`` and ``max_total_tokens`` bound one root-to-leaf path (a path reaching
    either ends truncated); ``sampling`` overrides the policy's default sampling
    parameters; ``parser`` overrides the parser the format and context imply (for whole
    turns: one of the built-in tool-call parsers or TextActionParser; by default the
    format's tool parser, or the model's own tool dialect when the format parses text or
    token chunks)."""

    def __init__(
        self,
        *,
        policy: Policy[Any],
        env: Env,
        system_prompt: Optional[str] = None,
        context: Optional[Segments] = None,
        parser: Optional[ActionParser[Any]] = None,
        max_segments: int = 64,
        max_total_tokens: int = 8192,
        sampling: Optional[SamplingParams] = None,
    ) -> None:
        if not isinstance(policy, Policy):
            raise ConfigError(f"Agent: policy must be a focus_go Policy, got {type(policy).__name__}")
        if not isinstance(env, Env):
            raise ConfigError(f"Agent: env must be a focus_go Env, got {type(env).__name__}")
        _rules.check("Agent", {"max_segments": max_segments, "max_total_tokens": max_total_tokens})
        if context is not None and env.action != context.action:
            raise ConfigError(
                f"Agent: {type(env).__name__} consumes {env.action!r} actions but {type(context).__name__} "
                f"produces {context.action!r} actions"
            )
        self.policy = policy
        self.env = env
        self.system_prompt = system_prompt
        self.context = context
        self.parser = parser
        self.max_segments = max_segments
        self.max_total_tokens = max_total_tokens
        self.sampling = sampling

    def __repr__(self) -> str:
        return f"Agent(policy={self.policy.model!r}, env={type(self.env).__name__}, context={self.context!r})"
