"""Steady-state throughput of tree collectors, shared by every collector the benchmarks run.

A tree takes seconds on a loaded 2-core machine, so counting whole trees over a run
charges each collector the ramp-up and the tail where its last trees finish with few
requests in flight, while the load generator that sets the ceiling has neither. Instead a
run lasts `warmup + seconds` and each tree is credited with the share of its segments that
falls inside the window [warmup, warmup + seconds], in proportion to the overlap of its
lifetime with the window. Process CPU is sampled at the window's edges.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Dict, List, Tuple, Union


class Window:
    def __init__(self, seconds: float, warmup: float = 1.5) -> None:
        now = time.perf_counter()
        self.start, self.end = now + warmup, now + warmup + seconds
        self.trees: List[Tuple[float, float, Any]] = []
        self.cpu: Dict[str, float] = {}
        self._sampler = asyncio.ensure_future(self._sample())

    async def _sample(self) -> None:
        await asyncio.sleep(max(self.start - time.perf_counter(), 0))
        self.cpu["start"] = time.process_time()
        await asyncio.sleep(max(self.end - time.perf_counter(), 0))
        self.cpu["end"] = time.process_time()

    def running(self) -> bool:
        """Whether a worker should start another tree."""
        return time.perf_counter() < self.end

    def add(self, began: float, ended: float, segments: Any) -> None:
        self.trees.append((began, ended, segments))

    async def result(self) -> Dict[str, Any]:
        await self._sampler
        # A count may be deferred (a callable) when counting would cost the collector time.
        self.trees = [(b, e, n() if callable(n) else n) for b, e, n in self.trees]
        credited = 0.0
        for began, ended, n in self.trees:
            overlap = min(ended, self.end) - max(began, self.start)
            if overlap > 0:
                credited += n * overlap / max(ended - began, 1e-9)
        seconds = self.end - self.start
        cpu = self.cpu["end"] - self.cpu["start"]
        return {"trees": len(self.trees), "segments": sum(n for _, _, n in self.trees), "credited_segments": credited,
                "seconds": seconds, "sps": credited / seconds, "cpu_us_per_segment": cpu / max(credited, 1) * 1e6}


async def run_workers(parallel: int, window: Window, one_tree: Callable[[int], Awaitable[Union[int, Callable[[], int]]]]) -> Dict[str, Any]:
    """`parallel` workers collecting trees until the window closes; one_tree(i) returns the
    tree's segment count, or a callable that counts them after the run."""

    async def worker(w: int) -> None:
        i = w
        while window.running():
            began = time.perf_counter()
            n = await one_tree(i)
            window.add(began, time.perf_counter(), n)
            i += parallel

    await asyncio.gather(*(worker(w) for w in range(parallel)))
    return await window.result()
