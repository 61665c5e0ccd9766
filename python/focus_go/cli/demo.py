"""``focus-go demo``: FOCUS end to end on the embedded simulated server, no arguments needed."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from .. import Agent, Collector, Critic, MathEnv, Segments, Selective, _rules
from .._records import jsonl
from ..backends import SamplingParams, SGLangPolicy
from ..errors import ConfigError
from ..export import format_edges, format_tree, format_tree_html
from ..extend import SchedulerView
from ..sim import SimServer


async def _collect(server: SimServer, problems: List[Any], budget: int, warmup: int) -> List[Any]:
    policy = SGLangPolicy(
        model=server.model, base_url=server.url, profile="token_chunk", default_params=SamplingParams(temperature=1.0)
    )
    try:

        async def one(problem):
            agent = Agent(
                policy=policy,
                env=MathEnv(problem.label, policy.decode),
                system_prompt="Solve the problem.",
                context=Segments(256),
            )
            async with Collector(agent, critic=Critic.constant(0.5), search=Selective(budget=budget, warmup=warmup)) as collector:
                state = await collector.collect(problem)
                return problem, state, collector.prepare(state)

        return await asyncio.gather(*(one(p) for p in problems))
    finally:
        policy.close()


def _prog() -> str:
    """How to run the focus-go command from here: the console script when it is on PATH,
    else this interpreter with ``-m focus_go``."""
    if shutil.which("focus-go"):
        return "focus-go"
    python = sys.executable
    with contextlib.suppress(ValueError):
        python = min(python, os.path.relpath(python), key=len)
    return f"{python} -m focus_go"


def run_demo(out_dir: Path, n_problems: int = 4, budget: int = Selective.budget, warmup: int = Selective.warmup) -> int:
    # Every argument is checked before the server starts or the directory is made (exit 2).
    try:
        Selective(budget=budget, warmup=warmup)
        if not isinstance(n_problems, int) or n_problems < 1:
            raise ConfigError(f"--problems must be an integer >= 1, got {n_problems!r}")
        if out_dir.exists() and not out_dir.is_dir():
            raise ConfigError(f"--out {out_dir}: is a file, not a directory")
    except ConfigError as exc:
        print(f"focus-go demo: {exc}", file=sys.stderr)
        return 2
    # verbosity=3: worked solutions of ~750-1100 tokens, so 256-token segments make a deep tree.
    with SimServer(seed=0, verbosity=3) as server:
        bundled = server.problems()
        if n_problems > len(bundled):
            print(f"focus-go demo: --problems {n_problems}: the simulator bundles {len(bundled)} problems", file=sys.stderr)
            return 2
        out_dir.mkdir(parents=True, exist_ok=True)
        # The hardest bundled problems: their rollouts disagree, so the search branches.
        problems = sorted(bundled, key=lambda p: -p.metadata["difficulty"])[:n_problems]
        t0 = time.perf_counter()
        results = asyncio.run(_collect(server, problems, budget, warmup))
        elapsed = time.perf_counter() - t0

    actor_path, critic_path = out_dir / "actor.jsonl", out_dir / "critic.jsonl"
    summary: List[Dict[str, Any]] = []
    with actor_path.open("w", encoding="utf-8") as actor_file, critic_path.open("w", encoding="utf-8") as critic_file:
        for group, (problem, state, batch) in enumerate(results):
            records = batch.to_records(group)
            actor_file.write(jsonl(r for r in records if r["lane"] == "actor"))
            critic_file.write(jsonl(r for r in records if r["lane"] == "critic"))
            outcomes = state.stats  # the engine's counts: finished rollouts and successes
            summary.append(
                {
                    "problem": problem.id,
                    "rollouts": int(batch.stats["rollouts"]),
                    "nodes": int(batch.stats["nodes"]),
                    "success": outcomes["successes"] / max(outcomes["finished_rollouts"], 1),
                    "actor": len(batch.actor),
                    "critic": len(batch.critic),
                    "generated": int(batch.stats["generated_tokens"]),
                    "reused": int(batch.stats["prefix_tokens_reused"]),
                }
            )

    problem, state, batch = results[0]
    view = SchedulerView(state)
    html_path = out_dir / "tree.html"
    html_path.write_text(format_tree_html(view, batch))
    tree_path = out_dir / "tree.json"
    state.save(tree_path)
    # The problems in the format `focus-go collect` reads, to try it next.
    problems_path = out_dir / "problems.jsonl"
    problems_path.write_text(
        jsonl({"id": p.id, "prompt": p.prompt, "label": p.label} for p, _, _ in results), encoding="utf-8"
    )

    print(f"FOCUS demo: {len(results)} problems, Selective(budget={budget}, warmup={warmup}), Segments(256), "
          f"Critic.constant(0.5), on the embedded simulated server ({elapsed:.2f} s)\n")
    print(f"Problem {problem.id!r}: {problem.prompt}  (label {problem.label})\n")
    print(format_tree(view, batch))
    print()
    print(format_edges(batch))
    print()
    header = f"{'problem':<22}{'rollouts':>9}{'nodes':>7}{'success':>9}{'actor':>7}{'critic':>8}{'generated':>11}{'reused':>8}"
    print(header)
    for row in summary:
        print(f"{row['problem']:<22}{row['rollouts']:>9}{row['nodes']:>7}{row['success']:>9.2f}{row['actor']:>7}"
              f"{row['critic']:>8}{row['generated']:>11}{row['reused']:>8}")
    print()
    print(f"actor records   {actor_path}")
    print(f"critic records  {critic_path}")
    print(f"tree picture    {html_path}  (open it in a browser; click a node)")
    print(f"tree (JSON)     {tree_path}")
    print(f"problems        {problems_path}")
    print()
    prog = _prog()
    print("Next: the same collection from the command line, then on your own server:")
    print(f"  {prog} collect {problems_path} --out {out_dir / 'collect'}")
    print(f"  {prog} collect {problems_path} --out {out_dir / 'collect'} --overwrite --sglang http://localhost:30000 --model Qwen/Qwen3-4B")
    print(f"  {prog} view {tree_path}")
    for _, s, _ in results:
        s.close()
    return 0


def _run(args: argparse.Namespace) -> int:
    return run_demo(Path(args.out), n_problems=args.problems, budget=args.budget, warmup=args.warmup)


def add_parser(commands: Any) -> None:
    """Register ``demo`` on the ``focus-go`` subcommand parser."""
    demo = commands.add_parser("demo", help="collect trees on the embedded simulated server and write records")
    demo.add_argument("--out", default="focus-demo", help="output directory (default: ./focus-demo)")
    demo.add_argument("--problems", type=int, default=4, help="how many bundled problems to collect")
    selective = _rules.defaults()["selective"]  # Selective()'s defaults, the library's
    demo.add_argument("--budget", type=int, default=selective["budget"], help="rollouts per tree")
    demo.add_argument("--warmup", type=int, default=selective["warmup"], help="warmup rollouts per tree")
    demo.set_defaults(run=_run)
