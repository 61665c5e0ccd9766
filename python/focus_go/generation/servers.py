"""Go-native token policies: SGLang's native ``/generate`` and vLLM's ``/v1/completions``.

Requests go out from Go over pooled fasthttp connections with a per-server concurrency
limit, bounded retries with backoff for transient failures (connection refused, 429, 5xx),
and validation of every response (at most ``max_tokens`` tokens, logprobs present and
aligned, a known finish reason). A collection that uses these policies never calls back
into Python for generation.
"""

from __future__ import annotations

import array
import dataclasses
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import _async, _lib
from ..errors import ConfigError, ConfigTypeError
from .._handle import GoObject
from ..types import GenerateResult, TokenId
from .types import SamplingParams
from .format import PolicyFormat, PreparedPrompt
from .policy import Policy


_PARAM_FIELDS = tuple(f.name for f in dataclasses.fields(SamplingParams))


# json.dumps's C encoder, made once instead of per call (a third of params_json's time).
_C_ENCODER = json.encoder.c_make_encoder and json.encoder.c_make_encoder(
    None, json.JSONEncoder().default, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True
)


def params_json(params: SamplingParams) -> bytes:
    """SamplingParams as the Go core reads them: unset (None) fields are left out; the
    text of json.dumps."""
    # Not dataclasses.asdict: it deep-copies every field, on every request.
    values = {k: v for k in _PARAM_FIELDS if (v := getattr(params, k)) is not None}
    if _C_ENCODER is None:
        return json.dumps(values).encode()
    return "".join(_C_ENCODER(values, 0)).encode()


def call_result(name: str, prefix: Sequence[TokenId], *args: Any) -> GenerateResult:
    """Call a Go function that returns a generation result (ids and logprobs as arrays,
    the rest as JSON) for ``prefix``."""
    meta, tokens, logprobs = _lib.call_result(name, *args)
    return result_from_json(json.loads(meta), tokens, logprobs, prefix)


def result_from_json(
    data: Mapping[str, Any], tokens: "array.array[int]", logprobs: "array.array[float]", prefix: Sequence[TokenId]
) -> GenerateResult:
    """The GenerateResult of a Go call's result, whose ids and logprobs came in tokens (a
    uint32 array) and logprobs (float64): its tokens are plain ints (the tuple is taken
    out of the cycle collector, see _lib.untracked_ids). The result carries the arrays
    (see go_arrays), so that the collector's bridge need not convert them back."""

    def keyed(maps):
        return None if maps is None else [None if m is None else {str(k): v for k, v in m.items()} for m in maps]

    result = GenerateResult(
        tokens=_lib.untracked_ids(tuple(tokens.tolist())),
        prefix_tokens=tuple(prefix),
        text=data.get("text", ""),
        stop_reason=data.get("stop_reason", "stop"),
        matched_stop=data.get("matched_stop"),
        logprobs=logprobs.tolist(),
        top_logprobs=keyed(data.get("top_logprobs")),
        prompt_logprobs=list(data.get("prompt_logprobs") or ()),
        prompt_top_logprobs=keyed(data.get("prompt_top_logprobs")),
        entropy=data.get("entropy", 0.0),
        exact_generation=data.get("exact_generation", True),
    )
    result.__dict__[_GO_ARRAYS] = (result.tokens, result.logprobs[:], tokens, logprobs)
    return result


# The attribute a GenerateResult built from a Go call's result keeps its arrays under.
_GO_ARRAYS = "_focus_go_arrays"


def go_arrays(result: GenerateResult) -> "Optional[Tuple[array.array[int], array.array[float]]]":
    """The uint32 ids and float64 logprobs of a result Go returned (and checked: aligned,
    logprobs <= 0 or NaN), when result still holds exactly those values: the same tokens
    tuple, and logprobs equal to what Go returned (a Completion may change a result it
    hands on, or build a new one; then None)."""
    carried = result.__dict__.get(_GO_ARRAYS)
    if carried is None:
        return None
    tokens, logprobs, ids, values = carried
    current = result.logprobs
    # type() first: comparing, say, a numpy array with a list gives no single truth value.
    if result.tokens is not tokens or type(current) is not list or current != logprobs:
        return None
    return ids, values


