"""`focus-go collect` you can trust (issue 17): one writer per output directory, whole
lines whatever happens, an honest --resume, --retry-failed, and no silent success against
servers that misbehave (loopback servers written here, in tests/cli_faults.py)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from cli_faults import FaultyProxy
from focus_go.__main__ import main
from focus_go.cli import outdir

SMALL = ["--budget", "4", "--warmup", "2"]


def lines(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_problems(path: Path, problems: List[Any]) -> Path:
    path.write_text("".join(json.dumps({"id": p.id, "prompt": p.prompt, "label": p.label}) + "\n" for p in problems))
    return path


@pytest.fixture(scope="module")
def problems_file(server, tmp_path_factory):
    return write_problems(tmp_path_factory.mktemp("problems") / "problems.jsonl", server.problems()[:3])


def consistent(out: Path) -> Dict[str, Any]:
    """Every record belongs to a tree, each tree's records appear once, and run.json adds up."""
    run = json.loads((out / "run.json").read_text())
    trees = sorted((out / "trees").glob("*.json"))
    actor, critic = lines(out / "actor.jsonl"), lines(out / "critic.jsonl")
    groups = {int(t.name[:5]) for t in trees}
    assert {r["group_index"] for r in actor} == groups
    for records in (actor, critic):
        keys = [(r["group_index"], r["node_id"]) for r in records]
        assert len(keys) == len(set(keys)), "a record appears more than once"
    assert run["summary"] is not None
    assert len(critic) >= len(groups)
    return run


def spawn(problems: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "focus_go", "collect", str(problems), "--out", str(out), *SMALL, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def wait_for_trees(out: Path, n: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "trees").is_dir() and len(list((out / "trees").glob("*.json"))) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {n} trees in time (exit {proc.poll()})")


def stop(proc: subprocess.Popen, signum: int = signal.SIGINT) -> tuple:
    try:
        proc.send_signal(signum)
        return proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


# ---- 1. one writer per output directory; whole lines


def test_three_runs_into_one_directory_leave_each_record_once(tmp_path, server):
    problems = write_problems(tmp_path / "p.jsonl", server.problems()[:6])
    out = tmp_path / "out"
    procs = [spawn(problems, out, "--sim-latency", "0.001") for _ in range(3)]
    results = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2, 2], results
    for p, (_, err) in zip(procs, results):
        if p.returncode == 2:
            assert "another focus-go collect (pid " in err and "is writing there" in err
    run = consistent(out)
    assert run["summary"]["completed"] == 6


def test_resume_while_a_run_writes_is_refused_naming_its_pid(tmp_path, server, capsys):
    problems = write_problems(tmp_path / "p.jsonl", server.problems()[:30])
    out = tmp_path / "out"
    proc = spawn(problems, out, "--concurrency", "2", "--sim-latency", "0.0005")
    try:
        wait_for_trees(out, 1, proc)
        assert main(["collect", str(problems), "--out", str(out), "--resume", *SMALL]) == 2
        assert f"another focus-go collect (pid {proc.pid}) is writing there" in capsys.readouterr().err
        assert main(["collect", str(problems), "--out", str(out), "--overwrite", *SMALL]) == 2
    finally:
        stop(proc)
    assert proc.returncode == 130
    run = consistent(out)
    n = run["summary"]["completed"]
    # The refused runs took nothing away: every tree the first run wrote is there, with its records.
    assert len(list((out / "trees").glob("*.json"))) == n >= 1
    # Once it has ended, the lock is free.
    assert main(["collect", str(problems), "--out", str(out), "--resume", *SMALL, "--limit", str(n + 1)]) == 0
    consistent(out)


def test_a_torn_last_line_is_cut_when_the_file_is_opened(tmp_path):
    path = tmp_path / "actor.jsonl"
    path.write_text('{"a": 1}\n{"a": 2')
    fd = outdir._open_append(path)
    try:
        outdir._append(fd, '{"a": 3}\n')
    finally:
        os.close(fd)
    assert path.read_text() == '{"a": 1}\n{"a": 3}\n'


