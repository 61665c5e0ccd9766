"""Scheduling by requests in flight and several server URLs (core/fleet through the Python
policies and the command line), over real HTTP to simulated servers on loopback."""

from __future__ import annotations

import asyncio
import json
import contextlib

import pytest

from collectors import math_collector
from focus_go.backends import SGLangPolicy, VLLMPolicy
from focus_go.__main__ import main
from focus_go.errors import ConfigError, ConfigTypeError
from focus_go.integrations import Problem, collect_records
from focus_go.sim import SimServer


@contextlib.contextmanager
def servers(n, **config):
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(SimServer(seed=i, **config)) for i in range(n)]


@contextlib.contextmanager
def sglang(urls, model, **kwargs):
    policy = SGLangPolicy(model=model, base_url=urls, profile="token_chunk", **kwargs)
    try:
        yield policy
    finally:
        policy.close()


def test_capacity_comes_from_the_servers_else_the_flag():
    with servers(2, latency={"max_concurrent": 8}) as (a, b):
        with sglang(a.url, a.model) as one:  # a str still works
            one.startup_check()
            assert one.base_urls == [a.url]
            assert one.max_concurrency == 8
            assert one.load()["capacity"] == 8
        with sglang([a.url, b.url], a.model) as two:
            two.startup_check()
            fleet = two.server_info["fleet"]
            assert two.max_concurrency == 16 == fleet["capacity"]
            assert [r["name"] for r in fleet["replicas"]] == [a.url, b.url]
            assert two.server_info["ContextLength"] > 0  # the first server's own fields stay on top
        with sglang([a.url, b.url], a.model, max_concurrency=5) as capped:
            capped.startup_check()
            assert capped.max_concurrency == 5
            # The cap is shared by the replicas, not split: each keeps its own capacity.
            assert capped.load()["capacity"] == 5
            assert [r["capacity"] for r in capped.load()["replicas"]] == [8, 8]
    with SimServer(seed=0) as quiet:  # reports no max_running_requests
        with sglang(quiet.url, quiet.model, capacity=12) as p:
            p.startup_check()
            assert p.max_concurrency == 12
        v = VLLMPolicy(model=quiet.model, base_url=[quiet.url + "/v1"], api_key="EMPTY", profile="token_chunk")
        try:
            v.startup_check()
            assert v.max_concurrency == 256  # vLLM does not say: the default capacity
        finally:
            v.close()


@pytest.mark.parametrize("kwargs, error, match", [
    ({"base_url": []}, ConfigTypeError, "base_url"),
    ({"base_url": ["http://a:1", 3]}, ConfigTypeError, "base_url"),
    ({"base_url": 7}, ConfigTypeError, "base_url"),
    ({"routing": "random"}, ConfigError, "routing"),
    ({"capacity": 0}, ConfigError, "capacity"),
    ({"capacity": True}, ConfigError, "capacity"),
])
def test_bad_fleet_settings_are_refused(server, kwargs, error, match):
    args = {"model": server.model, "base_url": server.url, "profile": "token_chunk", **kwargs}
    with pytest.raises(error, match=match):
        SGLangPolicy(**args)


def test_admission_waits_for_capacity_and_cancellation_frees_it():
    with SimServer(seed=0, latency={"max_concurrent": 4}) as s, sglang(s.url, s.model) as policy:
        policy.startup_check()

        async def run():
            first = await policy.admit(4)
            assert policy.load()["reserved"] == 4
            second = asyncio.ensure_future(policy.admit(2))
            for _ in range(20):
                await asyncio.sleep(0.01)
            assert not second.done()  # demand (4 reserved) is not below the capacity (4)
            first.close()
            async with await second:
                assert policy.load()["reserved"] == 2
            assert policy.load()["reserved"] == 0
            third = await policy.admit(4)
            waiting = asyncio.ensure_future(policy.admit(1))
            await asyncio.sleep(0.02)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            third.close()
            load = policy.load()
            assert (load["reserved"], load["in_flight"], load["queued"], load["admitted"]) == (0, 0, 0, 3)

        asyncio.run(run())
        with pytest.raises(ConfigError, match="width"):
            asyncio.run(policy.admit(0))


