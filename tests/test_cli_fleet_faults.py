"""`focus-go collect` against a fleet with a broken replica loses nothing silently (issue 38):
responses without logprobs, replicas of another model, replicas that answer but are broken,
a server that never answers, absurd sizes. The misbehaving servers are loopback proxies in
front of simulated servers (tests/cli_faults.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from cli_faults import OOV_ID, FaultyProxy
from focus_go.__main__ import main
from focus_go.cli.run import EXIT_DEGRADED

SMALL = ["--budget", "4", "--warmup", "2", "--segment-tokens", "48", "--progress-interval", "0"]


def lines(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def problems_file(server, tmp_path_factory):
    path = tmp_path_factory.mktemp("problems") / "problems.jsonl"
    path.write_text("".join(json.dumps({"id": p.id, "prompt": p.prompt, "label": p.label}) + "\n"
                            for p in server.problems()[:2]))
    return path


def collect(problems: Path, out: Path, urls: List[str], model: str, *extra: str) -> int:
    args = ["collect", str(problems), "--out", str(out), "--model", model, *SMALL, *extra]
    for url in urls:
        args += ["--sglang", url]
    return main(args)


# ---- 1. responses without logprobs: counted, named, and a non-zero exit status


def test_responses_without_logprobs_are_a_degraded_run(tmp_path, server, problems_file, capsys):
    out = tmp_path / "out"
    with FaultyProxy(server.url, mode="null_logprobs") as proxy:
        assert collect(problems_file, out, [proxy.url], server.model) == EXIT_DEGRADED
    captured = capsys.readouterr()
    run = json.loads((out / "run.json").read_text())
    summary = run["summary"]
    assert summary["completed"] == 2 and summary["actor_records"] == 0
    assert summary["inexact_edges"] > 0 and summary["degraded_trees"] == 2
    inexact = [f for f in lines(out / "failures.jsonl") if f["kind"] == "inexact"]
    assert len(inexact) == summary["inexact_edges"]
    assert all(f["error"].startswith("inexact edge: ") and "logprob" in f["error"] for f in inexact)
    assert {f["problem_id"] for f in inexact} == {"0", "1"} or len({f["line"] for f in inexact}) == 2
    assert "inexact" in captured.out and "--allow-degraded" in captured.err


def test_allow_degraded_accepts_a_degraded_run(tmp_path, server, problems_file, capsys):
    out = tmp_path / "out"
    with FaultyProxy(server.url, mode="null_logprobs") as proxy:
        assert collect(problems_file, out, [proxy.url], server.model, "--allow-degraded", "--limit", "1") == 0
    assert json.loads((out / "run.json").read_text())["summary"]["inexact_edges"] > 0


def test_failed_rollouts_make_a_degraded_run(tmp_path, server, problems_file):
    out = tmp_path / "out"
    server.set_faults([{"kind": "http_error", "status": 400, "count": 1}])
    try:
        assert collect(problems_file, out, [server.url], server.model, "--limit", "1") == EXIT_DEGRADED
    finally:
        server.set_faults([])
    summary = json.loads((out / "run.json").read_text())["summary"]
    assert summary["failed_rollouts"] == 1 and summary["degraded_trees"] == 1


def test_a_failed_problem_counts_every_rollout_and_keeps_every_error(tmp_path, server, problems_file):
    out = tmp_path / "out"
    with FaultyProxy(server.url, mode="empty") as proxy:
        assert collect(problems_file, out, [proxy.url], server.model, "--limit", "1") == 1
    summary = json.loads((out / "run.json").read_text())["summary"]
    failures = lines(out / "failures.jsonl")
    rollouts = [f for f in failures if f["kind"] == "rollout"]
    assert [f["kind"] for f in failures].count("problem") == 1
    assert summary["failed_problems"] == 1 and summary["rollouts"] >= 2
    assert summary["failed_rollouts"] == len(rollouts) == summary["rollouts"]
    assert all("no tokens" in f["error"] for f in rollouts)


# ---- 2. every replica serves the same model


def test_a_replica_of_another_model_is_refused_naming_both(tmp_path, server, problems_file, capsys):
    out = tmp_path / "out"
    with FaultyProxy(server.url, model="/models/Other-Model-7B") as other:
        assert collect(problems_file, out, [server.url, other.url], server.model) == 1
        assert other.generates == 0
    err = capsys.readouterr().err
    assert f"replica 2 of 2 ({other.url}) serves model \"/models/Other-Model-7B\"" in err
    assert f"replica 1 ({server.url}) serves model \"{server.model}\"" in err


@pytest.mark.parametrize("first, second", [
    ("/ckpt/run7/iter_0000100/hf", "/ckpt/run7/iter_0000200/hf"),  # two checkpoints of one run
    ("orgA/Qwen3-4B", "orgB/Qwen3-4B"),  # two organisations' models of one name
])
def test_replicas_are_compared_by_their_whole_model_path(tmp_path, server, problems_file, capsys, first, second):
    out = tmp_path / "out"
    with FaultyProxy(server.url, model=first) as a, FaultyProxy(server.url, model=second) as b:
        assert collect(problems_file, out, [a.url, b.url], server.model) == 1
        assert a.generates == b.generates == 0
    err = capsys.readouterr().err
    assert f"replica 2 of 2 ({b.url}) serves model \"{second}\"" in err
    assert f"but replica 1 ({a.url}) serves model \"{first}\"" in err and "the model differs" in err


def test_run_json_records_every_replicas_model(tmp_path, server, problems_file):
    out = tmp_path / "out"
    with FaultyProxy(server.url) as same:
        assert collect(problems_file, out, [server.url, same.url], server.model, "--limit", "1") == 0
    run = json.loads((out / "run.json").read_text())
    assert [r["model"] for r in run["fleet"]["replicas"]] == [server.model, server.model]
    assert run["fleet"]["identity"] == {"model": server.model, "tokenizer": server.model, "weight_version": "default"}
    assert run["fleet"]["weight_versions"] == ["default"]
    assert run["settings"]["allow_weight_change"] is False
    tree = json.loads(next((out / "trees").glob("*.json")).read_text())
    assert {n.get("weight_version") for n in tree["nodes"][1:]} == {"default"}, "each edge names its weights"


def test_a_replica_that_names_no_model_is_a_warning_given_once(tmp_path, server, problems_file, capsys):
    out = tmp_path / "out"
    with FaultyProxy(server.url, model="") as unnamed:
        assert collect(problems_file, out, [unnamed.url, server.url], server.model, "--limit", "1") == 0
    err = capsys.readouterr().err
    warning = f"warning: fleet: replica 1 of 2 ({unnamed.url}) does not say which model it serves"
    assert err.count(warning) == 1
    fleet = json.loads((out / "run.json").read_text())["fleet"]
    assert len(fleet["warnings"]) == 1 and fleet["identity"]["model"] == server.model


# ---- 2b. the weights may not change under a run unless the user says so


def test_a_weight_update_mid_run_is_refused(tmp_path, server, problems_file):
    out = tmp_path / "out"
    with FaultyProxy(server.url, weight_version="step-2", version_after=3) as proxy:
        assert collect(problems_file, out, [proxy.url], server.model, "--limit", "1") != 0
    failures = lines(out / "failures.jsonl")
    assert failures and any("the weight version differs" in f["error"] for f in failures)
    assert any('answered with model' in f["error"] and '"step-2"' in f["error"] and '"default"' in f["error"]
               and "--allow-weight-change" in f["error"] for f in failures)
    assert json.loads((out / "run.json").read_text())["fleet"]["weight_versions"] == ["default"]


def test_an_allowed_weight_update_is_recorded_on_every_edge(tmp_path, server, problems_file):
    out = tmp_path / "out"
    with FaultyProxy(server.url, weight_version="step-2", version_after=3) as proxy:
        assert collect(problems_file, out, [proxy.url], server.model, "--limit", "1", "--allow-weight-change") == 0
    run = json.loads((out / "run.json").read_text())
    assert run["fleet"]["weight_versions"] == ["default", "step-2"]
    assert run["settings"]["allow_weight_change"] is True
    tree = json.loads(next((out / "trees").glob("*.json")).read_text())
    versions = [n.get("weight_version") for n in tree["nodes"][1:]]
    assert set(versions) == {"default", "step-2"} and versions.count("default") == 3
    # Every actor record names the weights that generated its response: one per-span
    # record holds one edge's tokens, so it names that edge's version.
    actor = lines(out / "actor.jsonl")
    assert actor and all(r["weight_versions"] == [versions[r["node_id"] - 1]] for r in actor)
    assert {r["weight_versions"][0] for r in actor} == {"default", "step-2"}


def test_a_replica_that_comes_back_serving_another_model_is_refused(server):
    from focus_go.backends import SGLangPolicy
    from focus_go.errors import BackendError, FocusError
    from focus_go.generation.types import SamplingParams

    params = SamplingParams(max_tokens=4, temperature=0.0)
    with FaultyProxy(server.url) as proxy:
        policy = SGLangPolicy(model=server.model, base_url=proxy.url, profile="token_chunk", timeout=5)
        try:
            policy.startup_check()
            assert len(policy.generate_tokens([1, 2, 3], params).tokens) > 0
            proxy.mode = "down"  # killed ...
            with pytest.raises(BackendError):
                policy.generate_tokens([1, 2, 3], params)
            proxy.mode, proxy.model = "pass", "/models/Another-Model"  # ... and back with another model
            served = proxy.generates
            for _ in range(2):
                with pytest.raises(FocusError) as info:
                    policy.generate_tokens([1, 2, 3], params)
                message = str(info.value)
                assert f'replica 1 of 1 ({proxy.url}) came back serving model "/models/Another-Model"' in message
                assert f'but replica 1 ({proxy.url}) serves model "{server.model}"' in message
            assert proxy.generates == served, "nothing was generated by the other model"
            replica = policy.load()["replicas"][0]
            assert replica["model"] == "/models/Another-Model" and "came back serving" in replica["refused"]
        finally:
            policy.close()


# ---- 4. a server that accepts and never answers costs one timed-out round per tree


def test_a_silent_server_stops_the_tree_after_one_timed_out_round(tmp_path, server, problems_file):
    out = tmp_path / "out"
    with FaultyProxy(server.url, mode="hang") as proxy:
        code = collect(problems_file, out, [proxy.url], server.model, "--limit", "1", "--timeout", "0.5",
                       "--budget", "8", "--warmup", "2", "--per-pass", "2")
        assert proxy.generates == 2, "only the warmup's requests were sent"
    assert code == 1
    summary = json.loads((out / "run.json").read_text())["summary"]
    assert summary["rollouts"] == 2 and summary["failed_rollouts"] == 2


# ---- 5. sizes larger than a machine holds are refused before anything is allocated

HUGE = [2**31, 2**40, 2**62]


@pytest.mark.parametrize("n", HUGE)
@pytest.mark.parametrize("build, field", [
    (lambda n: __import__("focus_go").Selective(budget=n, warmup=n), "budget"),
    (lambda n: __import__("focus_go").Selective(budget=8, warmup=4, per_pass=n), "per_pass"),
    (lambda n: __import__("focus_go").Selective(budget=8, warmup=4, max_children=n), "max_children"),
    (lambda n: __import__("focus_go").Independent(n), "n"),
    (lambda n: __import__("focus_go").Segments(n), "tokens"),
])
def test_huge_sizes_are_config_errors(build, field, n):
    from focus_go.errors import ConfigError

    with pytest.raises(ConfigError, match="must be <=") as info:
        build(n)
    assert info.value.field == field


@pytest.mark.parametrize("key", ["max_concurrency", "capacity"])
def test_a_huge_in_flight_cap_is_refused(server, key):
    from focus_go.backends import SGLangPolicy
    from focus_go.errors import ConfigError

    with pytest.raises(ConfigError, match="too large"):
        SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", **{key: 2**40}).close()


@pytest.mark.parametrize("flags", [
    ["--budget", str(2**40), "--warmup", str(2**40)],
    ["--search", "independent", "--budget", str(2**40)],
    ["--segment-tokens", str(2**40)],
    ["--max-total-tokens", str(2**40)],
    ["--max-segments", str(2**40)],
    ["--max-in-flight", str(2**40)],
    ["--capacity", str(2**40)],
])
def test_huge_sizes_on_the_command_line_exit_cleanly(tmp_path, problems_file, flags):
    import subprocess
    import sys

    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "focus_go", "collect", str(problems_file), "--out", str(out),
                           "--limit", "1", "--progress-interval", "0", *flags], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (1, 2), proc.stderr[-2000:]
    assert "fatal error" not in proc.stderr and "goroutine" not in proc.stderr
    assert "must be <=" in proc.stderr or "too large" in proc.stderr, proc.stderr[-2000:]


# ---- 3. a replica that answers but is broken is taken out; its trees move


@pytest.mark.parametrize("mode", ["hang", "garbage", "empty", "null_logprobs", "zero_stop", "abort", "oov"])
def test_a_broken_replica_is_taken_out_and_nothing_is_lost(tmp_path, server, problems_file, mode):
    out = tmp_path / "out"
    with FaultyProxy(server.url, mode=mode) as broken:
        code = collect(problems_file, out, [broken.url, server.url], server.model, "--timeout", "1", "--warmup", "4")
    assert code == 0
    run = json.loads((out / "run.json").read_text())
    summary, fleet = run["summary"], run["fleet"]
    assert summary["completed"] == 2 and summary["failed_rollouts"] == 0 and summary["inexact_edges"] == 0
    assert summary["actor_records"] > 0 and not (out / "failures.jsonl").exists()
    bad, good = fleet["replicas"]
    assert bad["down"] and bad["downs"] >= 1 and bad["failed"] >= 1 and bad["served"] == 0
    assert not good["down"] and good["served"] > 0
    assert fleet["moved"] >= 1


@pytest.mark.parametrize("mode, answered", [
    ("zero_stop", 'answered finish reason "stop" with no tokens'),
    ("oov", f"answered token id {OOV_ID} (generated token 1 of "),
])
def test_a_malformed_answer_of_the_only_replica_fails_naming_it(tmp_path, server, problems_file, mode, answered):
    out = tmp_path / "out"
    with FaultyProxy(server.url, mode=mode) as proxy:
        assert collect(problems_file, out, [proxy.url], server.model, "--limit", "1") == 1
    rollouts = [f for f in lines(out / "failures.jsonl") if f["kind"] == "rollout"]
    assert rollouts and all(f"replica 1 of 1 ({proxy.url}) {answered}" in f["error"] for f in rollouts)
    summary = json.loads((out / "run.json").read_text())["summary"]
    assert summary["completed"] == 0 and summary["actor_records"] == 0


# ---- 6. --max-in-flight below the number of replicas is shared, not pinned to one


def test_max_in_flight_below_the_replicas_uses_and_fails_over_every_replica(tmp_path, server, problems_file):
    out = tmp_path / "out"
    with FaultyProxy(server.url) as second:
        assert collect(problems_file, out, [server.url, second.url], server.model, "--max-in-flight", "1") == 0
        assert second.generates > 0, "the second replica served too"
    fleet = json.loads((out / "run.json").read_text())["fleet"]
    assert fleet["capacity"] == 1 and fleet["peak_in_flight"] == 1
    with FaultyProxy(server.url, mode="garbage") as broken:
        out = tmp_path / "out2"
        assert collect(problems_file, out, [server.url, broken.url], server.model, "--max-in-flight", "1") == 0
    summary = json.loads((out / "run.json").read_text())["summary"]
    assert summary["completed"] == 2 and summary["failed_rollouts"] == 0


# ---- 7. the smaller ones


def test_admit_waiting_when_the_policy_closes_raises():
    from focus_go.backends import SGLangPolicy
    from focus_go.errors import InvalidHandleError
    from focus_go.sim import SimServer

    with SimServer(seed=0, latency={"max_concurrent": 2}) as s:
        policy = SGLangPolicy(model=s.model, base_url=s.url, profile="token_chunk")
        policy.startup_check()

        async def run():
            first = await policy.admit(2)
            waiting = asyncio.ensure_future(policy.admit(1))
            await asyncio.sleep(0.05)
            assert not waiting.done()
            policy.close()
            with pytest.raises(InvalidHandleError, match="closed"):
                await asyncio.wait_for(waiting, 60)  # a guard, not a timing check
            first.close()

        asyncio.run(run())


def test_a_nan_label_is_refused(tmp_path, server, capsys):
    problems = tmp_path / "p.jsonl"
    problems.write_text('{"id": "a", "prompt": "1+1?", "label": NaN}\n')
    assert main(["collect", str(problems), "--out", str(tmp_path / "out"), *SMALL]) == 2
    assert "p.jsonl:1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_resume_takes_the_same_model_directory_spelled_another_way(tmp_path, server, problems_file, monkeypatch):
    import os

    out = tmp_path / "out"
    assert collect(problems_file, out, [server.url], server.model, "--limit", "1") == 0
    monkeypatch.chdir(Path(server.model).parent)
    relative = os.path.join(".", Path(server.model).name)
    assert collect(problems_file, out, [server.url], relative, "--resume") == 0


def test_retry_failed_names_itself_and_finds_degraded_trees_without_failures_jsonl(tmp_path, server, problems_file, capsys):
    out = tmp_path / "out"
    server.set_faults([{"kind": "http_error", "status": 400, "count": 1}])
    try:
        assert collect(problems_file, out, [server.url], server.model, "--concurrency", "1") == EXIT_DEGRADED
    finally:
        server.set_faults([])
    (out / "failures.jsonl").unlink()
    capsys.readouterr()
    assert collect(problems_file, out, [server.url], server.model, "--retry-failed", "--temperature", "0.5") == 2
    assert "--retry-failed: the earlier run" in capsys.readouterr().err
    assert collect(problems_file, out, [server.url], server.model, "--retry-failed") == 0
    assert "(1 degraded trees collected again)" in capsys.readouterr().err


def test_resume_of_a_finished_run_keeps_its_totals(tmp_path, server, problems_file):
    out = tmp_path / "out"
    assert collect(problems_file, out, [server.url], server.model) == 0
    first = json.loads((out / "run.json").read_text())["summary"]
    assert collect(problems_file, out, [server.url], server.model, "--resume") == 0
    run = json.loads((out / "run.json").read_text())
    assert run["summary"]["resumed"] == 2 and run["summary"]["completed"] == 0
    assert run["earlier_runs"] == [first]