def test_a_full_disk_keeps_every_line_whole_and_fails_cleanly(tmp_path, problems_file, capsys, monkeypatch):
    out = tmp_path / "out"
    real_write = os.write
    calls = {"n": 0}

    def write(fd: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] >= 3:  # the second problem's actor records: half written, then no space
            real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(outdir.os, "write", write)
    code = main(["collect", str(problems_file), "--out", str(out), *SMALL, "--concurrency", "1"])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert code == 1 and "cannot write to" in err and "No space left on device" in err and "Traceback" not in err
    for name in ("actor.jsonl", "critic.jsonl"):
        text = (out / name).read_text()
        assert text == "" or text.endswith("\n")
        lines(out / name)  # every line parses
    run = json.loads((out / "run.json").read_text())
    assert run["summary"]["completed"] == 1
    # --resume collects the rest once there is room.
    assert main(["collect", str(problems_file), "--out", str(out), "--resume", *SMALL]) == 0
    assert consistent(out)["problems"] and len(list((out / "trees").glob("*.json"))) == 3


# ---- 2. an honest --resume


@pytest.mark.parametrize(
    "change, names",
    [
        (["--budget", "6"], ["search: ", "budget=4", "budget=6"]),
        (["--gamma", "0.9"], ["reward: ", "'gamma': 1", "'gamma': 0.9"]),
        (["--estimator", "group-baseline"], ["estimator: 'DirectBranchTd' before, 'GroupBaseline' now"]),
        (["--temperature", "0.7"], ["temperature: 1", " before, 0.7 now"]),
        (["--segment-tokens", "128"], ["segment_tokens: 256 before, 128 now"]),
        (["--sim-seed", "3"], ["model: 'simulator seed 0' before, 'simulator seed 3' now"]),
        (["--no-critic"], ["critic: 'constant 0.5' before, 'none' now"]),
    ],
    ids=["budget", "gamma", "estimator", "temperature", "segments", "model", "critic"],
)
def test_resume_refuses_a_setting_that_alters_the_data(tmp_path, problems_file, capsys, change, names):
    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), "--limit", "1", *SMALL]) == 0
    before = {n: (out / n).read_text() for n in ("actor.jsonl", "critic.jsonl", "run.json")}
    capsys.readouterr()
    assert main(["collect", str(problems_file), "--out", str(out), "--resume", *SMALL, *change]) == 2
    err = capsys.readouterr().err
    assert "--resume: the earlier run" in err and "collected with other settings" in err
    for name in names:
        assert name in err
    assert {n: (out / n).read_text() for n in before} == before, "nothing rewritten"


def test_resume_accepts_what_does_not_alter_the_data(tmp_path, problems_file):
    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), "--limit", "1", *SMALL]) == 0
    assert main(["collect", str(problems_file), "--out", str(out), "--resume", *SMALL, "--limit", "2",
                 "--concurrency", "1", "--timeout", "30"]) == 0
    run = consistent(out)
    assert len(run["problems"]) == 2 and run["settings"]["search"].startswith("Selective(budget=4")


def test_resume_refuses_a_changed_problem(tmp_path, server, capsys):
    problems = write_problems(tmp_path / "p.jsonl", server.problems()[:2])
    out = tmp_path / "out"
    assert main(["collect", str(problems), "--out", str(out), *SMALL]) == 0
    changed = [json.loads(line) for line in problems.read_text().splitlines()]
    changed[1]["label"] = "not the answer"
    problems.write_text("".join(json.dumps(r) + "\n" for r in changed))
    capsys.readouterr()
    assert main(["collect", str(problems), "--out", str(out), "--resume", *SMALL]) == 2
    err = capsys.readouterr().err
    assert f"problem {changed[1]['id']!r} (line 2) is not the one the earlier run collected" in err


