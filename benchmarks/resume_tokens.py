"""Generated tokens saved by resuming an aborted tree (``Collector.collect(resume=...)``,
what the Slime hook does under ``--partial-rollout``) against collecting it again from
scratch, on the simulated server (seed 0, no latency: the counts are deterministic).

For each problem: a full collection gives the tree's call count C; a collection aborted
(``stop_on_abort``, every call after the first ``f * C`` answered with an "abort" finish,
as a trainer's abort leaves a tree) gives a partial tree; then the same problem is
collected once resuming that tree and once from scratch. Printed per abort point: the
tokens the second collection generated either way, the tokens the resume kept, and the
saving (restart - resume) as a share of the restart. Two cross-checks hold for every resumed
tree (benchmarks/crosscheck.py; the run stops at one that does not): its generated tokens
are the ones it kept plus the ones its collection generated, and it kept no more tokens or
finished rollouts than the aborted tree held.

    .venv/bin/python benchmarks/resume_tokens.py [--problems 16] [--budget 32] [--warmup 8] [--segment 64]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any, Dict, List

from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
from focus_go.backends import GenerateResult, Policy, SamplingParams, SGLangPolicy
from focus_go.errors import CollectionError
from focus_go.extend import SchedulerView
from focus_go.sim import SimServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import crosscheck  # noqa: E402
from crosscheck import check  # noqa: E402

SAMPLING = SamplingParams(temperature=1.0)


def collector(policy: Any, problem: Any, opts: argparse.Namespace, complete: Any = None, **kw: Any) -> Collector:
    if complete is not None:
        policy = Policy(format=policy.format, complete=complete, default_params=SAMPLING)
    agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(opts.segment))
    return Collector(agent, critic=Critic.constant(0.5), search=Selective(opts.budget, opts.warmup, seed=1), **kw)


def counting(policy: Any, calls: List[int], abort_after: int = -1) -> Any:
    async def complete(tokens: Any, params: Any) -> Any:
        calls.append(1)
        if 0 <= abort_after < len(calls):
            return GenerateResult(tokens=(11,), prefix_tokens=tuple(tokens), text="x", stop_reason="abort", logprobs=[-0.5])
        return await policy.agenerate_tokens(tokens, params)

    return complete


def one_problem(policy: Any, problem: Any, opts: argparse.Namespace, fractions: List[float]) -> List[Dict[str, int]]:
    calls: List[int] = []
    with asyncio.run(collector(policy, problem, opts, counting(policy, calls)).collect(problem)) as full:
        restart = full.stats["generated_tokens"]
    out = []
    for f in fractions:
        try:
            asyncio.run(collector(policy, problem, opts, counting(policy, [], int(f * len(calls))), stop_on_abort=True).collect(problem))
            continue  # finished before the abort point
        except CollectionError as exc:
            partial = exc.state
        aborted = partial.stats
        if all(n.failed for n in SchedulerView(partial).nodes[1:]):
            # Aborted before anything finished: a resume is refused (the tree keeps nothing),
            # so the caller, as the Slime hook does, collects the problem again.
            with partial, asyncio.run(collector(policy, problem, opts).collect(problem)) as again:
                out.append({"fraction": f, "restart": restart, "resume": again.stats["generated_tokens"], "kept": 0, "rollouts_kept": 0})
            continue
        with partial, asyncio.run(collector(policy, problem, opts).collect(problem, resume=partial)) as resumed:
            kept = resumed.stats.get("tokens_resumed", 0)
            held = sum(t for n in SchedulerView(resumed).nodes[1:] for s in n.spans for t in s.trainable)
            check(held == kept + resumed.stats["generated_tokens"],
                  "resume: a resumed tree's generated tokens are those it kept plus those its collection generated")
            check(kept <= aborted["generated_tokens"] and resumed.stats.get("rollouts_resumed", 0) <= aborted["finished_rollouts"],
                  "resume: a resumed tree kept no more tokens or finished rollouts than the aborted tree held")
            out.append({
                "fraction": f, "restart": restart, "resume": resumed.stats["generated_tokens"],
                "kept": resumed.stats.get("tokens_resumed", 0), "rollouts_kept": resumed.stats.get("rollouts_resumed", 0),
            })
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("--budget", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--segment", type=int, default=64)
    opts = parser.parse_args()
    fractions = [0.25, 0.5, 0.75]
    rows: Dict[float, List[Dict[str, int]]] = {f: [] for f in fractions}
    with SimServer(seed=0) as server:
        policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SAMPLING)
        try:
            for problem in server.problems()[: opts.problems]:
                for row in one_problem(policy, problem, opts, fractions):
                    rows[row["fraction"]].append(row)
        finally:
            policy.close()
    print(f"Selective({opts.budget}, {opts.warmup}), Segments({opts.segment}), {opts.problems} simulated problems")
    print("| aborted at | trees | restart: tokens generated | resume: tokens generated | tokens kept | rollouts kept | saved |")
    print("|---|---|---|---|---|---|---|")
    for f, rs in rows.items():
        if not rs:
            continue
        restart, resume = sum(r["restart"] for r in rs), sum(r["resume"] for r in rs)
        kept, rollouts = sum(r["kept"] for r in rs), sum(r["rollouts_kept"] for r in rs)
        print(f"| {f:.0%} of the calls | {len(rs)} | {restart:,} | {resume:,} | {kept:,} | {rollouts} | {1 - resume / restart:.0%} |")
    print()
    print("\n".join(crosscheck.markdown()))


if __name__ == "__main__":
    main()
