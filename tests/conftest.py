"""Shared fixtures: every test runs against the built library and must not leak handles."""

from __future__ import annotations

import os

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


@pytest.fixture
def sim_policy(server):
    """An SGLang policy (profile ``token_chunk``) on the module's simulated server."""
    from focus_go.backends import SGLangPolicy

    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
    yield p
    p.close()


@pytest.fixture
def standin(sim_policy):
    """The Tinker service stood in over ``sim_policy`` (tests/tinker_standin.py: the real
    SDK's client classes, the transport replaced); needs the tinker package."""
    from tinker_standin import StandinTinker

    s = StandinTinker(sim_policy)
    yield s
    s.close()


@pytest.fixture
def problems(server):
    """The module's simulated server's first four problems."""
    return server.problems()[:4]


@pytest.fixture
def selftest():
    """The test calls the focus_selftest_* exports, which only a self-test build of the
    library has (`make test-py` loads build/selftest/libfocus.so). Without one the test
    is skipped, with the fix; under CI (``CI`` set) it fails instead."""
    if not _lib.has_selftest():
        message = (
            f"{_lib.library_path()} is not a self-test build: run `make test-py`, or "
            "`make selftest-lib` and set FOCUS_GO_LIBRARY=build/selftest/libfocus.so"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