def test_resume_refuses_a_run_json_without_settings(tmp_path, problems_file, capsys):
    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), "--limit", "1", *SMALL]) == 0
    run = json.loads((out / "run.json").read_text())
    del run["settings"]
    (out / "run.json").write_text(json.dumps(run))
    assert main(["collect", str(problems_file), "--out", str(out), "--resume", *SMALL]) == 2
    assert "does not record the earlier run's settings" in capsys.readouterr().err


# ---- 3. degraded trees: counted, and --retry-failed


def test_retry_failed_replaces_degraded_trees(tmp_path, server, problems_file, capsys):
    out = tmp_path / "out"
    args = ["collect", str(problems_file), "--out", str(out), "--sglang", server.url, "--model", server.model, *SMALL,
            "--concurrency", "1"]
    server.set_faults([{"kind": "missing_logprobs", "count": 1}])
    try:
        assert main(args) == 3, "a degraded run"
    finally:
        server.set_faults([])
    captured = capsys.readouterr()
    run = consistent(out)
    degraded = run["summary"]["degraded_trees"]
    assert degraded >= 1 and "degraded trees" in captured.out
    failed_lines = {f["line"] for f in lines(out / "failures.jsonl") if f["kind"] == "rollout"}
    assert len(failed_lines) == degraded
    # A plain --resume keeps them and says so.
    assert main([*args, "--resume"]) == 0, "nothing failed in this run"
    assert f"{degraded} earlier (--retry-failed collects them again)" in capsys.readouterr().out
    # --retry-failed collects them again, replacing their records.
    assert main([*args, "--retry-failed"]) == 0
    captured = capsys.readouterr()
    assert f"({degraded} degraded trees collected again)" in captured.err
    run = consistent(out)
    assert run["summary"]["retried"] == degraded and run["summary"]["degraded_trees"] == 0
    assert not (out / "failures.jsonl").exists()
    assert len(list((out / "trees").glob("*.json"))) == 3


# ---- 4. a server that answers empty completions


def test_empty_completions_are_failures_not_success(tmp_path, server, problems_file, capsys):
    out = tmp_path / "out"
    with FaultyProxy(server.url, mode="empty") as proxy:
        code = main(["collect", str(problems_file), "--out", str(out), "--sglang", proxy.url, "--model", server.model,
                     *SMALL, "--limit", "1"])
    assert code == 1
    run = json.loads((out / "run.json").read_text())
    assert run["summary"]["completed"] == 0 and run["summary"]["failed_problems"] == 1
    [failure] = [f for f in lines(out / "failures.jsonl") if f["kind"] == "problem"]
    assert "no tokens and finish reason \"length\"" in failure["error"]
    assert (out / "actor.jsonl").read_text() == "" and (out / "critic.jsonl").read_text() == ""


# ---- 5. a server that never answers: the default request timeout


def test_the_request_timeout_has_a_default():
    import argparse

    from focus_go.cli import collect as collect_main

    commands = argparse.ArgumentParser().add_subparsers()
    collect_main.add_parser(commands)
    args = commands.choices["collect"].parse_args(["p.jsonl", "--out", "o"])
    assert args.timeout == collect_main.DEFAULT_TIMEOUT > 0


def test_a_server_that_never_answers_fails_the_rollouts_after_the_timeout(tmp_path, server, problems_file):
    out = tmp_path / "out"
    with FaultyProxy(server.url, mode="hang") as proxy:
        proc = subprocess.run(
            [sys.executable, "-m", "focus_go", "collect", str(problems_file), "--out", str(out), "--sglang", proxy.url,
             "--model", server.model, *SMALL, "--limit", "1", "--timeout", "1"],
            capture_output=True, text=True, timeout=120,
        )
    assert proc.returncode == 1, proc.stderr
    [failure] = [f for f in lines(out / "failures.jsonl") if f["kind"] == "problem"]
    assert "every rollout failed" in failure["error"]
    assert "deadline" in failure["error"] or "timeout" in failure["error"].lower()


# ---- 6. every server checked at start-up, --wait-for-server


