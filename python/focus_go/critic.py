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
    """A value model for checkpoints: it predicts the return from a checkpoint's context.

    A critic reads a checkpoint's context (the decoded text of its exact token prefix) and
    predicts the return from there. Each checkpoint is scored once, when it first becomes
    a candidate for branching; the prediction is the prior of its refined value and is
    recorded on the node. Build one with ``Critic.constant``, ``Critic.from_function`` or
    ``Critic.http`` rather than with the constructor.

    Example:
        ```python
        from focus import Critic

        prior = Critic.constant(0.5)
        ```
    """

    def __init__(self, kind: str, *, value: Optional[float] = None, fn: Optional[ScoreFn] = None,
                 url: Optional[str] = None, timeout: Optional[float] = None) -> None:
        self.kind = kind
        self.value = value
        self.fn = fn
        self.url = url
        self.timeout = timeout

    @classmethod
    def constant(cls, value: float) -> "Critic":
        """A critic that predicts ``value`` for every checkpoint: an uninformed prior.

        Args:
            value: The prediction, a finite number (0.5 for rewards in [0, 1] is usual).

        Returns:
            The critic.

        Raises:
            ConfigError: ``value`` is not a finite number.
        """
        _rules.check("Critic.constant", {"value": value})  # the Go rule: a finite number
        return cls("constant", value=float(value))

    @classmethod
    def from_function(cls, fn: ScoreFn) -> "Critic":
        """A critic that scores checkpoints with your function, called in batches.

        Args:
            fn: ``fn(contexts: list[str]) -> list[float]``, synchronous or ``async``; it must
                return one finite value per context, in order. A call that raises or
                returns a non-finite value leaves those checkpoints unscored and is
                listed as a failure of the collection.

        Returns:
            The critic.

        Raises:
            ConfigError: ``fn`` is not callable.
        """
        if not callable(fn):
            raise ConfigError(f"Critic.from_function: {fn!r} is not callable")
        return cls("function", fn=fn)

    @classmethod
    def http(cls, url: str, *, timeout: Optional[float] = None) -> "Critic":
        """A critic served over HTTP by a value server.

        Each request is ``POST url`` with the JSON body ``{"contexts": [...]}``; the server
        answers ``{"values": [...]}``, one finite value per context.

        Args:
            url: The endpoint, starting with ``http://`` or ``https://``.
            timeout: The request deadline in seconds; None for no deadline of its own.

        Returns:
            The critic.

        Raises:
            ConfigError: ``url`` is not an http(s) URL.
        """
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
