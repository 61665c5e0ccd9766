"""Replay: serve recorded responses so a collection re-runs offline.

``ReplayPolicy`` answers generation requests from recorded GenerateResults instead of a
model, for regression tests, debugging a tree, or re-running preparation without a server.
Recordings may mix exact and inexact responses (say, token-server results and API results):
``is_exact()`` reports each one's own provenance.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import ConfigError
from ..types import GenerateResult, TokenId
from .types import SamplingParams
from .format import PolicyFormat, PreparedPrompt
from .policy import Policy

Recording = Union[GenerateResult, Sequence[GenerateResult]]


class ReplayPolicy(Policy[Any]):
    """Serves recorded ``GenerateResult``s in place of a model, so a collection re-runs offline.

    Use it for regression tests, for debugging a tree, or to re-run preparation without a
    server; ``record_calls`` records a live policy's responses in the form it takes. A
    request with no recording left (an exhausted list, an unknown prefix, or a prefix whose
    results are used up) raises ``ConfigError`` naming the prefix. Results are returned as
    copies with ``prefix_tokens`` set, so the recordings stay intact; sampling parameters are
    accepted and ignored (the recording decides). Recordings may mix exact and inexact
    responses: ``is_exact(result)`` is the result's own ``exact_generation``, and
    ``trainable`` is True only when every recording is exact and the parser keeps token
    provenance.

    Args:
        recordings: Either a sequence of results, served in order, one per request (a
            result whose ``prefix_tokens`` are set must match the request's prefix; a
            mismatch means the run diverged from the recording); or a mapping from exact
            prefix tokens (a tuple of ids) to a result or a sequence of results, which
            requests with that prefix take in order. A key may also be ``(prefix, seed)``:
            a request carrying that sampling seed takes those recordings first, which keeps
            a concurrent collection (which seeds every request) identical to the recorded
            run whatever order its requests arrive in.
        format: The codec and parser the recorded run used.
        model: The model's name, for logs and records.
        default_params: The sampling parameters of requests that bring none.

    Raises:
        ConfigError: ``recordings`` is neither a sequence nor a mapping of results, or a
            key is neither prefix token ids nor ``(prefix, seed)``.
    """

    def __init__(
        self,
        recordings: Union[Sequence[GenerateResult], Mapping[Sequence[TokenId], Recording]],
        *,
        format: PolicyFormat[Any],
        model: str = "replay",
        default_params: Optional[SamplingParams] = None,
    ) -> None:
        super().__init__(format=format, model=model, default_params=default_params)
        self._queue: Optional[List[GenerateResult]] = None
        self._by_prefix: Dict[Any, List[GenerateResult]] = {}
        if isinstance(recordings, Mapping):
            for raw_key, value in recordings.items():
                key = _key(raw_key)
                results = [value] if isinstance(value, GenerateResult) else list(value)
                _check(results, f"recording for prefix {_show(key[0] if _seeded(key) else key)}")
                self._by_prefix[key] = results
            self._all: List[GenerateResult] = [r for rs in self._by_prefix.values() for r in rs]
        elif isinstance(recordings, Iterable) and not isinstance(recordings, (str, bytes)):
            self._queue = list(recordings)
            _check(self._queue, "recordings")
            self._all = list(self._queue)
        else:
            raise ConfigError(f"recordings is a {type(recordings).__name__}, expected a list of GenerateResult or a mapping from prefix tokens to them")
        self._served = 0

    @property
    def trainable(self) -> bool:
        """Whether every recording is exact and the parser keeps token provenance."""
        return all(r.exact_generation for r in self._all) and self._format.parser.trainable

    @property
    def served(self) -> int:
        """How many recorded responses have been served."""
        return self._served

    @property
    def remaining(self) -> int:
        """How many recorded responses are left."""
        if self._queue is not None:
            return len(self._queue)
        return sum(len(v) for v in self._by_prefix.values())

    async def agenerate_tokens(
        self, tokens: Sequence[TokenId], sampling_params: Optional[SamplingParams] = None
    ) -> GenerateResult:
        """The next recorded response for ``tokens`` (and the call's seed, when recordings
        are keyed by it)."""
        return self._next(tuple(int(t) for t in tokens), self.effective_params(sampling_params).seed)

    async def agenerate(self, prompt: PreparedPrompt, sampling_params: Optional[SamplingParams] = None) -> GenerateResult:
        """The next recorded response for the prompt's tokens."""
        return self._next(tuple(prompt.tokens), self.effective_params(sampling_params).seed)

    def _next(self, prefix: Tuple[TokenId, ...], seed: Optional[int] = None) -> GenerateResult:
        if self._closed:
            raise ConfigError("ReplayPolicy is closed")
        if self._queue is not None:
            if not self._queue:
                raise ConfigError(f"replay: no recording left for prefix {_show(prefix)}: all {self._served} recorded responses were served")
            recorded = self._queue[0]
            if recorded.prefix_tokens and tuple(recorded.prefix_tokens) != prefix:
                raise ConfigError(
                    f"replay: request {self._served} has prefix {_show(prefix)} but the recording continues "
                    f"{_show(tuple(recorded.prefix_tokens))}: the run diverged from the recording"
                )
            self._queue.pop(0)
        else:
            results = self._by_prefix.get((prefix, seed)) if seed is not None else None
            if not results:
                results = self._by_prefix.get(prefix)
            if results is None:
                raise ConfigError(f"replay: no recording for prefix {_show(prefix)}")
            if not results:
                raise ConfigError(f"replay: the recordings for prefix {_show(prefix)} are used up")
            recorded = results.pop(0)
        self._served += 1
        return dataclasses.replace(
            recorded,
            prefix_tokens=prefix,
            logprobs=list(recorded.logprobs),
            prompt_logprobs=list(recorded.prompt_logprobs),
        )

    def is_exact(self, result: GenerateResult) -> bool:
        """This response's own provenance: exact token ids or estimated ones."""
        return result.exact_generation


