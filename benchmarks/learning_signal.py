"""Learning signal per generated token on synthetic bandit trees (`make bench-signal`).

Where the truth is known, measure how much a trainer learns per generated token from each
search + estimator. Everything runs through the public API (benchmarks/signal_trees.py): a
Python ``Completion`` samples a tabular softmax policy, a Python ``Env`` pays the leaf
reward, a ``Critic.from_function`` scores checkpoints, ``Collector.collect`` +
``prepare_samples`` build the samples, and the gradient is read off ``Batch.actor``
(``weight``, ``visitation``, spans).

Problem: D segments of L tokens each (an action token, then fillers), K actions, leaf reward
Bernoulli(sigmoid(b + sum_k w_k[a_k])). A branch from a depth-d checkpoint reuses d * L
tokens of prefix, so a tree's generated tokens are what a real server would generate; the
prefill each generate call sends is reported beside them, with and without a prefix cache.

Methods (signal_trees.Method): selective:<score>[+w][/tgb] (Selective(B, B/2) +
DirectBranchTd or TreeGroupBaseline, +w the visitation weights), root-only:<B>
(Independent(B) + DirectBranchTd) and grpo:<B> (Independent(B) + GroupBaseline).

1. Per generated token (the headline, signal_learning.py): learning curves J against
   generated tokens, each method at its best learning rate from a grid (chosen per critic
   noise and budget on selection seeds, then run on fresh seeds), and their area: mean J
   over the first N rollout-equivalents (RE: the tokens of one independent rollout).
2. Per rollout (the second view): the same runs' area against rollouts, and the gradient
   error of one tree at the initial policy: sqrt(sum |alpha g_hat - g|^2 / sum |g|^2) over
   a cell's trees, alpha the method's best global step size, with the advantage MSE
   (A - (V(c) - V(s)))^2 beside it.
Paired design: each seed has its own problems and critic noise, shared by every method, and
the engine's per-rollout sampler seeds, so every method's first W root rollouts of a tree
are the same paths with the same rewards. "+-" is one standard error of the mean paired
difference over seeds; "*" marks a difference beyond two.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import crosscheck  # noqa: E402
from signal_learning import learning, tau_name  # noqa: E402
from signal_trees import (  # noqa: E402,F401  (re-exported for tests/test_bench_signal.py)
    SCORES,
    Bandit,
    Harness,
    Method,
    all_methods,
    collect_tree,
    dot,
    label,
    library_default,
    parse_selective,
    make_problems,
    mean_se,
    sigmoid,
    stop_groups,
    tree_gradient,
)
from signal_learning import area  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[1]
# The library's defaults, the same search with the critic rule (docs/signal.md §R), and the
# critic-free preset (§C).
DEFAULT_SELECTIVE = "8/4:value_refinement_per_token+stop,8/4:value_refinement_per_token+stop/auto,8/4:value_refinement+w/free"
RESULTS = ROOT / "benchmarks" / "results"


# --- per rollout: gradient error of one tree at the initial policy ---------------------------

async def gradient_cells(h: Harness, args, methods: List[Method], taus: List[Optional[float]]) -> Dict:
    """For every tau and method: per-seed relative gradient errors at the best global step
    size, advantage MSE, and tokens per tree. Methods with the same tree_key share trees."""
    out: Dict = {}
    keys = sorted({m.tree_key for m in methods})
    for tau in taus:
        jobs = []
        for seed in range(args.grad_seeds):
            for p in make_problems(1000 + seed, args.problems, args.depth, args.k, args.scale):
                for key in keys:
                    group = [m for m in methods if m.tree_key == key]
                    ests = sorted({m.first_estimator for m in group})
                    jobs.append((seed, key, p, collect_tree(h, p, group[0], seed, tau, seed, group[0].kappa_or(args.kappa),
                                                            args.segment_tokens, ests)))
        results = await asyncio.gather(*(j[3] for j in jobs))
        trees: Dict = {}
        for (seed, key, p, _), res in zip(jobs, results):
            trees.setdefault(key, {}).setdefault(seed, []).append((p, res))
        cell: Dict = {}
        for m in methods:
            rows = []  # per (seed, problem): (g_hat, g)
            adv_err: Dict[int, List[float]] = {}
            for seed, items in trees[m.tree_key].items():
                for p, res in items:
                    v = p.values()
                    rows.append((seed, tree_gradient(p, res.edges[m.first_estimator], res.rollouts, m.weighted), p.gradient(v)))
                    adv_err.setdefault(seed, []).extend((adv - (v[s + (a,)] - v[s])) ** 2 for s, a, adv, _ in res.edges[m.first_estimator])
            num = sum(dot(gh, g) for _, gh, g in rows)
            den = sum(dot(gh, gh) for _, gh, _ in rows)
            alpha = num / den if den > 0 else 0.0
            errs = {}
            for seed in range(args.grad_seeds):
                e2 = g2 = 0.0
                for sd, gh, g in rows:
                    if sd == seed:
                        e2 += dot(g, g) - 2 * alpha * dot(gh, g) + alpha * alpha * dot(gh, gh)
                        g2 += dot(g, g)
                errs[seed] = math.sqrt(max(e2, 0.0) / g2)
            tokens = [res.tokens for items in trees[m.tree_key].values() for _, res in items]
            cell[m.name] = {
                "alpha": alpha,
                "grad_err": [errs[s] for s in range(args.grad_seeds)],
                "adv_mse": [sum(adv_err[s]) / len(adv_err[s]) for s in range(args.grad_seeds)],
                "tokens_per_tree": sum(tokens) / len(tokens),
            }
        out[tau_name(tau)] = cell
        print(f"  gradient cell tau={tau_name(tau)} done", file=sys.stderr, flush=True)
    return out


# --- report --------------------------------------------------------------------------------

def paired(a: Sequence[float], b: Sequence[float]):
    return mean_se([x - y for x, y in zip(a, b)])


def fmt_pm(m: float, se: float, digits: int = 4) -> str:
    sig = "" if math.isnan(se) else ("*" if abs(m) > 2 * se else "")
    return f"{m:+.{digits}f} ± {se:.{digits}f}{sig}"


def fresh_runs(cell: Dict, budget: str) -> List[Dict]:
    """A method's fresh-seed run summaries at its best learning rate for ``budget``."""
    return cell["fresh"][f"{cell['best_lr'][budget]:g}"]["summary"]


