"""OpenAI API policies: Chat Completions and the Responses API.

Both send the agent's conversation as messages with native tool schemas and return the
model's text and structured tool calls (``GenerateResult.native_tool_calls``, linked to the
tool replies by call id). Token accounting is estimated (see ``_openai_shared``): use them
for agent execution, evaluation and teachers, not for exact actor-training spans.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from .types import SamplingParams
from .format import PolicyFormat
from ._openai_shared import NativePolicy


class OpenAIChatPolicy(NativePolicy):
    """Runs agent interactions through a Chat Completions endpoint
    (``POST {base_url}/chat/completions``) with native message and tool-call handling.

    Requests carry ``messages`` (tool calls with JSON-string arguments, tool replies by
    ``tool_call_id``), ``tools``, ``max_completion_tokens``, and ``logprobs`` /
    ``top_logprobs`` when ``SamplingParams.logprobs`` is set. Finish reasons map to stop
    reasons as: ``stop`` and ``tool_calls`` → ``"stop"`` (the turn ended normally, with or
    without calls), ``length`` → ``"length"``, ``content_filter`` → ``"abort"``. Local token
    accounting is estimated, so its responses do not train the actor. The arguments are
    those of ``NativePolicy``.

    Example:
        ```python
        from focus.backends import OpenAIChatPolicy

        policy = OpenAIChatPolicy(model=model_name)
        ```
    """

    _api = "chat"


class OpenAIResponsesPolicy(NativePolicy):
    """Runs agent interactions through a Responses endpoint (``POST {base_url}/responses``),
    preserving its native response and tool-call structure.

    Messages become input items: ``message`` items, an assistant's tool calls
    ``function_call`` items and tool replies ``function_call_output`` items linked by
    ``call_id``; tools are sent flat. From the output, message text becomes ``text``,
    ``function_call`` items ``native_tool_calls`` and the whole item list ``native_output``
    (reasoning summaries included). Status ``completed`` gives ``"stop"``, ``incomplete``
    for ``max_output_tokens`` gives ``"length"``, any other incomplete or cancelled status
    ``"abort"``, and ``failed`` raises ``BackendError``. Token accounting is estimated, so
    its responses do not train the actor.

    Example:
        ```python
        from focus.backends import OpenAIResponsesPolicy

        policy = OpenAIResponsesPolicy(model=model_name, reasoning_effort="low")
        ```

    Args:
        model: The model name the API knows.
        format: The format; a native format for ``model`` when None.
        default_params: The sampling parameters of requests that bring none.
        api_key: The API key; ``OPENAI_API_KEY`` when None.
        base_url: The API's base URL; ``OPENAI_BASE_URL``, else
            ``https://api.openai.com/v1``, when None.
        system_prompt: Sent as ``instructions`` unless the conversation opens with its own
            system or developer message.
        locked_sampling: Ignore per-call sampling parameters and always use
            ``default_params``.
        reasoning_effort: ``"none"``, ``"minimal"``, ``"low"``, ``"medium"`` or ``"high"``,
            sent as ``reasoning={"effort": ...}``; None sends none.
    """

    _api = "responses"

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
        reasoning_effort: Optional[str] = None,
    ) -> None:
        self.reasoning_effort = reasoning_effort
        super().__init__(
            model=model,
            format=format,
            default_params=default_params,
            api_key=api_key,
            base_url=base_url,
            system_prompt=system_prompt,
            locked_sampling=locked_sampling,
        )

    def _client_config(self, api_key: Optional[str], base_url: Optional[str]) -> Dict[str, Any]:
        config = super()._client_config(api_key, base_url)
        config["reasoning_effort"] = self.reasoning_effort or ""
        return config
