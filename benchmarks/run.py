"""focus-go benchmarks (`make bench`). Each section runs its variants side by side in one
run and reports ratios, because these machines are noisy (2 shared cores). Results are
printed and written to benchmarks/RESULTS.md (--results), which every finished run replaces,
under a header naming the date, the machine, the load and the command line (throughput raw
data: benchmarks/results/throughput.json). How to run and read them: benchmarks/README.md.

Sections (--sections throughput,latency,prepare,memory,layouts,fleet; all by default):
1-2. throughput: the simulated server (verbosity 3) in its own process at zero latency.
  The ceiling is the Go load generator (benchmarks/loadgen, no tree logic, 64 requests in
  flight) replaying the requests the engine itself sends (recorded from a short Go-only
  collection: same prefixes, max_tokens and seeds), so the ceiling and the engine ask the
  server for the same work; prompt-only requests are shown too. Against it: a plain Python
  aiohttp client replaying the same requests; the engine in Go alone (loadgen collect);
  (2a) the all-Go path through the Python API; (2b) a Python Completion policy and a Python
  Env through the bridge; (2c) the plain-Python reference collector (benchmarks/reference).
  What 2b is made of: its floor (a Completion answering at once with ready ids, an Env doing
  nothing, no server), the Go SGLang policy called from Python on the replayed requests, and
  2b's parts alone (its Completion and Python Env called directly on the replayed requests,
  no engine, no bridge). The engine in Go alone is also measured running at the same time as
  the load generator, for a ratio taken within one window.
  Every collector runs 32 concurrent Selective(32, 16, score="value_refinement") trees
  (the reference's rule) with Segments(256) and is measured in a steady-state window (benchmarks/reference/window.py); segments/s and
  process CPU per segment, ratios to the ceiling and to (2c).
3. latency hiding: Selective(32, 16) trees against a server with latency on, wall time as a
  ratio of the critical path (sum over rounds of the slowest rollout's modelled latency),
  and the floor: the Go load generator sending one segment at a time.
4. prepare + export: Selective-shaped trees of 32 to 4,096 rollouts x 8 segments of 256
  tokens; the Go core alone (`go test -bench` on core/export), then through the Python API
  (prepare_samples + Batch.to_records) against the reference's Python implementation of the
  same formulas producing identical records (unweighted: visitation_weights=False); records/s and bytes crossing the C boundary.
5. memory: RSS over 1,000 trees collected, prepared and exported one after another.
6. record layouts: the demo's trees (the four hardest bundled problems, Selective(32, 16))
  with Segments(256) and Segments(32), exported as per-segment records (the default) and
  as path records (layout="paths"): tokens sent to the trainer per trained token, the
  floor (the sum of the leaf paths' lengths over the trained tokens), and Batch.to_records
  time for each layout.
7. fleet (issue #22 parts 1-2): `focus-go collect` with its default settings against
  simulated servers with a finite batch (max_concurrent) and per-token latency, generated
  tokens/s (the servers' own counters over the run's collection time) as a fraction of the
  server's full-batch throughput (the Go load generator with max_concurrent requests in
  flight); then 4 servers, each with its own prefix cache, routed with prefix affinity vs
  round-robin vs one server: prefill tokens computed (prompt tokens the cache did not
  serve) per generated token, and tokens/s.

Every section checks facts about its own results as it runs (benchmarks/crosscheck.py: the
reference's records equal the library's, both layouts train the same tokens, ...); a run
stops at the first that does not hold, and RESULTS.md lists those that held. RESULTS.md's
sections that this program does not write (make bench-signal's, resume_tokens.py's, the
targets) are kept as they are. --quick runs every section and its checks at the smallest
settings (the smoke run, `make bench-smoke`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import platform
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import crosscheck  # noqa: E402
from crosscheck import check  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"  # raw data (throughput.json); ignored by git
RESULTS_MD = ROOT / "benchmarks" / "RESULTS.md"
SIZES = [32, 256, 1024, 4096]


def go_prepare_export(benchtime: str = "5x") -> list[str]:
    out = subprocess.run(
        ["go", "test", "-run", "^$", "-bench", "BenchmarkPrepare", "-benchmem", "-benchtime", benchtime, "./core/export"],
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


def _best(fn, reps: int = 3) -> tuple:
    """The fastest of `reps` runs (seconds, last result): the least-disturbed measurement."""
    best, out = float("inf"), None
    for _ in range(reps):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def python_prepare_export(sizes: Sequence[int] = SIZES) -> list[str]:
    """The same trees through the C boundary (prepare_samples + Batch.to_records) and through
    the plain-Python reference (DirectBranchTd values, advantages, critic targets, records),
    each producing identical records. prepare_samples returns samples that are built on first
    access (the reference's prepare returns bare numbers); reading every critic sample is timed
    on its own. Boundary MB: what prepare_samples receives (metadata JSON + sample columns),
    then what to_records receives (records' new tokens, own-span masks and logprobs, per-record
    columns, critic contexts)."""
    from focus_go import DirectBranchTd, RewardConfig, _lib
    from focus_go.preparation import prepare_samples
    from focus_go.tree import SchedulerState

    from reference import algorithm

    rows = [
        "| rollouts | nodes | records | prepare ms (focus-go / reference) | x | to_records ms (focus-go / reference) | x "
        "| end-to-end x | records/s (focus-go / reference) | read batch.critic ms | boundary MB (prepare / records) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in sizes:
        state = SchedulerState(_lib.call_handle("focus_selftest_search_tree", n, 8, 256, 1))
        ref_tree = algorithm.from_json(json.loads(state.to_json()))
        reps = 5 if n <= 1024 else 3

        def go_prep():
            return prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())

        def ref_prep():
            vals = algorithm.values(ref_tree)
            return algorithm.advantages(ref_tree, vals), algorithm.critic_targets(ref_tree, vals)

        # Interleaved, best of reps each: the two sides see the same machine load.
        go_p = ref_p = go_r = ref_r = go_c = float("inf")
        for _ in range(reps):
            t, batch = _best(go_prep, 1)
            go_p = min(go_p, t)
            t, (adv, targets) = _best(ref_prep, 1)
            ref_p = min(ref_p, t)
            # Unweighted: the reference's records carry the plain advantage.
            t, records = _best(lambda: batch.to_records(0, visitation_weights=False), 1)
            go_r = min(go_r, t)
            n_records = len(records)
            del records
            t, ref_records = _best(lambda: algorithm.records(ref_tree, adv, targets), 1)
            ref_r = min(ref_r, t)
            check(len(ref_records) == n_records, "prepare: the reference builds as many records as focus-go")
            del ref_records
            t, _ = _best(lambda: len(list(batch.critic)), 1)
            go_c = min(go_c, t)
        # the two implementations produce the same records
        key = lambda r: (r["lane"], r["node_id"])  # noqa: E731
        if n <= 1024:
            check(sorted(algorithm.records(ref_tree, adv, targets), key=key) == sorted(batch.to_records(0, visitation_weights=False), key=key),
                  "prepare: the reference's records equal focus-go's, key for key (trees of at most 1,024 rollouts)")
        prep_bytes, rec_bytes = _prepare_bytes(state), _boundary_bytes(batch)
        rows.append(
            f"| {n:,} | {len(ref_tree.nodes):,} | {n_records:,} | {go_p * 1e3:.1f} / {ref_p * 1e3:.1f} | {ref_p / go_p:.2f} "
            f"| {go_r * 1e3:.0f} / {ref_r * 1e3:.0f} | {ref_r / go_r:.2f} | {(ref_p + ref_r) / (go_p + go_r):.2f} "
            f"| {n_records / (go_p + go_r):,.0f} / {n_records / (ref_p + ref_r):,.0f} | {go_c * 1e3:.1f} "
            f"| {prep_bytes / 1e6:.2f} / {rec_bytes / 1e6:.1f} |"
        )
        del batch
        state.close()
    return rows


def _take_blob_size(name: str, handle: int, *args) -> int:
    """Bytes of the (layout JSON, buffer) pair that function `name` returns for a handle
    (and its other arguments)."""
    import ctypes

    from focus_go import _lib

    layout_ptr, blob, size = _lib.Bytes(), ctypes.c_void_p(), ctypes.c_size_t()
    _lib.call(name, _lib.c_handle(handle), *args, ctypes.byref(layout_ptr), ctypes.byref(blob), ctypes.byref(size))
    layout = _lib.take_string(layout_ptr)
    _lib.lib().focus_buffer_free(blob)
    return size.value + len(layout)


def _prepare_bytes(state) -> int:
    """Bytes prepare_samples receives: focus_prepare's metadata JSON and the sample columns."""
    import ctypes

    from focus_go import RewardConfig, _lib

    cfg = RewardConfig()._json()
    out = _lib.c_handle()
    summary = _lib.call_string("focus_prepare", _lib.c_handle(state.handle), cfg, len(cfg), *_lib.text_arg("DirectBranchTd"), ctypes.byref(out))
    try:
        return len(summary.encode()) + _take_blob_size("focus_batch_columns", out.value)
    finally:
        _lib.release(out.value)


def _boundary_bytes(batch) -> int:
    """Bytes of the buffer and layout focus_batch_export hands to Python for this batch."""
    from focus_go import _lib

    with batch._go_batch() as go:
        return _take_blob_size("focus_batch_export", go.handle, 0, 0.0, *_lib.text_arg(""), 0)


LOADGEN = Path(os.environ.get("FOCUS_BENCH_LOADGEN", ROOT / "build" / "loadgen"))
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

    def usage(self) -> tuple:
        """(server CPU seconds, tokens generated so far): the server's cost per token
        differs between request mixes, so each measurement reports it."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        with urllib.request.urlopen(self.url + "/get_server_info", timeout=10) as r:
            tokens = json.load(r)["internal_states"][0]["generated_tokens"]
        return cpu, tokens

    def measure(self, fn) -> dict:
        """fn()'s result with "server_us_per_segment": server CPU per 256 generated tokens."""
        cpu0, tok0 = self.usage()
        result = fn()
        cpu1, tok1 = self.usage()
        result["server_us_per_segment"] = (cpu1 - cpu0) / max(tok1 - tok0, 1) * 256 * 1e6
        return result


def _loadgen(*args: str) -> dict:
    out = subprocess.run([str(LOADGEN), *args], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def go_ceiling(sim: SimProcess, seconds: float, replay: Path) -> dict:
    """The limit: the engine's own recorded requests replayed by the Go load generator."""
    return _loadgen("load", sim.url, "-c", str(CONCURRENCY), "-d", str(seconds), "-replay", str(replay))


def go_prompt_only(sim: SimProcess, seconds: float, prompt: Path) -> dict:
    """Prompt-only 256-token requests (every request starts at the root)."""
    return _loadgen("load", sim.url, "-c", str(CONCURRENCY), "-d", str(seconds), "-tokens", "256", "-prompt", str(prompt))


async def _replay(calls: list, seconds: float, send) -> dict:
    """CONCURRENCY workers awaiting send(call) for `seconds`, each going round the calls
    from its own offset: requests/s and process CPU per request."""
    done = 0
    deadline = time.perf_counter() + seconds
    cpu0 = time.process_time()

    async def worker(w: int) -> None:
        nonlocal done
        i = w * len(calls) // CONCURRENCY
        while time.perf_counter() < deadline:
            await send(calls[i % len(calls)])
            done += 1
            i += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(CONCURRENCY)))
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    return {"requests": done, "seconds": elapsed, "rps": done / elapsed, "cpu_us_per_request": cpu / max(done, 1) * 1e6}