def test_a_dead_critic_is_found_before_the_first_problem(tmp_path, problems_file, capsys):
    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), "--critic-url", "http://127.0.0.1:9/values", *SMALL]) == 1
    err = capsys.readouterr().err
    assert "the critic at http://127.0.0.1:9/values is not ready" in err
    assert not out.exists(), "nothing written"


def test_a_critic_that_answers_something_else_is_refused(tmp_path, server, problems_file, capsys):
    out = tmp_path / "out"
    # The simulated server's /health answers, but it is no value server.
    assert main(["collect", str(problems_file), "--out", str(out), "--critic-url", server.url + "/health", *SMALL]) == 1
    err = capsys.readouterr().err
    assert "the critic at " in err and "is not ready" in err and "HTTP 405" in err
    assert not out.exists()


def test_wait_for_server_waits_while_the_server_loads(tmp_path, server, problems_file, capsys):
    out = tmp_path / "out"
    args = ["collect", str(problems_file), "--out", str(out), "--sglang", None, "--model", server.model, *SMALL, "--limit", "1"]
    with FaultyProxy(server.url, mode="starting", starting_for=10**6) as proxy:
        args[5] = proxy.url
        assert main(args) == 1, "without --wait-for-server a loading server is not ready"
        assert "503" in capsys.readouterr().err and not out.exists()
    with FaultyProxy(server.url, mode="starting", starting_for=6) as proxy:
        args[5] = proxy.url
        assert main([*args, "--wait-for-server", "120"]) == 0
        assert "waiting up to 120 s for SGLang at" in capsys.readouterr().err
    consistent(out)


# ---- 7. SIGTERM behaves like Ctrl-C


def test_sigterm_stops_cleanly_and_exits_143(tmp_path, server):
    problems = write_problems(tmp_path / "p.jsonl", server.problems()[:30])
    out = tmp_path / "out"
    proc = spawn(problems, out, "--concurrency", "2", "--sim-latency", "0.0005")
    wait_for_trees(out, 2, proc)
    stdout, stderr = stop(proc, signal.SIGTERM)
    assert proc.returncode == 143, stderr
    assert "Interrupted: kept the completed problems." in stdout
    run = consistent(out)
    assert run["summary"]["interrupted"] is True and run["summary"]["signal"] == signal.SIGTERM
    assert 2 <= run["summary"]["completed"] < 30
    assert not list(out.rglob(".tmp-*"))
    assert not Path(run["backend"]["model"]).exists(), "the simulator's model directory is removed"


# ---- 8. a prompt longer than the model's context is refused up front


