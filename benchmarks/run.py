"""focus-go benchmarks (`make bench`). Each section runs its variants side by side in one
run and reports ratios, because these machines are noisy. Results are printed and written to
benchmarks/results/latest.md.

Sections:
- server ceiling vs clients: requests/s that the simulated server (its own process, zero
  latency) answers for 256-token segment requests, from the Go-native SGLang client
  (benchmarks/loadgen, no tree logic) and from a plain Python asyncio client (aiohttp,
  pooled connections) sending the same bodies.
- engine throughput: Selective(32, 16) trees with Segments(256) against the same server:
  segments/s and process CPU per segment for (a) the all-Go path and (b) a Python Completion
  policy and a Python Env through the bridge, each as a fraction of the Go ceiling.
- latency hiding: one Selective(32, 16) tree against a server with latency on, wall time as
  a ratio of the critical path (sum over rounds of the slowest rollout's modelled latency).
- prepare/export (Go): prepare + flat export of Selective-shaped trees, 32 to 4,096 rollouts
  x 8 segments of 256 tokens (`go test -bench` on core/export), time per node and per token.
- prepare/export (Python API): the same trees through the C boundary, prepare_samples +
  Batch.to_records, records per second and bytes crossing the boundary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import tempfile
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SIZES = [32, 256, 1024, 4096]


def go_prepare_export() -> list[str]:
    out = subprocess.run(
        ["go", "test", "-run", "^$", "-bench", "BenchmarkPrepare", "-benchmem", "-benchtime", "5x", "./core/export"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    rows = ["| benchmark | rollouts | ms/op | nodes | ns/node or ns/token | MB/op | allocs/op |", "|---|---|---|---|---|---|---|"]
    for line in out.splitlines():
        m = re.match(r"Benchmark(\w+)/rollouts=(\d+)-\d+\s+\d+\s+(\d+) ns/op(.*)", line)
        if not m:
            continue
        name, n, ns, rest = m.groups()
        metrics = dict((unit, float(v)) for v, unit in re.findall(r"([\d.]+) (\S+)", rest))
        per = metrics.get("ns/token") or metrics.get("ns/node") or 0
        rows.append(
            f"| {name} | {n} | {int(ns) / 1e6:.1f} | {int(metrics.get('nodes', 0))} | {per:.2f} | "
            f"{metrics.get('B/op', 0) / 1e6:.1f} | {int(metrics.get('allocs/op', 0))} |"
        )
    return rows


def python_prepare_export() -> list[str]:
    from focus_go import DirectBranchTd, RewardConfig, _lib
    from focus_go.preparation import prepare_samples
    from focus_go.tree import SchedulerState

    rows = ["| rollouts | prepare_samples ms | to_records ms | records | records/s | tokens | boundary MB |", "|---|---|---|---|---|---|---|"]
    for n in SIZES:
        state = SchedulerState(_lib.call_handle("focus_selftest_search_tree", n, 8, 256, 1))
        t0 = time.perf_counter()
        batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
        t1 = time.perf_counter()
        records = batch.to_records(0)
        t2 = time.perf_counter()
        actor = [r for r in records if r["lane"] == "actor"]
        tokens = sum(len(r["tokens"]) for r in actor)
        own = sum(sum(r["loss_mask"]) for r in actor)
        # what crossed: u32 tokens + (u8 mask + f64 logprob) per own token + per-record columns
        boundary = tokens * 4 + own * 9 + len(actor) * 44
        rows.append(
            f"| {n} | {(t1 - t0) * 1e3:.1f} | {(t2 - t1) * 1e3:.1f} | {len(records)} | "
            f"{len(records) / (t2 - t1):,.0f} | {tokens:,} | {boundary / 1e6:.1f} |"
        )
        del records, actor, batch
        state.close()
    return rows


LOADGEN = ROOT / "build" / "loadgen"
CONCURRENCY = 64


class SimProcess:
    """The simulated server in a process of its own, so clients never share its CPU time."""

    def __init__(self, config: dict) -> None:
        self.proc = subprocess.Popen(
            [str(LOADGEN), "serve", "-config", json.dumps(config)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        info = json.loads(self.proc.stdout.readline())
        self.url, self.model, self.problems = info["url"], info["model_dir"], info["problems"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def prompt_ids(sim: SimProcess) -> list:
    from focus_go.backends import HFTokenizer

    with HFTokenizer(sim.model) as tok:
        _, ids = tok.render([{"role": "system", "content": "Solve the problem."}, {"role": "user", "content": sim.problems[0]["prompt"]}])
    return list(ids)


def go_ceiling(sim: SimProcess, ids: list, seconds: float) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(ids, f)
    try:
        out = subprocess.run(
            [str(LOADGEN), "load", sim.url, "-c", str(CONCURRENCY), "-d", str(seconds), "-tokens", "256", "-prompt", f.name],
            capture_output=True, text=True, check=True,
        ).stdout
    finally:
        os.unlink(f.name)
    return json.loads(out)


async def _python_client(url: str, ids: list, seconds: float) -> dict:
    import aiohttp

    done = 0
    deadline = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker(w: int) -> None:
            nonlocal done
            i = 0
            while time.perf_counter() < deadline:
                body = {
                    "input_ids": ids, "return_logprob": True, "logprob_start_len": -1, "top_logprobs_num": 0,
                    "return_text_in_logprobs": False, "stream": False,
                    "sampling_params": {"max_new_tokens": 256, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0,
                                        "stop": [], "stop_token_ids": [], "skip_special_tokens": False, "no_stop_trim": True,
                                        "spaces_between_special_tokens": False, "repetition_penalty": 1.0, "n": 1,
                                        "sampling_seed": w * 1_000_003 + i},
                }
                async with session.post(url + "/generate", json=body) as resp:
                    data = await resp.json()
                tokens = [t[1] for t in data["meta_info"]["output_token_logprobs"]]
                assert len(tokens) <= 256
                done += 1
                i += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(CONCURRENCY)))
        elapsed = time.perf_counter() - t0
    return {"requests": done, "seconds": elapsed, "rps": done / elapsed}


def python_client(sim: SimProcess, ids: list, seconds: float) -> dict:
    return asyncio.run(_python_client(sim.url, ids, seconds))


def _policy(sim: SimProcess):
    from focus_go.backends import SamplingParams, SGLangPolicy

    return SGLangPolicy(model=sim.model, base_url=sim.url, profile="token_chunk", default_params=SamplingParams(temperature=1.0))


def _critical_path(view, first_token: float, per_token: float) -> float:
    """Sum over rounds of the slowest rollout's modelled latency (first token + per token)."""
    rounds: dict = {}
    duration: dict = {}
    for node in view.nodes[1:]:
        cost = first_token + per_token * sum(1 for s in node.spans for t in s.trainable if t)
        parent = view.node(node.parent)
        continues = node.parent != 0 and parent.search_pass == node.search_pass and duration.get(node.parent) is not None
        duration[node.id] = (duration[node.parent] if continues else 0.0) + cost
        rounds[node.search_pass] = max(rounds.get(node.search_pass, 0.0), duration[node.id])
    return sum(rounds.values())


