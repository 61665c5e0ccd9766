"""Slime's abort, seen by the trees running when it happens.

Slime aborts a rollout by setting ``aborted`` on its ``GenerateState`` singleton (and
sending SGLang ``/abort_request``). One poller per event loop (``_AbortWatch``) reads that
flag, without importing Slime, and ``_unless_aborted`` cancels a running collection, and so
its Go requests in flight, as soon as it is set. ``_aborted`` tells a collection that
ended on an aborted generation.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import weakref
from typing import Any, Optional, Sequence, Tuple


# Slime's rollout module, where GenerateState (a SingletonMeta singleton) holds `aborted`.
_SLIME_ROLLOUT = "slime.rollout.sglang_rollout"


# How often a running tree checks Slime's abort flag (one poller per event loop).
_ABORT_POLL_SECONDS = 0.005


def _slime_aborted() -> bool:
    """Whether Slime's GenerateState says the rollout was aborted. Reads only what is
    already there: Slime is never imported, nor its state created."""
    module = sys.modules.get(_SLIME_ROLLOUT)
    cls = getattr(module, "GenerateState", None) if module is not None else None
    if cls is None:
        return False
    state = (getattr(cls, "_instances", None) or {}).get(cls)
    return bool(getattr(state, "aborted", False))


class _AbortWatch:
    """One event loop's poller of Slime's abort flag: the trees running on the loop
    register a future, which it resolves when the flag is set; it stops when none is
    left."""

    def __init__(self) -> None:
        self.waiters: "set[asyncio.Future[None]]" = set()
        self.task: Optional["asyncio.Future[None]"] = None

    def register(self) -> "asyncio.Future[None]":
        fut: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self.waiters.add(fut)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._poll())
        return fut

    def unregister(self, fut: "asyncio.Future[None]") -> None:
        self.waiters.discard(fut)
        if not fut.done():
            fut.cancel()

    async def _poll(self) -> None:
        while self.waiters:
            if _slime_aborted():
                for fut in list(self.waiters):
                    if not fut.done():
                        fut.set_result(None)
                self.waiters.clear()
                return
            await asyncio.sleep(_ABORT_POLL_SECONDS)


_WATCHES: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _AbortWatch]" = weakref.WeakKeyDictionary()


_WATCHES_LOCK = threading.Lock()


def _abort_watch() -> _AbortWatch:
    loop = asyncio.get_running_loop()
    with _WATCHES_LOCK:
        watch = _WATCHES.get(loop)
        if watch is None:
            watch = _WATCHES[loop] = _AbortWatch()
    return watch


async def _unless_aborted(coro: Any) -> Tuple[bool, Any]:
    """Run ``coro`` (a collection) until it ends or Slime aborts the rollout; on an abort,
    cancel it, which cancels the Go collection and its requests in flight at once.
    Returns ``(aborted, result)``. A collection that ended before the abort was seen
    keeps its result."""
    task = asyncio.ensure_future(coro)
    if sys.modules.get(_SLIME_ROLLOUT) is None:
        return False, await task  # not under Slime: no flag to watch
    watch = _abort_watch()
    flag = watch.register()
    try:
        await asyncio.wait({task, flag}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    finally:
        watch.unregister(flag)
    if task.done():
        return False, task.result()
    task.cancel()
    outcome = (await asyncio.gather(task, return_exceptions=True))[0]
    if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
        state = getattr(outcome, "state", None)
        if state is not None:
            state.close()
    return True, None


def _aborted(failures: Sequence[Tuple[int, str]]) -> bool:
    return any(getattr(f, "aborted", False) for f in failures)
