"""What the native API policies share: message validation, client lifecycle, and the
estimated token accounting of models that have no local tokenizer.

``NativePolicy`` is the base of ``OpenAIChatPolicy`` and ``OpenAIResponsesPolicy``; instantiate
those to choose a transport. Requests go out from Go (``backends/openai`` over the shared
fasthttp transport): bounded retries of 429 and 5xx with backoff, the API key sent only as a
bearer token and never put in an error message.

Native policies send messages and receive text plus structured tool calls; the API returns
no token ids. Their format's codec (``NativeCodec``) therefore *estimates* tokens: one id per
four bytes of UTF-8 text, each id packing those bytes, so counts approximate the model's and
``decode()`` still shows the text. Such ids are not any model's vocabulary: every result
has ``exact_generation=False``, ``is_exact()`` is False, and ``trainable`` is False.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import _async, _lib
from .._handle import GoObject
from ..errors import ConfigError
from ..types import GenerateResult, Message, NativeToolCall, TokenId
from .types import SamplingParams
from .format import PolicyFormat, PreparedPrompt
from .parsing import NativeToolCallParser
from .policy import Policy

ENV_API_KEY = "OPENAI_API_KEY"
ENV_BASE_URL = "OPENAI_BASE_URL"


@dataclass(frozen=True)
class NativeCodec:
    """A codec for API models, which have no local tokenizer: estimated tokens.

    ``encode`` renders the conversation as plain ``role: content`` lines (tool calls and
    schemas as JSON) and estimates its tokens at one per four UTF-8 bytes; ``decode`` returns
    the text behind estimated ids. The estimate serves token budgets and accounting only:
    the server applies its own chat template and counts its own tokens."""

    tokenizer: None = None
    """No local tokenizer (collectors look for one here)."""

    def encode(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] = (), *, add_generation_prompt: bool = True
    ) -> Tuple[str, Tuple[TokenId, ...]]:
        request = {"messages": list(messages), "tools": [dict(t) for t in tools]}
        return _estimate(request)

    def estimate(self, text: str) -> Tuple[TokenId, ...]:
        """Estimated token ids of ``text``."""
        return _estimate({"text": text})[1]

    def decode(self, tokens: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        ids, count = _lib.ids_arg(tokens)
        return _lib.call_string("focus_native_decode", ids, count)


def _estimate(request: Mapping[str, Any]) -> Tuple[str, Tuple[TokenId, ...]]:
    data = json.dumps(request, ensure_ascii=False).encode("utf-8")
    out = json.loads(_lib.call_string("focus_native_estimate", data, len(data)))
    return out["text"], tuple(out["tokens"] or ())


def native_format(model: str) -> PolicyFormat[Any]:
    """The "native" PolicyFormat of an API model: estimated-token codec and the native
    tool-call parser (``PolicyFormat.resolve`` needs a local tokenizer, which API models
    lack)."""
    return PolicyFormat(name=f"{model}:native", codec=NativeCodec(), parser=NativeToolCallParser())  # type: ignore[arg-type]


def _params_dict(params: SamplingParams) -> Dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(params).items() if v is not None}


class _NativeClient(GoObject):
    """The Go client behind a native policy."""

    _KIND = "policy"

    def __init__(self, config: Mapping[str, Any]) -> None:
        data = json.dumps(config).encode()
        super().__init__(_lib.call_handle("focus_openai_open", data, len(data)))

    def generate(self, request: Mapping[str, Any]) -> Dict[str, Any]:
        data = json.dumps(request, ensure_ascii=False).encode("utf-8")
        return json.loads(_lib.call_string("focus_openai_generate", _lib.c_handle(self.handle), 0, data, len(data)))

    async def agenerate(self, request: Mapping[str, Any]) -> Dict[str, Any]:
        data = json.dumps(request, ensure_ascii=False).encode("utf-8")
        out = _lib.Bytes()
        return await _async.call(
            "focus_openai_generate", self.handle, data, len(data), slots=(out,), convert=lambda: json.loads(_lib.take_string(out))
        )


class NativePolicy(Policy[Any]):
    """The shared base of the OpenAI policies: message validation and client lifecycle.

    Instantiate ``OpenAIChatPolicy`` or ``OpenAIResponsesPolicy`` to choose a transport.
    These policies send messages and receive text plus structured tool calls; the API
    returns no token ids, so token counts are estimated (one per four bytes of text), every
    result has ``exact_generation=False``, and ``trainable`` is False. Use them for agent
    execution, evaluation and teachers, not for actor training.

    A rejected key (HTTP 401 or 403) raises ``ConfigError`` saying so; 429 and 5xx answers
    are retried with backoff, then raise ``BackendError``. A sampling field set to None is
    left out of the request so the API's own default applies; fields the API lacks
    (``top_k``, ``repetition_penalty``, ``prompt_logprobs``; ``stop`` and ``seed`` on the
    Responses API) raise ``ConfigError`` when set. Results carry the visible text,
    ``native_tool_calls`` (empty when the model called none), ``native_output`` (the raw
    reply), the server's log probabilities when it returned them, and estimated ``tokens``.

    Args:
        model: The model name the API knows.
        format: The format; a native format for ``model`` when None.
        default_params: The sampling parameters of requests that bring none.
        api_key: The API key; the ``OPENAI_API_KEY`` environment variable when None. The
            default URL needs one; any other base URL, such as a local vLLM or SGLang
            OpenAI-compatible server, may be keyless.
        base_url: The API's base URL; ``OPENAI_BASE_URL``, else
            ``https://api.openai.com/v1``, when None.
        system_prompt: Sent ahead of the conversation (as a system message, or the
            Responses ``instructions``) unless it opens with its own system or developer
            message.
        locked_sampling: Ignore per-call sampling parameters and always use
            ``default_params`` (or the ``SamplingParams`` defaults), for deployments whose
            sampling must not vary between calls.

    Raises:
        ConfigError: The default OpenAI URL is used without a key.
    """

    _api: Optional[str] = None

    def __init__(
        self,
        *,
        model: str,
        format: Optional[PolicyFormat[Any]] = None,
        default_params: Optional[SamplingParams] = None,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        system_prompt: Optional[str] = None,
        locked_sampling: bool = False,
    ) -> None:
        super().__init__(
            format=format if format is not None else native_format(model),
            model=model,
            default_params=default_params,
            exact=False,
            native=True,
        )
        self.system_prompt = system_prompt
        self.locked_sampling = locked_sampling
        self._client: Optional[_NativeClient] = None
        if self._api is not None:
            self._client = _NativeClient(self._client_config(api_key, base_url))

    def _client_config(self, api_key: Optional[str], base_url: Optional[str]) -> Dict[str, Any]:
        return {
            "api": self._api,
            "model": self.served_model,
            "base_url": base_url or "",
            "api_key": api_key or "",
            "system_prompt": self.system_prompt or "",
            # The Go runtime's copy of the environment misses changes made after it loaded.
            "env": {name: os.environ.get(name, "") for name in (ENV_API_KEY, ENV_BASE_URL)},
        }

    def effective_params(self, sampling_params: Optional[SamplingParams]) -> SamplingParams:
        """The call's settings, unless ``locked_sampling`` pins them to the defaults."""
        if self.locked_sampling:
            return self.default_params or SamplingParams()
        return super().effective_params(sampling_params)

    def validate_context(self, messages: Sequence[Message]) -> None:
        """Check a conversation without a model request: every message a dict with a known
        role and string or absent content; every assistant tool call with an id and a name;
        each call answered by exactly one tool message that directly follows its assistant
        message (only tool messages in between), before any other turn; no tool reply
        without a matching earlier call. Raises ConfigError naming the message index. Calls
        still unanswered at the end are allowed (the tools have not replied yet); a request
        refuses them."""
        super().validate_context(messages)
        data = json.dumps(list(messages), ensure_ascii=False).encode("utf-8")
        _lib.call("focus_openai_validate", data, len(data))

    async def agenerate(self, prompt: PreparedPrompt, sampling_params: Optional[SamplingParams] = None) -> GenerateResult:
        """Send ``prompt.messages`` and ``prompt.tools`` to the API and return its reply."""
        client, request = self._request(prompt, sampling_params)
        out = await client.agenerate(request)
        return _native_result(out, prompt.tokens)

    def generate(self, prompt: PreparedPrompt, sampling_params: Optional[SamplingParams] = None) -> GenerateResult:
        """Send ``prompt.messages`` and ``prompt.tools`` to the API and return its reply, blocking."""
        client, request = self._request(prompt, sampling_params)
        return _native_result(client.generate(request), prompt.tokens)

    def _request(self, prompt: PreparedPrompt, sampling_params: Optional[SamplingParams]) -> Tuple["_NativeClient", Dict[str, Any]]:
        """The live client and the request for ``prompt``; the structural message check
        runs here, the tool-call ordering check in Go before anything is sent."""
        client = self._live_client()
        messages = prompt.messages
        Policy.validate_context(self, messages)
        params = self.effective_params(sampling_params)
        return client, {"messages": messages, "tools": prompt.tools, "params": _params_dict(params)}

    async def agenerate_tokens(
        self, tokens: Sequence[TokenId], sampling_params: Optional[SamplingParams] = None
    ) -> GenerateResult:
        """Not available: an API model generates from messages (``agenerate``), and its
        token ids are estimates that cannot be continued exactly."""
        raise ConfigError(
            f"{type(self).__name__} generates from messages: call agenerate(prompt); continuing exact "
            "token ids needs a token-level backend (SGLangPolicy, VLLMPolicy, TinkerPolicy, SlimePolicy)"
        )

    def _live_client(self) -> _NativeClient:
        if self._closed:
            raise ConfigError(f"{type(self).__name__} is closed")
        if self._client is None:
            raise ConfigError("NativePolicy has no transport: instantiate OpenAIChatPolicy or OpenAIResponsesPolicy")
        return self._client

    def close(self) -> None:
        """Close the HTTP client; later requests raise ConfigError. Safe to call twice."""
        super().close()
        if self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        """Close the HTTP client; the async form of ``close``."""
        self.close()

    def __enter__(self) -> "NativePolicy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _native_result(out: Mapping[str, Any], prefix: Sequence[TokenId]) -> GenerateResult:
    calls = tuple(NativeToolCall(c["name"], c["arguments"], c.get("call_id", "")) for c in out.get("tool_calls") or ())
    tops = out.get("top_logprobs")
    return GenerateResult(
        tokens=tuple(out.get("tokens") or ()),
        prefix_tokens=tuple(prefix),
        text=out.get("text", ""),
        stop_reason=out.get("stop_reason", "stop"),
        logprobs=list(out.get("logprobs") or ()),
        top_logprobs=None if tops is None else [dict(m or {}) for m in tops],
        entropy=out.get("entropy", 0.0),
        exact_generation=False,
        native_tool_calls=calls,
        native_output=tuple(out.get("native_output") or ()),
    )


__all__: List[str] = ["NativeCodec", "NativePolicy", "native_format"]
