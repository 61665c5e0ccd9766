"""Bad responses from a server reach Python as typed errors naming what was wrong."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from focus_go import _async
from focus_go.backends import SamplingParams, SGLangPolicy, VLLMPolicy
from focus_go.errors import BackendError, ConfigError, FocusError
from focus_go.sim import SimServer

PROMPT = [1, 2, 3]


@pytest.fixture
def server():
    with SimServer(seed=2) as s:
        yield s


@pytest.fixture
def policy(server):
    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
    yield p
    p.close()


def test_transient_503_is_retried(server, policy):
    server.set_faults([{"kind": "http_error", "status": 503, "count": 2}])
    result = policy.generate_tokens(PROMPT, SamplingParams(max_tokens=8))
    assert len(result.tokens) <= 8
    assert server.stats()["faults"] == 2


def test_too_many_tokens_is_named(server, policy):
    server.set_faults([{"kind": "extra_tokens", "tokens": 5}])
    with pytest.raises(BackendError, match="max_tokens was 8"):
        policy.generate_tokens(PROMPT, SamplingParams(max_tokens=8))


def test_malformed_json_and_missing_logprobs(server, policy):
    server.set_faults([{"kind": "malformed_json", "count": 1}])
    with pytest.raises(BackendError):
        policy.generate_tokens(PROMPT, SamplingParams(max_tokens=8))
    server.set_faults([{"kind": "missing_logprobs", "count": 1}])
    with pytest.raises(BackendError, match="logprob"):
        policy.generate_tokens(PROMPT, SamplingParams(max_tokens=8))


def test_context_length_is_a_config_error(server):
    with SimServer(seed=0, max_model_len=64) as small:
        p = VLLMPolicy(model=small.model, base_url=small.url + "/v1", api_key="EMPTY", profile="token_chunk")
        try:
            with pytest.raises(ConfigError, match="context length"):
                p.generate_tokens(list(range(100, 160)), SamplingParams(max_tokens=32))
        finally:
            p.close()


def test_connection_refused(server):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = SGLangPolicy(model=server.model, base_url=f"http://127.0.0.1:{port}", profile="token_chunk", timeout=5)
    try:
        with pytest.raises(BackendError, match=f"127.0.0.1:{port}"):
            p.generate_tokens(PROMPT, SamplingParams(max_tokens=4))
        with pytest.raises(FocusError):
            p.startup_check()
    finally:
        p.close()


def test_cancelling_agenerate_cancels_the_request(server, policy):
    server.set_faults([{"kind": "hang"}])

    async def run():
        before = set(_async._pending)
        task = asyncio.create_task(policy.agenerate_tokens(PROMPT, SamplingParams(max_tokens=4)))
        await asyncio.sleep(0.2)
        mine = set(_async._pending) - before
        assert len(mine) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The Go call ends and is posted although the server still hangs.
        while mine & set(_async._pending):
            await asyncio.sleep(0.01)

    asyncio.run(asyncio.wait_for(run(), 10))
    server.set_faults([])


def test_concurrent_agenerate_calls_take_no_thread_each(server, policy):
    params = [SamplingParams(max_tokens=6, temperature=1.0, seed=i) for i in range(200)]

    async def run():
        before = threading.active_count()
        calls = [asyncio.ensure_future(policy.agenerate_tokens(PROMPT, p)) for p in params]
        await asyncio.sleep(0)
        during = threading.active_count()
        return await asyncio.gather(*calls), during - before

    results, new_threads = asyncio.run(asyncio.wait_for(run(), 60))
    assert new_threads == 0  # the event loop itself waits for the Go calls
    for i in (0, 57, 199):  # each result is its own request's, as a blocking call gives it
        assert results[i] == policy.generate_tokens(PROMPT, params[i])
    assert all(len(r.logprobs) == len(r.tokens) <= 6 for r in results)


def test_agenerate_from_event_loops_in_two_threads(server, policy):
    """Whichever loop drains the completion queue hands each call to the loop awaiting it."""
    params = [SamplingParams(max_tokens=5, temperature=1.0, seed=i) for i in range(60)]
    results: dict = {}

    def run(part):
        async def go():
            return await asyncio.gather(*(policy.agenerate_tokens(PROMPT, p) for p in part))

        results[id(part)] = asyncio.run(asyncio.wait_for(go(), 60))

    halves = [params[:30], params[30:]]
    threads = [threading.Thread(target=run, args=(h,)) for h in halves]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = results[id(halves[0])] + results[id(halves[1])]
    for i in (0, 29, 30, 59):
        assert got[i] == policy.generate_tokens(PROMPT, params[i])


async def _agenerate_closed(server):
    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
    p.close()
    await p.agenerate_tokens(PROMPT, SamplingParams(max_tokens=4))


def test_agenerate_on_a_closed_policy_fails_at_once(server):
    before = set(_async._pending)
    with pytest.raises(FocusError, match="this policy is closed"):
        asyncio.run(asyncio.wait_for(_agenerate_closed(server), 10))
    assert set(_async._pending) <= before, "a call that could not start is not waited for"


def test_closed_policy_is_rejected(server):
    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
    p.close()
    with pytest.raises(FocusError):
        p.generate_tokens(PROMPT, SamplingParams(max_tokens=4))
