"""Go calls that wait (on a server or a collection), awaited from asyncio without a thread
per call.

Such a call starts in Go and returns at once (focus.h, "calls that wait"). One process-wide
thread waits on the library's completion queue and hands each finished call to
the event loop awaiting it: one wake-up per loop for every batch of finished calls, however
many are in flight. Cancelling the awaiting task cancels the call's Go context.
"""

from __future__ import annotations

import asyncio
import ctypes
import itertools
import threading
import time
from typing import Any, Callable, Dict, List, Sequence, Tuple, TypeVar

from . import _lib
from .errors import error_for

T = TypeVar("T")

_BATCH = 256

# ticket -> (loop, future, convert, err slot, output slots): the slots stay referenced until
# Go has written them. Single dict operations are atomic under the GIL, so the starting
# thread and the waiter share the dict without a lock.
_pending: Dict[int, Tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any], ctypes.c_void_p, Sequence[Any]]] = {}
_orphans: List[Any] = []
_tickets = itertools.count(1)
_waiter_lock = threading.Lock()
_waiter: threading.Thread | None = None


async def call(name: str, handle: int, *args: Any, slots: Sequence[Any], convert: Callable[[], T]) -> T:
    """Run ``name(handle, ticket, *args, *slots, err)`` and return ``convert()``, which reads
    (and frees) the output ``slots`` once the call has succeeded."""
    _ensure_waiter()
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    err = ctypes.c_void_p()
    ticket = next(_tickets)
    # Registered before the start, so the waiter always finds a call that ends at once.
    _pending[ticket] = (loop, future, convert, err, slots)
    fn = getattr(_lib.held(), name)  # with a ticket the call only starts: keep the GIL
    code = fn(_lib.c_handle(handle), ticket, *args, *[ctypes.byref(s) for s in slots], ctypes.byref(err))
    if code:
        del _pending[ticket]
        raise error_for(code, _lib.take_string(err) or f"{name} failed with status {code}")
    try:
        return await future
    except asyncio.CancelledError:
        _lib.call("focus_async_cancel", ctypes.c_uint64(ticket))
        raise


def _ensure_waiter() -> None:
    global _waiter
    if _waiter is not None:
        return
    with _waiter_lock:
        if _waiter is None:
            _waiter = threading.Thread(target=_wait, name="focus-go-completions", daemon=True)
            _waiter.start()


def _wait() -> None:
    """The waiter thread: take finished calls, read their outputs here, and hand the values
    (or errors) to their loops."""
    tickets = (ctypes.c_uint64 * _BATCH)()
    codes = (ctypes.c_int32 * _BATCH)()
    n = ctypes.c_size_t()
    while True:
        ready: Dict[asyncio.AbstractEventLoop, List[Tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
        try:
            _lib.call("focus_async_wait", -1, _BATCH, tickets, codes, ctypes.byref(n))
        except Exception as exc:  # never expected; fail every waiting call rather than hang it
            for ticket in list(_pending):
                entry = _pending.pop(ticket, None)
                if entry is not None:
                    _orphans.append(entry)  # Go may still write its slots: keep them alive
                    ready.setdefault(entry[0], []).append((entry[1], None, exc))
            n.value = 0
            time.sleep(0.1)
        for i in range(n.value):
            entry = _pending.pop(tickets[i], None)
            if entry is None:
                continue
            loop, future, convert, err, _slots = entry
            value, exc = _finish(codes[i], convert, err)
            ready.setdefault(loop, []).append((future, value, exc))
        for loop, items in ready.items():
            try:
                loop.call_soon_threadsafe(_deliver, items)
            except RuntimeError:
                pass  # the loop is closed: nobody awaits these calls any more


def _finish(code: int, convert: Callable[[], Any], err: ctypes.c_void_p) -> Tuple[Any, BaseException | None]:
    if code:  # a failed call writes no outputs, only its message
        return None, error_for(code, _lib.take_string(err) or f"call failed with status {code}")
    try:
        return convert(), None
    except Exception as exc:
        return None, exc


def _deliver(items: List[Tuple["asyncio.Future[Any]", Any, BaseException | None]]) -> None:
    for future, value, exc in items:
        if future.cancelled():
            continue
        if exc is None:
            future.set_result(value)
        else:
            future.set_exception(exc)