async def _python_client(url: str, requests: list, seconds: float) -> dict:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session:

        async def send(r: dict) -> None:
            body = {
                "input_ids": r["tokens"], "return_logprob": True, "logprob_start_len": -1, "top_logprobs_num": 0,
                "return_text_in_logprobs": False, "stream": False,
                "sampling_params": {"max_new_tokens": r["max_tokens"], "temperature": 1.0, "no_stop_trim": True,
                                    "sampling_seed": r["seed"]},
            }
            async with session.post(url + "/generate", json=body) as resp:
                data = await resp.json()
            assert len(data["output_ids"]) <= r["max_tokens"]

        return await _replay(requests, seconds, send)


def python_client(sim: SimProcess, replay: Path, seconds: float) -> dict:
    return asyncio.run(_python_client(sim.url, json.loads(replay.read_text()), seconds))


def _replay_calls(requests: list) -> list:
    """The recorded requests as (prefix, SamplingParams) pairs for a policy's agenerate_tokens."""
    from focus_go.backends import SamplingParams

    return [(tuple(r["tokens"]), SamplingParams(max_tokens=r["max_tokens"], temperature=1.0, seed=r["seed"])) for r in requests]


async def _policy_calls(sim: SimProcess, requests: list, seconds: float) -> dict:
    """The Go SGLang policy called from Python (agenerate_tokens, what the 2b benchmark's
    Completion forwards to) on the replayed requests, CONCURRENCY calls in flight."""
    policy = _policy(sim)
    calls = _replay_calls(requests)

    async def send(call: tuple) -> None:
        prefix, params = call
        result = await policy.agenerate_tokens(prefix, params)
        assert len(result.tokens) <= params.max_tokens

    try:
        return await _replay(calls, seconds, send)
    finally:
        policy.close()


