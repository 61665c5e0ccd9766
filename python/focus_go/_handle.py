"""Python objects that own a Go handle."""

from __future__ import annotations

import weakref

from . import _lib
from .errors import InvalidHandleError


def _release_quietly(handle: int) -> None:
    # Runs at garbage collection or interpreter exit, where raising helps nobody.
    try:
        _lib.release(handle)
    except Exception:  # noqa: BLE001
        pass


class GoObject:
    """Owns one Go handle and releases it exactly once: on close(), on leaving a ``with``
    block, or when garbage collected. Using it after close raises InvalidHandleError.
    ``copy.copy`` and ``copy.deepcopy`` return the object itself: a handle is shared,
    never duplicated (a copied handle would be released twice, or not be live at all)."""

    def __init__(self, handle: int) -> None:
        self._handle = handle
        self._finalizer = weakref.finalize(self, _release_quietly, handle)

    @property
    def handle(self) -> int:
        """The Go handle. Raises ``InvalidHandleError`` once closed, naming what was closed."""
        if not self._finalizer.alive:
            raise InvalidHandleError(f"this {self._what()} is closed")
        return self._handle

    def _what(self) -> str:
        """What the handle is, for the closed error: ``_KIND`` or the class name."""
        return getattr(self, "_KIND", "") or type(self).__name__

    def close(self) -> None:
        """Release the native object now.

        Using it afterwards raises ``InvalidHandleError``; closing twice is safe.
        """
        if self._finalizer.detach() is not None:
            _lib.release(self._handle)

    def __copy__(self) -> "GoObject":
        return self

    def __deepcopy__(self, memo: dict) -> "GoObject":
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
