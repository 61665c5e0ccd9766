"""Go-native token policies: SGLang's native ``/generate`` and vLLM's ``/v1/completions``.

Requests go out from Go over pooled fasthttp connections with a per-server concurrency
limit, bounded retries with backoff for transient failures (connection refused, 429, 5xx),
and validation of every response (at most ``max_tokens`` tokens, logprobs present and
aligned, a known finish reason). A collection that uses these policies never calls back
into Python for generation.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .. import _async, _lib
from ..errors import ConfigError, ConfigTypeError
from .._handle import GoObject
from ..types import GenerateResult, TokenId
from .types import SamplingParams
from .format import PolicyFormat, PreparedPrompt
from .policy import Policy


_PARAM_FIELDS = tuple(f.name for f in dataclasses.fields(SamplingParams))


def params_json(params: SamplingParams) -> bytes:
    """SamplingParams as the Go core reads them: unset (None) fields are left out."""
    # Not dataclasses.asdict: it deep-copies every field, on every request.
    fields = ((k, getattr(params, k)) for k in _PARAM_FIELDS)
    return json.dumps({k: v for k, v in fields if v is not None}).encode()


def call_result(name: str, prefix: Sequence[TokenId], *args: Any) -> GenerateResult:
    """Call a Go function that returns a generation result (ids and logprobs as arrays,
    the rest as JSON) for ``prefix``."""
    meta, tokens, logprobs = _lib.call_result(name, *args)
    return result_from_json(json.loads(meta), tokens, logprobs, prefix)


def result_from_json(
    data: Mapping[str, Any], tokens: Sequence[TokenId], logprobs: List[float], prefix: Sequence[TokenId]
) -> GenerateResult:
    def keyed(maps):
        return None if maps is None else [None if m is None else {str(k): v for k, v in m.items()} for m in maps]

    return GenerateResult(
        tokens=tuple(tokens),
        prefix_tokens=tuple(prefix),
        text=data.get("text", ""),
        stop_reason=data.get("stop_reason", "stop"),
        matched_stop=data.get("matched_stop"),
        logprobs=logprobs,
        top_logprobs=keyed(data.get("top_logprobs")),
        prompt_logprobs=list(data.get("prompt_logprobs") or ()),
        prompt_top_logprobs=keyed(data.get("prompt_top_logprobs")),
        entropy=data.get("entropy", 0.0),
        exact_generation=data.get("exact_generation", True),
    )


class _GoClient(GoObject):
    """The Go transport behind a token policy."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        data = json.dumps(config).encode()
        super().__init__(_lib.call_handle("focus_policy_open", data, len(data)))

    def generate(self, prefix: Sequence[TokenId], params: SamplingParams) -> GenerateResult:
        ids, count = _lib.ids_arg(prefix)
        body = params_json(params)
        return call_result("focus_policy_generate", prefix, _lib.c_handle(self.handle), 0, ids, count, body, len(body))

    async def agenerate(self, prefix: Sequence[TokenId], params: SamplingParams) -> GenerateResult:
        ids, count = _lib.ids_arg(prefix)
        body = params_json(params)
        slots = _lib.result_slots()

        def convert() -> GenerateResult:
            meta, tokens, logprobs = _lib.take_result(slots)
            return result_from_json(json.loads(meta), tokens, logprobs, prefix)

        return await _async.call("focus_policy_generate", self.handle, ids, count, body, len(body), slots=slots, convert=convert)

    def startup_check(self) -> Dict[str, Any]:
        return json.loads(_lib.call_string("focus_policy_startup_check", _lib.c_handle(self.handle), 0))