class _GoClient(GoObject):
    """The Go transport behind a token policy."""

    _KIND = "policy"

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

    async def admit(self, width: int) -> "Admission":
        out = _lib.c_handle()
        return await _async.call("focus_policy_admit", self.handle, width, slots=(out,),
                                 convert=lambda: Admission(out.value))

    def load(self) -> Dict[str, Any]:
        return json.loads(_lib.call_string("focus_policy_load", _lib.c_handle(self.handle)))


class Admission(GoObject):
    """One admitted tree's reservation (``Policy.admit``): close it, or leave the ``with``
    block, when the tree's collection has ended. Dropping it releases it too."""

    async def __aenter__(self) -> "Admission":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


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
        # An answer with an id outside the tokenizer's vocabulary counts against its server.
        vocab = getattr(format.codec.tokenizer, "vocab_size", 0)
        self._client = _GoClient({"backend": self._backend, "model": model, "vocab_size": vocab, **config})
        self.server_info: Dict[str, Any] = {}

    @property
    def handle(self) -> int:
        """The Go policy handle (what a native collection uses)."""
        return self._client.handle

    async def agenerate_tokens(
        self, prefix_tokens: Sequence[TokenId], sampling_params: Optional[SamplingParams] = None
    ) -> GenerateResult:
        """Generate a continuation of exact token ids.

        Args:
            prefix_tokens: The prefix token ids.
            sampling_params: This request's sampling parameters; None for the policy's
                defaults.

        Returns:
            The response, checked: a known stop reason, at most ``max_tokens`` tokens, one
                finite log probability per token.

        Raises:
            BackendError: The server failed or answered something malformed.
            FocusTimeoutError: The request passed its ``timeout``.
        """
        params = self.effective_params(sampling_params)
        prefix = tuple(prefix_tokens)
        return await self._client.agenerate(prefix, params)

    def generate_tokens(
        self, prefix_tokens: Sequence[TokenId], sampling_params: Optional[SamplingParams] = None
    ) -> GenerateResult:
        """Generate a continuation of exact token ids, blocking; see ``agenerate_tokens``."""
        return self._client.generate(tuple(prefix_tokens), self.effective_params(sampling_params))

    def generate(self, prompt: PreparedPrompt, sampling_params: Optional[SamplingParams] = None) -> GenerateResult:
        """Generate a response to a prepared prompt, blocking."""
        return self.generate_tokens(prompt.tokens, sampling_params)

    def startup_check(self) -> None:
        """Contact the server (health and model info; every server of a list) and keep what
        it says in ``server_info``: the first server's fields, and under ``"fleet"`` the
        capacity the policy schedules to (``max_concurrency`` when given, else the sum of
        each server's ``max_running_requests`` where it reports one and ``capacity`` where
        not) and each server's. Raises BackendError or NotFoundError when one is not ready."""
        self.server_info = self._client.startup_check()
        self.max_concurrency = int(self.server_info["fleet"]["capacity"])

    async def admit(self, width: int) -> "Admission":
        """Wait until this policy's requests in flight (with those queued and those earlier
        admissions still reserve) drop below its capacity, then reserve ``width`` requests
        (the next tree's warmup) and return the admission; close it when the tree has been
        collected. This is how ``focus-go collect`` schedules by requests in flight, and how
        a loop over ``Collector.collect`` can: ``async with await policy.admit(16): ...``."""
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ConfigError(f"admit: width must be a positive int (the tree's first burst of requests), got {width!r}")
        return await self._client.admit(width)

    def load(self) -> Dict[str, Any]:
        """The scheduling state: ``capacity``, ``in_flight``, ``queued``, ``reserved``,
        ``peak_in_flight``, ``admitted``, ``routing``, per server ``replicas`` (``name``,
        ``model``, ``tokenizer``, ``weight_version``, ``capacity``, ``in_flight``,
        ``served``, ``failed``, ``down``, and ``refused`` naming both models when it
        served another), the fleet's ``identity`` (``model``, ``tokenizer``,
        ``weight_version``), the ``weight_versions`` served, and ``warnings`` (a server
        that does not say which model it serves, a server refused), each once."""
        return self._client.load()

    def close(self) -> None:
        """Close the HTTP clients, and the tokenizer if this policy loaded it."""
        super().close()
        self._client.close()
        if self._owns_format:
            self.format.codec.tokenizer.close()

    async def aclose(self) -> None:
        """Close the HTTP clients; the async form of ``close``."""
        self.close()