def fresh(cell: Dict, budget: str, view: str = "tokens") -> List[float]:
    """A method's fresh-seed areas at its best learning rate for ``budget``."""
    return [s[view][budget] for s in fresh_runs(cell, budget)]


def best_of(learn_tau: Dict, names: Sequence[str], budget: str) -> Optional[str]:
    """The name among ``names`` with the best selection-seed area at its best rate."""
    def sel_area(n):
        c = learn_tau[n]
        return mean_se([s["tokens"][budget] for s in c["selection"][f"{c['best_lr'][budget]:g}"]])[0]
    present = [n for n in names if n in learn_tau]
    return max(present, key=sel_area) if present else None


def margins(learn: Dict, name: str, tau: str, budget: str, bases: Sequence[str]) -> Optional[tuple]:
    """name minus the best of ``bases`` (chosen on the selection seeds), paired over the
    fresh seeds: (mean, se, the base's name)."""
    base = best_of(learn[tau], bases, budget)
    if base is None or base == name:
        return None
    m, se = paired(fresh(learn[tau][name], budget), fresh(learn[tau][base], budget))
    return m, se, base


def report(args, methods: List[Method], grad: Dict, learn: Dict, default: str) -> List[str]:
    re_tokens = args.depth * args.segment_tokens
    lines = [f"Bandit trees: D={args.depth} segments of L={args.segment_tokens} tokens (1 RE = {re_tokens} generated tokens, "
             f"one independent rollout), K={args.k}, weight scale {args.scale}, Selective budget {args.budget}, kappa {args.kappa:g}. "
             f"Learning: {args.learn_problems} problems per seed, one tree per visit, a step after every tree, up to "
             f"{max(args.budgets)} RE; learning rates {', '.join(f'{x:g}' for x in args.lrs)}, each method's grid extended past "
             f"an edge its choice sat on (up to {args.extend_lrs} rates a side), chosen per noise and budget on "
             f"{args.seeds} selection seeds, reported on {args.confirm_seeds} fresh seeds. '*' = paired difference > 2 s.e.; "
             "'^' = the best learning rate is at the edge of the method's grid.", ""]
    names = [m.name for m in methods]
    roots = [n for n in names if n.startswith("root-only:") and "@" not in n]
    grpos = [n for n in names if n.startswith("grpo:")]
    if learn:
        taus = list(learn)
        some = learn[taus[0]]
        lines.append("Tokens per tree (fresh seeds, first noise, largest budget's learning rate): generated tokens, rollouts, "
                     "RE per rollout, prefix tokens reused, prefill without a cache and with a per-tree prefix cache:")
        lines.append("")
        lines.append("| method | generated | rollouts | RE / rollout | prefix reused | prefill, no cache | prefill, prefix cache |")
        lines.append("|---|---|---|---|---|---|---|")
        big = str(max(args.budgets))
        for n in names:
            if n not in some:
                continue
            tot = [s["totals"] for s in fresh_runs(some[n], big)]
            trees = sum(t["trees"] for t in tot)
            per = {k: sum(t[k] for t in tot) / trees for k in ("tokens", "rollouts", "prefix_reused", "prefill", "prefill_cached")}
            lines.append(f"| {label(n)} | {per['tokens']:.0f} | {per['rollouts']:.1f} | {per['tokens'] / per['rollouts'] / re_tokens:.2f} | "
                         f"{per['prefix_reused']:.0f} | {per['prefill']:.0f} | {per['prefill_cached']:.0f} |")
        autos = [n for n in names if "/auto" in n and n in some]
        if autos:
            lines += ["", "The critic rule's choices (fresh seeds, the largest budget's learning rate): the share of batches "
                      "prepared with DirectBranchTd (the rest TreeGroupBaseline) and the mean kappa it set:", ""]
            lines.append("| method | " + " | ".join(f"tau={t}" for t in taus) + " |")
            lines.append("|---|" + "---|" * len(taus))
            for n in autos:
                cells = []
                for t in taus:
                    tot = [s["totals"] for s in fresh_runs(learn[t][n], big)]
                    nb = sum(x.get("batches", 0) for x in tot) or 1
                    cells.append(f"{sum(x.get('dbtd_batches', 0) for x in tot) / nb:.2f} DBTD, kappa {sum(x.get('kappa_sum', 0) for x in tot) / nb:.2f}")
                lines.append(f"| {label(n)} | " + " | ".join(cells) + " |")
        for b in args.budgets:
            bs = str(b)
            lines += ["", f"Per generated token, the first {b} RE: mean J (fresh seeds) at the best learning rate (in brackets):", ""]
            lines.append("| method | " + " | ".join(f"tau={t}" for t in taus) + " |")
            lines.append("|---|" + "---|" * len(taus))
            for n in names:
                cells = []
                for t in taus:
                    c = learn[t][n]
                    lr = c["best_lr"][bs]
                    grid = [float(x) for x in c["selection"]]
                    edge = "^" if lr in (min(grid), max(grid)) and len(grid) > 1 else ""
                    cells.append(f"{mean_se(fresh(c, bs))[0]:.4f} ({lr:g}{edge})")
                lines.append(f"| {label(n)} | " + " | ".join(cells) + " |")
            lines += ["", f"Margins, the first {b} RE: each method minus the best root-only and minus the best GRPO group size "
                      "(each chosen on the selection seeds, named in brackets), paired over the fresh seeds:", ""]
            lines.append("| method | " + " | ".join(f"− root-only, tau={t} | − GRPO, tau={t}" for t in taus) + " |")
            lines.append("|---|" + "---|" * (2 * len(taus)))
            for n in names:
                cells = []
                for t in taus:
                    for bases in (roots, grpos):
                        mg = margins(learn, n, t, bs, bases)
                        cells.append("" if mg is None else f"{fmt_pm(mg[0], mg[1])} ({mg[2].split(':')[1]})")
                lines.append(f"| {label(n)} | " + " | ".join(cells) + " |")
        lines += ["", "The worst case: each method minus each root-only and GRPO size in turn, paired over the fresh seeds; "
                  "the smallest margin (the baseline that comes closest or wins, in brackets). The target asks this to be "
                  "positive beyond 2 s.e. at tau 0.2 and 0.5 and not negative beyond 2 s.e. at 0.05 and const:", ""]
        lines.append("| method | " + " | ".join(f"{b} RE, tau={t}" for b in args.budgets for t in taus) + " |")
        lines.append("|---|" + "---|" * (len(args.budgets) * len(taus)))
        for n in names:
            cells = []
            for b in args.budgets:
                for t in taus:
                    worst = min((paired(fresh(learn[t][n], str(b)), fresh(learn[t][base], str(b))) + (base,)
                                 for base in roots + grpos if base != n), key=lambda x: x[0], default=None)
                    cells.append("" if worst is None else f"{fmt_pm(worst[0], worst[1])} ({worst[2]})")
            lines.append(f"| {label(n)} | " + " | ".join(cells) + " |")
        lines += ["", "Per rollout (the second view): mean J over the first N rollouts (fresh seeds, the same runs and "
                  "learning rates as per token):", ""]
        cols = [(t, b) for b in args.budgets for t in taus]
        lines.append("| method | " + " | ".join(f"{b} rollouts, tau={t}" for t, b in cols) + " |")
        lines.append("|---|" + "---|" * len(cols))
        for n in names:
            lines.append(f"| {label(n)} | " + " | ".join(f"{mean_se(fresh(learn[t][n], str(b), 'rollouts'))[0]:.4f}" for t, b in cols) + " |")
        if default in names:
            lines += ["", f"The target for {default}: ahead of the best root-only and the best GRPO by more than 2 s.e. at "
                      "tau 0.2 and 0.5, not behind at 0.05 and with the constant critic (the first budget, then the last):", ""]
            for b in args.budgets:
                parts = []
                for t in taus:
                    for bases, what in ((roots, "root-only"), (grpos, "GRPO")):
                        mg = margins(learn, default, t, str(b), bases)
                        if mg:
                            parts.append(f"tau {t} vs {what}:{mg[2].split(':')[1]} {fmt_pm(mg[0], mg[1])}")
                lines.append(f"- {b} RE: " + "; ".join(parts))
    if grad:
        lines += ["", "Gradient error of one tree at the initial policy (relative, best global step size; lower is better), "
                  f"{args.problems} problems x {args.grad_seeds} seeds per cell, and the advantage MSE:", ""]
        lines.append("| method | " + " | ".join(f"grad err tau={t}" for t in grad) + " | " + " | ".join(f"adv MSE tau={t}" for t in grad)
                     + " | tokens / tree |")
        lines.append("|---|" + "---|" * (2 * len(grad) + 1))
        for m in methods:
            if m.name not in next(iter(grad.values())):
                continue  # a method added to a merged run without gradient cells
            ge = [mean_se(grad[t][m.name]["grad_err"])[0] for t in grad]
            am = [mean_se(grad[t][m.name]["adv_mse"])[0] for t in grad]
            tok = next(iter(grad.values()))[m.name]["tokens_per_tree"]
            lines.append(f"| {label(m.name)} | " + " | ".join(f"{x:.3f}" for x in ge) + " | " + " | ".join(f"{x:.4f}" for x in am)
                         + f" | {tok:.0f} |")
        if default in names:
            lines += ["", f"Paired gradient-error difference, {default} minus each (negative: {default} better):", ""]
            lines.append("| method | " + " | ".join(f"tau={t}" for t in grad) + " |")
            lines.append("|---|" + "---|" * len(grad))
            for n in names:
                if n != default and n in grad[next(iter(grad))]:
                    lines.append(f"| {label(n)} | " + " | ".join(fmt_pm(*paired(grad[t][default]["grad_err"], grad[t][n]["grad_err"]), digits=3)
                                                                for t in grad) + " |")
    return lines


