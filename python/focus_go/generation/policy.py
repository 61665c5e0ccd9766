"""Policies: what generates tokens for an agent.

``Policy`` runs a custom ``Completion`` (any async function from exact prefix tokens to a
GenerateResult); the HTTP backends (``VLLMPolicy``, ``SGLangPolicy``, ...) subclass it and
generate from Go. A policy's ``format`` renders conversations and parses replies.

Keep the actor and critic fixed for each tree; the training loop owns model snapshots.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Awaitable, Callable, Generic, List, Optional, Sequence, TypeVar

from ..errors import ConfigError
from ..types import GenerateResult, Message, TokenId
from .types import SamplingParams
from .format import PolicyFormat, PreparedPrompt

A = TypeVar("A")

Completion = Callable[[Sequence[TokenId], Optional[SamplingParams]], Awaitable[GenerateResult]]
"""An async completion callback: exact prefix token ids and optional per-call sampling
settings in, a GenerateResult out."""

_ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})


def run_sync(awaitable: Awaitable[Any]) -> Any:
    """Run a coroutine to completion from synchronous code (the blocking twins)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(awaitable)  # type: ignore[arg-type]
    if inspect.iscoroutine(awaitable):
        awaitable.close()
    raise RuntimeError("called a blocking policy method inside a running event loop; await its async twin instead")


class Policy(Generic[A]):
    """Generates model output through a backend or a custom completion function.

    ``complete`` returns generated tokens and their log probabilities, which stay attached
    to those tokens through training-data preparation. ``exact=False`` marks a policy whose
    token ids are estimated: in a collection its edges are recorded as inexact
    (``NodeView.inexact``), keep their tokens as conditioning only, and make no actor
    sample (``Batch.failures`` lists each with the reason), while values, critic targets
    and evaluation work as usual. The same holds for one response whose
    ``exact_generation`` is False or that has a generated token without a finite logprob
    (NaN, SGLang's null). ``native=True`` marks a policy that speaks a structured chat API
    rather than tokens.

    ``copy.copy`` / ``copy.deepcopy`` return the policy itself, so an environment that holds
    ``policy.decode`` forks (``Env.fork``'s default deep copy) onto the same policy and
    connections."""

    def __copy__(self) -> "Policy[A]":
        return self

    def __deepcopy__(self, memo: dict) -> "Policy[A]":
        return self

    def __init__(
        self,
        *,
        format: PolicyFormat[A],
        model: str = "custom",
        served_model: Optional[str] = None,
        default_params: Optional[SamplingParams] = None,
        complete: Optional[Completion] = None,
        exact: bool = True,
        native: bool = False,
    ) -> None:
        self._format = format
        self._model = model
        self._served_model = served_model
        self.default_params = default_params
        self._complete = complete
        self._exact = exact
        self._native = native
        self._closed = False

    @property
    def format(self) -> PolicyFormat[A]:
        return self._format

    @property
    def model(self) -> str:
        return self._model

    @property
    def served_model(self) -> str:
        """The name the server knows the model by (defaults to ``model``)."""
        return self._served_model or self._model

    @property
    def trainable(self) -> bool:
        """Whether this policy's responses can train the actor: exact token ids from a
        token-level backend and a parser that keeps them."""
        return self._exact and not self._native and self._format.parser.trainable

    def prepare(self, messages: Sequence[Message], tools: Sequence[dict] = ()) -> PreparedPrompt:
        return self._format.prepare(messages, tools)

    def validate_context(self, messages: Sequence[Message]) -> None:
        """Check an edited conversation before committing it (no model request). The base
        check is structural: every message is a mapping with a known role and string or
        absent content."""
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                raise ConfigError(f"message {i} is a {type(message).__name__}, expected a dict")
            role = message.get("role")
            if role not in _ROLES:
                raise ConfigError(f"message {i} has role {role!r}, expected one of {sorted(_ROLES)}")
            content = message.get("content")
            if content is not None and not isinstance(content, str):
                raise ConfigError(f"message {i} content is a {type(content).__name__}, expected str or None")

    def effective_params(self, sampling_params: Optional[SamplingParams]) -> SamplingParams:
        """The settings a request uses: the call's, else the policy's defaults, else the
        module defaults."""
        return sampling_params or self.default_params or SamplingParams()

    async def agenerate(self, prompt: PreparedPrompt, sampling_params: Optional[SamplingParams] = None) -> GenerateResult:
        return await self.agenerate_tokens(prompt.tokens, sampling_params)

    def generate(self, prompt: PreparedPrompt, sampling_params: Optional[SamplingParams] = None) -> GenerateResult:
        return run_sync(self.agenerate(prompt, sampling_params))

    async def agenerate_tokens(
        self, tokens: Sequence[TokenId], sampling_params: Optional[SamplingParams] = None
    ) -> GenerateResult:
        """Generate directly from token ids using the effective sampling settings."""
        if self._complete is None:
            raise ConfigError(f"{type(self).__name__} has no completion function: pass complete=")
        if self._closed:
            raise ConfigError(f"{type(self).__name__} is closed")
        prefix = tuple(tokens)
        result = await self._complete(prefix, self.effective_params(sampling_params))
        if not isinstance(result, GenerateResult):
            raise ConfigError(f"completion returned {type(result).__name__}, expected GenerateResult")
        if not result.prefix_tokens:
            result.prefix_tokens = prefix
        return result

    def generate_tokens(self, tokens: Sequence[TokenId], sampling_params: Optional[SamplingParams] = None) -> GenerateResult:
        return run_sync(self.agenerate_tokens(tokens, sampling_params))

    def decode(self, tokens: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        return self._format.codec.decode(tokens, skip_special_tokens=skip_special_tokens)

    def parse(self, result: GenerateResult) -> A:
        return self._format.parser.parse(result)

    def is_exact(self, result: GenerateResult) -> bool:
        """Whether this response preserves exact token provenance."""
        return self._exact and result.exact_generation

    def record_reply(self, result: GenerateResult, messages: List[Message]) -> None:
        self._format.record_reply(result, messages)

    def startup_check(self) -> None:
        """Check that the policy is ready to serve requests. A custom completion has no
        server to contact; HTTP backends override this to contact theirs."""

    def close(self) -> None:
        """Release policy-owned resources."""
        self._closed = True

    async def aclose(self) -> None:
        self.close()
