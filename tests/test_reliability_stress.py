"""Reliability under load and at shutdown: 1,000 trees from 64 concurrent collectors on
several Python threads (each with its own event loop) give exactly the trees a serial run
gives; cancelling or abandoning collections mid-tree leaves no Go handle, thread, socket
or file descriptor behind."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import threading
import time

import pytest

from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
from focus_go.backends import SamplingParams, SGLangPolicy
from focus_go.extend import SchedulerView
from focus_go.sim import SimServer

from test_reliability import PyMathEnv

SAMPLING = SamplingParams(temperature=1.0)
TREES = 1000
COLLECTORS = 64
THREADS = 4
SEARCH = Selective(budget=6, warmup=3, seed=11)


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def focus_threads():
    return [t for t in threading.enumerate() if t.name.startswith("focus-go-collection")]


@pytest.fixture(scope="module", autouse=True)
def warm_runtime():
    """Let the Go runtime open its process-lifetime descriptors (netpoller, cgroup files,
    the async calls' notification pipe) before any test counts descriptors."""
    with SimServer(seed=0) as server:
        policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
        policy.generate_tokens([1, 2, 3], SamplingParams(max_tokens=2))
        problem = server.problems()[0]
        asyncio.run(Collector(agent_for(policy, problem), search=Selective(1, 1)).collect(problem)).close()
        policy.close()


@pytest.fixture(autouse=True)
def no_leaks():
    """Python-side leak check after each test (conftest checks Go handles): no collection
    thread left and the process's file descriptors (sockets included) back where they were."""
    gc.collect()
    fds = open_fds()
    yield
    deadline = time.monotonic() + 60  # a guard against a leak, not a timing check
    while time.monotonic() < deadline:
        gc.collect()
        if not focus_threads() and open_fds() <= fds:
            break
        time.sleep(0.05)
    assert not focus_threads(), [t.name for t in focus_threads()]
    assert open_fds() <= fds, f"file descriptors: {fds} before, {open_fds()} after"


def tree_nodes(state):
    return json.loads(state.to_json())["nodes"]


@pytest.mark.parametrize("bridged,trees", [(False, TREES), (True, 192)], ids=["all_go", "python_env"])
def test_thousand_trees_from_64_collectors_on_4_threads(bridged, trees):
    # The python_env case serves every env call of every collector through the bridge on
    # its thread's event loop; its trees must equal the all-Go serial reference.
    with SimServer(seed=0) as server:
        problems = server.problems()
        policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SAMPLING)
        try:
            def collector_for(problem, bridged=False):
                env = PyMathEnv(problem.label, policy.decode) if bridged else MathEnv(problem.label, policy.decode)
                agent = Agent(policy=policy, env=env, context=Segments(128))
                return Collector(agent, critic=Critic.constant(0.5), search=SEARCH)

            async def reference():
                out = {}
                for p in problems:
                    state = await collector_for(p).collect(p)
                    out[p.id] = tree_nodes(state)
                    state.close()
                return out

            want = asyncio.run(reference())
            results = {}
            errors = []
            lock = threading.Lock()

            def worker(t):
                async def one_collector(c):
                    # Collector c collects trees c, c + 64, c + 128, ... one after another.
                    for i in range(c, trees, COLLECTORS):
                        problem = problems[i % len(problems)]
                        state = await collector_for(problem, bridged).collect(problem)
                        try:
                            nodes = tree_nodes(state)
                            batch = collector_for(problem).prepare(state)
                            records = batch.to_records(i)
                            assert records and all(
                                len(r["tokens"]) == len(r["loss_mask"]) == len(r["behavior_logprobs"]) for r in records if r["lane"] == "actor"
                            )
                        finally:
                            state.close()
                        with lock:
                            results[i] = (problem.id, nodes)

                async def main():
                    await asyncio.gather(*(one_collector(c) for c in range(t, COLLECTORS, THREADS)))

                try:
                    asyncio.run(main())
                except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                    errors.append(exc)

            t0 = time.monotonic()
            threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(timeout=300)
            elapsed = time.monotonic() - t0
            assert not any(th.is_alive() for th in threads)
            assert not errors, errors[:3]
            assert len(results) == trees
            for i, (pid, nodes) in results.items():
                assert nodes == want[pid], f"tree {i} (problem {pid}) differs from the serial run"
            print(f"\n{trees} trees (bridged env: {bridged}), {COLLECTORS} collectors, {THREADS} threads: {elapsed:.1f}s, "
                  f"{server.stats()['requests']['/generate']} requests")
            assert elapsed < 120
        finally:
            policy.close()


