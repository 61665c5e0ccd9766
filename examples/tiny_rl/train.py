"""Train a small transformer by RL through focus-go: a tree and a plain group side by side.

    pip install torch tokenizers        # and focus-go
    python examples/tiny_rl/train.py    # 2.5 minutes measured on a shared 2-core machine at load 3

The model learns 3-digit addition with a scratchpad (task.py). A short supervised warm start
brings it to about 15% held-out success (answers sampled at temperature 1); then each method trains a copy of it with
the same PPO trainer (trainer.py) on trees collected through focus-go (methods.py): the
library's default search, ``Selective()``, against a GRPO group of 8 (``Independent(8)`` with
``GroupBaseline``). The critic is a small value model trained on the collector's critic
records. The script prints held-out success against generated tokens for both, and the
critic's measured error.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from methods import Learner, Method, RunConfig, Setup, area  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", default="selective,grpo:8", help="comma-separated methods (methods.py)")
    ap.add_argument("--budget", type=int, default=64_000, help="generated tokens per method")
    ap.add_argument("--lr", type=float, default=5e-5, help="Adam's learning rate (the rate `make bench-learn` chose for 9 of its 11 methods)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workdir", default=str(Path.cwd() / "tiny_rl_work"), help="tokenizer and warm-start cache")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    cfg = RunConfig(budget_tokens=args.budget, device=args.device)
    start = time.perf_counter()
    setup = Setup.build(args.seed, cfg, Path(args.workdir))
    params = sum(v.numel() for v in setup.warm.values())
    print(f"warm start: {params} parameters, {setup.warm_steps} supervised steps, held-out success {setup.warm_success:.3f} "
          f"({time.perf_counter() - start:.0f} s)")
    results = {}
    try:
        for name in args.methods.split(","):
            t = time.perf_counter()
            results[name] = asyncio.run(Learner(setup, Method.parse(name), args.lr).run())
            r = results[name]
            critic = f", critic MSE {r.critic_mse[0]:.3f} -> {r.critic_mse[-1]:.3f}" if r.critic_mse else ""
            print(f"{name}: {r.updates} updates, {r.trees} trees, {r.rollouts} rollouts{critic} ({time.perf_counter() - t:.0f} s)")
    finally:
        setup.close()
    names = list(results)
    print("\ngenerated tokens | " + " | ".join(names))
    for i in range(0, 11):
        x = args.budget * i / 10
        row = []
        for n in names:
            pts = [p for p in results[n].points if p.generated <= x and p.success == p.success]
            row.append(f"{pts[-1].success:.3f}")
        print(f"{x:>16.0f} | " + " | ".join(row))
    print("\narea (mean held-out success over the budget): "
          + ", ".join(f"{n} {area(results[n].points, 'generated', args.budget):.3f}" for n in names))


if __name__ == "__main__":
    main()
