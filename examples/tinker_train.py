"""Train a model on Tinker with FOCUS trees: a batch of searched trees per update, PPO on
each segment's advantage, critic targets written for your value model.

    export TINKER_API_KEY=...          # from the Tinker console
    python examples/tinker_train.py --model Qwen/Qwen3-4B-Instruct-2507 --math math_train.jsonl --steps 20
    python examples/tinker_train.py ...     # the same command again continues a stopped run

Each update trains on ``--problems-per-step`` trees sampled at temperature 1.0 (the
cookbook's default); every step's metrics go to ``RUN/metrics.jsonl`` (and to wandb with
``--wandb-project``), the training state is checkpointed every ``--checkpoint-every``
steps (``RUN/checkpoints.jsonl``), and the last ``--eval-problems`` problems are held out
and evaluated every ``--eval-every`` steps with one unbranched rollout each.

Needs the ``tinker`` package (``pip install tinker``, Python 3.11+) and a Tinker API key;
without a key it says so and exits with status 2 without contacting anything. The model's
tokenizer must be available locally (a model directory, or the Hugging Face cache:
``huggingface-cli download MODEL tokenizer.json tokenizer_config.json``), because FOCUS
builds the exact token prompts itself. ``--math`` is a MATH-format JSONL file (``problem``,
``solution`` with ``\\boxed{answer}``, or ``answer``); without it, four small built-in
problems are used.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import sys
from pathlib import Path
from typing import List, Optional

from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
from focus_go.backends import SamplingParams
from focus_go.integrations import JsonlDirectory, Problem

SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
BUILT_IN = [
    Problem("Solve 3x + 7 = 22 for x.", "5", id="linear"),
    Problem("What is 17 * 23?", "391", id="product"),
    Problem("What is the sum of the first 20 positive integers?", "210", id="series"),
    Problem("A rectangle has perimeter 30 and width 6. What is its area?", "54", id="rectangle"),
]


def collector_for(budget: int, warmup: int):
    """The CollectorFor ``train`` builds each update's collector with."""

    def build(policy, problem):
        agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), system_prompt=SYSTEM_PROMPT,
                      context=Segments(256), sampling=SamplingParams(temperature=1.0))
        return Collector(agent, critic=Critic.constant(0.5), search=Selective(budget=budget, warmup=warmup))

    return build


async def run(args: argparse.Namespace) -> None:
    import tinker

    from focus_go.integrations.tinker import train

    if args.math:
        sys.path.insert(0, str(Path(__file__).parent))
        from math_quickstart import math_problems

        problems: List[Problem] = math_problems(Path(args.math), args.problems)
    else:
        problems = BUILT_IN
    held_out = problems[len(problems) - args.eval_problems:] if 0 < args.eval_problems < len(problems) else []
    if held_out:
        problems = problems[: len(problems) - len(held_out)]
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    service = tinker.ServiceClient()
    resume = None
    if args.resume:
        from focus_go.integrations.tinker import load_checkpoint

        resume = load_checkpoint(args.resume)
    # train loads a checkpoint's weights and optimizer into this client when it resumes:
    # from --resume, or from the run directory's checkpoints.jsonl on a plain rerun.
    training_client = service.create_lora_training_client(base_model=args.model, rank=args.rank)
    if inspect.isawaitable(training_client):  # tinker >= 0.38 returns a future of the client
        training_client = await training_client
    reports = await train(
        training_client,
        model=args.model,
        problems=problems,
        collector_for=collector_for(args.budget, args.warmup),
        steps=args.steps,
        learning_rate=args.learning_rate,
        profile="token_chunk",
        critic_sink=JsonlDirectory(args.critic_dir),
        allow_partial=True,
        problems_per_step=args.problems_per_step,
        log_path=run_dir / "metrics.jsonl",
        wandb_project=args.wandb_project,
        wandb_name=args.wandb_name,
        eval_problems=held_out,
        eval_every=args.eval_every if held_out else 0,
        checkpoint_every=args.checkpoint_every,
        checkpoint_path=run_dir / "checkpoints.jsonl",
        resume_from=resume,
        on_step=lambda r: print(
            f"update {r.learner_step}: batch {r.batch} ({r.trees} trees, lag {r.policy_lag}) "
            f"reward {r.stats['reward_mean']:.3f} loss {r.metrics.get('loss:sum', float('nan')):.4g}"
            + (f" eval {r.stats['eval/reward_mean']:.3f}" if "eval/reward_mean" in r.stats else ""),
            flush=True,
        ),
    )
    print(f"{len(reports)} updates; metrics in {run_dir}/metrics.jsonl; critic targets in {args.critic_dir}/")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="Qwen/Qwen3-4B-Instruct-2507", help="a Tinker base model")
    parser.add_argument("--math", metavar="JSONL", help="MATH-format problems (default: four built-in problems)")
    parser.add_argument("--problems", type=int, default=64, help="how many problems to read from --math")
    parser.add_argument("--steps", type=int, default=10, help="updates (counted from the run's start)")
    parser.add_argument("--problems-per-step", type=int, default=4, help="trees per update")
    parser.add_argument("--eval-problems", type=int, default=0, help="hold out the last N problems for evaluation")
    parser.add_argument("--eval-every", type=int, default=5, help="evaluate every N updates (with --eval-problems)")
    parser.add_argument("--checkpoint-every", type=int, default=10, help="save the training state every N updates")
    parser.add_argument("--run-dir", default="focus-run", help="where metrics.jsonl and checkpoints.jsonl go")
    parser.add_argument("--resume", metavar="JSONL", help="continue from the last checkpoint in this file")
    parser.add_argument("--wandb-project", help="also log to this wandb project (wandb must be installed)")
    parser.add_argument("--wandb-name", help="the wandb run's name (with --wandb-project)")
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--rank", type=int, default=32, help="LoRA rank")
    parser.add_argument("--budget", type=int, default=Selective().budget)
    parser.add_argument("--warmup", type=int, default=Selective().warmup)
    parser.add_argument("--critic-dir", default="focus-critic-targets")
    args = parser.parse_args(argv)
    if not os.environ.get("TINKER_API_KEY"):
        print("tinker_train.py trains on Tinker and needs a Tinker API key: set TINKER_API_KEY "
              "(from the Tinker console) and run it again. Nothing was run.", file=sys.stderr)
        return 2
    try:
        import tinker  # noqa: F401
    except ImportError:
        print("tinker_train.py needs the tinker package: pip install tinker (Python 3.11+).", file=sys.stderr)
        return 2
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
