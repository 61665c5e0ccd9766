"""Held-out success per generated token of a neural policy trained by RL (`make bench-learn`).

A small causal transformer (examples/tiny_rl) learns multi-digit addition with a scratchpad.
Each seed warm-starts it by supervised steps to a held-out success of about
``warm_target``; then every method (examples/tiny_rl/methods.py: the default ``Selective()``,
the critic rule, the critic-free preset, root-only and GRPO groups of W and B with and
without dynamic sampling) trains it from that same start with the same PPO trainer until it
has generated ``budget_tokens`` tokens. Generation goes through focus-go's collector with a
custom policy over the model; the critic is a value model trained on the collector's critic
records.

Protocol (docs/signal.md §N): each method's learning rate is chosen from a factor-2 grid by
its mean area on the selection seeds (a rate at the grid's edge extends the grid on that
side, up to ``max_extend`` times); the chosen rates are then run on fresh seeds, which are
reported. The area is the mean held-out success over the first T generated tokens (each
update's policy holds until the next update), at T = budget / 4 and T = budget, and over the
model's forward tokens without and with a per-tree prefix cache. "+-" is one standard error of
the mean paired difference over the fresh seeds; "*" marks a difference beyond two.

    python benchmarks/learn.py --quick        # a smoke run of every section (a minute or two)
    python benchmarks/learn.py                # the reduced configuration (2 cores, ~2 hours)
    python benchmarks/learn.py --full --device cuda --jobs 1
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "tiny_rl"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from methods import RunConfig, default_methods  # noqa: E402

CONFIGS = {
    "quick": {"run": dict(digits=2, segment=6, max_segments=8, train_problems=200, held_out=32, trees_per_update=4,
                          budget_tokens=900, warm_target=0.05, model={"d": 32, "layers": 1, "heads": 2, "max_len": 64}),
              "lrs": [1e-3, 2e-3], "selection": 1, "fresh": 2, "max_extend": 1},
    "reduced": {"run": dict(digits=3, segment=8, max_segments=8, train_problems=2000, held_out=128, trees_per_update=16,
                            budget_tokens=64_000, warm_target=0.15),
                "lrs": [5e-5, 1e-4, 2e-4], "selection": 2, "fresh": 8, "max_extend": 2},
    "full": {"run": dict(digits=3, segment=8, max_segments=8, train_problems=5000, held_out=256, trees_per_update=16,
                         budget_tokens=200_000, warm_target=0.15, model={"d": 128, "layers": 4, "heads": 4, "max_len": 96}),
             "lrs": [1.5625e-5, 3.125e-5, 6.25e-5, 1.25e-4, 2.5e-4], "selection": 4, "fresh": 16, "max_extend": 3},
}


# --- work done in the pool's processes ------------------------------------------------------

def _worker_init(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def _warm(job: Tuple[int, dict, str]) -> Tuple[int, int, float]:
    from methods import Setup

    seed, cfg, workdir = job
    setup = Setup.build(seed, RunConfig(**cfg), Path(workdir))
    setup.close()
    return seed, setup.warm_steps, setup.warm_success


def _run(job: Tuple[str, int, float, dict, str]) -> dict:
    import asyncio

    from methods import Learner, Method, Setup

    name, seed, lr, cfg, workdir = job
    setup = Setup.build(seed, RunConfig(**cfg), Path(workdir))
    try:
        start = time.perf_counter()
        result = asyncio.run(Learner(setup, Method.parse(name), lr).run()).as_dict()
        result["seconds"] = time.perf_counter() - start
        return result
    finally:
        setup.close()


def _indexed(job: Tuple) -> Tuple[int, object]:
    fn, i, item = job
    return i, fn(item)


def _progress(log):
    """A ``Pool.map`` logger of finished runs: method, seed, rate, area and seconds."""
    def show(r: dict) -> None:
        budget = r["points"][-1]["generated"]
        gen = [p for p in r["points"] if p["success"] == p["success"]]
        log(f"    {r['method']} seed {r['seed']} lr {r['lr']:g}: success {r['points'][0]['success']:.3f} -> {gen[-1]['success']:.3f}, "
            f"{r['updates']} updates, {budget} tokens, {r['seconds']:.0f} s")
    return show


class Pool:
    """Runs jobs in ``jobs`` spawned processes (never forked: the Go runtime does not survive
    a fork), or in this process when ``jobs`` is 1."""

    def __init__(self, jobs: int, threads: int) -> None:
        self.pool = multiprocessing.get_context("spawn").Pool(jobs, _worker_init, (threads,)) if jobs > 1 else None
        if self.pool is None:
            _worker_init(threads)

    def map(self, fn, items: Sequence, log=None) -> List:
        """``fn`` over ``items``, in order; ``log`` sees each result as it finishes."""
        items = list(items)
        done = (self.pool.imap_unordered(_indexed, [(fn, i, x) for i, x in enumerate(items)])
                if self.pool is not None else (_indexed((fn, i, x)) for i, x in enumerate(items)))
        out: List = [None] * len(items)
        for i, result in done:
            out[i] = result
            if log is not None:
                log(result)
        return out

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool.join()


# --- the protocol -------------------------------------------------------------------------

def mean_se(xs: Sequence[float]) -> Tuple[float, float]:
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, float("nan")
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1) / n)


def run_area(result: dict, axis: str, budget: float) -> float:
    from methods import Point, area

    return area([Point(**p) for p in result["points"]], axis, budget)


def select_rates(pool: Pool, methods: Sequence[str], grid: Sequence[float], seeds: Sequence[int], cfg: dict, workdir: str,
                 max_extend: int, log) -> Tuple[Dict[str, float], Dict[str, Dict[str, List[dict]]]]:
    """Each method's learning rate: the best mean area over the whole budget on the selection
    seeds; a best rate at the grid's edge extends that method's grid by a factor 2 on that
    side, at most ``max_extend`` times. Returns the rates and every selection run."""
    budget = cfg["budget_tokens"]
    runs: Dict[str, Dict[str, List[dict]]] = {m: {} for m in methods}
    grids = {m: sorted(grid) for m in methods}
    todo = {m: list(grids[m]) for m in methods}
    chosen: Dict[str, float] = {}
    for round_ in range(max_extend + 1):
        jobs = [(m, s, lr, cfg, workdir) for m in methods for lr in todo.get(m, []) for s in seeds]
        for r in pool.map(_run, jobs, _progress(log)):
            runs[r["method"]].setdefault(f"{r['lr']:g}", []).append(r)
        todo = {}
        for m in methods:
            score = {lr: mean_se([run_area(r, "generated", budget) for r in runs[m][f"{lr:g}"]])[0] for lr in grids[m]}
            best = max(grids[m], key=lambda lr: score[lr])
            chosen[m] = best
            if round_ < max_extend and best in (grids[m][0], grids[m][-1]) and len(grids[m]) > 1:
                new = best / 2 if best == grids[m][0] else best * 2
                grids[m] = sorted(grids[m] + [new])
                todo[m] = [new]
        log(f"  selection round {round_}: " + ", ".join(f"{m} {chosen[m]:g}" for m in methods))
        if not todo:
            break
    return chosen, runs


def check(results: Sequence[dict]) -> None:
    """Cross-checks every run must pass: costs never decrease and order as they must
    (forward >= forward through the cache >= generated), and every method of a seed starts
    from the same warm-started success."""
    start: Dict[int, float] = {}
    for r in results:
        pts = r["points"]
        for p, q in zip(pts, pts[1:]):
            if not (q["generated"] >= p["generated"] and q["forward"] >= p["forward"] and q["forward_cached"] >= p["forward_cached"]):
                raise AssertionError(f"{r['method']} seed {r['seed']}: costs decrease between updates")
        last = pts[-1]
        if not last["forward"] >= last["forward_cached"] >= last["generated"]:
            raise AssertionError(f"{r['method']} seed {r['seed']}: forward {last['forward']}, cached {last['forward_cached']}, "
                                 f"generated {last['generated']} out of order")
        if start.setdefault(r["seed"], pts[0]["success"]) != pts[0]["success"]:
            raise AssertionError(f"seed {r['seed']}: methods start from different successes")


def main(argv: Sequence[str] = ()) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true", help="a smoke run of every section (tiny; CI)")
    which.add_argument("--full", action="store_true", help="the full configuration (more cores or a GPU)")
    ap.add_argument("--device", default="cpu", help="torch device: cpu or cuda")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once, each in its own process")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--methods", default="", help="comma-separated methods (default: docs/signal.md §N's)")
    ap.add_argument("--lrs", default="", help="comma-separated starting grid of learning rates")
    ap.add_argument("--selection-only", action="store_true", help="stop after choosing the rates (preliminary numbers)")
    ap.add_argument("--seeds", type=int, default=0, help="selection seeds (default: the configuration's)")
    ap.add_argument("--fresh", type=int, default=0, help="fresh seeds (default: the configuration's)")
    ap.add_argument("--budget", type=int, default=0, help="generated tokens per run (default: the configuration's)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "learn"), help="output folder")
    args = ap.parse_args(list(argv) or None)

    name = "quick" if args.quick else "full" if args.full else "reduced"
    conf = CONFIGS[name]
    cfg = asdict(replace(RunConfig(**conf["run"]), device=args.device))
    if args.budget:
        cfg["budget_tokens"] = args.budget
    methods = [m for m in args.methods.split(",") if m] or default_methods()
    grid = [float(x) for x in args.lrs.split(",") if x] or conf["lrs"]
    n_sel, n_fresh = args.seeds or conf["selection"], args.fresh or conf["fresh"]
    out = Path(args.out) / name
    workdir = out / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    from task import build_tokenizer

    build_tokenizer(workdir / "tokenizer")
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:7.0f}s] {msg}", file=sys.stderr, flush=True)

    sel_seeds = list(range(n_sel))
    fresh_seeds = list(range(n_sel, n_sel + (0 if args.selection_only else n_fresh)))
    pool = Pool(max(1, args.jobs), args.threads)
    try:
        log(f"{name}: {len(methods)} methods, grid {grid}, selection seeds {sel_seeds}, fresh seeds {fresh_seeds}")
        warm = pool.map(_warm, [(s, cfg, str(workdir)) for s in sel_seeds + fresh_seeds])
        log("warm starts: " + ", ".join(f"seed {s}: {steps} steps, success {rate:.2f}" for s, steps, rate in warm))
        rates, selection = select_rates(pool, methods, grid, sel_seeds, cfg, str(workdir), conf["max_extend"], log)
        fresh_runs = pool.map(_run, [(m, s, rates[m], cfg, str(workdir)) for m in methods for s in fresh_seeds], _progress(log))
        log("fresh seeds done")
    finally:
        pool.close()
    everything = [r for m in selection.values() for rs in m.values() for r in rs] + list(fresh_runs)
    check(everything)
    data = {"config": name, "run": cfg, "grid": grid, "methods": methods, "selection_seeds": sel_seeds, "fresh_seeds": fresh_seeds,
            "warm": warm, "rates": rates, "selection": selection, "fresh": fresh_runs, "seconds": time.perf_counter() - t0}
    (out / "results.json").write_text(json.dumps(data, indent=1) + "\n")
    from learn_report import plot, report

    lines = report(data)
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    png = plot(data, out / "learn.png")
    log(f"wrote {out / 'results.json'}, {out / 'report.md'}" + (f", {png}" if png else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