async def _collect_trees(sim: SimProcess, seconds: float, bridged: bool, parallel: int = 8) -> dict:
    from focus_go import Agent, Collector, Critic, Env, MathEnv, Segments, Selective, Step
    from focus_go.backends import Policy
    from focus_go.env import grade_math
    from focus_go.extend import SchedulerView
    from focus_go.integrations import Problem

    go_policy = _policy(sim)

    class PyMathEnv(Env):
        action = "tokens"

        def __init__(self, label, decode):
            self.label, self.decode, self.tokens = label, decode, []

        def step(self, action):
            self.tokens.extend(action.tokens)
            if not action.finished:
                return Step()
            return Step(reward=float(grade_math(self.decode(self.tokens), self.label)), done=True)

        def fork(self):
            twin = PyMathEnv(self.label, self.decode)
            twin.tokens = list(self.tokens)
            return twin

    async def complete(tokens, params):
        return await go_policy.agenerate_tokens(tokens, params)

    policy = Policy(format=go_policy.format, complete=complete, default_params=go_policy.default_params) if bridged else go_policy
    problems = [Problem(p["prompt"], p["label"], id=p["id"]) for p in sim.problems]
    segments = trees = 0
    deadline = time.perf_counter() + seconds
    cpu0, t0 = time.process_time(), time.perf_counter()

    async def worker(w: int) -> None:
        nonlocal segments, trees
        i = w
        while time.perf_counter() < deadline:
            problem = problems[i % len(problems)]
            env = PyMathEnv(problem.label, policy.decode) if bridged else MathEnv(problem.label, policy.decode)
            agent = Agent(policy=policy, env=env, system_prompt="Solve the problem.", context=Segments(256))
            async with Collector(agent, critic=Critic.constant(0.5), search=Selective(32, 16, seed=i)) as collector:
                state = await collector.collect(problem, allow_partial=True)
            segments += len(SchedulerView(state)) - 1
            trees += 1
            state.close()
            i += parallel

    await asyncio.gather(*(worker(w) for w in range(parallel)))
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    go_policy.close()
    return {"trees": trees, "segments": segments, "seconds": elapsed, "sps": segments / elapsed, "cpu_us_per_segment": cpu / max(segments, 1) * 1e6}