def policy_calls(sim: SimProcess, replay: Path, seconds: float) -> dict:
    return asyncio.run(_policy_calls(sim, json.loads(replay.read_text()), seconds))


def _python_parts(go_policy) -> tuple:
    """2b's Python parts: the Completion of the spec's example (it forwards to a backend's
    agenerate_tokens, here the Go SGLang policy's) in a Policy, and the class of a math Env
    written in Python, which keeps the episode's ids in a list (copied on fork) and, when a
    chunk finishes, decodes them with the policy's tokenizer and grades with grade_math."""
    from focus_go import Env, Step
    from focus_go.backends import Policy
    from focus_go.env import grade_math

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

    return Policy(format=go_policy.format, complete=complete, default_params=go_policy.default_params), PyMathEnv


async def _contract_floor(sim: SimProcess, requests: list, seconds: float) -> dict:
    """2b's own parts without the engine or the bridge: CONCURRENCY workers go round the
    replayed requests; for each, the Policy (the Completion forwarding to the Go policy)
    generates from the recorded prefix, and the worker's Python Env steps with the chunk and
    forks, as the engine asks of them once per segment (a new Env when an episode
    finishes). Any collector that serves these parts runs at least this much per segment,
    plus its tree logic and its way of reaching them."""
    from focus_go.types import TokenChunk

    go_policy = _policy(sim)
    policy, PyMathEnv = _python_parts(go_policy)
    labels = [p["label"] for p in sim.problems]
    calls = _replay_calls(requests)
    envs: dict = {}

    async def send(call: tuple) -> None:
        prefix, params = call
        worker = asyncio.current_task()
        env = envs.get(worker)
        if env is None:
            env = PyMathEnv(labels[len(envs) % len(labels)], policy.decode)
        result = await policy.agenerate_tokens(prefix, params)
        step = env.step(TokenChunk(tokens=result.tokens, finished=result.stop_reason == "stop"))
        if step.done:
            envs[worker] = None
        else:
            env.fork()  # the snapshot the engine keeps of a checkpoint
            envs[worker] = env

    try:
        return await _replay(calls, seconds, send)
    finally:
        go_policy.close()


def contract_floor(sim: SimProcess, replay: Path, seconds: float) -> dict:
    return asyncio.run(_contract_floor(sim, json.loads(replay.read_text()), seconds))


def go_engine_at_once(sim: SimProcess, seconds: float, problems_file: Path, replay: Path) -> dict:
    """The engine in Go alone and the load generator replaying its requests, run at the same
    time against the server, the load generator's run opening with the engine's measured
    window: both see the same minute of the machine, so the ratio of their CPU per segment
    and per request is free of the drift between measurements taken one after the other."""
    warmup = 1.5
    engine = subprocess.Popen([str(LOADGEN), "collect", sim.url, "-model", sim.model, "-problems", str(problems_file),
                               "-trees", str(TREES), "-d", str(seconds), "-warmup", str(warmup)], stdout=subprocess.PIPE, text=True)
    time.sleep(warmup)
    load = subprocess.Popen([str(LOADGEN), "load", sim.url, "-c", str(CONCURRENCY), "-d", str(seconds), "-replay", str(replay)],
                            stdout=subprocess.PIPE, text=True)
    engine_out, load_out = engine.communicate()[0], load.communicate()[0]
    if engine.returncode or load.returncode:
        raise RuntimeError(f"loadgen failed: collect exit {engine.returncode}, load exit {load.returncode}")
    e, l = json.loads(engine_out), json.loads(load_out)
    return {**e, "load_cpu_us_per_request": l["cpu_us_per_request"], "load_rps": l["rps"]}


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


# Concurrent trees for every engine variant and the reference. A tree keeps 16 rollouts in
# flight during warmup but at most 4 in a branching round, and each round waits for its
# slowest rollout; 32 trees keep the 64-request cap of the HTTP client (and of the
# reference's connection pool) busy most of the time.
TREES = 32


async def _collect_trees(sim: SimProcess, seconds: float, variant: str, parallel: int = TREES) -> dict:
    """Trees collected for `seconds` (steady-state window) by one engine variant: "native",
    the all-Go path (2a); "bridged", a Python Completion forwarding to the Go policy with a
    Python MathEnv (2b); or "bridge_floor", the bridge's own cost: a Completion that answers
    at once with ready-made ids (no server) and an Env whose step and fork do nothing."""
    from focus_go import Agent, Collector, Critic, Env, MathEnv, Segments, Selective, Step
    from focus_go.backends import Policy
    from focus_go.integrations import Problem
    from focus_go.types import GenerateResult

    go_policy = _policy(sim)
    python_policy, PyMathEnv = _python_parts(go_policy)

    class NullEnv(Env):
        action = "tokens"

        def step(self, action):
            return Step(reward=0.0, done=True) if action.finished else Step()

        def fork(self):
            return NullEnv()

    if variant == "bridge_floor":
        # The floor's responses: 256 ids drawn from the prompts' (so inside the vocabulary),
        # ending the response with probability 0.3, about the simulated server's segments
        # per tree; fixed lists, so answering costs the Completion nothing.
        rng = random.Random(0)
        vocabulary = sorted({t for p in _problem_ids(sim) for t in p})
        canned = [(tuple(rng.choices(vocabulary, k=256)), rng.random() < 0.3) for _ in range(97)]
        answered = itertools.count()

        async def floor_complete(tokens, params):
            ids, stop = canned[next(answered) % len(canned)]
            return GenerateResult(tokens=ids, stop_reason="stop" if stop else "length", logprobs=[-0.5] * len(ids))

        policy = Policy(format=go_policy.format, complete=floor_complete, default_params=go_policy.default_params)
    elif variant == "bridged":
        policy = python_policy
    else:
        policy = go_policy
    problems = [Problem(p["prompt"], p["label"], id=p["id"]) for p in sim.problems]
    from reference.window import Window, run_workers

    async def one_tree(i: int) -> int:
        problem = problems[i % len(problems)]
        if variant == "bridge_floor":
            env = NullEnv()
        elif variant == "bridged":
            env = PyMathEnv(problem.label, policy.decode)
        else:
            env = MathEnv(problem.label, policy.decode)
        agent = Agent(policy=policy, env=env, system_prompt="Solve the problem.", context=Segments(256))
        # value_refinement: the rule of the reference collector (benchmarks/reference) and of
        # checkouts before 2026-12-02 (BASELINE=), so every collector builds the same trees.
        search = Selective(32, 16, score="value_refinement", seed=i)
        async with Collector(agent, critic=Critic.constant(0.5), search=search) as collector:
            state = await collector.collect(problem, allow_partial=True)
        def count() -> int:
            n = len(state) - 1  # segments: every node but the root
            state.close()
            return n

        return count

    out = await run_workers(parallel, Window(seconds), one_tree)
    go_policy.close()
    return out