def test_collect_records_keeps_the_in_flight_cap_over_two_servers():
    # Each server batches 3 sequences; 6 trees asked for at once never put more than 3 on
    # either, every tree completes, and both servers serve (new trees go to the least
    # loaded) with their prefix caches reused.
    with servers(2, latency={"max_concurrent": 3, "per_token": 0.001}) as sims:
        with sglang([s.url for s in sims], sims[0].model) as policy:
            policy.startup_check()
            problems = [Problem(p.prompt, p.label, id=f"{p.id}-{i}") for i, p in enumerate(sims[0].problems()[:6])]

            async def run():
                return await asyncio.gather(*(collect_records(math_collector(policy, p, budget=6, warmup=3), p, group_index=i)
                                              for i, p in enumerate(problems)))

            results = asyncio.run(run())
            assert all(actor for actor, _ in results)
            load = policy.load()
            assert load["peak_in_flight"] <= 6 and load["in_flight"] == 0 and load["reserved"] == 0
            assert load["admitted"] == 6
            for s, r in zip(sims, load["replicas"]):
                stats = s.stats()
                assert stats["peak_running"] <= 3
                assert r["served"] > 0 and r["failed"] == 0
                assert stats["cached_tokens"] > 0


def test_a_dead_replica_fails_over_and_the_tree_completes():
    with servers(2) as (dead, live):
        dead.set_faults([{"kind": "close_connection"}])  # every generation request
        with sglang([dead.url, live.url], dead.model) as policy:
            problem = Problem(live.problems()[0].prompt, live.problems()[0].label, id="p")

            async def run():
                async with math_collector(policy, problem, budget=6, warmup=3) as collector:
                    state = await collector.collect(problem)  # raises on any failed rollout
                    try:
                        return state.stats["rollouts"]
                    finally:
                        state.close()

            assert asyncio.run(run()) >= 3
            d, l = policy.load()["replicas"]
            assert d["down"] and d["failed"] > 0 and d["served"] == 0
            assert not l["down"] and l["served"] > 0


def test_cli_takes_several_servers(tmp_path, capsys):
    with servers(2, latency={"max_concurrent": 16}) as sims:
        problems = tmp_path / "problems.jsonl"
        problems.write_text("".join(json.dumps({"id": f"p{i}", "prompt": p.prompt, "label": p.label}) + "\n"
                                    for i, p in enumerate(sims[0].problems()[:3])))
        args = ["collect", str(problems), "--out", str(tmp_path / "out"), "--model", sims[0].model,
                "--budget", "4", "--warmup", "2", "--segment-tokens", "64", "--progress-interval", "0"]
        for s in sims:
            args += ["--sglang", s.url]
        assert main(args) == 0
        run = json.loads((tmp_path / "out" / "run.json").read_text())
        assert run["backend"]["url"] == f"{sims[0].url}, {sims[1].url}"
        assert run["summary"]["completed"] == 3
        fleet = run["fleet"]  # the policy's scheduling counters at the end
        assert fleet["capacity"] == 32 and fleet["admitted"] == 3 and fleet["in_flight"] == 0
        assert [r["name"] for r in fleet["replicas"]] == [s.url for s in sims]
        assert sum(s.stats()["sequences"] for s in sims) > 0
        assert all(s.stats()["peak_running"] <= 16 for s in sims)


def test_allow_weight_change_must_be_a_bool(server):
    with pytest.raises(ConfigTypeError, match="allow_weight_change must be True or False"):
        SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", allow_weight_change="yes")
    with pytest.raises(ConfigTypeError, match="allow_weight_change"):
        VLLMPolicy(model=server.model, base_url=server.url + "/v1", api_key="EMPTY", profile="token_chunk", allow_weight_change=1)


def test_the_fleet_records_its_identity_and_warns_of_none():
    with servers(2) as (a, b), sglang([a.url, b.url], a.model, allow_weight_change=True) as policy:
        policy.startup_check()
        load = policy.load()
        assert load["identity"] == {"model": a.model, "tokenizer": a.model, "weight_version": "default"}
        assert [r["weight_version"] for r in load["replicas"]] == ["default", "default"]
        assert not load.get("warnings")