def test_a_prompt_longer_than_the_context_is_refused_before_anything_starts(tmp_path, server, capsys):
    problems = tmp_path / "p.jsonl"
    p = server.problems()[0]
    problems.write_text(json.dumps({"id": p.id, "prompt": p.prompt, "label": p.label}) + "\n"
                        + json.dumps({"id": "long", "prompt": "Solve 3x + 7 = 22. " * 40000, "label": "5"}) + "\n"
                        + json.dumps({"id": "huge", "prompt": "Solve 3x + 7 = 22. " * 400000, "label": "5"}) + "\n")
    out = tmp_path / "out"
    assert main(["collect", str(problems), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{problems}:2: problem 'long': its prompt is " in err and "the model's context is 32768 tokens" in err
    assert not out.exists()
    problems.write_text("\n".join(problems.read_text().splitlines()[::2]) + "\n")  # the first and the huge one
    assert main(["collect", str(problems), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{problems}:2: problem 'huge': its prompt is more than " in err and not out.exists()


# ---- 9. every flag checked before anything starts (exit 2)


def test_out_naming_a_file_or_an_unwritable_directory_is_refused(tmp_path, problems_file, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["collect", str(problems_file), "--out", str(a_file), *SMALL]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    locked = tmp_path / "ro"
    locked.mkdir(mode=0o500)
    assert main(["collect", str(problems_file), "--out", str(locked / "out"), *SMALL]) == 2
    assert "cannot write there" in capsys.readouterr().err


def test_out_under_a_file_is_refused(tmp_path, problems_file, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["collect", str(problems_file), "--out", str(a_file / "out"), *SMALL]) == 2
    err = capsys.readouterr().err
    assert "cannot write there" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--budget", "4", "--warmup", "8"], "warmup (8) must not exceed budget (4)"),
        (["--timeout", "0"], "--timeout: must be a number of seconds > 0"),
        (["--wait-for-server", "-1"], "--wait-for-server: must be a number of seconds >= 0"),
        (["--seed", "-1"], "Selective: seed must be an integer in [0, 2**64), got -1"),
        (["--search", "independent", "--seed", "-1"], "Independent: seed"),
        (["--min-abs-advantage", "-1"], "min_abs_advantage"),
        (["--critic-value", "nan"], "--critic-value: must be a finite number"),
    ],
    ids=["warmup over budget", "timeout 0", "negative wait", "negative seed", "negative independent seed",
         "negative min_abs_advantage", "nan critic value"],
)
def test_bad_flags_exit_2_before_anything_starts(tmp_path, problems_file, capsys, flags, message):
    out = tmp_path / "out"
    try:
        code = main(["collect", str(problems_file), "--out", str(out), *flags])
    except SystemExit as exc:  # argparse's own refusal
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--temperature", "-1"], "sampling: temperature -1 must be ≥ 0"),
        (["--top-p", "2"], "sampling: top_p 2 must be in (0, 1]"),
        (["--gamma", "2"], "reward: gamma is 2, must be in (0, 1]"),
        (["--reward-min", "1", "--reward-max", "0"], "reward: reward_min is 1, must be below reward_max 0"),
        (["--critic-weight", "-1"], "reward: critic_weight is -1, must be in [0, 64]"),
    ],
    ids=["negative temperature", "top-p over 1", "gamma over 1", "empty reward range", "negative critic weight"],
)
def test_bad_sampling_and_reward_flags_exit_2_before_anything_starts(tmp_path, problems_file, flags, message):
    # SamplingParams and RewardConfig check their values when built (the Go rules), and the
    # command builds both before any server starts: once per run, not once per problem.
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "focus_go", "collect", str(problems_file), "--out", str(out), *SMALL, *flags],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--budget", "0"], "Selective: budget"),
        (["--warmup", "100"], "warmup (100) must not exceed budget (8)"),
        (["--problems", "0"], "--problems must be an integer >= 1"),
        (["--problems", "-3"], "--problems must be an integer >= 1"),
        (["--problems", "1000"], "the simulator bundles"),
    ],
    ids=["budget 0", "warmup 100", "problems 0", "problems -3", "problems 1000"],
)
def test_bad_demo_arguments_exit_2(tmp_path, capsys, args, message):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), *args]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


# ---- 10. the whole problems file checked before anything starts


@pytest.mark.parametrize(
    "line, message",
    [
        ({"prompt": [{"role": "user", "content": 7}], "label": "1"}, "message 0 has content 7, expected a string or a list of parts"),
        ({"prompt": [{"role": "wizard", "content": "x"}], "label": "1"}, "message 0 has role 'wizard', expected one of"),
        ({"prompt": [{"role": "user", "content": [{"type": "text"}]}], "label": "1"}, "part 0 is a text part without a string 'text'"),
        ({"prompt": [{"role": "user", "content": [3]}], "label": "1"}, "part 0 is 3, expected an object"),
        ({"prompt": [{"role": "user"}], "label": "1"}, "message 0 has no content"),
        ({"prompt": {"role": "user", "content": "x"}, "label": "1"}, "must be a non-empty string or a list of chat messages"),
        ("[" * 100000 + "]" * 100000, "JSON nested too deeply to read"),
    ],
    ids=["content not text", "unknown role", "text part without text", "part not an object", "no content", "not a list", "deep nesting"],
)
def test_every_line_is_checked_even_past_the_limit(tmp_path, server, capsys, line, message):
    p = server.problems()[0]
    problems = tmp_path / "p.jsonl"
    bad = line if isinstance(line, str) else json.dumps(line)
    problems.write_text(json.dumps({"id": p.id, "prompt": p.prompt, "label": p.label}) + "\n" + bad + "\n")
    out = tmp_path / "out"
    assert main(["collect", str(problems), "--out", str(out), "--limit", "1", *SMALL]) == 2
    err = capsys.readouterr().err
    assert f"{problems}:2: " in err and message in err and "Traceback" not in err
    assert not out.exists()


