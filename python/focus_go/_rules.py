"""The library's rules and defaults, decided in Go (``capi/binding``).

Python configuration objects declare their fields; ``check(kind, fields)`` hands them to
the Go rules (the same Validate methods the engine runs when a collection starts) and
returns the normalised object, raising the mapped ``FocusError`` (``ConfigError`` for a
bad value) with a message that names the field. ``defaults()`` is the library's defaults
(Go's constants): what ``focus-go collect`` uses for its flags, and what the Python
signatures' literal defaults are tested against.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any, Dict, List, Mapping, Optional

from . import _lib, _schema
from .errors import ConfigError


def _plain(value: Any) -> Any:
    """``value`` for JSON: non-finite floats as the strings Go reads as such."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def check(kind: str, fields: Mapping[str, Any]) -> Dict[str, Any]:
    """The Go-normalised ``kind`` object of ``fields``; raises ConfigError naming the field."""
    try:
        data = json.dumps({k: _plain(v) for k, v in fields.items()}, allow_nan=False).encode()
    except (TypeError, ValueError):
        # A value JSON cannot carry (an object, a nested non-finite number): Go names it.
        data = json.dumps({k: _plain(v) if isinstance(v, (int, float, str, type(None))) else repr(v)
                           for k, v in fields.items()}).encode()
    out = json.loads(_checked(kind.encode(), data))
    return out if isinstance(out, dict) else {}


@functools.lru_cache(maxsize=256)
def _checked(name: bytes, data: bytes) -> str:
    """The Go rule's answer for one kind and JSON object: a pure function of both, asked
    once (a configuration is checked again for every tree it collects); a refusal raises
    and is not remembered."""
    return _lib.call_string("focus_rules_check", name, len(name), data, len(data))


def defaults() -> Dict[str, Any]:
    """The library's defaults: ``{"selective", "independent", "segments", "agent", "reward",
    "sampling", "records", "critic_free", "scores", "truncations"}`` (a fresh copy each call), read from
    the binding's schema (``_schema``)."""
    return _schema.rules_defaults()


def _messages_json(value: Any, what: str) -> Any:
    """A prompt or reset observation as JSON values: strings and None as they are, a
    sequence of messages as a list of dicts (anything else is passed for Go to name)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [dict(m) if isinstance(m, Mapping) else m for m in value]
    if isinstance(value, Mapping):
        return dict(value)
    raise ConfigError(f"{what} is a {type(value).__name__}, expected str, list of messages or None")


def root_messages(system_prompt: Optional[str], prompt: Any, observation: Any) -> List[Dict[str, Any]]:
    """The root conversation: the system prompt, the problem's prompt and the env's reset
    observation where the Go rule puts it (``core/collect.RootMessages``: text joins the
    last user message after a blank line, messages are appended)."""
    request = {
        "system_prompt": system_prompt or "",
        "prompt": _messages_json(prompt, "problem prompt"),
        "observation": _messages_json(observation, "env.reset() observation"),
    }
    try:
        data = json.dumps(request).encode()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"the problem prompt and the env.reset() observation must be JSON messages: {exc}") from None
    return json.loads(_lib.call_string("focus_rules_root_messages", data, len(data)))
