"""FOCUS on MATH-style problems, as a script: collect a searched tree per problem from
your SGLang or vLLM server and write actor and critic training records.

    python examples/math_quickstart.py                       # the embedded simulator, bundled problems
    python examples/math_quickstart.py --math math500.jsonl --sglang http://localhost:30000 --model Qwen/Qwen3-4B
    python examples/math_quickstart.py --math math500.jsonl --vllm http://localhost:8000/v1 --model Qwen/Qwen3-4B

``--math`` reads the MATH dataset's JSONL format (one object per line with ``problem`` and
``solution``; the reference answer is the solution's last ``\\boxed{...}``, or an
``answer`` field when present). ``--model`` is a local model directory or a model in the
Hugging Face cache: its tokenizer and chat template build the exact token prompts.

This is the Python API that ``focus-go collect`` wraps; read it to adapt the agent, the
critic or the search.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from pathlib import Path
from typing import Iterator, List, Optional

from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
from focus_go.backends import SamplingParams, SGLangPolicy, VLLMPolicy
from focus_go.export import format_tree
from focus_go.integrations import Problem
from focus_go.tree import SchedulerView

SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."


def last_boxed(solution: str) -> Optional[str]:
    """The contents of the last ``\\boxed{...}`` in ``solution`` (braces balanced), or None."""
    start = solution.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(solution)):
        depth += {"{": 1, "}": -1}.get(solution[j], 0)
        if depth == 0:
            return solution[i + 1 : j]
    return None


def math_problems(path: Path, limit: int) -> List[Problem]:
    """Problems from a MATH-format JSONL file (the first ``limit``)."""
    out: List[Problem] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        item = json.loads(line)
        answer = item.get("answer") or last_boxed(item.get("solution", ""))
        if answer is None:
            raise SystemExit(f"{path}:{lineno}: no 'answer' and no \\boxed{{}} in 'solution'")
        out.append(Problem(item["problem"], str(answer), id=item.get("unique_id", f"line-{lineno}")))
        if len(out) == limit:
            break
    return out


@contextlib.contextmanager
def policy_for(args: argparse.Namespace) -> Iterator[tuple]:
    """(policy, problems): your server's, or the embedded simulator with its own problems."""
    params = SamplingParams(temperature=1.0)
    if args.sglang or args.vllm:
        if args.sglang:
            policy = SGLangPolicy(model=args.model, base_url=args.sglang, profile="token_chunk", default_params=params)
        else:
            policy = VLLMPolicy(model=args.model, base_url=args.vllm, api_key="EMPTY", profile="token_chunk", default_params=params)
        try:
            yield policy, math_problems(Path(args.math), args.problems)
        finally:
            policy.close()
        return
    from focus_go.sim import SimServer

    with SimServer(seed=0, verbosity=3) as server:
        policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=params)
        try:
            yield policy, server.problems()[: args.problems]
        finally:
            policy.close()


async def collect(policy, problems: List[Problem], out: Path, budget: int, warmup: int) -> None:
    critic = Critic.constant(0.5)  # an uninformed prior; Critic.http(url) for a value model
    actor_file = (out / "actor.jsonl").open("w")
    critic_file = (out / "critic.jsonl").open("w")

    async def one(group_index: int, problem: Problem) -> None:
        agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), system_prompt=SYSTEM_PROMPT,
                      context=Segments(256))
        async with Collector(agent, critic=critic, search=Selective(budget=budget, warmup=warmup)) as collector:
            state = await collector.collect(problem, allow_partial=True)
            try:
                batch = collector.prepare(state)
                if group_index == 0:
                    print(format_tree(SchedulerView(state), batch))
                leaves = [n for n in SchedulerView(state).nodes if n.done]
                print(f"{problem.id}: {sum(n.reward for n in leaves):.0f}/{len(leaves)} correct, "
                      f"{len(batch.actor)} actor edges, {len(batch.critic)} critic targets, {len(batch.failures)} failures")
                for record in batch.to_records(group_index):
                    (actor_file if record["lane"] == "actor" else critic_file).write(json.dumps(record) + "\n")
            finally:
                state.close()

    try:
        # Every problem at once: the engine keeps each tree's independent rollouts in flight too.
        await asyncio.gather(*(one(i, p) for i, p in enumerate(problems)))
    finally:
        actor_file.close()
        critic_file.close()


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--sglang", metavar="URL")
    which.add_argument("--vllm", metavar="URL", help="e.g. http://localhost:8000/v1")
    parser.add_argument("--model", help="local model directory or Hugging Face cache name (with --sglang / --vllm)")
    parser.add_argument("--math", metavar="JSONL", help="MATH-format problems (with --sglang / --vllm)")
    parser.add_argument("--problems", type=int, default=4, help="how many problems")
    parser.add_argument("--budget", type=int, default=Selective().budget)
    parser.add_argument("--warmup", type=int, default=Selective().warmup)
    parser.add_argument("--out", default="focus-math", help="output directory")
    args = parser.parse_args(argv)
    if (args.sglang or args.vllm) and not (args.model and args.math):
        parser.error("--sglang / --vllm need --model and --math")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with policy_for(args) as (policy, problems):
        asyncio.run(collect(policy, problems, out, args.budget, args.warmup))
    print(f"records in {out / 'actor.jsonl'} and {out / 'critic.jsonl'}")


if __name__ == "__main__":
    main()