def test_a_prompt_the_chat_template_cannot_render_is_refused_up_front(tmp_path, server, capsys):
    p = server.problems()[0]
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps({"id": p.id, "prompt": p.prompt, "label": p.label}) + "\n"
                        + json.dumps({"id": "t", "prompt": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                                      "label": "1"}) + "\n")
    out = tmp_path / "out"
    # The simulator's template (Qwen's) concatenates content: it renders no parts list.
    assert main(["collect", str(problems), "--out", str(out), *SMALL]) == 2
    err = capsys.readouterr().err
    assert f"{problems}:2: problem 't': cannot render its prompt" in err and "chat: rendering the chat template failed" in err
    assert not out.exists()


# ---- 13. tool-use collection from the command line: --env MODULE:FACTORY

EXAMPLE_ENV = Path(__file__).resolve().parent.parent / "examples" / "calculator_env.py"


def test_env_factory_collects_tool_use_trees(tmp_path, server, capsys):
    problems = tmp_path / "p.jsonl"
    problems.write_text("".join(json.dumps({"id": p.id, "prompt": p.prompt, "label": p.label, "tools": ["calculator"]}) + "\n"
                                for p in server.problems()[:2]))
    out = tmp_path / "out"
    assert main(["collect", str(problems), "--out", str(out), "--env", f"{EXAMPLE_ENV}:make_env", *SMALL,
                 "--segment-tokens", "2048"]) == 0
    run = consistent(out)
    assert run["summary"]["completed"] == 2 and run["settings"]["env"] == f"{EXAMPLE_ENV}:make_env"
    assert run["summary"]["successes"] > 0, "whole answers (a turn of up to --segment-tokens) are graded"
    tree = json.loads(sorted((out / "trees").glob("*.json"))[0].read_text())
    root = tree["nodes"][0]["text"]
    assert '"name": "calculator"' in root, "the tool schemas are in the prompt"
    texts = " ".join(n["text"] for n in tree["nodes"][1:])
    assert "<tool_call>" in texts and "<tool_response>" in texts, "whole turns with tool calls and their results"
    actor = lines(out / "actor.jsonl")
    assert actor and all(len(r["tokens"]) == len(r["loss_mask"]) for r in actor)
    start = capsys.readouterr().err.splitlines()[0]
    assert "whole turns of up to 2048 tokens" in start and "Segments(" not in start, start


@pytest.mark.parametrize(
    "spec, message",
    [
        ("nocolon", "expected MODULE:FACTORY"),
        ("no_such_module_xyz:make", "cannot import no_such_module_xyz: ModuleNotFoundError"),
        (f"{EXAMPLE_ENV}:nothing", "has no callable 'nothing'"),
        ("builtins:str", "returned str for problem"),
        ("json:dumps", "raised for problem"),
    ],
    ids=["no colon", "missing module", "missing factory", "not an env", "factory raises"],
)
def test_a_bad_env_factory_exits_2_before_anything_starts(tmp_path, problems_file, capsys, spec, message):
    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), "--env", spec, *SMALL]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


# ---- 12. progress in a log file, and the unspent budget in the summary


