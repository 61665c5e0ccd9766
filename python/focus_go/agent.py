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
    """The exact-token context: each segment of the tree is at most ``tokens`` generated tokens.

    Every policy call continues the checkpoint's exact token prefix with
    ``max_tokens = tokens``, and the response is parsed by ``TokenChunkParser``: a stop
    finish gives ``finished=True`` (the model answered), a length finish ``finished=False``
    (a checkpoint the search may branch from). Every response is checked to have at most
    ``tokens`` tokens, each with a log probability. Use it with environments that consume
    ``"tokens"`` actions, such as ``MathEnv``.

    Args:
        tokens: The segment length in tokens (at least 1).

    Raises:
        ConfigError: ``tokens`` is less than 1.
    """

    tokens: int = 256
    action: ClassVar[ActionKind] = "tokens"

    def __post_init__(self) -> None:
        _rules.check("Segments", {"tokens": self.tokens})  # the Go rule: tokens >= 1


class Agent:
    """A policy acting on an environment: what a ``Collector`` runs at every node of the tree.

    ``context`` decides what one segment (one edge of the tree) is:

    - ``None`` (the default), the whole-turn chat context: one assistant turn per segment,
      for environments that consume ``"tool"`` or ``"text"`` actions such as ``ToolEnv``.
      The reply is parsed into the environment's action, the environment's tool messages
      are rendered with the model's chat template after the exact token prefix, and each
      turn may use up to the sampling ``max_tokens``.
    - ``Segments(n)``: segments of at most ``n`` exact tokens, for environments that
      consume ``"tokens"`` actions such as ``MathEnv``.

    Args:
        policy: The policy that generates the agent's responses.
        env: The environment for one problem; each branch of the tree gets its own fork.
        system_prompt: A system message placed before the problem's prompt, or None.
        context: What one segment is (see above); None for whole turns.
        parser: The parser that turns a response into the environment's action, overriding
            the one the policy's format and the context imply. For whole turns, one of the
            built-in tool-call parsers or ``TextActionParser``; by default the format's tool
            parser, or the model's own tool dialect when the format parses text or token
            chunks.
        max_segments: The most segments on one root-to-leaf path; a path that reaches it
            ends truncated.
        max_total_tokens: The most generated tokens on one root-to-leaf path; a path that
            reaches it ends truncated.
        sampling: Sampling parameters for every request, in place of the policy's
            defaults.

    Raises:
        ConfigError: ``policy`` or ``env`` is of the wrong type, a limit is below 1, or the
            environment consumes a different action kind than ``context`` produces.
    """

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