def throughput_sections(seconds: float) -> list[str]:
    sim = SimProcess({"seed": 0, "verbosity": 3})
    try:
        ids = prompt_ids(sim)
        ceiling = go_ceiling(sim, ids, seconds)
        try:
            py = python_client(sim, ids, seconds)
        except ImportError:
            py = None
        native = asyncio.run(_collect_trees(sim, seconds, bridged=False))
        bridged = asyncio.run(_collect_trees(sim, seconds, bridged=True))
    finally:
        sim.close()
    rows = [
        f"Simulated server in its own process, zero latency, {CONCURRENCY} concurrent 256-token segment requests, "
        f"{seconds:g} s per measurement.",
        "",
        "| client | requests or segments /s | x Go ceiling | CPU µs / segment (this process) |",
        "|---|---|---|---|",
        f"| Go-native SGLang client, no tree logic (ceiling) | {ceiling['rps']:,.0f} | 1.00 | |",
    ]
    if py is not None:
        rows.append(f"| plain Python asyncio client (aiohttp), same bodies | {py['rps']:,.0f} | {py['rps'] / ceiling['rps']:.2f} | |")
    else:
        rows.append("| plain Python asyncio client | (aiohttp not installed) | | |")
    rows.append(
        f"| engine, all-Go path: Selective(32, 16) trees, 8 collectors | {native['sps']:,.0f} | {native['sps'] / ceiling['rps']:.2f} | {native['cpu_us_per_segment']:.0f} |"
    )
    rows.append(
        f"| engine, Python Completion + Python Env through the bridge | {bridged['sps']:,.0f} | {bridged['sps'] / ceiling['rps']:.2f} | {bridged['cpu_us_per_segment']:.0f} |"
    )
    return rows


def latency_section() -> list[str]:
    from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
    from focus_go.extend import SchedulerView
    from focus_go.integrations import Problem

    first_token, per_token = 0.02, 0.0002
    sim = SimProcess({"seed": 0, "verbosity": 3, "latency": {"first_token": first_token, "per_token": per_token}})
    rows = ["| tree | rounds | wall s | critical path s | wall / critical path |", "|---|---|---|---|---|"]
    try:
        policy = _policy(sim)
        # The hardest problems: their warmup disagrees, so the search runs branching rounds.
        for p in sorted(sim.problems, key=lambda p: -p["difficulty"])[:3]:
            problem = Problem(p["prompt"], p["label"], id=p["id"])
            agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(256))
            t0 = time.perf_counter()
            state = asyncio.run(Collector(agent, critic=Critic.constant(0.5), search=Selective(32, 16)).collect(problem, allow_partial=True))
            wall = time.perf_counter() - t0
            critical = _critical_path(SchedulerView(state), first_token, per_token)
            rounds = len({n.search_pass for n in SchedulerView(state).nodes[1:]})
            rows.append(f"| {p['id']} | {rounds} | {wall:.3f} | {critical:.3f} | {wall / critical:.3f} |")
            state.close()
        policy.close()
    finally:
        sim.close()
    return [f"Latency model: {first_token * 1e3:g} ms to first token, {per_token * 1e3:g} ms per token.", ""] + rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each throughput measurement")
    args = parser.parse_args()
    lines = ["# focus-go benchmarks", "", "## throughput against the simulated server", ""]
    lines += throughput_sections(args.seconds)
    lines += ["", "## latency hiding", ""]
    lines += latency_section()
    lines += ["", "## prepare + export (Go core)", ""]
    lines += go_prepare_export()
    lines += ["", "## prepare + export through the Python API", ""]
    lines += python_prepare_export()
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "latest.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
