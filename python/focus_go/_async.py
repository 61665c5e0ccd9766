"""Go calls that wait (on a server or a collection), awaited from asyncio without a thread.

Such a call starts in Go and returns at once (focus.h, "calls that wait"). When it ends, Go
queues it and makes the library's notification pipe readable; every event loop that started
a call watches that pipe (``loop.add_reader``) and, when it wakes, takes every finished call
from the queue and completes its future (on its own loop, or through
``call_soon_threadsafe`` on another). So however many calls are in flight, no thread waits
for them and no wake-up crosses threads. Cancelling the awaiting task cancels the call's Go
context.
"""

from __future__ import annotations

import asyncio
import ctypes
import itertools
import os
import threading
import weakref
from typing import Any, Callable, Dict, List, Sequence, Tuple, TypeVar

from . import _lib

T = TypeVar("T")

_BATCH = 256

# ticket -> (loop, future, convert, err slot, output slots): the slots stay referenced until
# Go has written them. Single dict operations are atomic under the GIL, so loops in several
# threads share the dict without a lock.
_pending: Dict[int, Tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any], ctypes.c_void_p, Sequence[Any]]] = {}
_tickets = itertools.count(1)
_watching: "weakref.WeakSet[asyncio.AbstractEventLoop]" = weakref.WeakSet()
_fd_lock = threading.Lock()
_fd = -1


async def call(name: str, handle: int, *args: Any, slots: Sequence[Any], convert: Callable[[], T]) -> T:
    """Run ``name(handle, ticket, *args, *slots, err)`` and return ``convert()``, which reads
    (and frees) the output ``slots`` once the call has succeeded."""
    loop = asyncio.get_running_loop()
    if _last_loop() is not loop:  # a weak reference: no WeakSet lookup (a new weakref) per call
        _watched(loop)
    future: asyncio.Future[T] = loop.create_future()
    err = _lib.Bytes()
    ticket = next(_tickets)
    # Registered before the start, so a call that ends at once is found.
    _pending[ticket] = (loop, future, convert, err, slots)
    fn = getattr(_lib.held(), name)  # with a ticket the call only starts: keep the GIL
    code = fn(_lib.c_handle(handle), ticket, *args, *[ctypes.byref(s) for s in slots], ctypes.byref(err))
    if code:
        del _pending[ticket]
        raise _lib.take_error(code, err, name)
    try:
        return await future
    except asyncio.CancelledError:
        _lib.call("focus_async_cancel", ctypes.c_uint64(ticket))
        raise
    finally:
        # A failed call's exception holds its traceback, hence this frame: without the
        # future (which holds the exception) that is no cycle, and what the callers' frames
        # keep is freed at once instead of by the garbage collector.
        del future


def _no_loop() -> None:
    return None


# The loop that made the last call (in any thread): most calls come from the same loop.
_last_loop: Callable[[], Any] = _no_loop


def _watched(loop: asyncio.AbstractEventLoop) -> None:
    """Make sure loop watches the pipe, and remember it as the last loop seen."""
    global _last_loop
    if loop not in _watching:
        _watch(loop)
    _last_loop = weakref.ref(loop)


def _watch(loop: asyncio.AbstractEventLoop) -> None:
    """Have loop drain the completion queue whenever the notification pipe is readable."""
    global _fd
    with _fd_lock:
        if _fd < 0:
            fd = ctypes.c_int()
            _lib.call("focus_async_fd", ctypes.byref(fd))
            _fd = fd.value
    tickets = (ctypes.c_uint64 * _BATCH)()
    codes = (ctypes.c_int32 * _BATCH)()
    loop.add_reader(_fd, _drain, loop, tickets, codes)
    _watching.add(loop)


def _drain(loop: asyncio.AbstractEventLoop, tickets: Any, codes: Any) -> None:
    """Take every finished call (this loop's buffers, this loop's thread) and complete it."""
    try:
        os.read(_fd, 4096)  # before draining: a call posted from now on makes it readable again
    except BlockingIOError:
        pass  # another loop read it first
    n = ctypes.c_size_t(_BATCH)
    while n.value == _BATCH:
        _lib.call("focus_async_wait", 0, _BATCH, tickets, codes, ctypes.byref(n))
        elsewhere: Dict[asyncio.AbstractEventLoop, List[Tuple[Any, ...]]] = {}
        for i in range(n.value):
            entry = _pending.pop(tickets[i], None)
            if entry is None:
                continue
            owner, future, convert, err, _slots = entry
            value, exc = _finish(codes[i], convert, err)
            if owner is loop:
                _settle(future, value, exc)
            else:
                elsewhere.setdefault(owner, []).append((future, value, exc))
        for owner, items in elsewhere.items():
            try:
                owner.call_soon_threadsafe(_settle_all, items)
            except RuntimeError:
                pass  # that loop is closed: nobody awaits these calls any more


def _finish(code: int, convert: Callable[[], Any], err: "_lib.Bytes") -> Tuple[Any, BaseException | None]:
    if code:  # a failed call writes no outputs, only its message
        return None, _lib.take_error(code, err, "call")
    try:
        return convert(), None
    except Exception as exc:
        return None, exc


def _settle(future: "asyncio.Future[Any]", value: Any, exc: BaseException | None) -> None:
    if future.cancelled():
        return
    if exc is None:
        future.set_result(value)
    else:
        future.set_exception(exc)


def _settle_all(items: List[Tuple[Any, ...]]) -> None:
    for item in items:
        _settle(*item)
