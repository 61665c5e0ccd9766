"""Shared fixtures: every test runs against the built library and must not leak handles."""

from __future__ import annotations

import pytest

from focus_go import _lib


@pytest.fixture(autouse=True)
def no_leaked_handles():
    """Fail a test that leaves Go handles live (after collecting Python garbage)."""
    import gc

    before = _lib.live_handles() if _lib.loaded() else 0
    yield
    if _lib.loaded():
        gc.collect()
        assert _lib.live_handles() == before, "test leaked Go handles"
