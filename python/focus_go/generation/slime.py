"""Slime as a generation transport: ``SlimePolicy`` sends SGLang ``/generate`` requests
through Slime's own async HTTP helper.

Inside a Slime rollout, ``post`` is ``slime.utils.http_utils.post`` (``async def post(url,
payload, max_retries=60)``, newer releases also take ``headers=``) and ``url`` is the router's
``http://{args.sglang_router_ip}:{args.sglang_router_port}/generate``. Slime's client owns
connection limits, retries and admission; focus-go builds the body and reads the reply, both
in Go exactly as ``SGLangPolicy`` does: ``input_ids``, every sampling field explicit
(``max_new_tokens``, ``temperature``, ``top_p``, ``top_k``, ``stop``, ``stop_token_ids``,
``no_stop_trim=True``, ...), ``return_logprob=True``; token ids from
``meta_info.output_token_logprobs``, the finish reason from ``meta_info.finish_reason``, and
the response checked (at most ``max_tokens`` tokens, one finite logprob per token).
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, Dict, Mapping, Optional, Sequence

from .. import _lib
from ..errors import BackendError, ConfigError
from ..types import GenerateResult, TokenId
from .types import SamplingParams
from .format import PolicyFormat
from .policy import Policy
from .servers import call_result, params_json

PostFn = Callable[..., Awaitable[Mapping[str, Any]]]
"""The asynchronous HTTP callback SlimePolicy sends generation requests with:
``await post(url, payload)`` (plus ``headers=`` when the policy has headers) returning the
decoded JSON reply, like ``slime.utils.http_utils.post``."""


class SlimePolicy(Policy[Any]):
    """Generates tokens through Slime's SGLang router, using the training framework's own HTTP transport.

    Requests are SGLang ``/generate`` bodies built and read exactly as ``SGLangPolicy``
    does; Slime's client owns connection limits, retries and admission. Exact token ids and
    behaviour log probabilities are kept.

    Example:
        <!-- not run: needs Slime (slime.utils.http_utils) and its router -->
        ```python
        from slime.utils.http_utils import post
        from focus.backends import SlimePolicy

        policy = SlimePolicy(post, url, model=model_name, profile="token_chunk")
        ```

    Args:
        post: Slime's async HTTP helper, ``slime.utils.http_utils.post`` (see ``PostFn``).
        url: The router's generation endpoint,
            ``http://{args.sglang_router_ip}:{args.sglang_router_port}/generate``.
        model: The model directory or Hugging Face id, for the tokenizer and chat template.
        format: The model's format; resolved from ``model`` and ``profile`` when None (that
            tokenizer is closed with the policy).
        profile: The parser profile when ``format`` is None.
        default_params: The sampling parameters of requests that bring none.
        headers: HTTP headers, passed as ``post(url, payload, headers=headers)`` (for Slime
            releases whose ``post`` takes them).

    Raises:
        ConfigError: ``post`` is not callable or ``url`` is not an http(s) URL.
    """

    def __init__(
        self,
        post: PostFn,
        url: str,
        *,
        model: str,
        format: Optional[PolicyFormat[Any]] = None,
        profile: Optional[str] = None,
        default_params: Optional[SamplingParams] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> None:
        if not callable(post):
            raise ConfigError(f"post is a {type(post).__name__}, expected Slime's async post(url, payload) function")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"url {url!r} is not an http(s) URL of the router's /generate endpoint")
        self._owns_format = format is None
        if format is None:
            format = PolicyFormat.resolve(model, profile=profile)
        super().__init__(format=format, model=model, default_params=default_params)
        self.post = post
        self.url = url
        self.headers: Dict[str, str] = dict(headers or {})

    async def agenerate_tokens(
        self, prefix_tokens: Sequence[TokenId], sampling_params: Optional[SamplingParams] = None
    ) -> GenerateResult:
        """Continue ``prefix_tokens`` through ``post`` and return the exact tokens and log probabilities.

        Args:
            prefix_tokens: The prefix token ids.
            sampling_params: This request's sampling parameters; None for the policy's
                defaults.

        Returns:
            The response.

        Raises:
            BackendError: The reply breaks SGLang's contract. Errors from ``post`` itself
                propagate unchanged (Slime has already retried).
        """
        if self._closed:
            raise ConfigError("SlimePolicy is closed")
        prefix = tuple(prefix_tokens)
        ids, count = _lib.ids_arg(prefix)
        params = params_json(self.effective_params(sampling_params))
        payload = json.loads(_lib.call_string("focus_sglang_request", ids, count, params, len(params)))
        if self.headers:
            output = await self.post(self.url, payload, headers=self.headers)
        else:
            output = await self.post(self.url, payload)
        if isinstance(output, (bytes, bytearray)):
            body = bytes(output)
        elif isinstance(output, str):
            body = output.encode("utf-8")  # Slime's post hands back non-JSON text as is
        elif isinstance(output, (Mapping, list)):
            body = json.dumps(output if isinstance(output, list) else dict(output), ensure_ascii=False).encode("utf-8")
        else:
            raise BackendError(f"slime: post returned a {type(output).__name__}, expected the decoded JSON reply")
        ids, count = _lib.ids_arg(prefix)
        return call_result("focus_sglang_parse", prefix, body, len(body), ids, count, params, len(params))

    def close(self) -> None:
        """Release the tokenizer this policy loaded; ``post`` belongs to Slime."""
        if self._closed:
            return
        super().close()
        if self._owns_format:
            self.format.codec.tokenizer.close()
