"""`focus-go collect`: problems from a JSONL file, trees from a server, records on disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from focus_go.__main__ import main
from focus_go.cli.problems import ProblemsFileError, read_problems

SMALL = ["--budget", "4", "--warmup", "2"]


@pytest.fixture(scope="module")
def problems_file(server, tmp_path_factory):
    path = tmp_path_factory.mktemp("problems") / "problems.jsonl"
    path.write_text("".join(json.dumps({"id": p.id, "prompt": p.prompt, "label": p.label}) + "\n" for p in server.problems()[:3]))
    return path


def lines(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_output(out: Path, n_problems: int, budget: int) -> Dict[str, Any]:
    """Everything written parses and adds up; returns run.json."""
    run = json.loads((out / "run.json").read_text())
    summary = run["summary"]
    actor, critic = lines(out / "actor.jsonl"), lines(out / "critic.jsonl")
    trees = sorted((out / "trees").glob("*.json"))
    assert summary["completed"] == len(trees) == n_problems
    assert len(actor) == summary["actor_records"] and len(critic) == summary["critic_records"]
    assert {r["group_index"] for r in actor} == set(range(n_problems))
    assert all(r["lane"] == "actor" and len(r["tokens"]) == len(r["loss_mask"]) == len(r["behavior_logprobs"]) for r in actor)
    assert all(r["lane"] == "critic" and isinstance(r["context"], str) for r in critic)
    rollouts = 0
    for tree in trees:
        stats = json.loads(tree.read_text())["stats"]
        assert stats["rollouts"] + stats["budget_unspent"] == budget
        rollouts += stats["rollouts"]
    assert summary["rollouts"] == rollouts
    assert not list(out.rglob(".tmp-*")), "no temporary files left"
    return run


def test_collect_on_the_embedded_simulator(tmp_path, problems_file, capsys):
    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), *SMALL]) == 0
    run = check_output(out, 3, 4)
    assert run["backend"]["kind"] == "simulator" and run["reward"]["gamma"] == 1.0
    captured = capsys.readouterr()
    for row in ("rollouts", "success rate", "mean |A|", "tokens generated", "prefix tokens reused", "failures"):
        assert row in captured.out
    assert "trees/s" in captured.err and "tokens/s" in captured.err, "progress line"
    assert not (out / "failures.jsonl").exists()


def test_collect_with_the_tree_group_baseline(tmp_path, problems_file):
    """--estimator tree-group-baseline prepares with TreeGroupBaseline: run.json and every
    actor record name it."""
    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), "--limit", "1", "--estimator", "tree-group-baseline", *SMALL]) == 0
    run = check_output(out, 1, 4)
    assert run["estimator"] == "TreeGroupBaseline"
    assert {r["estimator"] for r in lines(out / "actor.jsonl")} == {"TreeGroupBaseline"}


@pytest.mark.parametrize("flag, url", [("--sglang", ""), ("--vllm", "/v1")])
def test_collect_from_a_server(tmp_path, server, problems_file, flag, url):
    out = tmp_path / "out"
    args = ["collect", str(problems_file), "--out", str(out), flag, server.url + url, "--model", server.model, *SMALL]
    assert main([*args, "--search", "independent"]) == 0
    run = check_output(out, 3, 4)
    assert run["backend"] == {"kind": flag[2:], "url": server.url + url, "model": server.model}
    assert all(r["search_pass"] == 0 for r in lines(out / "actor.jsonl")), "independent rollouts only"


def test_collect_with_a_local_tokenizer_dir(tmp_path, server, problems_file):
    out = tmp_path / "out"
    args = ["collect", str(problems_file), "--out", str(out), "--sglang", server.url, "--tokenizer", server.model,
            "--model", "my-model", "--limit", "1", *SMALL]
    assert main(args) == 0
    assert json.loads((out / "run.json").read_text())["backend"]["model"] == "my-model"
    check_output(out, 1, 4)


def test_custom_keys(tmp_path, server):
    problems = tmp_path / "custom.jsonl"
    p = server.problems()[0]
    problems.write_text("\n" + json.dumps({"question": p.prompt, "answer": p.metadata["answer"], "uid": 7, "level": 1}) + "\n\n")
    [loaded] = read_problems(problems, prompt_key="question", label_key="answer", id_key="uid")
    assert (loaded.line, loaded.problem.id, loaded.problem.label, dict(loaded.problem.metadata)) == (2, "7", p.metadata["answer"], {"level": 1})
    out = tmp_path / "out"
    args = ["collect", str(problems), "--out", str(out), "--prompt-key", "question", "--label-key", "answer", "--id-key", "uid"]
    assert main([*args, *SMALL]) == 0
    assert [t.name for t in (out / "trees").iterdir()] == ["00000-7.json"]


GOOD = json.dumps({"id": "a", "prompt": "Solve 3x + 7 = 22.", "label": "5"})


@pytest.mark.parametrize(
    "text, where, message",
    [
        (GOOD + "\n{\"id\": \"b\", \"prompt\": \"x\", \"label\": 1\n", 2, "bad JSON"),
        (GOOD + "\n\n" + json.dumps({"id": "c", "label": "1"}) + "\n", 3, "missing prompt key 'prompt'"),
        (json.dumps({"prompt": "x"}) + "\n", 1, "missing label key 'label'"),
        (GOOD + "\n[1, 2]\n", 2, "expected a JSON object"),
        (GOOD + "\n" + GOOD + "\n", 2, "id 'a' repeats line 1"),
        (json.dumps({"prompt": "", "label": "1"}) + "\n", 1, "non-empty string or a list of chat messages"),
        (json.dumps({"prompt": "x", "label": None}) + "\n", 1, "must be a non-empty string or a number"),
    ],
    ids=["bad json", "missing prompt", "missing label", "not an object", "duplicate id", "empty prompt", "null label"],
)
def test_bad_problems_file_names_the_line_and_writes_nothing(tmp_path, capsys, text, where, message):
    problems = tmp_path / "p.jsonl"
    problems.write_text(text)
    out = tmp_path / "out"
    assert main(["collect", str(problems), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{problems}:{where}: " in err and message in err
    assert not out.exists(), "nothing written"
    with pytest.raises(ProblemsFileError, match=f":{where}: "):
        read_problems(problems)


@pytest.mark.parametrize(
    "setup, args, message",
    [
        (lambda d: (d / "p.jsonl").write_text(""), [], "no problems"),
        (lambda d: None, [], "no such problems file"),
        (lambda d: (d / "p.jsonl").write_text(GOOD), ["--openai", "http://127.0.0.1:1/v1"], "cannot collect FOCUS trees"),
        (lambda d: (d / "p.jsonl").write_text(GOOD), ["--sglang", "http://127.0.0.1:1"], "needs --model"),
        (lambda d: (d / "p.jsonl").write_text(GOOD), ["--model", "Qwen/Qwen3-4B"], "need --sglang URL or --vllm URL"),
        (lambda d: (d / "p.jsonl").write_text(GOOD), ["--budget", "4", "--warmup", "8"], "warmup (8) must not exceed budget (4)"),
    ],
    ids=["empty file", "missing file", "openai", "no model", "model without server", "bad search"],
)
def test_refused_before_anything_starts(tmp_path, capsys, setup, args, message):
    setup(tmp_path)
    out = tmp_path / "out"
    assert main(["collect", str(tmp_path / "p.jsonl"), "--out", str(out), *args]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_server_not_ready_writes_nothing(tmp_path, server, problems_file, capsys):
    out = tmp_path / "out"
    args = ["collect", str(problems_file), "--out", str(out), "--sglang", "http://127.0.0.1:9", "--model", server.model, "--timeout", "2"]
    assert main(args) == 1
    assert "is not ready" in capsys.readouterr().err
    assert not out.exists()


def test_model_not_available_locally_writes_nothing(tmp_path, problems_file, capsys):
    out = tmp_path / "out"
    args = ["collect", str(problems_file), "--out", str(out), "--vllm", "http://127.0.0.1:9/v1", "--tokenizer", str(tmp_path / "none")]
    assert main(args) == 1
    assert "cannot open the backend: tokenizer" in capsys.readouterr().err
    assert not out.exists()


def test_earlier_run_is_kept_unless_overwrite(tmp_path, problems_file, capsys):
    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), "--limit", "2", *SMALL]) == 0
    before = (out / "actor.jsonl").read_text()
    assert main(["collect", str(problems_file), "--out", str(out), "--limit", "1", *SMALL]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "actor.jsonl").read_text() == before
    assert main(["collect", str(problems_file), "--out", str(out), "--limit", "1", "--overwrite", *SMALL]) == 0
    check_output(out, 1, 4)


def test_failed_rollouts_and_problems_are_listed(tmp_path, server, problems_file, capsys):
    out = tmp_path / "out"
    args = ["collect", str(problems_file), "--out", str(out), "--sglang", server.url, "--model", server.model, *SMALL,
            "--limit", "1", "--concurrency", "1"]
    server.set_faults([{"kind": "missing_logprobs", "count": 1}])
    try:
        assert main(args) == 3, "a degraded run (a failed rollout) has its own exit status"
        run = json.loads((out / "run.json").read_text())
        assert run["summary"]["failed_rollouts"] == 1 and run["summary"]["completed"] == 1
        [failure] = lines(out / "failures.jsonl")
        assert failure["kind"] == "rollout" and failure["line"] == 1 and "logprobs" in failure["error"]

        server.set_faults([{"kind": "missing_logprobs"}])
        assert main([*args, "--overwrite"]) == 1, "a problem without a tree fails the run"
    finally:
        server.set_faults([])
    run = json.loads((out / "run.json").read_text())
    assert run["summary"]["failed_problems"] == 1 and run["summary"]["completed"] == 0
    # Every rollout of the failed problem is listed (and counted), then the problem.
    kinds = [f["kind"] for f in lines(out / "failures.jsonl")]
    assert kinds[-1] == "problem" and set(kinds[:-1]) == {"rollout"}
    assert run["summary"]["failed_rollouts"] == len(kinds) - 1 == run["summary"]["rollouts"] > 0
    assert (out / "actor.jsonl").read_text() == "" and not list((out / "trees").iterdir())


def test_ctrl_c_stops_cleanly_and_keeps_what_is_written(tmp_path, server):
    problems = tmp_path / "p.jsonl"
    problems.write_text("".join(json.dumps({"id": p.id, "prompt": p.prompt, "label": p.label}) + "\n" for p in server.problems()[:30]))
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "focus_go", "collect", str(problems), "--out", str(out), *SMALL,
         "--concurrency", "2", "--sim-latency", "0.0005"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list((out / "trees").glob("*.json")) if (out / "trees").is_dir() else []) < 2:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert "Interrupted: kept the completed problems." in stdout and "not collected (interrupted)" in stdout
    run = json.loads((out / "run.json").read_text())
    assert run["summary"]["interrupted"] is True
    n = run["summary"]["completed"]
    assert 2 <= n < 30
    trees = sorted((out / "trees").glob("*.json"))
    assert len(trees) == n
    actor = lines(out / "actor.jsonl")
    assert len(actor) == run["summary"]["actor_records"]
    assert {r["group_index"] for r in actor} == {int(t.name[:5]) for t in trees}, "records only for completed trees"
    assert not list(out.rglob(".tmp-*"))
    # --resume finishes the run: every problem once.
    before = {}
    for r in actor:
        before[r["group_index"]] = before.get(r["group_index"], 0) + 1
    assert main(["collect", str(problems), "--out", str(out), "--resume", *SMALL]) == 0
    after = {}
    for r in lines(out / "actor.jsonl"):
        after[r["group_index"]] = after.get(r["group_index"], 0) + 1
    assert set(after) == set(range(30)) and len(list((out / "trees").glob("*.json"))) == 30
    assert all(after[g] == n for g, n in before.items()), "completed problems are not collected twice"


def test_resume_collects_only_what_is_missing(tmp_path, problems_file, capsys):
    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), "--limit", "2", *SMALL]) == 0
    first = {r["group_index"] for r in lines(out / "actor.jsonl")}
    assert first == {0, 1}
    # What a hard kill could leave: records of problem 2 without its tree, and a torn line.
    with (out / "actor.jsonl").open("a") as f:
        f.write(json.dumps({"group_index": 2, "lane": "actor"}) + "\n" + '{"group_index": 2, "tok')
    capsys.readouterr()
    assert main(["collect", str(problems_file), "--out", str(out), "--resume", *SMALL]) == 0
    captured = capsys.readouterr()
    assert "1 completed, 0 failed, 2 collected before (--resume)" in captured.out
    assert "1 problems from" in captured.err and "(2 collected before)" in captured.err
    actor = lines(out / "actor.jsonl")
    assert {r["group_index"] for r in actor} == {0, 1, 2}
    assert all("tokens" in r for r in actor), "the unfinished problem's records were dropped"
    assert len(list((out / "trees").glob("*.json"))) == 3
    # Nothing left to do: a second resume collects nothing.
    assert main(["collect", str(problems_file), "--out", str(out), "--resume", *SMALL]) == 0
    assert len(lines(out / "actor.jsonl")) == len(actor)


def test_resume_refuses_another_problems_file(tmp_path, problems_file, server, capsys):
    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), "--limit", "1", *SMALL]) == 0
    other = tmp_path / "other.jsonl"
    p = server.problems()[5]
    other.write_text(json.dumps({"id": p.id, "prompt": p.prompt, "label": p.label}) + "\n")
    assert main(["collect", str(other), "--out", str(out), "--resume", *SMALL]) == 2
    assert "is not a tree of this problems file" in capsys.readouterr().err
    assert main(["collect", str(problems_file), "--out", str(out), "--resume", "--overwrite"]) == 2


def _advantages(out: Path) -> Dict[Any, float]:
    return {(r["group_index"], r["node_id"]): r["advantage"] for r in lines(out / "actor.jsonl")}


def test_visitation_weights_are_off_unless_switched_on(tmp_path, problems_file):
    # docs/learning-signal.md, "The defaults and the old behaviour": actor records carry weight, and
    # weight * visitation with --visitation-weights. value_refinement branches below the root, so the factors
    # are not all 1 and the two runs' records differ.
    from focus_go import DirectBranchTd, RewardConfig
    from focus_go.extend import SchedulerState
    from focus_go.preparation import prepare_samples

    args = ["collect", str(problems_file), "--budget", "8", "--warmup", "2", "--score", "value_refinement", "--no-stop-alike"]
    outs = {flag: tmp_path / flag.strip("-") for flag in ("--visitation-weights", "--no-visitation-weights")}
    assert main([*args, "--out", str(tmp_path / "default")]) == 0
    for flag, out in outs.items():
        assert main([*args, "--out", str(out), flag]) == 0
    default, weighted, plain = (_advantages(tmp_path / "default"), _advantages(outs["--visitation-weights"]),
                                _advantages(outs["--no-visitation-weights"]))
    assert default == plain and set(weighted) == set(plain)
    factors = {}
    for tree in sorted(outs["--no-visitation-weights"].glob("trees/*.json")):
        with SchedulerState.from_json(tree.read_text()) as state:
            batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
            factors.update({(int(tree.name[:5]), a.node_id): (a.weight, a.visitation) for a in batch.actor})
    assert any(abs(v - 1) > 1e-9 for _, v in factors.values()), "some edge is over-sampled"
    for key, (w, v) in factors.items():
        assert plain[key] == pytest.approx(w, abs=1e-12)
        assert weighted[key] == pytest.approx(w * v, abs=1e-12)
    for flag, out in outs.items():
        run = json.loads((out / "run.json").read_text())
        assert run["settings"]["visitation_weights"] is (flag == "--visitation-weights")