class _TokenServerPolicy(Policy[Any]):
    """Shared body of the Go-native token policies."""

    _backend = ""

    def __init__(
        self,
        *,
        model: str,
        format: Optional[PolicyFormat[Any]],
        profile: Optional[str],
        served_model: Optional[str],
        default_params: Optional[SamplingParams],
        config: Mapping[str, Any],
    ) -> None:
        self._owns_format = format is None
        if format is None:
            format = PolicyFormat.resolve(model, profile=profile)
        super().__init__(format=format, model=model, served_model=served_model, default_params=default_params)
        self._client = _GoClient({"backend": self._backend, "model": model, **config})
        self.server_info: Dict[str, Any] = {}

    @property
    def handle(self) -> int:
        """The Go policy handle (what a native collection uses)."""
        return self._client.handle

    async def agenerate_tokens(
        self, prefix_tokens: Sequence[TokenId], sampling_params: Optional[SamplingParams] = None
    ) -> GenerateResult:
        params = self.effective_params(sampling_params)
        prefix = tuple(prefix_tokens)
        return await self._client.agenerate(prefix, params)

    def generate_tokens(
        self, prefix_tokens: Sequence[TokenId], sampling_params: Optional[SamplingParams] = None
    ) -> GenerateResult:
        return self._client.generate(tuple(prefix_tokens), self.effective_params(sampling_params))

    def generate(self, prompt: PreparedPrompt, sampling_params: Optional[SamplingParams] = None) -> GenerateResult:
        return self.generate_tokens(prompt.tokens, sampling_params)

    def startup_check(self) -> None:
        """Contact the server (health and model info) and keep what it says in
        ``server_info``; raises BackendError or NotFoundError when it is not ready."""
        self.server_info = self._client.startup_check()

    def close(self) -> None:
        """Close the HTTP clients, and the tokenizer if this policy loaded it."""
        super().close()
        self._client.close()
        if self._owns_format:
            self.format.codec.tokenizer.close()

    async def aclose(self) -> None:
        self.close()


# The Go transport's limit when none is given (backends/transport.DefaultMaxConcurrency).
DEFAULT_MAX_CONCURRENCY = 64


def _check_max_concurrency(value: Optional[int]) -> int:
    """``max_concurrency`` as the Go config takes it (0: the default)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigTypeError(f"max_concurrency must be a positive int or None, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ConfigError(f"max_concurrency is {value}; it must be at least 1 (None: {DEFAULT_MAX_CONCURRENCY})")
    return value


class SGLangPolicy(_TokenServerPolicy):
    """Generates token continuations through an SGLang server's native ``/generate``
    endpoint (or an sglang-router in front of several), preserving exact token ids and
    behaviour logprobs. It owns its HTTP clients: close it when done.

    ``max_concurrency`` caps the requests this policy has in flight at once, shared by
    every collection that uses it (None: 64); further requests wait for a free slot.
    Behind a router, size it for all its workers (Slime's hooks use
    ``--sglang-server-concurrency`` times the number of rollout engines)."""

    _backend = "sglang"

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        format: Optional[PolicyFormat[Any]] = None,
        profile: Optional[str] = None,
        default_params: Optional[SamplingParams] = None,
        api_key: Optional[str] = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        max_concurrency: Optional[int] = None,
    ) -> None:
        limit = _check_max_concurrency(max_concurrency)
        config = {
            "base_url": base_url,
            "api_key": api_key or "",
            "headers": dict(headers or {}),
            "timeout": timeout or 0,
            "max_concurrency": limit,
        }
        super().__init__(
            model=model, format=format, profile=profile, served_model=None, default_params=default_params, config=config
        )
        self.max_concurrency: int = limit or DEFAULT_MAX_CONCURRENCY


class VLLMPolicy(_TokenServerPolicy):
    """Generates from token prompts through a vLLM server's ``/v1/completions`` with
    ``return_token_ids``, keeping exact token ids and behaviour logprobs. ``timeout`` is the
    request deadline in seconds, retries included (None: no deadline); allow for queueing
    when many requests share the server."""

    _backend = "vllm"

    def __init__(
        self,
        *,
        model: str,
        format: Optional[PolicyFormat[Any]] = None,
        profile: Optional[str] = None,
        served_model: Optional[str] = None,
        base_url: str,
        api_key: str,
        default_params: Optional[SamplingParams] = None,
        timeout: Optional[float] = None,
    ) -> None:
        config = {
            "base_url": base_url,
            "api_key": api_key,
            "served_model": served_model or "",
            "timeout": timeout or 0,
        }
        super().__init__(
            model=model,
            format=format,
            profile=profile,
            served_model=served_model,
            default_params=default_params,
            config=config,
        )
