"""The exceptions focus-go raises.

Every error is a :class:`FocusError`. Each subclass also inherits the built-in exception it
resembles, so ``except ValueError`` keeps working for bad configuration. Errors from the Go
core arrive as a numeric status code (``capi/focus.h``) and are mapped here by that code,
never by their message. A class raised only by Python (``ConfigTypeError``, ``LibraryError``)
is never a code's target: each code maps to exactly one class.
"""

from __future__ import annotations

from typing import Optional


class FocusError(Exception):
    """The base class of every focus-go error.

    Each subclass also inherits the built-in exception it resembles, so ``except
    ValueError`` still catches a ``ConfigError``. ``code`` is the numeric status the
    native core reports for the class.
    """

    code: int = 1


class InternalError(FocusError, RuntimeError):
    """A bug in focus-go, such as a recovered Go panic. Please report it with the message."""

    code = 1


class ConfigError(FocusError, ValueError):
    """Invalid configuration or input: bad JSON, out-of-range values, malformed trees.

    Attributes:
        field: The configuration field the error is about, in the spelling of the
            argument that was wrong (``"budget"`` for ``Selective(budget=0)``), or the
            path of the value a JSON input was refused for (``"nodes[3].reward"``), or
            None when the error is not about one field.
    """

    code = 2

    def __init__(self, *args: object, field: Optional[str] = None) -> None:
        super().__init__(*args)
        self.field = field


class ConfigTypeError(ConfigError, TypeError):
    """Configuration or input of the wrong type: a callable, a Collector or a Workspace was
    expected and something else was given. It is a ``ConfigError`` (with the same code)
    and also a ``TypeError``, so either ``except`` clause catches it."""


class InvalidHandleError(FocusError, LookupError):
    """An object backed by native memory (a tree, a policy, a tokenizer...) was used after it was
    closed or released, or never existed."""

    code = 3


class FocusTimeoutError(FocusError, TimeoutError):
    """A deadline passed (a policy, environment or critic call took too long)."""

    code = 4


class OperationCancelled(FocusError):
    """The work was cancelled by its caller."""

    code = 5


class BackendError(FocusError, ConnectionError):
    """An inference or value server failed or answered something malformed."""

    code = 6


class CollectionError(FocusError, RuntimeError):
    """A collection had failed rollouts or critic calls and ``allow_partial`` was not set.

    When ``Collector.collect`` or ``collect_records`` raises it, its ``state`` attribute
    keeps the collected tree and its ``failures`` attribute the ``(node_id, message)``
    pairs.
    """

    code = 7


class NotFoundError(FocusError, FileNotFoundError):
    """A model directory, tokenizer or file that was asked for does not exist."""

    code = 8


class LibraryError(FocusError, ImportError):
    """libfocus.so is missing, cannot be loaded, or was built for another ABI version."""

    code = -1


_BY_CODE: dict[int, type[FocusError]] = {
    cls.code: cls
    for cls in (
        InternalError,
        ConfigError,
        InvalidHandleError,
        FocusTimeoutError,
        OperationCancelled,
        BackendError,
        CollectionError,
        NotFoundError,
    )
}


def error_for(code: int, message: str, field: Optional[str] = None) -> FocusError:
    """The exception for a status code from the Go core; unknown codes are internal errors.
    ``field`` (the configuration field the error is about, if any) becomes a
    ``ConfigError``'s ``field``."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return InternalError(f"unknown status code {code}: {message}")
    if issubclass(cls, ConfigError):
        return cls(message, field=field or None)
    return cls(message)


__all__ = [
    "BackendError",
    "CollectionError",
    "ConfigError",
    "ConfigTypeError",
    "FocusError",
    "FocusTimeoutError",
    "InternalError",
    "InvalidHandleError",
    "LibraryError",
    "NotFoundError",
    "OperationCancelled",
    "error_for",
]
