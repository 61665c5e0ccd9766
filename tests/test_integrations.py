"""focus_go.integrations: Problem, the CollectorFor / CriticSink aliases, JsonlDirectory
(also under concurrent threads and spawned processes) and collect_records against the
simulated server."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import threading
import typing

import pytest

from focus_go import Collector, Independent, Workspace
from focus_go.backends import SamplingParams, SGLangPolicy

from collectors import math_collector
from focus_go.errors import CollectionError, ConfigError
from focus_go.integrations import JsonlDirectory, collect_records


@pytest.fixture
def policy(server):
    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SamplingParams(temperature=1.0))
    yield p
    p.close()


def collector_for(policy, problem):
    return math_collector(policy, problem, sampling=None, system_prompt="Solve.")


def test_spec_examples_aliases_and_problem():
    from focus.integrations import CollectorFor
    from focus.integrations import CriticSink
    from focus.integrations import Problem

    problem = Problem("Solve 3x + 7 = 22.", r"\boxed{5}", id="linear")
    assert (problem.prompt, problem.label, problem.id, dict(problem.metadata)) == ("Solve 3x + 7 = 22.", r"\boxed{5}", "linear", {})
    assert typing.get_origin(CollectorFor) is typing.get_origin(CriticSink) is not None
    assert len(typing.get_args(CollectorFor)[0]) == 2 and typing.get_args(CriticSink)[1] is type(None)
    from focus.integrations import collect_records as spec_collect_records

    assert spec_collect_records is collect_records


def test_jsonl_directory_spec_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from focus.integrations import JsonlDirectory

    sink = JsonlDirectory("critic-targets")
    assert (tmp_path / "critic-targets").is_dir()
    sink([])  # a collection without critic records writes nothing
    assert list((tmp_path / "critic-targets").iterdir()) == []
    records = [{"context": "a", "target": 0.5, "lane": "critic", "group_index": 0, "node_id": 0, "problem_id": "p"}]
    sink(records)
    sink(records)
    files = sorted((tmp_path / "critic-targets").iterdir())
    assert len(files) == 2 and all(f.suffix == ".jsonl" and f.name.startswith("p-") for f in files)
    assert [json.loads(line) for line in files[0].read_text().splitlines()] == records


def test_jsonl_directory_safe_names_and_missing_directory(tmp_path):
    target = tmp_path / "a" / "b"
    sink = JsonlDirectory(target)
    target.rmdir()  # removed after construction: recreated on write
    for pid in ("../../escape", "/etc/passwd", "..", ".hidden", "x" * 500, None, 7):
        sink([{"context": "c", "target": 1.0, "problem_id": pid}])
    names = [p.name for p in target.iterdir()]
    assert len(names) == 7
    assert all("/" not in n and not n.startswith(".") and len(n) < 120 for n in names)
    assert not any(p.name.endswith(".jsonl") for p in tmp_path.iterdir())
    assert {p.parent for p in target.iterdir()} == {target}


def test_jsonl_directory_bad_record_writes_nothing(tmp_path):
    sink = JsonlDirectory(tmp_path)
    with pytest.raises(ValueError):
        sink([{"context": "c", "target": float("nan")}])
    with pytest.raises(TypeError):
        sink([{"context": object()}])
    assert list(tmp_path.iterdir()) == []


def _write_many(directory: str, worker: int, calls: int) -> None:
    sink = JsonlDirectory(directory)
    for i in range(calls):
        sink([{"worker": worker, "call": i, "line": k, "context": "x" * 2000} for k in range(20)])


def _check_files(directory, expected_calls):
    files = list(directory.glob("*.jsonl"))
    assert len(files) == expected_calls
    for f in files:
        lines = [json.loads(line) for line in f.read_text().splitlines()]
        assert len(lines) == 20
        assert len({(line["worker"], line["call"]) for line in lines}) == 1  # never interleaved
        assert [line["line"] for line in lines] == list(range(20))
    assert not [p for p in directory.iterdir() if not p.name.endswith(".jsonl")]  # no temp files left


def test_jsonl_directory_concurrent_threads(tmp_path):
    threads = [threading.Thread(target=_write_many, args=(str(tmp_path), w, 10)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _check_files(tmp_path, 80)


def test_jsonl_directory_concurrent_processes(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(str(tmp_path), w, 5)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    _check_files(tmp_path, 15)


def test_collect_records(server, policy, tmp_path):
    problem = server.problems()[0]

    class RecordingWorkspace(Workspace):
        def __init__(self, path):
            super().__init__(path)
            self.events = []

        async def __aenter__(self):
            self.events.append("enter")
            return await super().__aenter__()

        async def __aexit__(self, *exc):
            self.events.append("exit")
            await super().__aexit__(*exc)

    workspaces = []

    def workspace_for(p):
        assert p is problem
        workspaces.append(RecordingWorkspace(tmp_path / str(p.id)))
        return workspaces[-1]

    collector = collector_for(policy, problem)
    actor, critic = asyncio.run(collect_records(collector, problem, group_index=5, workspace_for=workspace_for))
    # Entered around the collection and by the collector that now holds it; closed after.
    assert collector.workspace is workspaces[0]
    events = workspaces[0].events
    assert events[0] == "enter" and events[-1] == "exit" and events.count("enter") == events.count("exit")
    assert not workspaces[0].is_open
    other = collector_for(policy, problem)
    other.workspace = Workspace()
    with pytest.raises(ConfigError, match="already has its own workspace"):
        asyncio.run(collect_records(other, problem, group_index=5, workspace_for=workspace_for))
    assert actor and critic
    assert all(r["lane"] == "actor" and r["group_index"] == 5 and r["problem_id"] == problem.id for r in actor)
    assert all(r["lane"] == "critic" and r["group_index"] == 5 for r in critic)
    assert {"tokens", "loss_mask", "behavior_logprobs", "advantage", "estimator", "node_id", "search_pass"} <= set(actor[0])
    # The threshold compares the unweighted advantage: read it off unweighted records.
    plain, _ = asyncio.run(collect_records(collector_for(policy, problem), problem, group_index=5, visitation_weights=False))
    big = max(abs(r["advantage"]) for r in plain)
    kept, _ = asyncio.run(collect_records(collector_for(policy, problem), problem, group_index=5, min_abs_advantage=big,
                                          visitation_weights=False))
    assert kept and all(abs(r["advantage"]) >= big for r in kept)


def test_collect_records_failures(server, policy):
    problem = server.problems()[1]
    server.set_faults([{"kind": "missing_logprobs"}])
    try:
        for allow_partial in (False, True):
            with pytest.raises(CollectionError) as err:
                asyncio.run(collect_records(collector_for(policy, problem), problem, group_index=0, allow_partial=allow_partial))
            assert err.value.failures
            if allow_partial:
                assert "every rollout" in str(err.value) and problem.id in str(err.value)
            if err.value.state is not None:
                err.value.state.close()
        # Some rollouts fail: allow_partial keeps the rest.
        server.set_faults([{"kind": "missing_logprobs", "count": 1}])
        agent = collector_for(policy, problem).agent
        collector = Collector(agent, critic=None, search=Independent(3))
        actor, _ = asyncio.run(collect_records(collector, problem, group_index=0, allow_partial=True))
        assert actor
    finally:
        server.set_faults([])
    with pytest.raises(ConfigError, match="must be a Problem"):
        asyncio.run(collect_records(collector_for(policy, problem), "prompt", group_index=0))
    with pytest.raises(ConfigError, match="expected a Workspace"):
        asyncio.run(collect_records(collector_for(policy, problem), problem, group_index=0, workspace_for=lambda p: object()))
    with pytest.raises(ConfigError, match="min_abs_advantage"):
        asyncio.run(collect_records(collector_for(policy, problem), problem, group_index=0, min_abs_advantage=-1.0))


def test_collect_records_visitation_weights(server, policy):
    # The same deterministic tree, exported plain and weighted: each weighted advantage is
    # the sample's weight times its visitation factor (docs/signal.md); plain is the
    # default.
    problem = server.problems()[2]

    async def samples():
        async with collector_for(policy, problem) as collector:
            state = await collector.collect(problem)
            try:
                batch = collector.prepare(state)
                return {a.node_id: (a.weight, a.visitation) for a in batch.actor}
            finally:
                state.close()

    want = asyncio.run(samples())
    assert any(v != 1.0 for _, v in want.values()), "a Selective tree over-samples some checkpoint"
    plain, _ = asyncio.run(collect_records(collector_for(policy, problem), problem, group_index=1))
    explicit, _ = asyncio.run(collect_records(collector_for(policy, problem), problem, group_index=1, visitation_weights=False))
    weighted, _ = asyncio.run(collect_records(collector_for(policy, problem), problem, group_index=1, visitation_weights=True))
    assert plain == explicit
    assert [r["node_id"] for r in plain] == [r["node_id"] for r in weighted]
    for p, w in zip(plain, weighted):
        weight, visitation = want[p["node_id"]]
        assert p["advantage"] == pytest.approx(weight)
        assert w["advantage"] == pytest.approx(weight * visitation)