def _reference(sim: SimProcess, problems: list, seconds: float) -> dict:
    from reference import collector

    ids = {p["id"]: p["prompt_tokens"] for p in problems}
    return asyncio.run(collector.run(sim.url, sim.problems, ids, seconds, TREES, CONCURRENCY))


def _problem_ids(sim) -> list:
    """Each problem's rendered prompt ids (the system prompt the benchmarks use)."""
    from focus_go.backends import HFTokenizer

    with HFTokenizer(sim.model) as tok:
        return [list(tok.render([{"role": "system", "content": "Solve the problem."}, {"role": "user", "content": p["prompt"]}])[1])
                for p in sim.problems]


def _problems_file(sim: SimProcess, path: Path) -> list:
    out = [{"id": p["id"], "label": p["label"], "prompt_tokens": ids} for p, ids in zip(sim.problems, _problem_ids(sim))]
    path.write_text(json.dumps(out))
    return out


def _median(xs: list) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _baseline_variant(baseline: Path, name: str, sim: SimProcess, seconds: float, problems_file: Path) -> dict:
    """One engine variant of an earlier checkout in the same run (`make bench BASELINE=ref`):
    the Go-alone engine with that checkout's loadgen, or 2a / 2b in a child process that
    imports that checkout's focus_go package and loads its self-test library, driven by this
    file's _collect_trees (public API only, so both versions run the same benchmark)."""
    if name == "go_engine":
        out = subprocess.run([str(baseline / "loadgen"), "collect", sim.url, "-model", sim.model, "-problems", str(problems_file),
                              "-trees", str(TREES), "-d", str(seconds)], capture_output=True, text=True, check=True).stdout
        return json.loads(out)
    env = {**os.environ, "PYTHONPATH": str(baseline / "python"), "FOCUS_GO_LIBRARY": str(baseline / "libfocus.so")}
    out = subprocess.run(
        [sys.executable, __file__, "--engine-variant", json.dumps({"name": name, "url": sim.url, "model": sim.model,
                                                                   "problems": sim.problems, "seconds": seconds})],
        capture_output=True, text=True, check=True, env=env,
    ).stdout
    return json.loads(out.splitlines()[-1])


class _RemoteSim:
    """The parts of SimProcess that _collect_trees reads, for a child process."""

    def __init__(self, spec: dict) -> None:
        self.url, self.model, self.problems = spec["url"], spec["model"], spec["problems"]


def _engine_variant_child(spec: dict) -> None:
    import focus_go

    assert str(Path(focus_go.__file__).resolve()).startswith(os.environ["PYTHONPATH"]), focus_go.__file__
    out = asyncio.run(_collect_trees(_RemoteSim(spec), spec["seconds"], spec["name"]))
    print(json.dumps(out))


def cpu_ratio_rows(rows: dict, baseline: str) -> list[str]:
    """Issue 22 part 3: client CPU per segment as ratios, each taken within a repetition
    (median over repetitions): the engine in Go alone and 2a against the load generator's
    CPU per replayed request (the engine in Go alone also against the load generator run at
    the same time), 2b against 2a; before (an earlier commit, same run) and after."""

    def cpu(r: dict) -> float:
        return r.get("cpu_us_per_segment", r.get("cpu_us_per_request", 0.0))

    def ratio(name: str, to: str) -> str:
        if name not in rows or to not in rows:
            return ""
        return f"{_median([cpu(a) / cpu(b) for a, b in zip(rows[name], rows[to])]):.2f}"

    def us(name: str) -> str:
        return f"{_median([cpu(r) for r in rows[name]]):.0f}" if name in rows else ""

    before = f"before ({baseline})" if baseline else "before (run with BASELINE=commit)"
    out = [
        "Client CPU per segment as ratios (process CPU, getrusage / process_time, over the same window; "
        "ratios within a repetition, medians), before and after in this run:",
        "",
        f"| ratio | {before} | after | target | CPU µs / segment ({before.split(' (')[0]} / after) |",
        "|---|---|---|---|---|",
    ]
    for label, name, to, target in [
        ("engine in Go alone / load generator (per replayed request)", "go_engine", "ceiling", "<= 1.30"),
        ("2a, all-Go path through Python / load generator", "native", "ceiling", ""),
        ("2b, Python Completion + Python Env / 2a", "bridged", "native", "<= 2.00"),
        ("2b's floor (no-op Completion and Env, no server) / 2a", "bridge_floor", "native", ""),
        ("2b's parts alone (its Completion and Env, no engine, no bridge) / 2a", "contract_floor", "native", ""),
        ("Go SGLang policy called from Python / load generator (per request)", "policy_calls", "ceiling", ""),
    ]:
        out.append(f"| {label} | {ratio('before_' + name, 'ceiling' if to == 'ceiling' else 'before_' + to)} | {ratio(name, to)} | {target} "
                   f"| {us('before_' + name) or '-'} / {us(name)} |")
        if name == "go_engine" and "go_engine_at_once" in rows:
            at_once = rows["go_engine_at_once"]
            out.append(f"| the same, both running at once (one window) | | "
                       f"{_median([r['cpu_us_per_segment'] / r['load_cpu_us_per_request'] for r in at_once]):.2f} | {target} "
                       f"| - / {us('go_engine_at_once')} |")
    return out