def test_a_log_gets_progress_lines_while_trees_run_and_the_summary_counts_unspent_budget(tmp_path, problems_file, capsys):
    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), *SMALL, "--limit", "1", "--sim-latency", "0.002",
                 "--progress-interval", "0.1"]) == 0
    captured = capsys.readouterr()
    progress = [line for line in captured.err.splitlines() if line.startswith("[")]
    periodic = [line for line in progress if not line.endswith(")")]
    assert periodic, "lines while the tree runs, not only when it ends"
    assert all("0/1 trees" in line for line in periodic)
    run = consistent(out)
    trees = [json.loads(t.read_text())["stats"] for t in (out / "trees").glob("*.json")]
    assert run["summary"]["budget"] == 4 and run["summary"]["budget_unspent"] == sum(t["budget_unspent"] for t in trees)
    assert f"budget unspent        {run['summary']['budget_unspent']} of 4 rollouts" in captured.out


def test_a_log_gets_the_engine_numbers_of_the_running_tree(tmp_path, problems_file, capsys):
    import re

    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), *SMALL, "--limit", "1", "--sim-latency", "0.002",
                 "--progress-interval", "0.05"]) == 0
    captured = capsys.readouterr()
    pattern = re.compile(r"running 1 tree: (\d+)/(\d+) rollouts, (\d+) tokens, (\d+) tokens/s, tree ETA (\S+)")
    live = [m for m in map(pattern.search, captured.err.splitlines()) if m]
    assert live, f"the periodic lines carry the engine's counters:\n{captured.err}"
    [tree] = [json.loads(t.read_text())["stats"] for t in (out / "trees").glob("*.json")]
    finished = [int(m.group(1)) for m in live]
    tokens = [int(m.group(3)) for m in live]
    assert all(int(m.group(2)) == 4 for m in live), "of the tree's budget"
    assert finished == sorted(finished) and tokens == sorted(tokens), "counts only grow"
    assert finished[-1] <= tree["rollouts"] and tokens[-1] <= tree["generated_tokens"]
    for m in live:
        assert (m.group(5) == "-") == (m.group(1) == "0"), "an ETA once a rollout finished"


def test_the_progress_line_shows_the_running_trees():
    import io

    from focus_go.cli.progress import Progress, Totals
    from focus_go.collector import CollectionProgress

    def snap(finished, tokens, rate, eta, failed=0, done=False):
        return CollectionProgress(budget=8, rollouts_launched=finished + 2, rollouts_finished=finished, rollouts_failed=failed,
                                  segments=finished, generated_tokens=tokens, elapsed_seconds=3.0,
                                  tokens_per_second=rate, eta_seconds=eta, done=done)

    live = [snap(3, 300, 100.0, 5.0), snap(1, 90, 30.0, 70.0, failed=1)]
    line = Progress(2, io.StringIO(), Totals(problems=2), live=lambda: live).line()
    assert line.endswith("| running 2 trees: 4/16 rollouts (1 failed), 390 tokens, 130 tokens/s, tree ETA 1m10s"), line
    line = Progress(2, io.StringIO(), Totals(problems=2), live=lambda: [snap(0, 10, 5.0, None)]).line()
    assert "running 1 tree: 0/8 rollouts, 10 tokens, 5 tokens/s, tree ETA -" in line
    # A tree that has just ended (its snapshot has no ETA, being done) has no time left.
    line = Progress(2, io.StringIO(), Totals(problems=2), live=lambda: [snap(8, 800, 100.0, None, done=True)]).line()
    assert "running 1 tree: 8/8 rollouts, 800 tokens, 100 tokens/s, tree ETA 0s" in line, line
    line = Progress(2, io.StringIO(), Totals(problems=2), live=lambda: [snap(8, 800, 100.0, None, done=True), snap(3, 300, 100.0, 5.0)]).line()
    assert line.endswith("tree ETA 5s"), line
    assert "running" not in Progress(2, io.StringIO(), Totals(problems=2), live=list).line()

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    Progress(2, term, Totals(problems=2), live=lambda: live).refresh()
    assert term.getvalue().startswith("\r[") and "running 2 trees: 4/16 rollouts" in term.getvalue(), "redrawn in place"


