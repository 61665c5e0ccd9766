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

    The backends (``SGLangPolicy``, ``VLLMPolicy``, ...) are subclasses. Construct
    ``Policy`` itself to generate with your own async completion function: it receives the
    exact prefix token ids and the sampling parameters and returns a ``GenerateResult``,
    whose tokens and log probabilities stay attached to those tokens through preparation.
    Every method that makes a request has a blocking form and an ``a``-prefixed ``async``
    form; call the async one inside an event loop.

    A policy whose token ids are estimated (``exact=False``, or one response whose
    ``exact_generation`` is False or that has a token without a finite log probability)
    still collects: its edges are recorded as inexact (``NodeView.inexact``), keep their
    tokens as conditioning only and make no actor sample, while values, critic targets and
    evaluation work as usual.

    Keep the actor and critic fixed for each tree; the training loop owns model snapshots.
    ``copy.copy`` and ``copy.deepcopy`` return the policy itself, so an environment that holds
    ``policy.decode`` forks onto the same policy and connections.

    Example:
        ```python
        from focus.backends import Policy

        async def complete(tokens, params):
            return await backend.agenerate_tokens(tokens, params)

        policy = Policy(format=policy_format, complete=complete)
        ```

    Args:
        format: Renders conversations into tokens and parses responses.
        model: The model's name, for logs and records.
        served_model: The name the server knows the model by; ``model`` when None.
        default_params: The sampling parameters of requests that bring none; when None,
            ``SamplingParams()``.
        complete: The async completion function; required to generate with ``Policy``
            itself.
        exact: False marks the token ids as estimated, so no response trains the actor.
        native: True marks a policy that speaks a structured chat API rather than tokens.
    """

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
        """The format: the chat codec that renders prompts and the parser that reads responses."""
        return self._format

    @property
    def model(self) -> str:
        """The model's name."""
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
        """Render a conversation and tool schemas into a prompt.

        Args:
            messages: The chat messages.
            tools: OpenAI-style function schemas shown to the model.

        Returns:
            The prompt, with its exact tokens.
        """
        return self._format.prepare(messages, tools)

    def validate_context(self, messages: Sequence[Message]) -> None:
        """Check an edited conversation before committing it, without a model request.

        The base check is structural: every message is a dict with a known role and string or
        absent content. Native API policies also check tool-call and reply ordering.

        Args:
            messages: The conversation.

        Raises:
            ConfigError: A message is malformed; the message names its index.
        """
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
        """The sampling parameters a request uses: the call's, else the policy's defaults, else
        ``SamplingParams()``.
        """
        return sampling_params or self.default_params or SamplingParams()

    async def agenerate(self, prompt: PreparedPrompt, sampling_params: Optional[SamplingParams] = None) -> GenerateResult:
        """Generate a response to a prepared prompt.

        Args:
            prompt: The prompt, from ``prepare``.
            sampling_params: This request's sampling parameters; None for the policy's
                defaults.

        Returns:
            The response.
        """
        return await self.agenerate_tokens(prompt.tokens, sampling_params)

    def generate(self, prompt: PreparedPrompt, sampling_params: Optional[SamplingParams] = None) -> GenerateResult:
        """Generate a response to a prepared prompt, blocking; the blocking form of ``agenerate``.

        Raises:
            RuntimeError: Called inside a running event loop; await ``agenerate`` there.
        """
        return run_sync(self.agenerate(prompt, sampling_params))

    async def agenerate_tokens(
        self, tokens: Sequence[TokenId], sampling_params: Optional[SamplingParams] = None
    ) -> GenerateResult:
        """Generate a continuation of exact token ids with the effective sampling parameters.

        This is the request a collection makes for every segment.

        Args:
            tokens: The prefix token ids.
            sampling_params: This request's sampling parameters; None for the policy's
                defaults.

        Returns:
            The response, with ``prefix_tokens`` set.

        Raises:
            ConfigError: The policy has no completion function or is closed, or the completion
                function returned something other than a ``GenerateResult``.
        """
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
        """Generate a continuation of exact token ids, blocking; the blocking form of
        ``agenerate_tokens``.

        Raises:
            RuntimeError: Called inside a running event loop; await ``agenerate_tokens`` there.
        """
        return run_sync(self.agenerate_tokens(tokens, sampling_params))

    def decode(self, tokens: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        """Decode token ids into text with the format's tokenizer.

        Args:
            tokens: The token ids.
            skip_special_tokens: Leave special tokens out of the text.

        Returns:
            The text.
        """
        return self._format.codec.decode(tokens, skip_special_tokens=skip_special_tokens)

    def parse(self, result: GenerateResult) -> A:
        """Parse a response into an action with the format's parser.

        Args:
            result: The response.

        Returns:
            The action.
        """
        return self._format.parser.parse(result)

    def is_exact(self, result: GenerateResult) -> bool:
        """Whether this response preserves exact token provenance.

        ``trainable`` describes the policy before collection; ``is_exact`` what happened on one
        call, for instance when a replay policy mixes exact and inexact responses.

        Args:
            result: A response of this policy.

        Returns:
            True when the response's token ids are exact and may train the actor.
        """
        return self._exact and result.exact_generation

    def record_reply(self, result: GenerateResult, messages: List[Message]) -> None:
        """Append the assistant message for a response to a conversation.

        Args:
            result: The response.
            messages: The conversation, extended in place.
        """
        self._format.record_reply(result, messages)

    def startup_check(self) -> None:
        """Check that the policy is ready to serve requests. A custom completion has no
        server to contact; HTTP backends override this to contact theirs."""

    def close(self) -> None:
        """Release policy-owned resources."""
        self._closed = True

    async def aclose(self) -> None:
        """Release policy-owned resources; the async form of ``close``."""
        self.close()