def throughput_sections(seconds: float, reps: int, baseline: Optional[Path] = None) -> list[str]:
    sim = SimProcess({"seed": 0, "verbosity": 3})
    rows: dict = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tmpdir = Path(tmp)
            problems = _problems_file(sim, tmpdir / "problems.json")
            prompt = tmpdir / "prompt.json"
            prompt.write_text(json.dumps(problems[0]["prompt_tokens"]))
            replay = tmpdir / "replay.json"
            # Record the request mix the engine sends in its steady state (prefix lengths,
            # max_tokens, seeds), from the opening of the collect's measured window.
            _loadgen("collect", sim.url, "-model", sim.model, "-problems", str(tmpdir / "problems.json"),
                     "-trees", str(TREES), "-d", "2", "-record", str(replay), "-max-record", "4000")
            variants = [
                ("ceiling", lambda: go_ceiling(sim, seconds, replay)),
                ("prompt_only", lambda: go_prompt_only(sim, seconds, prompt)),
                ("py_client", lambda: python_client(sim, replay, seconds)),
                ("policy_calls", lambda: policy_calls(sim, replay, seconds)),
                ("go_engine", lambda: _loadgen("collect", sim.url, "-model", sim.model, "-problems", str(tmpdir / "problems.json"),
                                                "-trees", str(TREES), "-d", str(seconds))),
                ("native", lambda: asyncio.run(_collect_trees(sim, seconds, "native"))),
                ("bridged", lambda: asyncio.run(_collect_trees(sim, seconds, "bridged"))),
                ("bridge_floor", lambda: asyncio.run(_collect_trees(sim, seconds, "bridge_floor"))),
                ("contract_floor", lambda: contract_floor(sim, replay, seconds)),
                ("go_engine_at_once", lambda: go_engine_at_once(sim, seconds, tmpdir / "problems.json", replay)),
                ("reference", lambda: _reference(sim, problems, seconds)),
            ]
            pairs: dict = {}
            if baseline is not None:
                # The same engine variants of an earlier commit, each run right beside this
                # tree's (first in every other repetition), so that the machine's drift
                # over a repetition does not fall on one side of a before/after ratio.
                pairs = {name: ("before_" + name, lambda name=name: _baseline_variant(baseline, name, sim, seconds, tmpdir / "problems.json"))
                         for name in ("go_engine", "native", "bridged", "bridge_floor")}
            for rep in range(reps):
                for name, fn in variants:
                    side = [(name, fn)] + ([pairs[name]] if name in pairs else [])
                    for n, f in side[::-1] if rep % 2 else side:
                        rows.setdefault(n, []).append(sim.measure(f))
    finally:
        sim.close()

    def rate(r: dict) -> float:
        return r.get("sps", r.get("rps", 0.0))

    check(all(rate(r) > 0 for rs in rows.values() for r in rs), "throughput: every client finished segments or requests in every measurement")

    def cpu(r: dict) -> str:
        v = r.get("cpu_us_per_segment", r.get("cpu_us_per_request"))
        return f"{v:.0f}" if v is not None else ""

    # Ratios are taken within each repetition (same minute of machine noise), then the median.
    def ratio(name: str, to: str) -> float:
        return _median([rate(a) / rate(b) for a, b in zip(rows[name], rows[to])])

    def med(name: str) -> dict:
        rs = rows[name]
        mid = sorted(rs, key=rate)[len(rs) // 2]
        return {"rate": _median([rate(r) for r in rs]), "cpu": cpu(mid), "server": f"{mid['server_us_per_segment']:.0f}"}

    labels = [
        ("ceiling", "1. ceiling: Go load generator replaying the engine's recorded requests, no tree logic"),
        ("prompt_only", "Go load generator, prompt-only 256-token requests"),
        ("py_client", "plain Python aiohttp client replaying the same requests"),
        ("policy_calls", "the Go SGLang policy called from Python (agenerate_tokens) on the same requests"),
        ("go_engine", "engine in Go alone (loadgen collect, no Python)"),
        ("native", "2a. engine, all-Go path through the Python API"),
        ("bridged", "2b. engine, Python Completion policy + Python Env through the bridge"),
        ("bridge_floor", "2b's floor: a Completion answering at once with ready ids (no server) + an Env doing nothing"),
        ("contract_floor", "2b's parts alone: its Completion (forwarding to the Go policy) and Python Env called directly on the replayed requests, no engine, no bridge"),
        ("reference", "2c. plain-Python reference collector (benchmarks/reference)"),
    ]
    out = [
        f"Simulated server (verbosity 3) in its own process, zero latency; {CONCURRENCY} requests in flight at most; "
        f"{TREES} concurrent Selective(32, 16) trees with Segments(256) for every collector; {seconds:g} s per measurement, "
        f"{reps} interleaved repetitions, medians (ratios taken within a repetition).",
        "",
        "| client | requests or segments /s | x ceiling | x reference (2c) | CPU µs / request or segment (client process) | server CPU µs / 256 tokens |",
        "|---|---|---|---|---|---|",
    ]
    if baseline is not None:
        labels += [("before_" + name, f"before ({baseline.name}): {label}") for name, label in labels if name in ("go_engine", "native", "bridged", "bridge_floor")]
    for name, label in labels:
        m = med(name)
        out.append(f"| {label} | {m['rate']:,.0f} | {ratio(name, 'ceiling'):.2f} | {ratio(name, 'reference'):.2f} | {m['cpu']} | {m['server']} |")
    out += [""] + cpu_ratio_rows(rows, baseline.name if baseline is not None else "")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "throughput.json").write_text(json.dumps(rows, indent=1))
    return out