# A server's capacity when it does not report one and none is given (core/fleet.DefaultCapacity,
# vLLM's default max_num_seqs).
DEFAULT_CAPACITY = 256
# Kept for imports written before scheduling by capacity: the old per-client default.
DEFAULT_MAX_CONCURRENCY = 64
ROUTINGS = ("affinity", "round_robin")


def _check_urls(base_url: Any) -> List[str]:
    """``base_url`` as a list: one URL (a str) or several replicas of the same model."""
    if isinstance(base_url, str):
        return [base_url]
    if isinstance(base_url, (list, tuple)) and base_url and all(isinstance(u, str) for u in base_url):
        return list(base_url)
    raise ConfigTypeError(f"base_url must be a URL string or a non-empty list of URL strings, got {base_url!r}")


def _fleet_config(
    base_url: Any, max_concurrency: Optional[int], capacity: Optional[int], routing: str, allow_weight_change: bool
) -> Dict[str, Any]:
    urls = _check_urls(base_url)
    if not isinstance(allow_weight_change, bool):
        raise ConfigTypeError(f"allow_weight_change must be True or False, got {type(allow_weight_change).__name__} {allow_weight_change!r}")
    if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1):
        raise ConfigError(f"capacity must be a positive int (requests one server batches at once) or None, got {capacity!r}")
    if routing not in ROUTINGS:
        raise ConfigError(f"routing is {routing!r}; expected one of {', '.join(ROUTINGS)}")
    return {"base_url": urls[0], "base_urls": urls, "max_concurrency": _check_max_concurrency(max_concurrency),
            "capacity": capacity or 0, "routing": routing, "allow_weight_change": allow_weight_change}