@pytest.fixture
def slow_server():
    # About 5 s per rollout (a Selective(32, 8) tree takes half a minute or more), so
    # that every cancellation below lands mid-tree and is told from a finished tree by
    # a wide margin, whatever the machine's load.
    with SimServer(seed=0, latency={"first_token": 0.01, "per_token": 0.05}) as server:
        yield server


def agent_for(policy, problem, env=None):
    return Agent(policy=policy, env=env or MathEnv(problem.label, policy.decode), context=Segments(32))


@pytest.mark.parametrize("bridged", [False, True], ids=["all_go", "python_env"])
def test_cancelling_many_collections_mid_tree(slow_server, bridged):
    problems = slow_server.problems()
    policy = SGLangPolicy(model=slow_server.model, base_url=slow_server.url, profile="token_chunk", default_params=SAMPLING)
    try:
        async def main():
            tasks = []
            for i in range(16):
                p = problems[i % len(problems)]
                env = PyMathEnv(p.label, policy.decode) if bridged else None
                tasks.append(asyncio.create_task(Collector(agent_for(policy, p, env), search=Selective(32, 8)).collect(p)))
            await asyncio.sleep(0.5)
            assert slow_server.stats()["peak_running"] > 0 and not any(t.done() for t in tasks)
            t0 = time.monotonic()
            for t in tasks:
                t.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            assert all(isinstance(r, asyncio.CancelledError) for r in results), results
            return time.monotonic() - t0

        elapsed = asyncio.run(main())
        assert elapsed < 20, elapsed
    finally:
        policy.close()


def test_event_loop_ending_with_collections_in_flight(slow_server):
    # asyncio.run cancels the tasks still pending when main returns: abandoned
    # collections must stop their Go work and release everything.
    problems = slow_server.problems()
    policy = SGLangPolicy(model=slow_server.model, base_url=slow_server.url, profile="token_chunk", default_params=SAMPLING)
    try:
        async def main():
            for i in range(8):
                p = problems[i]
                asyncio.ensure_future(Collector(agent_for(policy, p), search=Selective(32, 8)).collect(p))
            await asyncio.sleep(0.3)

        t0 = time.monotonic()
        asyncio.run(main())
        assert time.monotonic() - t0 < 20
    finally:
        policy.close()


def test_policy_closed_with_collections_in_flight(slow_server):
    # Closing the policy (its client and its tokenizer) while its collections run: calls
    # in flight finish, later ones fail their rollouts with an error saying what was
    # closed; nothing crashes and nothing is used after it is freed.
    problem = slow_server.problems()[0]
    policy = SGLangPolicy(model=slow_server.model, base_url=slow_server.url, profile="token_chunk", default_params=SAMPLING)

    async def main():
        task = asyncio.create_task(Collector(agent_for(policy, problem), search=Selective(16, 4)).collect(problem, allow_partial=True))
        await asyncio.sleep(0.3)
        policy.close()
        return await asyncio.wait_for(task, 30)

    state = asyncio.run(main())
    try:
        assert state.failures
        assert all("closed" in f[1] or "used after Close" in f[1] for f in state.failures), state.failures
        view = SchedulerView(state)
        assert view.stats["rollouts"] + view.stats["budget_unspent"] == 16
    finally:
        state.close()


def test_server_going_away_mid_tree():
    server = SimServer(seed=0, latency={"first_token": 0.01, "per_token": 0.01})
    problem = server.problems()[0]
    policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SAMPLING)
    try:
        async def main():
            task = asyncio.create_task(Collector(agent_for(policy, problem), search=Selective(16, 4)).collect(problem, allow_partial=True))
            await asyncio.sleep(0.3)
            server.close()
            return await asyncio.wait_for(task, 300)  # a guard against hanging, not a timing check

        state = asyncio.run(main())
        try:
            assert state.failures
            view = SchedulerView(state)
            assert all(view.node(f[0]).failed for f in state.failures)
        finally:
            state.close()
    finally:
        policy.close()
        server.close()
