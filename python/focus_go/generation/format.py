"""Tokenizers, chat codecs and policy formats.

``HFTokenizer`` is a model's Hugging Face ``tokenizer.json`` plus the chat template and
special tokens of its ``tokenizer_config.json``, loaded by the Go core (the Rust
``tokenizers`` library and a Go Jinja renderer that reproduces transformers'
``apply_chat_template``). ``ChatCodec`` renders conversations to exact token ids with it;
``PolicyFormat`` binds a codec to the action parser that reads the model's output.
Nothing is downloaded: models resolve from a local directory or the local Hugging Face
cache.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Generic, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from .. import _lib
from .._handle import GoObject
from ..errors import ConfigError
from .parsing import (
    ActionParser,
    DeepSeekV3ToolCallParser,
    HarmonyToolCallParser,
    HermesToolCallParser,
    Llama3JSONToolCallParser,
    NativeToolCallParser,
    PythonicToolCallParser,
    QwenXMLToolCallParser,
    TextActionParser,
    TokenChunkParser,
)
from ..types import GenerateResult, Message, TokenId

A = TypeVar("A")

PROFILES = (
    "qwen_xml",
    "hermes",
    "llama3_json",
    "deepseek_v3",
    "pythonic",
    "harmony",
    "native",
    "text",
    "token_chunk",
)
"""Every profile ``PolicyFormat.resolve(profile=...)`` takes: the tool-call dialects
(``qwen_xml`` Qwen3.5 / Qwen3-Coder, ``hermes`` Qwen2.5 / Qwen3 / Hermes, ``llama3_json``
Llama 3.1-3.3, ``deepseek_v3`` DeepSeek V3 / R1, ``pythonic`` Gemma 3 / Llama 4,
``harmony`` gpt-oss, ``native`` API tool calls), ``text`` and ``token_chunk``."""


class HFTokenizer(GoObject):
    """A model's tokenizer and chat template, loaded from local files.

    Nothing is downloaded. The chat template is ``chat_template.jinja`` beside the config
    when there is one (it wins over the config's ``chat_template``, as in transformers); a
    model without any template still encodes and decodes (``chat_template`` is then ``""``)
    and ``render`` raises ``NotFoundError``. Rendering reproduces transformers'
    ``apply_chat_template``. The tokenizer is safe to share between threads.

    Args:
        model: A local directory holding ``tokenizer.json`` and ``tokenizer_config.json``,
            or a Hugging Face model id present in the local cache (``HF_HUB_CACHE``,
            ``HF_HOME`` or ``~/.cache/huggingface/hub``).

    Raises:
        NotFoundError: The model's tokenizer files do not exist.
    """

    def __init__(self, model: Union[str, "os.PathLike[str]"]) -> None:
        self.name_or_path = os.fspath(model)
        super().__init__(_lib.call_handle("focus_codec_load", *_lib.text_arg(self.name_or_path)))
        info = json.loads(_lib.call_string("focus_codec_info", _lib.c_handle(self.handle)))
        self.vocab_size: int = info["vocab_size"]
        self.source: str = info["source"]
        self.chat_template: str = info["chat_template"]
        self.special_tokens_map: Dict[str, Any] = dict(info["special_tokens"] or {})
        self.all_special_ids: Tuple[int, ...] = tuple(info["special_ids"] or ())

    @classmethod
    def from_pretrained(cls, model: Union[str, "os.PathLike[str]"]) -> "HFTokenizer":
        """Load ``model``; the same as the constructor, named like transformers' loader."""
        return cls(model)

    def _token(self, name: str) -> Optional[str]:
        value = self.special_tokens_map.get(name)
        return value if isinstance(value, str) else None

    @property
    def eos_token(self) -> Optional[str]:
        """The end-of-sequence token, or None."""
        return self._token("eos_token")

    @property
    def bos_token(self) -> Optional[str]:
        """The beginning-of-sequence token, or None."""
        return self._token("bos_token")

    @property
    def pad_token(self) -> Optional[str]:
        """The padding token, or None."""
        return self._token("pad_token")

    @property
    def eos_token_id(self) -> Optional[int]:
        """The end-of-sequence token's id, or None."""
        token = self.eos_token
        if token is None:
            return None
        ids = self.encode(token)
        return ids[0] if len(ids) == 1 else None

    def encode(self, text: str, add_special_tokens: bool = False) -> List[TokenId]:
        """Encode text into token ids; special tokens written in the text become their ids.

        Args:
            text: The text.
            add_special_tokens: Add the tokenizer's special tokens (such as a BOS token).

        Returns:
            The token ids.
        """
        data = text.encode("utf-8")
        return _lib.call_ids(
            "focus_codec_encode", _lib.c_handle(self.handle), data, len(data), int(add_special_tokens)
        )

    def decode(self, tokens: Sequence[int], skip_special_tokens: bool = False) -> str:
        """Decode token ids into text.

        Args:
            tokens: The token ids.
            skip_special_tokens: Leave special tokens out of the text.

        Returns:
            The text.
        """
        ids, count = _lib.ids_arg(tokens)
        return _lib.call_string(
            "focus_codec_decode", _lib.c_handle(self.handle), ids, count, int(skip_special_tokens)
        )

    def render(
        self,
        messages: Sequence[Message],
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
        *,
        add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> Tuple[str, Tuple[TokenId, ...]]:
        """Render a conversation with the chat template and encode the text.

        Messages reach the template as transformers passes them: every key in order,
        null-valued keys dropped, reasoning under ``reasoning_content``, ``thinking`` or
        ``reasoning`` seen under both ``thinking`` and ``reasoning_content``.

        Args:
            messages: The chat messages.
            tools: OpenAI-style function schemas for the template's ``tools``.
            add_generation_prompt: End with the opening of an assistant turn.
            **kwargs: Further template variables, such as ``enable_thinking=False``, and
                the options of ``apply_chat_template`` (honoured or refused as there).

        Returns:
            The rendered text and its token ids.

        Raises:
            ConfigError: The template raises (as transformers' Jinja2 would); a message has
                a role that is neither system, user, assistant nor tool and that the template
                does not name; an option focus-go does not honour is set; or a value has no
                exact template form (NaN, infinity, an integer beyond 64 bits).
            NotFoundError: The model has no chat template.
        """
        request = {
            "messages": list(messages),
            "tools": None if tools is None else list(tools),
            "add_generation_prompt": add_generation_prompt,
            "kwargs": kwargs,
        }
        data = _request_json(request)
        out = json.loads(_lib.call_string("focus_codec_render", _lib.c_handle(self.handle), data, len(data)))
        return out["text"], tuple(out["tokens"] or ())

    def apply_chat_template(
        self,
        conversation: Union[Sequence[Message], Sequence[Sequence[Message]]],
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
        documents: Optional[Sequence[Mapping[str, Any]]] = None,
        chat_template: Optional[str] = None,
        add_generation_prompt: bool = False,
        continue_final_message: Union[bool, str] = False,
        tokenize: bool = True,
        return_dict: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Render a conversation the way transformers' ``apply_chat_template`` does.

        Every option of transformers' method is honoured with its result or refused with a
        ``ConfigError`` naming it: ``documents``, ``chat_template`` (a template source, or
        the name of one of the model's named templates), ``continue_final_message`` and
        ``truncation=True`` with ``max_length`` (cuts the ids; the text stays whole) are
        honoured; ``padding``, ``sanitize_control_tokens``, ``return_tensors``,
        ``return_assistant_tokens_mask`` and ``tokenizer_kwargs`` are refused unless left
        at their defaults. A list of conversations renders each one.

        Args:
            conversation: The chat messages, or a list of conversations.
            tools: OpenAI-style function schemas.
            documents: Documents for templates that render them (retrieval).
            chat_template: A template to use instead of the model's.
            add_generation_prompt: End with the opening of an assistant turn.
            continue_final_message: Leave the final message open for the model to continue
                (True: its content; a string: that field, such as ``"reasoning_content"``).
            tokenize: Return token ids; False returns the text.
            return_dict: With ``tokenize``, return ``{"input_ids": ..., "attention_mask":
                ...}``. Unlike transformers 5 (whose default is True) the default returns
                the list of ids.
            **kwargs: ``truncation``, ``max_length`` and the refused options above, and
                further template variables.

        Returns:
            The token ids, the text with ``tokenize=False``, or the dict with
            ``return_dict=True``; a list of these for a list of conversations.

        Raises:
            ConfigError: An option focus-go does not honour is set, an option's value is
                invalid, or the template raises.
        """
        options = {"documents": documents, "chat_template": chat_template, "continue_final_message": continue_final_message}
        options.update(kwargs)
        if conversation and not isinstance(conversation[0], Mapping):
            return [
                self.apply_chat_template(
                    one, tools, add_generation_prompt=add_generation_prompt, tokenize=tokenize, return_dict=return_dict, **options
                )
                for one in conversation
            ]
        text, tokens = self.render(conversation, tools, add_generation_prompt=add_generation_prompt, **options)
        if not tokenize:
            return text
        if return_dict:
            return {"input_ids": list(tokens), "attention_mask": [1] * len(tokens)}
        return list(tokens)

    def __repr__(self) -> str:
        return f"HFTokenizer({self.name_or_path!r}, vocab_size={self.vocab_size})"


@dataclass(frozen=True)
class ChatCodec:
    """Renders messages as model tokens with a tokenizer's own chat template.

    Args:
        tokenizer: The model's tokenizer and chat template.
        template_kwargs: Variables passed to every rendering, for example
            ``{"enable_thinking": False}`` for Qwen3, and options of
            ``HFTokenizer.apply_chat_template`` (honoured or refused as there).
    """

    tokenizer: HFTokenizer
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def encode(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] = (), *, add_generation_prompt: bool = True
    ) -> Tuple[str, Tuple[TokenId, ...]]:
        """Render a conversation into text and exact token ids.

        Args:
            messages: The chat messages.
            tools: OpenAI-style function schemas.
            add_generation_prompt: End with the opening of an assistant turn.

        Returns:
            The rendered text and its token ids.
        """
        kwargs = dict(self.template_kwargs or {})
        return self.tokenizer.render(messages, list(tools) or None, add_generation_prompt=add_generation_prompt, **kwargs)

    def decode(self, tokens: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        """Decode token ids into text.

        Args:
            tokens: The token ids.
            skip_special_tokens: Leave special tokens out of the text.

        Returns:
            The text.
        """
        return self.tokenizer.decode(tokens, skip_special_tokens=skip_special_tokens)


def _request_json(request: Mapping[str, Any]) -> bytes:
    """``request`` as JSON for the Go core; NaN and infinities (which JSON has no form for)
    are refused with a ``ConfigError`` naming where they are."""
    try:
        return json.dumps(request, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except ValueError:
        # The template variables are named as the caller passed them ("kwargs" is the wire's).
        where = _non_finite(request["messages"], "messages") or _non_finite(request["tools"], "tools") or _non_finite(request["kwargs"], "")
        if where is None:
            raise
        raise ConfigError(
            f"{where[0]} is {where[1]!r}: a chat template renders JSON values, which have no NaN or infinity; "
            "pass a finite number, or the value as a string"
        ) from None


def _non_finite(value: Any, path: str) -> Optional[Tuple[str, float]]:
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    items = value.items() if isinstance(value, Mapping) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = _non_finite(item, f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def model_profile(model: str, chat_template: str = "") -> Tuple[str, str]:
    """The model family and tool-call profile of ``model``, recognised from its chat
    template or, when the template is of no known family, from its name. Where the name
    names another family than the template, the template wins (it renders the prompts the
    model answers) and a warning naming both is logged once. Raises ConfigError, naming the
    profiles to choose from, for a model of no supported family."""
    data = json.dumps({"model": model, "chat_template": chat_template or ""}, ensure_ascii=False).encode("utf-8")
    out = json.loads(_lib.call_string("focus_profile_resolve", data, len(data)))
    named = out["named_family"]
    if named and named != out["family"] and (model, named, out["family"]) not in _DISAGREEMENTS_LOGGED:
        _DISAGREEMENTS_LOGGED.add((model, named, out["family"]))
        _log.warning(
            "model %r is named like a %s model but its chat template is %s's: using the %s tool-call parser "
            "(pass profile= to choose another)",
            model, named, out["family"], out["profile"],
        )
    return out["family"], out["profile"]


_log = logging.getLogger("focus_go")
_DISAGREEMENTS_LOGGED: "set[Tuple[str, str, str]]" = set()


_PARSERS = {
    "qwen_xml": QwenXMLToolCallParser,
    "hermes": HermesToolCallParser,
    "llama3_json": Llama3JSONToolCallParser,
    "deepseek_v3": DeepSeekV3ToolCallParser,
    "pythonic": PythonicToolCallParser,
    "harmony": HarmonyToolCallParser,
    "native": NativeToolCallParser,
    "text": TextActionParser,
    "token_chunk": TokenChunkParser,
}


@dataclass(frozen=True)
class PreparedPrompt:
    """The messages, tool schemas and exact tokens of one generation request.

    The agent's context prepares it; ``policy.prepare(messages)`` renders an ordinary
    conversation.

    Attributes:
        tokens: The prompt's exact token ids.
        format: The format that rendered it.
        exact_continuation: True when the tokens continue a checkpoint's exact prefix
            unchanged (``Segments``) rather than a fresh rendering of the conversation.
    """

    tokens: Tuple[TokenId, ...]
    format: "PolicyFormat[Any]"
    _messages: Tuple[Message, ...]
    _tools: Tuple[Dict[str, Any], ...]
    exact_continuation: bool = False

    @property
    def messages(self) -> List[Message]:
        """A copy of the prompt's chat messages."""
        return [dict(m) for m in self._messages]

    @property
    def tools(self) -> List[Dict[str, Any]]:
        """A copy of the prompt's tool schemas."""
        return [dict(t) for t in self._tools]


@dataclass(frozen=True)
class PolicyFormat(Generic[A]):
    """Binds a codec for encoding model input to a parser for interpreting model output.

    The parser is the agent's default; the agent adapts it to the action kind its
    environment or context needs, and ``Agent(parser=...)`` overrides it. Build one with
    ``PolicyFormat.resolve``, or construct ``PolicyFormat(name, codec, parser)`` for a custom
    format.

    Example:
        <!-- not run: needs the Qwen/Qwen3.5-4B tokenizer in the local Hugging Face cache (nothing is downloaded) -->
        ```python
        from focus.backends import PolicyFormat

        policy_format = PolicyFormat.resolve("Qwen/Qwen3.5-4B", profile="token_chunk")
        ```

    Args:
        name: A name for logs, such as ``"Qwen/Qwen3.5-4B:token_chunk"``.
        codec: Renders prompts into tokens and decodes responses.
        parser: Turns a response into an action.
    """

    name: str
    codec: ChatCodec
    parser: ActionParser[A]

    def prepare(self, messages: Sequence[Message], tools: Sequence[Dict[str, Any]] = ()) -> PreparedPrompt:
        """Render a conversation and tool schemas into a prompt.

        Args:
            messages: The chat messages.
            tools: OpenAI-style function schemas.

        Returns:
            The prompt, with its exact tokens.
        """
        _, tokens = self.codec.encode(messages, tools)
        return PreparedPrompt(
            tokens=tokens,
            format=self,
            _messages=tuple(dict(m) for m in messages),
            _tools=tuple(dict(t) for t in tools),
        )

    def record_reply(self, result: GenerateResult, messages: List[Message]) -> None:
        """Append the assistant message for a response, keeping native tool-call fields.

        Args:
            result: The response.
            messages: The conversation, extended in place.
        """
        message: Message = {"role": "assistant", "content": result.text}
        if result.native_tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in result.native_tool_calls
            ]
        messages.append(message)

    @classmethod
    def resolve(
        cls, model: str, *, tokenizer: Optional[HFTokenizer] = None, profile: Optional[str] = None
    ) -> "PolicyFormat[Any]":
        """The tokenizer, chat template and parser for a model.

        ``profile`` names the parser: ``"qwen_xml"`` (Qwen3.5 and Qwen3-Coder tool calls),
        ``"hermes"`` (Qwen2.5, Qwen3 and Hermes tool calls), ``"llama3_json"`` (Llama 3.1 to
        3.3), ``"deepseek_v3"`` (DeepSeek V3 and R1), ``"pythonic"`` (Gemma 3, Llama 4),
        ``"harmony"`` (gpt-oss), ``"native"`` (API tool calls), ``"text"``, or
        ``"token_chunk"`` (exact segments). Without one, the chat template the tokenizer ships
        selects the tool-call dialect, or, when it is of no known family, the model name
        (see ``model_profile``; a disagreement between the two is logged).

        Args:
            model: A local model directory or a Hugging Face model id in the local cache.
            tokenizer: The model's tokenizer; loaded from ``model`` when None.
            profile: The parser profile; inferred from the model when None.

        Returns:
            The format.

        Raises:
            ConfigError: An unknown profile, or a model of no supported family and no profile
                given (rather than reading its tool calls with another family's parser).
            NotFoundError: The model's tokenizer files cannot be found.
        """
        if profile is not None and profile not in _PARSERS:
            from ..errors import ConfigError

            raise ConfigError(f"unknown profile {profile!r}, expected one of {', '.join(PROFILES)}")
        if tokenizer is None:
            tokenizer = HFTokenizer(model)
        if profile is None:
            _, profile = model_profile(model, tokenizer.chat_template)
        return cls(name=f"{model}:{profile}", codec=ChatCodec(tokenizer), parser=_PARSERS[profile]())