def latency_section(problems: int = 3) -> list[str]:
    from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
    from focus_go.extend import SchedulerView
    from focus_go.integrations import Problem

    first_token, per_token = 0.02, 0.0002
    sim = SimProcess({"seed": 0, "verbosity": 3, "latency": {"first_token": first_token, "per_token": per_token}})
    rows = ["| tree | rounds | wall s | critical path s | wall / critical path |", "|---|---|---|---|---|"]
    try:
        policy = _policy(sim)
        # The hardest problems: their warmup disagrees, so the search runs branching rounds.
        for p in sorted(sim.problems, key=lambda p: -p["difficulty"])[:problems]:
            problem = Problem(p["prompt"], p["label"], id=p["id"])
            agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(256))
            t0 = time.perf_counter()
            state = asyncio.run(Collector(agent, critic=Critic.constant(0.5), search=Selective(32, 16)).collect(problem, allow_partial=True))
            wall = time.perf_counter() - t0
            critical = _critical_path(SchedulerView(state), first_token, per_token)
            rounds = len({n.search_pass for n in SchedulerView(state).nodes[1:]})
            check(rounds > 1, "latency: every tree ran branching rounds after its warmup")
            rows.append(f"| {p['id']} | {rounds} | {wall:.3f} | {critical:.3f} | {wall / critical:.3f} |")
            state.close()
        policy.close()
        # The floor: one rollout at a time as a chain of segment requests, no tree logic.
        with tempfile.TemporaryDirectory() as tmp:
            prompt = Path(tmp) / "prompt.json"
            prompt.write_text(json.dumps(_problems_file(sim, Path(tmp) / "problems.json")[0]["prompt_tokens"]))
            chain = _loadgen("chain", sim.url, "-prompt", str(prompt), "-n", "6", "-first", str(first_token), "-per", str(per_token))
        rows.append(f"| floor: Go load generator, {chain['segments']} segments one at a time (no tree, no concurrency) | | "
                    f"{chain['wall']:.3f} | {chain['modelled']:.3f} | {chain['ratio']:.3f} |")
    finally:
        sim.close()
    return [f"Latency model: {first_token * 1e3:g} ms to first token, {per_token * 1e3:g} ms per token.", ""] + rows


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def memory_section(trees: int) -> list[str]:
    """RSS of this process over `trees` trees collected one after another (all-Go path),
    each prepared, exported to records and closed, as a training loop would."""
    from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
    from focus_go.integrations import Problem

    sim = SimProcess({"seed": 0, "verbosity": 3})
    samples = []
    try:
        policy = _policy(sim)
        problems = [Problem(p["prompt"], p["label"], id=p["id"]) for p in sim.problems]

        async def loop() -> None:
            for i in range(trees):
                problem = problems[i % len(problems)]
                agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), system_prompt="Solve the problem.", context=Segments(256))
                async with Collector(agent, critic=Critic.constant(0.5), search=Selective(32, 16, seed=i)) as collector:
                    state = await collector.collect(problem, allow_partial=True)
                    records = collector.prepare(state).to_records(i)
                check(bool(records), "memory: every tree exported records")
                del records
                state.close()
                if i == 0 or (i + 1) % max(trees // 10, 1) == 0:
                    gc.collect()
                    samples.append((i + 1, _rss_mb()))

        t0 = time.perf_counter()
        asyncio.run(loop())
        elapsed = time.perf_counter() - t0
        policy.close()
    finally:
        sim.close()
    first = next((mb for n, mb in samples if n >= max(trees // 10, 1)), samples[0][1])
    rows = [
        f"{trees:,} trees in sequence (Selective(32, 16), Segments(256), prepare + to_records + close each) in {elapsed:.0f} s; "
        "RSS of the Python process after a gc.collect().",
        "",
        "| trees | RSS MB |",
        "|---|---|",
    ]
    rows += [f"| {n:,} | {mb:.1f} |" for n, mb in samples]
    rows += ["", f"Growth from tree {samples[1][0] if len(samples) > 1 else 1:,} to {samples[-1][0]:,}: "
             f"{samples[-1][1] - first:+.1f} MB (from the first tree: {samples[-1][1] - samples[0][1]:+.1f} MB)."]
    return rows


def layouts_section(problems: int = 4) -> list[str]:
    """Section 6: tokens a sequence trainer is sent per trained token, per record layout,
    on the demo's trees (collected in process from the simulator as `focus-go demo` does)."""
    from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
    from focus_go.backends import SamplingParams, SGLangPolicy
    from focus_go.extend import SchedulerView
    from focus_go.sim import SimServer

    rows = [
        "| segments | trees | trained tokens | per-segment: tokens sent | per trained | paths: tokens sent | per trained | floor per trained | "
        "per-segment / paths | to_records per-segment ms | to_records paths ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    with SimServer(seed=0, verbosity=3) as server:
        chosen = sorted(server.problems(), key=lambda p: -p.metadata["difficulty"])[:problems]
        for seg in (256, 32):
            policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk",
                                  default_params=SamplingParams(temperature=1.0))

            async def one(problem):
                agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), system_prompt="Solve the problem.",
                              context=Segments(seg))
                async with Collector(agent, critic=Critic.constant(0.5), search=Selective(32, 16)) as collector:
                    state = await collector.collect(problem, allow_partial=True)
                    return state, collector.prepare(state)

            async def all_trees():
                return await asyncio.gather(*(one(p) for p in chosen))

            try:
                collected = asyncio.run(all_trees())
            finally:
                policy.close()
            trained, sent, ms, floor = {"spans": 0, "paths": 0}, {"spans": 0, "paths": 0}, {"spans": 0.0, "paths": 0.0}, 0
            for i, (state, batch) in enumerate(collected):
                floor += sum(len(n.context_tokens) for n in SchedulerView(state).nodes if not n.children)
                for layout in ("spans", "paths"):
                    seconds, records = _best(lambda: batch.to_records(i, layout=layout))
                    actor = [r for r in records if r["lane"] == "actor"]
                    sent[layout] += sum(len(r["tokens"]) for r in actor)
                    trained[layout] += sum(sum(r["loss_mask"]) for r in actor)
                    ms[layout] += seconds * 1e3
                state.close()
            check(trained["spans"] == trained["paths"], "layouts: both layouts train the same tokens")
            check(sent["paths"] == floor, "layouts: path records send exactly the floor (the trees' leaf path lengths)")
            t = trained["spans"]
            rows.append(
                f"| {seg} | {len(collected)} | {t:,} | {sent['spans']:,} | {sent['spans'] / t:.2f} | {sent['paths']:,} | "
                f"{sent['paths'] / t:.2f} | {floor / t:.2f} | {sent['spans'] / sent['paths']:.2f}x | {ms['spans']:.1f} | {ms['paths']:.1f} |"
            )
    return [
        "Tokens a sequence trainer is sent (every actor record's tokens) per trained token (loss_mask 1); the floor is the "
        "sum of the trees' leaf path lengths, what a trainer without tree attention must read at least. to_records: best "
        "of 3, all trees, dicts built in Python.",
        "",
    ] + rows


def _sim_counters(sim: SimProcess) -> tuple:
    """(generated tokens, prompt tokens, prompt tokens served from the prefix cache) so far."""
    with urllib.request.urlopen(sim.url + "/get_server_info", timeout=10) as r:
        st = json.load(r)["internal_states"][0]
    return st["generated_tokens"], st["prompt_tokens"], st["cached_tokens"]


def _problems_jsonl(sim: SimProcess, path: Path, n: int) -> None:
    """n problems cycling through the bundled ones, each prompt made distinct (its own
    prefix: no tree shares a cached prompt with another), ids distinct."""
    with path.open("w") as f:
        for i in range(n):
            p = sim.problems[i % len(sim.problems)]
            f.write(json.dumps({"id": f"{p['id']}-{i}", "prompt": f"(Set {i}.) {p['prompt']}", "label": p["label"]}) + "\n")


def _cli_collect(sims: list, problems: Path, out: Path, *flags: str) -> dict:
    """One `focus-go collect` run over the servers; tokens/s over its collection time."""
    before = [_sim_counters(s) for s in sims]
    cmd = [sys.executable, "-m", "focus_go", "collect", str(problems), "--out", str(out), "--overwrite",
           "--model", sims[0].model, "--progress-interval", "0", *flags]
    for s in sims:
        cmd += ["--sglang", s.url]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    after = [_sim_counters(s) for s in sims]
    summary = json.loads((out / "run.json").read_text())["summary"]
    generated = sum(a[0] - b[0] for a, b in zip(after, before))
    prefill = sum((a[1] - a[2]) - (b[1] - b[2]) for a, b in zip(after, before))
    return {"seconds": summary["elapsed"], "generated": generated, "tokens_per_s": generated / summary["elapsed"],
            "prefill_per_generated": prefill / max(generated, 1), "failed_problems": summary["failed_problems"]}


FLEET_PROBLEMS = 64


def _default_search() -> str:
    """The search and context `focus-go collect` runs by default, as the library defines them."""
    from focus_go import _rules

    d = _rules.defaults()
    sel = d["selective"]
    return (f"Selective({sel['budget']}, {sel['warmup']}), score {sel['score']}, stop_alike {sel['stop_alike']}, "
            f"Segments({d['segments']['tokens']})")


def fleet_section(problems_n: int = FLEET_PROBLEMS, capacity_seconds: float = 6) -> list[str]:
    per_token, batch = 0.004, 256
    latency = {"per_token": per_token, "max_concurrent": batch}
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        sim = SimProcess({"seed": 0, "verbosity": 3, "latency": latency})
        try:
            _problems_file(sim, tmpdir / "problems.json")
            prompt = tmpdir / "prompt.json"
            prompt.write_text(json.dumps(json.loads((tmpdir / "problems.json").read_text())[0]["prompt_tokens"]))
            full = _loadgen("load", sim.url, "-c", str(batch), "-d", str(capacity_seconds), "-tokens", "256", "-prompt", str(prompt))
            capacity = full["tokens"] / full["seconds"]
            _problems_jsonl(sim, tmpdir / "p64.jsonl", problems_n)
            few = min(16, problems_n)
            _problems_jsonl(sim, tmpdir / "p16.jsonl", few)
            runs = [
                (f"default settings, {problems_n} problems", _cli_collect([sim], tmpdir / "p64.jsonl", tmpdir / "a")),
                (f"--concurrency 4 (the old default: 4 problems at once), {few} problems",
                 _cli_collect([sim], tmpdir / "p16.jsonl", tmpdir / "b", "--concurrency", "4")),
            ]
        finally:
            sim.close()
        out += [f"Simulated server: batch of {batch} sequences (max_concurrent), {per_token * 1e3:g} ms per token; full-batch "
                f"throughput (Go load generator, {batch} prompt-only 256-token requests in flight): {capacity:,.0f} tokens/s. "
                f"`focus-go collect` with its defaults ({_default_search()}), generated tokens/s over the collection time.", "",
                "| run | seconds | generated tokens | tokens/s | x full-batch throughput |", "|---|---|---|---|---|"]
        for label, r in runs:
            out.append(f"| {label} | {r['seconds']:.1f} | {r['generated']:,} | {r['tokens_per_s']:,.0f} | {r['tokens_per_s'] / capacity:.3f} |")

        # Part 2: 4 replicas, each with its own prefix cache (a running sequence's prompt is
        # cached at its prefill, as SGLang's radix cache does).
        n, fleet_batch = 4, 64
        # One model directory for the replicas, as replicas of one model serve one path (the
        # fleet refuses replicas whose model identities differ).
        fleet_sim = {"verbosity": 3, "latency": {"per_token": per_token, "max_concurrent": fleet_batch},
                     "cache": {"insert_on_prefill": True}, "model_dir": str(tmpdir / "model")}
        fleet_problems = 4 * problems_n  # as many waves of trees per slot as the one server's run
        sims = [SimProcess({"seed": i, **fleet_sim}) for i in range(n)]
        try:
            _problems_jsonl(sims[0], tmpdir / "pf.jsonl", fleet_problems)
            _problems_jsonl(sims[0], tmpdir / "pf1.jsonl", problems_n)
            rows = [
                (f"one server, {problems_n} problems", _cli_collect(sims[:1], tmpdir / "pf1.jsonl", tmpdir / "c")),
                (f"{n} servers, prefix affinity (default), {fleet_problems} problems", _cli_collect(sims, tmpdir / "pf.jsonl", tmpdir / "d")),
                (f"{n} servers, round-robin, {fleet_problems} problems",
                 _cli_collect(sims, tmpdir / "pf.jsonl", tmpdir / "e", "--routing", "round_robin")),
            ]
        finally:
            for s in sims:
                s.close()
        one = rows[0][1]
        check(all(r["failed_problems"] == 0 and r["generated"] > 0 for _, r in runs + rows),
              "fleet: every collect run generated tokens and failed no problem")
        check(rows[2][1]["prefill_per_generated"] > rows[1][1]["prefill_per_generated"],
              "fleet: round-robin routing computes more prefill per generated token than prefix affinity")
        out += ["", f"{n} simulated servers, each with its own prefix cache (a prompt is cached from its prefill on), batch "
                f"{fleet_batch}, {per_token * 1e3:g} ms per token (one server's capacity: a quarter of the first table's); "
                "`focus-go collect` defaults otherwise. Prefill = prompt tokens the server's cache did not serve.", "",
                "| servers | seconds | tokens/s | x one server | prefill tokens / generated token | x one server |",
                "|---|---|---|---|---|---|"]
        for label, r in rows:
            out.append(f"| {label} | {r['seconds']:.1f} | {r['tokens_per_s']:,.0f} | {r['tokens_per_s'] / one['tokens_per_s']:.2f} | "
                       f"{r['prefill_per_generated']:.4f} | {r['prefill_per_generated'] / max(one['prefill_per_generated'], 1e-9):.2f} |")
    return out


SECTIONS = ("throughput", "latency", "prepare", "memory", "layouts", "fleet")


def _cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (x86 "model name", Arm "Model" or "Hardware")."""
    try:
        with open("/proc/cpuinfo") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        fields = {}
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    for key in ("model name", "Model", "Hardware", "cpu model", "cpu"):
        if fields.get(key):
            return fields[key]
    return platform.processor() or "unknown"


def _loadavg() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def results_header(chosen: list, started: float, load_start: str, load_end: str) -> list[str]:
    """The head of RESULTS.md: when, on what machine, under what load and by what command
    the tables below were measured."""
    uname = os.uname()
    cores = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    argv0 = Path(sys.argv[0]).resolve()
    command = shlex.join([str(argv0.relative_to(ROOT)) if argv0.is_relative_to(ROOT) else sys.argv[0], *sys.argv[1:]])
    skipped = [s for s in SECTIONS if s not in chosen]
    return [
        "# Benchmark results",
        "",
        "Written by `make bench` (`benchmarks/run.py`), which replaces sections 1 to 7 and the cross-checks on every "
        "finished run and keeps the others as they are. How to run the benchmarks and read these numbers: "
        "[README.md](README.md).",
        "",
        "| | |",
        "|---|---|",
        f"| date | {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))} (start), run time {time.time() - started:.0f} s |",
        f"| machine | `{uname.sysname} {uname.release} {uname.machine}`, {_cpu_model()}, "
        f"{cores} cores{f' ({usable} usable by this process)' if usable != cores else ''} |",
        f"| load average (1, 5, 15 min) | {load_start} at the start; {load_end} at the end |",
        f"| sections | {', '.join(chosen)}{'; not run: ' + ', '.join(skipped) if skipped else ''} |",
        f"| command | `{command}` |",
    ]


# The headings of the sections this program writes, by their first word ("## 1-2.", "## 4.",
# "## Cross-checks"); RESULTS.md's other sections come from other programs (make bench-signal,
# resume_tokens.py) or by hand (the targets), and a run keeps them as they are.
OWN_HEADINGS = ("1-2.", "3.", "4.", "5.", "6.", "7.", "Cross-checks")


def kept_sections(path: Path) -> list[str]:
    """The lines of `path`'s "## " sections that this program does not write, in their order."""
    if not path.exists():
        return []
    out: list[str] = []
    keep = False
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            keep = line[3:].split(" ", 1)[0] not in OWN_HEADINGS
            if keep and out and out[-1]:
                out.append("")
        if keep:
            out.append(line)
    while out and not out[-1]:
        out.pop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each throughput measurement")
    parser.add_argument("--reps", type=int, default=2, help="interleaved repetitions of the throughput measurements")
    parser.add_argument("--memory-trees", type=int, default=1000, help="trees collected in sequence for the memory section")
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated subset of " + ", ".join(SECTIONS))
    parser.add_argument("--quick", action="store_true",
                        help="the smallest settings that still run every section and its cross-checks (a smoke run, "
                             "benchmarks/test_smoke.py): 1 s measurements, 1 repetition, 20 memory trees, trees of 32 and "
                             "256 rollouts, one problem per latency and layout table, 4 fleet problems; its numbers mean "
                             "nothing")
    parser.add_argument("--rows-only", action="store_true", help=argparse.SUPPRESS)  # a child process's section
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a checkout of an earlier commit with its self-test libfocus.so and loadgen built at its top "
                             "(make bench BASELINE=commit): its engine rows are measured in the same run")
    parser.add_argument("--engine-variant", default=None, help=argparse.SUPPRESS)  # a baseline child's measurement
    parser.add_argument("--results", type=Path, default=RESULTS_MD,
                        help="the Markdown file the run writes, replacing it (default: %(default)s); a run of some "
                             "sections replaces it too, so point a partial run elsewhere to keep the full results")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.reps, args.memory_trees = 1.0, 1, 20
    if args.engine_variant:
        _engine_variant_child(json.loads(args.engine_variant))
        return 0
    chosen = [s for s in args.sections.split(",") if s]
    if args.rows_only:
        print("\n".join(memory_section(args.memory_trees) + crosscheck.printed()))
        return 0
    for s in chosen:
        if s not in SECTIONS:
            parser.error(f"unknown section {s!r}; expected some of {', '.join(SECTIONS)}")
    started, load_start = time.time(), _loadavg()
    lines = []
    if "throughput" in chosen:
        lines += ["## 1-2. throughput against the simulated server", ""]
        lines += throughput_sections(args.seconds, args.reps, args.baseline.resolve() if args.baseline else None)
    if "latency" in chosen:
        lines += ["", "## 3. latency hiding", ""]
        lines += latency_section(1 if args.quick else 3)
    if "prepare" in chosen:
        lines += ["", "## 4. prepare + export (Go core, no Python objects)", ""]
        lines += go_prepare_export("1x" if args.quick else "5x")
        lines += ["", "## 4. prepare + export to Python records: focus-go vs the plain-Python reference", ""]
        lines += python_prepare_export(SIZES[:2] if args.quick else SIZES)
    if "memory" in chosen:
        lines += ["", "## 5. memory", ""]
        if chosen == ["memory"]:
            lines += memory_section(args.memory_trees)
        else:
            # A fresh process: the earlier sections leave this one's heap large.
            child = subprocess.run(
                [sys.executable, __file__, "--sections", "memory", "--memory-trees", str(args.memory_trees), "--rows-only"],
                capture_output=True, text=True,
            )
            if child.returncode:
                raise RuntimeError(f"the memory section's process exited {child.returncode}:\n{child.stderr[-4000:]}")
            lines += crosscheck.take(child.stdout.splitlines())
    if "layouts" in chosen:
        lines += ["", "## 6. record layouts: per-segment vs path records", ""]
        lines += layouts_section(1 if args.quick else 4)
    if "fleet" in chosen:
        lines += ["", "## 7. keeping the servers busy: scheduling by requests in flight, several servers", ""]
        lines += fleet_section(4, 3) if args.quick else fleet_section()
    while lines and not lines[0]:
        lines.pop(0)
    lines += [""] + crosscheck.markdown()
    kept = kept_sections(args.results)
    if kept:
        lines += [""] + kept
    text = "\n".join(results_header(chosen, started, load_start, _loadavg()) + [""] + lines) + "\n"
    print(text)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