def test_the_progress_line_says_the_time_left():
    import io

    from focus_go.cli.progress import Progress, Totals, _duration

    totals = Totals(problems=4, completed=1)
    line = Progress(4, io.StringIO(), totals).line()
    assert "1/4 trees" in line and "ETA " in line
    assert [_duration(s) for s in (5, 425, 11520)] == ["5s", "7m05s", "3h12m"]


def test_sigterm_while_waiting_for_the_server_cleans_up_and_exits_143(tmp_path, server, problems_file):
    out = tmp_path / "out"
    with FaultyProxy(server.url, mode="starting", starting_for=10**6) as proxy:
        proc = subprocess.Popen(
            [sys.executable, "-m", "focus_go", "collect", str(problems_file), "--out", str(out), "--sglang", proxy.url,
             "--model", server.model, "--wait-for-server", "300", *SMALL],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + 60
        while proxy.health_calls < 5 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        _, stderr = stop(proc, signal.SIGTERM)
    assert proc.returncode == 143, stderr
    assert "interrupted before the first problem started" in stderr and "Traceback" not in stderr
    assert not out.exists(), "the directory it made (and its lock) is removed"


def test_a_torn_line_in_a_large_file_is_cut_back_to_the_last_newline(tmp_path):
    path = tmp_path / "actor.jsonl"
    whole = "".join(json.dumps({"i": i, "pad": "x" * 200}) + "\n" for i in range(2000))  # > one 64 KB block
    path.write_text(whole + '{"i": 2000, "pad": "' + "y" * 100000)
    os.close(outdir._open_append(path))
    assert path.read_text() == whole


def test_resume_refuses_switching_visitation_weights(tmp_path, problems_file, capsys):
    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), "--limit", "1", *SMALL]) == 0
    capsys.readouterr()
    assert main(["collect", str(problems_file), "--out", str(out), "--resume", *SMALL, "--visitation-weights"]) == 2
    assert "visitation_weights: False before, True now" in capsys.readouterr().err


def test_resume_reads_a_run_json_from_before_visitation_weights_as_unweighted(tmp_path, problems_file, capsys):
    # A run.json written before the flag existed has no visitation_weights: its records
    # are unweighted, so it resumes with --no-visitation-weights and only with it.
    out = tmp_path / "out"
    old = [*SMALL, "--score", "value_refinement", "--no-visitation-weights"]
    assert main(["collect", str(problems_file), "--out", str(out), "--limit", "1", *old]) == 0
    run = json.loads((out / "run.json").read_text())
    del run["settings"]["visitation_weights"]
    (out / "run.json").write_text(json.dumps(run))
    capsys.readouterr()
    assert main(["collect", str(problems_file), "--out", str(out), "--resume", *SMALL, "--score", "value_refinement",
                 "--visitation-weights"]) == 2
    assert "visitation_weights: False before, True now" in capsys.readouterr().err
    assert main(["collect", str(problems_file), "--out", str(out), "--resume", "--limit", "2", *old]) == 0
    assert consistent(out)["settings"]["visitation_weights"] is False


def test_resume_refuses_switching_stop_alike_and_reads_an_older_run_json_as_off(tmp_path, problems_file, capsys):
    # --stop-alike is recorded as its own setting: an older run.json has none, and its trees
    # spent their whole budget (docs/signal.md §P).
    out = tmp_path / "out"
    assert main(["collect", str(problems_file), "--out", str(out), "--limit", "1", *SMALL, "--no-stop-alike"]) == 0
    capsys.readouterr()
    assert main(["collect", str(problems_file), "--out", str(out), "--resume", *SMALL, "--stop-alike"]) == 2
    assert "stop_alike: False before, True now" in capsys.readouterr().err
    run = json.loads((out / "run.json").read_text())
    del run["settings"]["stop_alike"]
    (out / "run.json").write_text(json.dumps(run))
    assert main(["collect", str(problems_file), "--out", str(out), "--resume", "--limit", "2", *SMALL, "--no-stop-alike"]) == 0
    assert consistent(out)["settings"]["stop_alike"] is False
