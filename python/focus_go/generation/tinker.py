"""Tinker as a generation backend: ``TinkerPolicy`` samples from a ``tinker.SamplingClient``.

A SamplingClient is an immutable snapshot of the policy's weights; create a new policy (or
pass a new client) after each training step. The ``tinker`` package is imported only when a
request is made, so installing focus-go does not need it (it requires Python 3.11+).

Each request is ``sampling_client.sample(prompt=ModelInput.from_ints(prefix), num_samples=1,
sampling_params=tinker.types.SamplingParams(...))``, awaited: in tinker ≥ 0.38 ``sample``
returns an awaitable ``APIFuture`` and ``sample_async`` is deprecated; an older SDK's
``concurrent.futures.Future`` is awaited through ``asyncio.wrap_future``, and a client that
only has ``sample_async`` is awaited directly. The sampled sequence's exact token ids and
logprobs are kept, and checked in Go like every token backend's (known stop reason, at most
``max_tokens`` tokens, one finite logprob per token).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import math
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from .. import _lib
from ..errors import BackendError, ConfigError
from ..types import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, DEFAULT_TOP_P, GenerateResult, TokenId
from .types import SamplingParams
from .format import PolicyFormat
from .policy import Policy

if TYPE_CHECKING:
    import tinker


def _tinker() -> Any:
    try:
        import tinker
    except ImportError as exc:  # pragma: no cover - exercised only without tinker
        raise ConfigError("TinkerPolicy needs the tinker package: pip install 'focus-go[tinker]' (Python 3.11+)") from exc
    return tinker


class TinkerPolicy(Policy[Any]):
    """Generates through a Tinker sampling client, keeping exact token ids and log probabilities.

    A sampling client is an immutable snapshot of the policy's weights: create a new policy
    (or pass a new client) after each training step. The ``tinker`` package is imported only
    when a request is made.

    Sampling maps as: ``max_tokens``, ``temperature``, ``top_p``, ``top_k`` (None is off),
    ``stop`` strings and ``seed``; ``logprobs=k > 0`` asks for the top ``k`` log
    probabilities of each sampled token (in ``top_logprobs``, keyed by the token id as a
    string) and ``prompt_logprobs`` for the prompt's. ``repetition_penalty`` has no Tinker
    equivalent and raises ``ConfigError``. Stop reasons are ``"stop"`` or ``"length"``.

    Example:
        <!-- not run: needs a Tinker sampling client (a Tinker API key) -->
        ```python
        from focus.backends import TinkerPolicy

        policy = TinkerPolicy(sampling_client, model=model_name, profile="token_chunk")
        ```

    Args:
        sampling_client: A ``tinker.SamplingClient``.
        model: The model directory or Hugging Face id, for the tokenizer and chat template.
        format: The model's format; resolved from ``model`` and ``profile`` with a local
            tokenizer when None (that tokenizer is closed with the policy).
        profile: The parser profile when ``format`` is None.
        default_params: The sampling parameters of requests that bring none.

    Attributes:
        prompt_tokens: The prompt tokens of the sample requests answered (billed prefill),
            each request's prompt once whatever its ``num_samples``.
        prompt_cache_hit_tokens: Of those, the ones the service served from its prefix
            cache (``SampleResponse.prompt_cache_hit_tokens``).
        sequence_ids: Maps each sampled continuation, as ``(prompt token tuple, sampled
            token tuple)``, to the ``sequence_id`` Tinker gave it: the provenance Tinker's
            ``stable_reinforce`` loss asks for.

    Raises:
        ConfigError: ``sampling_client`` has no ``sample`` method.
    """

    def __init__(
        self,
        sampling_client: "tinker.SamplingClient",
        *,
        model: str,
        format: Optional[PolicyFormat[Any]] = None,
        profile: Optional[str] = None,
        default_params: Optional[SamplingParams] = None,
    ):
        self._owns_format = format is None
        if format is None:
            format = PolicyFormat.resolve(model, profile=profile)
        super().__init__(format=format, model=model, default_params=default_params)
        if not (callable(getattr(sampling_client, "sample", None)) or callable(getattr(sampling_client, "sample_async", None))):
            raise ConfigError(f"sampling_client is a {type(sampling_client).__name__}, expected a tinker.SamplingClient (with sample())")
        self.sampling_client = sampling_client
        # Tinker's sequence_id of each sampled continuation, keyed by (prompt tokens,
        # sampled tokens): the provenance the Tinker integration attaches to datums.
        self.sequence_ids: Dict[tuple, str] = {}
        self.sample_requests = 0  # sample() calls sent
        self.prompt_tokens = 0  # prompt tokens of the requests answered
        self.prompt_cache_hit_tokens = 0  # of which the service served from its prefix cache
        self._group_size = 1
        self._group: Optional["_Group"] = None
        self._group_done = False

    async def agenerate_tokens(
        self, prefix_tokens: Sequence[TokenId], sampling_params: Optional[SamplingParams] = None
    ) -> GenerateResult:
        """Sample one continuation of ``prefix_tokens`` and return its exact tokens and log probabilities.

        Args:
            prefix_tokens: The prefix token ids.
            sampling_params: This request's sampling parameters; None for the policy's
                defaults.

        Returns:
            The response.

        Raises:
            BackendError: The sampler returned no sequence or no log probabilities.
            ConfigError: The policy is closed, the prompt is empty, or ``repetition_penalty``
                is set.
        """
        if self._closed:
            raise ConfigError("TinkerPolicy is closed")
        prefix = tuple(int(t) for t in prefix_tokens)
        if not prefix:
            raise ConfigError("TinkerPolicy: the prompt has no tokens")
        params = self.effective_params(sampling_params)
        if params.repetition_penalty is not None and params.repetition_penalty != 1.0:
            raise ConfigError("TinkerPolicy: repetition_penalty has no Tinker equivalent; leave it None")
        tinker = _tinker()
        max_tokens = params.max_tokens if params.max_tokens is not None else DEFAULT_MAX_TOKENS
        sp = tinker.types.SamplingParams(
            max_tokens=max_tokens,
            temperature=params.temperature if params.temperature is not None else DEFAULT_TEMPERATURE,
            top_p=params.top_p if params.top_p is not None else DEFAULT_TOP_P,
            top_k=params.top_k if params.top_k not in (None, 0) else -1,
            stop=list(params.stop) if params.stop else None,
            seed=params.seed,
        )
        kwargs: Dict[str, Any] = {}
        if params.logprobs:
            kwargs["topk_sample_logprobs"] = params.logprobs
        if params.prompt_logprobs is not None:
            kwargs["include_prompt_logprobs"] = True
        if not self._group_done and self._group_size > 1:
            key = (prefix, sp.model_dump_json(exclude={"seed"}) if hasattr(sp, "model_dump_json") else repr(sp), tuple(sorted(kwargs.items())))
            leader = self._group is None
            if leader:
                self._group = _Group(key, self._group_size)
            group = self._group
            assert group is not None
            if group.key == key and not group.sent and len(group.members) < group.size:
                future = group.join(params.seed)
                if leader:  # the first member sends the group's request, in its own task
                    await self._send_group(group, tinker, prefix, sp, kwargs)
                response, seq = await future
                return self._result(response, prefix, max_tokens, params, seq)
        response = await self._sample(tinker.types.ModelInput.from_ints(list(prefix)), sp, kwargs)
        return self._result(response, prefix, max_tokens, params)

    def share_first_prompt(self, n: int) -> None:
        """Send the first ``n`` requests that have the first request's prompt and sampling
        settings (a tree's ``n`` warmup rollouts all start from the root prompt) as one
        ``sample(num_samples=n)`` request instead of ``n``. The request carries the
        smallest of the members' seeds (None if none has one), and its i-th sequence goes
        to the member with the i-th smallest seed, so the same seeds give the same
        assignment whatever order the requests arrive in. If fewer than ``n`` such requests
        arrive within 5 seconds (a rollout failed before sampling), those that did are sent
        together. The first member's task sends the request; if it is cancelled, the
        members still waiting are cancelled too. Later requests are sent one by one."""
        if not isinstance(n, int) or n < 1:
            raise ConfigError(f"TinkerPolicy.share_first_prompt: n must be an integer >= 1, got {n!r}")
        self._group_size = n

    async def _send_group(self, group: "_Group", tinker: Any, prefix: Sequence[TokenId], sp: Any, kwargs: Dict[str, Any]) -> None:
        try:
            # A timer, not wait_for: a cancelled leader then stops in one step, so a
            # cancelled collection leaves no task of it behind.
            timer = asyncio.get_running_loop().call_later(5.0, group.full.set)
            try:
                await group.full.wait()
            finally:
                timer.cancel()
            group.sent = True
            self._group_done = True
            members = sorted(group.members, key=lambda m: (m[0] is None, m[0] if m[0] is not None else 0, m[2]))
            seeds = [m[0] for m in members if m[0] is not None]
            request_sp = sp.model_copy(update={"seed": min(seeds) if seeds else None}) if hasattr(sp, "model_copy") else sp
            response = await self._sample(tinker.types.ModelInput.from_ints(list(prefix)), request_sp, kwargs, n=len(members))
            sequences = list(getattr(response, "sequences", None) or ())
            if len(sequences) != len(members):
                raise BackendError(f"tinker: the sampler returned {len(sequences)} sequences for num_samples={len(members)}")
            for (_, future, _), seq in zip(members, sequences):
                if not future.done():
                    future.set_result((response, seq))
        except BaseException as exc:
            group.sent = True
            self._group_done = True
            for _, future, _ in group.members:
                if future.done():
                    continue
                if isinstance(exc, Exception):
                    future.set_exception(exc)
                else:  # the leader was cancelled: so are the members waiting on its request
                    future.cancel()
            if not isinstance(exc, Exception):
                raise

    async def _sample(self, prompt: Any, sp: Any, kwargs: Dict[str, Any], n: int = 1) -> Any:
        client = self.sampling_client
        self.sample_requests += 1
        if callable(getattr(client, "sample", None)):
            pending = client.sample(prompt=prompt, num_samples=n, sampling_params=sp, **kwargs)
            if inspect.isawaitable(pending):
                response = await pending
            elif isinstance(pending, concurrent.futures.Future):
                response = await asyncio.wrap_future(pending)
            else:
                raise ConfigError(f"sampling_client.sample returned a {type(pending).__name__}, expected an awaitable future")
        else:
            response = await client.sample_async(prompt=prompt, num_samples=n, sampling_params=sp, **kwargs)
        # Billed prefill: the prompt once per request, split by the prefix-cache hits.
        length = getattr(prompt, "length", None)
        if isinstance(length, int):
            self.prompt_tokens += length
        cached = getattr(response, "prompt_cache_hit_tokens", None)
        if isinstance(cached, int):
            self.prompt_cache_hit_tokens += cached
        return response

    def _result(
        self, response: Any, prefix: Sequence[TokenId], max_tokens: int, params: SamplingParams, seq: Any = None
    ) -> GenerateResult:
        if seq is None:
            sequences = list(getattr(response, "sequences", None) or ())
            if len(sequences) != 1:
                raise BackendError(f"tinker: the sampler returned {len(sequences)} sequences for num_samples=1")
            seq = sequences[0]
        tokens = [int(t) for t in seq.tokens]
        if seq.logprobs is None:
            raise BackendError("tinker: the sampled sequence has no logprobs; exact training needs the sampler's logprobs")
        logprobs = [float(v) for v in seq.logprobs]
        stop_reason = str(seq.stop_reason)
        # JSON has no NaN or -inf: a logprob without a finite value goes to the check as
        # null (no logprob), and stays in the result as it is (the collection engine makes
        # such an edge inexact).
        checked = [v if math.isfinite(v) else None for v in logprobs]
        check = json.dumps({"tokens": tokens, "logprobs": checked, "stop_reason": stop_reason}).encode()
        _lib.call("focus_result_validate", *_lib.text_arg("tinker"), check, len(check), max_tokens)
        top: Optional[List[Dict[str, float]]] = None
        if params.logprobs:
            rows = getattr(seq, "topk_logprobs", None)
            if rows is None or len(rows) != len(tokens):
                raise BackendError(f"tinker: {params.logprobs} top logprobs were requested but the sequence has none aligned with its tokens")
            top = [{str(tid): float(lp) for tid, lp in (row or ())} for row in rows]
        prompt_lps: List[Optional[float]] = []
        if params.prompt_logprobs is not None:
            raw = getattr(response, "prompt_logprobs", None)
            if raw is None:
                raise BackendError("tinker: prompt logprobs were requested but the response has none")
            prompt_lps = [None if v is None or math.isnan(v) else float(v) for v in raw]
        sequence_id = getattr(seq, "sequence_id", None)
        if isinstance(sequence_id, str) and sequence_id:
            self.sequence_ids[(tuple(prefix), tuple(tokens))] = sequence_id
        return GenerateResult(
            tokens=tuple(tokens),
            prefix_tokens=tuple(prefix),
            text=self.decode(tokens),
            stop_reason=stop_reason,
            logprobs=logprobs,
            top_logprobs=top,
            prompt_logprobs=prompt_lps,
            entropy=_entropy(logprobs),
            exact_generation=True,
        )

    def close(self) -> None:
        """Release the tokenizer this policy loaded.

        The sampling client belongs to the caller; Tinker clients need no closing.
        """
        if self._closed:
            return
        super().close()
        if self._owns_format:
            self.format.codec.tokenizer.close()

    def __enter__(self) -> "TinkerPolicy":
        """Use the policy in a ``with`` block, which closes it at the end."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the policy."""
        self.close()


class _Group:
    """Requests waiting to go out as one ``sample(num_samples=n)`` (see
    ``TinkerPolicy.share_first_prompt``): (seed, future, arrival) per member."""

    def __init__(self, key: Any, size: int):
        self.key = key
        self.size = size
        self.members: List[Any] = []
        self.full = asyncio.Event()
        self.sent = False

    def join(self, seed: Optional[int]) -> "asyncio.Future[Any]":
        future: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        self.members.append((seed, future, len(self.members)))
        if len(self.members) >= self.size:
            self.full.set()
        return future


def _entropy(logprobs: Sequence[float]) -> float:
    """-mean of the finite logprobs, as the Go backends compute GenerateResult.entropy."""
    finite = [v for v in logprobs if math.isfinite(v)]
    return -sum(finite) / len(finite) if finite else 0.0
