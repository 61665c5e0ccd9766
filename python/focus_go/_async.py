"""Blocking Go calls from asyncio: run in a worker thread, cancellable from the event loop.

ctypes releases the GIL during the call, so many calls proceed in parallel. Cancelling the
awaiting task cancels the Go context of the call (through a cancel token), so the Go side
stops promptly instead of finishing work nobody waits for.
"""

from __future__ import annotations

import asyncio
import ctypes
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

from . import _lib

T = TypeVar("T")

# Sized for many concurrent requests: each one occupies a thread while Go works.
_EXECUTOR = ThreadPoolExecutor(max_workers=64, thread_name_prefix="focus-go")


async def cancellable(call: Callable[[ctypes.c_uint64], T]) -> T:
    """Run ``call(token)`` in a worker thread; ``token`` is a fresh cancel handle that is
    cancelled if the awaiting task is cancelled, and released afterwards either way."""
    token = _lib.call_handle("focus_cancel_new")
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(_EXECUTOR, call, _lib.c_handle(token))
    except asyncio.CancelledError:
        _lib.call("focus_cancel", _lib.c_handle(token))
        raise
    finally:
        # Releasing cancels too, so a call still running in its thread stops promptly.
        _lib.release(token)


def executor() -> Any:
    return _EXECUTOR
