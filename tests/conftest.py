"""Shared fixtures: every test runs against the built library and must not leak handles."""

from __future__ import annotations

import pytest

from focus_go import _lib
from focus_go.sim import SimServer


@pytest.fixture(autouse=True)
def no_leaked_handles():
    """Fail a test that leaves Go handles live (after collecting Python garbage)."""
    import gc

    before = _lib.live_handles() if _lib.loaded() else 0
    yield
    if _lib.loaded():
        gc.collect()
        assert _lib.live_handles() == before, "test leaked Go handles"


@pytest.fixture(scope="module")
def server():
    """A simulated server (seed 0) per test module; a module that needs another seed or
    latency defines its own ``server``."""
    with SimServer(seed=0) as s:
        yield s