def mean_curve(curves: List[Dict], x: str, grid: Sequence[float]) -> List[float]:
    """The mean over seeds of the step functions J(x), at each grid point."""
    out = []
    for g in grid:
        js = []
        for c in curves:
            j = c["j"][0]
            for xi, ji in zip(c[x], c["j"]):
                if xi > g:
                    break
                j = ji
            js.append(j)
        out.append(sum(js) / len(js))
    return out


def plot(path: Path, args, learn: Dict, default: str) -> Optional[str]:
    """One row per critic noise: J against generated tokens (RE) and against rollouts, mean
    over the fresh seeds at each method's best rate for the largest budget; the default,
    every root-only and GRPO size, and the three other best methods by area."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot (pip install matplotlib into .venv)"
    taus = list(learn)
    big = str(max(args.budgets))
    re_tokens = args.depth * args.segment_tokens
    fig, axes = plt.subplots(len(taus), 2, figsize=(13, 3.8 * len(taus)), squeeze=False)
    for r, t in enumerate(taus):
        cell = learn[t]
        fixed = [n for n in cell if n == default or n.startswith(("root-only:", "grpo:")) and "@" not in n]
        others = sorted((n for n in cell if n not in fixed), key=lambda n: -mean_se(fresh(cell[n], big))[0])[:3]
        for n in fixed + others:
            curves = cell[n]["fresh"][f"{cell[n]['best_lr'][big]:g}"]["curves"]
            style = "-" if n == default or n in others else ("--" if n.startswith("root-only") else ":")
            grid = [max(args.budgets) * i / 100 for i in range(101)]
            axes[r][0].plot(grid, mean_curve(curves, "tokens", [g * re_tokens for g in grid]), style, label=label(n))
            axes[r][1].plot(grid, mean_curve(curves, "rollouts", grid), style, label=label(n))
        axes[r][0].set_title(f"J vs generated tokens (RE), tau={t}", fontsize=9)
        axes[r][1].set_title(f"J vs rollouts, tau={t}", fontsize=9)
        axes[r][0].set_ylabel("mean exact J")
        axes[r][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=60)
    return None


def parse_floats(text: str) -> List[float]:
    """A comma-separated list of numbers ("" or None: none)."""
    return [float(x) for x in str(text or "").split(",") if x]


def parse_args(argv: Optional[List[str]]):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke test: tiny sizes, no plot")
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--segment-tokens", type=int, default=8, help="L, the tokens of every segment (an action, then fillers)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--scale", type=float, default=1.0, help="std of the reward-logit weights w_k[a]")
    ap.add_argument("--budget", type=int, default=32, help="the Selective trees' rollouts (warmup: half)")
    ap.add_argument("--group-sizes", default=None,
                    help="the Independent sizes of root-only and GRPO (default: every size from the library default's "
                         "warmup W to its budget B)")
    ap.add_argument("--stop-groups", default=None,
                    help="B/W sizes, comma-separated, of root-only and GRPO groups with dynamic sampling by stop_alike "
                         "(W rollouts, then the rest of B unless all W returned alike), named '<kind>:<B>/<W>+stop' "
                         "(default: the library default's B/W; '' none)")
    ap.add_argument("--scores", default=None,
                    help=f"scores of Selective(B, B/2) (B: --budget), each with and without visitation weights, of {', '.join(SCORES)} "
                         "(default: none)")
    ap.add_argument("--tgb-scores", default="",
                    help="the Selective scores also run with TreeGroupBaseline and visitation weights ('/tgb')")
    ap.add_argument("--selective", default=DEFAULT_SELECTIVE,
                    help="more Selective methods, comma-separated '<B>/<W>:<score>[+stop][+w][/tgb|/free|/auto[T][kK]]' "
                         "(Selective(B, W), stop_alike, visitation weights, TreeGroupBaseline, the critic-free preset's "
                         "constant critic, the critic rule at threshold T and max_kappa K); default: the library's "
                         "defaults, the same with the critic rule, and the critic-free preset")
    ap.add_argument("--methods", default="", help="keep only these methods (comma-separated names; default: all)")
    ap.add_argument("--taus", default="0.05,0.2,0.5,const", help="critic noises ('const': Critic.constant(0.5))")
    ap.add_argument("--budgets", default="160,640", help="the budgets of the areas, in rollout-equivalents (RE)")
    ap.add_argument("--lrs", default=",".join(str(2 ** i) for i in range(4, 15)), help="the learning-rate grid (default: 16 to 16384, factors of 2)")
    ap.add_argument("--extend-lrs", type=int, default=4,
                    help="a method whose chosen rate sits on an edge of its grid runs the next rate past it (the grid's step "
                         "there), on the selection seeds, up to this many rates a side")
    ap.add_argument("--seeds", type=int, default=4, help="selection seeds (0: no learning runs); every choice is made on them")
    ap.add_argument("--confirm-seeds", type=int, default=24, help="fresh seeds each method runs at its chosen rates")
    ap.add_argument("--learn-problems", type=int, default=4, help="problems per seed in a learning run")
    ap.add_argument("--grad-seeds", type=int, default=4, help="seeds of the gradient-error cells (0: none)")
    ap.add_argument("--problems", type=int, default=32, help="problems per seed in a gradient cell")
    ap.add_argument("--default", default=None,
                    help="the candidate of the paired differences and the target line (default: the library's defaults, "
                         "marked '(the default)' in the tables)")
    ap.add_argument("--kappa", type=float, default=1.0, help="RewardConfig.critic_weight (kappa) of every collection; the search selects with max(kappa, 1)")
    ap.add_argument("--extra-kappas", default="", help="comma-separated kappas: every DirectBranchTd method also runs at each, "
                    "named '<method>@k<kappa>', on the same seeds (paired with the --kappa methods)")
    ap.add_argument("--concurrency", type=int, default=64, help="trees collected at once")
    ap.add_argument("--out", default=str(RESULTS / "signal"))
    ap.add_argument("--replot", metavar="JSON", help="rewrite signal.md and signal.png from an earlier run's signal.json")
    args = ap.parse_args(argv)
    return ap, args


def methods_of(args) -> List[Method]:
    methods = all_methods([s for s in (args.scores or "").split(",") if s], args.budget, [int(x) for x in parse_floats(args.group_sizes)],
                          [s for s in args.tgb_scores.split(",") if s], parse_floats(args.extra_kappas), stop_groups(args.stop_groups or ""))
    have = {m.name for m in methods}
    for spec in (x for x in getattr(args, "selective", "").split(",") if x):
        m = parse_selective(spec, args.budget)
        if m.name not in have:
            methods.insert(len([x for x in methods if x.search == "selective"]), m)
            have.add(m.name)
    keep = [n for n in args.methods.split(",") if n]
    return [m for m in methods if m.name in keep] if keep else methods


def write(out: Path, args, methods, grad, learn, extra: Sequence[str] = (), plot_it: bool = True) -> str:
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join(list(report(args, methods, grad, learn, args.default)) + list(extra)) + "\n"
    (out / "signal.md").write_text(text)
    if plot_it and learn:
        msg = plot(out / "signal.png", args, learn, args.default)
        if msg:
            print(msg, file=sys.stderr)
    return text


def main(argv: Optional[List[str]] = None) -> int:
    ap, args = parse_args(argv)
    if args.replot:
        saved = json.loads(Path(args.replot).read_text())
        for k, v in saved["args"].items():
            if k not in ("replot", "out"):
                setattr(args, k, v)
        print(write(Path(args.out), args, methods_of(args), saved["gradient"], saved["learning"]))
        return 0
    if args.quick:
        args.depth, args.segment_tokens, args.budget, args.group_sizes = 3, 2, 8, args.group_sizes or "4,8"
        args.problems, args.grad_seeds, args.seeds, args.confirm_seeds, args.learn_problems = 2, 2, 2, 2, 2
        args.taus, args.budgets, args.lrs, args.tgb_scores = "0.2,const", "8,16", "4,16", "value_refinement"
        args.scores = "value_refinement,critic_adaptive" if args.scores is None else args.scores
        args.extend_lrs = min(args.extend_lrs, 1)
    from focus_go import Selective

    sel = Selective()
    if args.group_sizes is None:
        args.group_sizes = ",".join(str(b) for b in range(sel.warmup, sel.budget + 1))
    if args.stop_groups is None:
        args.stop_groups = f"{sel.budget}/{sel.warmup}"
    args.default = args.default or library_default()
    args.budgets = [int(b) for b in parse_floats(args.budgets)] if isinstance(args.budgets, str) else args.budgets
    args.lrs = parse_floats(args.lrs) if isinstance(args.lrs, str) else args.lrs
    taus = [None if t.startswith("const") else float(t) for t in args.taus.split(",") if t]
    methods = methods_of(args)
    if 2 * args.k > 8:
        ap.error(f"--k {args.k}: at most 4 actions (each has a win and a loss token)")
    if not methods:
        ap.error("no method left (--methods)")
    if args.default not in {m.name for m in methods}:
        print(f"note: --default {args.default!r} is not one of the methods: no target line", file=sys.stderr)

    h = Harness(args.concurrency)
    t0 = time.time()
    try:
        grad = asyncio.run(gradient_cells(h, args, methods, taus)) if args.grad_seeds > 0 else {}
        t1 = time.time()
        learn = asyncio.run(learning(h, args, methods, taus, log=lambda m: print(m, file=sys.stderr, flush=True))) if args.seeds > 0 else {}
    finally:
        h.close()
    t2 = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "signal.json").write_text(json.dumps({"args": dict(vars(args)), "gradient": grad, "learning": learn}))
    text = write(out, args, methods, grad, learn, ["", f"Run time {t2 - t0:.0f} s (gradient cells {t1 - t0:.0f} s, learning {t2 - t1:.0f} s).", ""]
                 + crosscheck.markdown(), plot_it=not args.quick)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
