"""The pieces of the ``train`` loop's steps: frozen samplers, concurrent collections and
the problem order of each epoch.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
from typing import Any, List, Optional, Sequence, Union


async def _publish(training_client: Any, record_stability_info: bool = False) -> Any:
    """A frozen sampler of the current weights. The SDK's save blocks its caller, so it runs
    in a worker thread and the event loop (an overlapping collection) keeps going.
    ``record_stability_info`` asks every sample of the sampler to record what Tinker's
    ``stable_reinforce`` loss trains on (passed only when set: older SDKs lack it)."""

    def save() -> Any:
        if record_stability_info:
            client = training_client.save_weights_and_get_sampling_client(record_stability_info=True)
        else:
            client = training_client.save_weights_and_get_sampling_client()
        # tinker >= 0.3x returns a future of the client; older versions the client itself.
        result = getattr(client, "result", None)
        return result() if callable(result) else client

    return await asyncio.to_thread(save)


async def _cancel_and_join(tasks: Sequence[Any]) -> None:
    """Cancel the tasks not yet done and wait for them, so that none outlives its caller;
    their outcome no longer matters."""
    pending = [t for t in tasks if not t.done()]
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)


async def _gather_all(coros: Sequence[Any]) -> List[Any]:
    """Run coroutines concurrently; if one raises, cancel and join the others, then raise."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        await _cancel_and_join(tasks)


def _warmup(collector: Any) -> int:
    """How many rollouts a collector's search starts from the root at once."""
    search = getattr(collector, "search", None)
    for name in ("warmup", "n"):
        value = getattr(search, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 1


class _Order:
    """Which problem each position of the run trains on: epoch ``e`` (positions ``e * n``
    to ``e * n + n - 1``) is a permutation of the list, ``random.Random(f"{seed}:{e}")``'s
    shuffle of ``range(n)``; the list order when ``seed`` is None."""

    def __init__(self, n: int, seed: Optional[int]):
        self._n, self._seed = n, seed
        self._epoch, self._perm = -1, list(range(n))

    def index(self, position: int) -> int:
        epoch, offset = divmod(position, self._n)
        if self._seed is None:
            return offset
        if epoch != self._epoch:
            perm = list(range(self._n))
            random.Random(f"{self._seed}:{epoch}").shuffle(perm)
            self._epoch, self._perm = epoch, perm
        return self._perm[offset]


def _epoch_seed(seed: int, epoch: int) -> int:
    """A search seed for ``epoch`` > 0 from the collector's own."""
    digest = hashlib.sha256(f"{seed}:{epoch}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _has_checkpoint(path: Union[str, "os.PathLike[str]"]) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            return any(line.strip() for line in f)
    except FileNotFoundError:
        return False


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0
