"""The scripts in examples/: the MATH quick start runs on the simulator and on a server,
the Slime module works as Slime loads it, the Tinker script refuses without a key and
trains through the real loop with a fake Tinker service."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def math_file(server, path: Path, n: int = 2) -> Path:
    """Sim problems in the MATH dataset's format (the answer only inside the solution)."""
    path.write_text("".join(
        json.dumps({"problem": p.prompt, "solution": f"Work it out. The answer is $\\boxed{{{p.metadata['answer']}}}$.",
                    "unique_id": p.id}) + "\n"
        for p in server.problems()[:n]
    ))
    return path


def records(out: Path):
    actor = [json.loads(line) for line in (out / "actor.jsonl").read_text().splitlines()]
    critic = [json.loads(line) for line in (out / "critic.jsonl").read_text().splitlines()]
    return actor, critic


def test_last_boxed_and_math_format(tmp_path):
    mq = load(EXAMPLES / "math_quickstart.py", "math_quickstart_t")
    assert mq.last_boxed(r"so $\boxed{\frac{1}{2}}$, not \boxed{3}? no: \boxed{\sqrt{2}}.") == r"\sqrt{2}"
    assert mq.last_boxed(r"\boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert mq.last_boxed("no box") is None and mq.last_boxed(r"\boxed{open") is None
    f = tmp_path / "m.jsonl"
    f.write_text(json.dumps({"problem": "p", "solution": r"\boxed{7}"}) + "\n\n" + json.dumps({"problem": "q", "answer": "8", "unique_id": "u"}) + "\n")
    assert [(p.prompt, p.label, p.id) for p in mq.math_problems(f, 10)] == [("p", "7", "line-1"), ("q", "8", "u")]


def test_math_quickstart_on_the_simulator(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(EXAMPLES / "math_quickstart.py"), "--out", str(out), "--problems", "2",
                           "--budget", "4", "--warmup", "2"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    actor, critic = records(out)
    assert {r["group_index"] for r in actor} == {0, 1} and critic
    assert "root" in proc.stdout and "correct" in proc.stdout


@pytest.mark.parametrize("flag, suffix", [("--sglang", ""), ("--vllm", "/v1")])
def test_math_quickstart_against_a_server(tmp_path, server, flag, suffix):
    out = tmp_path / "out"
    problems = math_file(server, tmp_path / "math.jsonl")
    proc = subprocess.run([sys.executable, str(EXAMPLES / "math_quickstart.py"), "--out", str(out), flag, server.url + suffix,
                           "--model", server.model, "--math", str(problems), "--budget", "4", "--warmup", "2"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    actor, _ = records(out)
    assert {r["problem_id"] for r in actor} == {p.id for p in server.problems()[:2]}


def test_slime_module_as_slime_loads_it(tmp_path, server, monkeypatch):
    from slime_contract import Sample, check_fanout, generate_and_rm, load_function, make_args

    monkeypatch.syspath_prepend(str(EXAMPLES / "slime"))
    for key, value in {"FOCUS_BUDGET": "4", "FOCUS_WARMUP": "2", "FOCUS_SEGMENT_TOKENS": "64",
                       "FOCUS_CRITIC_DIR": str(tmp_path / "critic")}.items():
        monkeypatch.setenv(key, value)
    sys.modules.pop("focus_math", None)
    args = make_args(sglang_router_port=urlparse(server.url).port, hf_checkpoint=server.model,
                     custom_generate_function_path="focus_math.generate")
    module = load_function("focus_math.collector_for").__module__
    focus_math = sys.modules[module]
    p = server.problems()[0]
    try:
        sample = Sample(group_index=0, index=0, prompt=p.prompt, label=p.label)
        out = asyncio.run(generate_and_rm(args, sample, {"temperature": 1.0}))
        check_fanout(out)
        assert len(out) > 1 and all(s.status == Sample.Status.COMPLETED for s in out)
        assert list((tmp_path / "critic").glob("*.jsonl")), "critic targets written"
        evaluated = asyncio.run(focus_math.evaluate(args, Sample(group_index=0, index=1, prompt=p.prompt, label=p.label), {}))
        assert evaluated.reward in (0.0, 1.0)
    finally:
        focus_math.generate.close()
        focus_math.evaluate.close()
        sys.modules.pop("focus_math", None)
    # The launch snippet is valid bash and names hooks that exist.
    launch = (EXAMPLES / "slime" / "launch.sh").read_text()
    assert subprocess.run(["bash", "-n", str(EXAMPLES / "slime" / "launch.sh")]).returncode == 0
    for flag in ("--custom-reward-post-process-path", "--custom-advantage-function-path", "--custom-pg-loss-reducer-function-path"):
        path = launch.split(flag, 1)[1].split()[0]
        assert callable(load_function(path)), path
    assert "--custom-generate-function-path focus_math.generate" in launch


def test_tinker_script_without_a_key_says_so(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TINKER_API_KEY"}
    proc = subprocess.run([sys.executable, str(EXAMPLES / "tinker_train.py")], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    assert "needs a Tinker API key" in proc.stderr and "TINKER_API_KEY" in proc.stderr


def test_tinker_script_trains_through_the_loop(tmp_path, server, monkeypatch):
    pytest.importorskip("tinker")
    from tinker_standin import StandinTinker

    import tinker
    from focus_go.backends import SGLangPolicy

    sim_policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
    created = []

    class FakeService:
        def create_lora_training_client(self, base_model, rank=32):
            assert (base_model, rank) == (server.model, 8)
            created.append(StandinTinker(sim_policy))
            client = created[-1].training_client()

            async def future():  # tinker 0.38: a future of the client
                return client

            return future()

    monkeypatch.setattr(tinker, "ServiceClient", FakeService)
    monkeypatch.setenv("TINKER_API_KEY", "test-key-unused")
    script = load(EXAMPLES / "tinker_train.py", "tinker_train_t")
    problems = math_file(server, tmp_path / "math.jsonl", 4)
    run_dir = tmp_path / "run"
    try:
        code = script.main(["--model", server.model, "--math", str(problems), "--steps", "2", "--rank", "8",
                            "--budget", "4", "--warmup", "2", "--critic-dir", str(tmp_path / "critic"),
                            "--problems-per-step", "2", "--eval-problems", "1", "--eval-every", "2",
                            "--checkpoint-every", "1", "--run-dir", str(run_dir)])
        assert code == 0
        standin = created[0]
        assert len(created) == 1 and standin.version == 2 and len(standin.trained) == 2
        assert len(list((tmp_path / "critic").glob("*.jsonl"))) == 4  # two trees per update
        lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        # Step 0: the starting weights evaluated (as the cookbook); then one row per update.
        assert [line["step"] for line in lines] == [0, 1, 2] and set(lines[0]) == {"step", "eval/problems", "eval/reward_mean", "eval/success_rate"}
        assert [line["trees"] for line in lines[1:]] == [2.0, 2.0] and "eval/reward_mean" in lines[2]
        assert len((run_dir / "checkpoints.jsonl").read_text().splitlines()) == 2 and len(standin.states) == 2
        # Sampled at the cookbook's default temperature.
        assert {c.temperature for c in standin.sample_calls} == {1.0}
        # Each tree's two warmup rollouts went out as one request.
        assert 2 in {c.num_samples for c in standin.sample_calls}
    finally:
        for s in created:
            s.close()
        sim_policy.close()