def _check_max_concurrency(value: Optional[int]) -> int:
    """``max_concurrency`` as the Go config takes it (0: the default)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigTypeError(f"max_concurrency must be a positive int or None, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ConfigError(f"max_concurrency is {value}; it must be at least 1 (None: the servers' capacity)")
    return value


class SGLangPolicy(_TokenServerPolicy):
    """Generates token continuations through SGLang, preserving exact token ids and log probabilities.

    Requests go to the server's native ``/generate`` endpoint (or to an sglang-router in
    front of several servers). The policy owns its HTTP clients: close it when done.

    Example:
        <!-- not run: needs the Qwen/Qwen3.5-4B tokenizer in the local Hugging Face cache and an SGLang server -->
        ```python
        from focus.backends import SGLangPolicy

        policy = SGLangPolicy(model="Qwen/Qwen3.5-4B", base_url="http://localhost:30000",
                              profile="token_chunk")
        ```

    Args:
        model: The model directory or Hugging Face id, for the tokenizer and chat template.
        base_url: One server (or router) URL, or a list of replicas of the same model. With
            replicas, each tree's requests go to the replica that served its prefix while it
            has a free slot, new trees to the least-loaded replica, and a request whose
            replica stops answering fails over to another.
        format: The model's format; resolved from ``model`` and ``profile`` when None (that
            tokenizer is closed with the policy).
        profile: The parser profile when ``format`` is None (see ``PolicyFormat.resolve``).
        default_params: The sampling parameters of requests that bring none.
        api_key: Sent as a bearer token.
        headers: Extra HTTP headers for every request.
        timeout: The request deadline in seconds; None for none.
        max_concurrency: The most requests in flight at once, shared by every collection
            that uses the policy and by all its servers together (not split between them:
            every server that is up can take requests, and a cap below the number of
            servers still fails over); further requests wait for a slot, oldest first. None: the
            servers' capacity (each server's ``max_running_requests``, read by
            ``startup_check``, or ``capacity`` for one that does not report it, such as a
            router). Behind a router, size it for all the router's workers.
        capacity: The requests one server batches at once when it does not say; None for
            256.
        routing: ``"affinity"`` (prefix affinity, the default) or ``"round_robin"``.
        allow_weight_change: Accept servers whose weight version changes during the run
            (a trainer updating their weights). False (the default): a server whose
            ``weight_version`` differs from the run's is refused like a server of another
            model; True: each generated edge records the version that produced it.

    Raises:
        ConfigError: A URL list, limit or routing is invalid.
    """

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
        capacity: Optional[int] = None,
        routing: str = "affinity",
        allow_weight_change: bool = False,
    ) -> None:
        fleet = _fleet_config(base_url, max_concurrency, capacity, routing, allow_weight_change)
        config = {
            **fleet,
            "api_key": api_key or "",
            "headers": dict(headers or {}),
            "timeout": timeout or 0,
        }
        super().__init__(
            model=model, format=format, profile=profile, served_model=None, default_params=default_params, config=config
        )
        self.base_urls: List[str] = fleet["base_urls"]
        # Until startup_check reads the servers: the limit, else the configured capacities.
        self.max_concurrency: int = fleet["max_concurrency"] or (capacity or DEFAULT_CAPACITY) * len(self.base_urls)


class VLLMPolicy(_TokenServerPolicy):
    """Generates from token prompts through vLLM, keeping exact token ids and log probabilities.

    Requests go to the server's ``/v1/completions`` with ``return_token_ids``; the endpoint
    must support vLLM's token-completion fields. The policy owns its HTTP clients: close it
    when done.

    Example:
        <!-- not run: needs the Qwen/Qwen3.5-4B tokenizer in the local Hugging Face cache and a vLLM server -->
        ```python
        from focus.backends import SamplingParams, VLLMPolicy

        policy = VLLMPolicy(
            model="Qwen/Qwen3.5-4B",
            base_url="http://localhost:8000/v1",
            api_key="EMPTY",
            profile="token_chunk",
            default_params=SamplingParams(max_tokens=512, logprobs=0),
        )
        ```

    Args:
        model: The model directory or Hugging Face id, for the tokenizer and chat template.
        format: The model's format; resolved from ``model`` and ``profile`` when None (that
            tokenizer is closed with the policy).
        profile: The parser profile when ``format`` is None (see ``PolicyFormat.resolve``).
        served_model: The name the server knows the model by, if not ``model``.
        base_url: One server URL, or a list of replicas (no router needed), routed with
            prefix affinity and failover as for ``SGLangPolicy``.
        api_key: Sent as a bearer token (``"EMPTY"`` for a server without one).
        default_params: The sampling parameters of requests that bring none.
        timeout: The request deadline in seconds, retries included; None for none. Allow
            for queueing when many requests share the server.
        max_concurrency: The most requests in flight at once; None for ``capacity`` per
            server.
        capacity: The requests one server batches at once; None for 256, vLLM's default
            ``max_num_seqs`` (vLLM does not report its own).
        routing: ``"affinity"`` (prefix affinity, the default) or ``"round_robin"``.
        allow_weight_change: Accept servers whose weight version changes during the run
            (a trainer updating their weights). False (the default): a server whose
            ``weight_version`` differs from the run's is refused like a server of another
            model; True: each generated edge records the version that produced it.

    Raises:
        ConfigError: A URL list, limit or routing is invalid.
    """

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
        max_concurrency: Optional[int] = None,
        capacity: Optional[int] = None,
        routing: str = "affinity",
        allow_weight_change: bool = False,
    ) -> None:
        fleet = _fleet_config(base_url, max_concurrency, capacity, routing, allow_weight_change)
        config = {
            **fleet,
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
        self.base_urls: List[str] = fleet["base_urls"]
        self.max_concurrency: int = fleet["max_concurrency"] or (capacity or DEFAULT_CAPACITY) * len(self.base_urls)