def record_calls(policy: Policy[Any]) -> Tuple[Policy[Any], Dict[Any, List[GenerateResult]]]:
    """Record a policy's responses for ``ReplayPolicy``.

    Returns a policy that forwards every token request to ``policy`` and records its
    results. The recording policy shares ``policy``'s format and defaults; close ``policy``
    yourself.

    Example:
        ```python
        from focus.backends import ReplayPolicy
        from focus.generation.replay import record_calls

        recorder, recordings = record_calls(policy)
        # ... collect with an agent that uses `recorder` ...
        replay = ReplayPolicy(recordings, format=policy.format)
        ```

    Args:
        policy: The policy to record.

    Returns:
        The recording policy, and the recordings it fills: ``{(prefix, seed): [results]}``
            for seeded calls, ``{prefix: [results]}`` otherwise.
    """
    recordings: Dict[Any, List[GenerateResult]] = {}

    async def complete(tokens: Sequence[TokenId], params: Optional[SamplingParams]) -> GenerateResult:
        result = await policy.agenerate_tokens(tokens, params)
        prefix = tuple(int(t) for t in tokens)
        key: Any = prefix if params is None or params.seed is None else (prefix, params.seed)
        recordings.setdefault(key, []).append(dataclasses.replace(result, logprobs=list(result.logprobs)))
        return result

    recorder = Policy(format=policy.format, model=policy.model, default_params=policy.default_params, complete=complete)
    return recorder, recordings


def _seeded(key: Any) -> bool:
    return len(key) == 2 and isinstance(key[0], tuple)


def _key(raw: Any) -> Any:
    """A mapping key as stored: a prefix tuple, or ``(prefix tuple, seed)``."""
    try:
        if len(raw) == 2 and not isinstance(raw[0], int) and isinstance(raw[1], int):
            return (tuple(int(t) for t in raw[0]), int(raw[1]))
        return tuple(int(t) for t in raw)
    except (TypeError, ValueError):
        raise ConfigError(f"recording key {raw!r} is neither prefix token ids nor (prefix, seed)") from None


def _check(results: Sequence[Any], what: str) -> None:
    for i, r in enumerate(results):
        if not isinstance(r, GenerateResult):
            raise ConfigError(f"{what}[{i}] is a {type(r).__name__}, expected GenerateResult")


def _show(prefix: Tuple[TokenId, ...]) -> str:
    if len(prefix) <= 8:
        return str(list(prefix))
    return f"[{', '.join(map(str, prefix[:4]))}, ... {len(prefix) - 8} more ..., {', '.join(map(str, prefix[-4:]))}] ({len(prefix)} tokens)"
