"""Critics: value predictions for checkpoints.

A critic reads a checkpoint's context (the decoded text of its exact token prefix) and
predicts the return from there. Each checkpoint is scored once, when it first becomes a
branching candidate; the prediction is the prior of its refined value and is recorded on
the node. ``Critic.constant`` and ``Critic.http`` run natively in Go; ``Critic.from_function``
calls your Python function (sync or async, batched) through the remote bridge.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Union

from . import _rules
from .errors import ConfigError

ScoreFn = Callable[[List[str]], Union[Sequence[float], Awaitable[Sequence[float]]]]


class Critic:
    """A value model for checkpoints; build one with ``constant``, ``from_function`` or
    ``http``."""

    def __init__(self, kind: str, *, value: Optional[float] = None, fn: Optional[ScoreFn] = None,
                 url: Optional[str] = None, timeout: Optional[float] = None) -> None:
        self.kind = kind
        self.value = value
        self.fn = fn
        self.url = url
        self.timeout = timeout

    @classmethod
    def constant(cls, value: float) -> "Critic":
        """Predict ``value`` for every checkpoint (an uninformed prior, e.g. 0.5)."""
        _rules.check("Critic.constant", {"value": value})  # the Go rule: a finite number
        return cls("constant", value=float(value))

    @classmethod
    def from_function(cls, fn: ScoreFn) -> "Critic":
        """Score with ``fn(contexts: list[str]) -> list[float]`` (sync or async); it must
        return one finite value per context."""
        if not callable(fn):
            raise ConfigError(f"Critic.from_function: {fn!r} is not callable")
        return cls("function", fn=fn)

    @classmethod
    def http(cls, url: str, *, timeout: Optional[float] = None) -> "Critic":
        """A value server: ``POST url`` with ``{"contexts": [...]}``, answered by
        ``{"values": [...]}`` (one finite value per context)."""
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"Critic.http: url must start with http:// or https://, got {url!r}")
        return cls("http", url=url, timeout=timeout)

    def _part(self, register: Callable[[Any], int]) -> Dict[str, Any]:
        """How the Go engine reaches this critic."""
        if self.kind == "constant":
            return {"kind": "constant", "value": self.value}
        if self.kind == "http":
            return {"kind": "http", "url": self.url, "timeout": self.timeout or 0}
        return {"kind": "remote", "object": register(self)}

    def __repr__(self) -> str:
        detail = {"constant": self.value, "http": self.url, "function": getattr(self.fn, "__name__", self.fn)}[self.kind]
        return f"Critic.{'from_function' if self.kind == 'function' else self.kind}({detail!r})"
