"""The tables and the plot of `make bench-learn` (benchmarks/learn.py)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from decide import SETTINGS, behind, neural_cells
from learn import mean_se, run_area



def fmt(m: float, se: float, digits: int = 3) -> str:
    return f"{m:.{digits}f} ± {se:.{digits}f}" if not math.isnan(se) else f"{m:.{digits}f}"


def fmt_diff(m: float, se: float) -> str:
    star = "*" if not math.isnan(se) and abs(m) > 2 * se else ""
    return f"{m:+.3f} ± {se:.3f}{star}" if not math.isnan(se) else f"{m:+.3f}"


def reported(data: Dict) -> Tuple[Dict[str, List[dict]], str]:
    """Each method's reported runs (fresh seeds; the selection runs at the chosen rate when
    the run had no fresh seeds) and what they are."""
    if data["fresh"]:
        out: Dict[str, List[dict]] = {}
        for r in data["fresh"]:
            out.setdefault(r["method"], []).append(r)
        return out, f"{len(data['fresh_seeds'])} fresh seeds"
    return ({m: data["selection"][m][f"{data['rates'][m]:g}"] for m in data["methods"]},
            f"{len(data['selection_seeds'])} SELECTION seeds: preliminary, not a result")


def cells(data: Dict, runs: Dict[str, List[dict]]) -> List[Tuple[str, str, float]]:
    """(label, axis, budget) of every area reported: generated tokens at a quarter of the
    budget and at all of it, forward tokens without and with a prefix cache up to what every
    reported run covers."""
    budget = data["run"]["budget_tokens"]
    out = [(f"gen {budget // 4}", "generated", budget / 4), (f"gen {budget}", "generated", budget)]
    for axis, name in (("forward", "fwd"), ("forward_cached", "fwd cached")):
        cover = min(r["points"][-1][axis] for rs in runs.values() for r in rs)
        out.append((f"{name} {cover}", axis, cover))
    return out


def areas(runs: Dict[str, List[dict]], axis: str, budget: float) -> Dict[str, List[float]]:
    """Per method, its runs' areas in seed order."""
    return {m: [run_area(r, axis, budget) for r in sorted(rs, key=lambda r: r["seed"])] for m, rs in runs.items()}


def best_baseline(data: Dict, baselines: Sequence[str], axis: str, budget: float) -> Optional[str]:
    """The baseline with the best selection-seed area at its chosen rate."""
    def sel(m):
        rs = data["selection"][m][f"{data['rates'][m]:g}"]
        try:
            return mean_se([run_area(r, axis, budget) for r in rs])[0]
        except ValueError:  # a selection run that does not cover this budget
            return -1.0
    return max(baselines, key=sel) if baselines else None


def report(data: Dict) -> List[str]:
    run, methods = data["run"], data["methods"]
    runs, what = reported(data)
    lines = [f"Neural benchmark ({data['config']}): {run['digits']}-digit addition with a scratchpad, Segments({run['segment']}), "
             f"model {run['model']}, {run['trees_per_update']} trees per update, {run['budget_tokens']} generated tokens per run; "
             f"learning rates from the grid {', '.join(f'{x:g}' for x in data['grid'])} (factor 2, extended at an edge) chosen on "
             f"selection seeds {data['selection_seeds']}; reported: {what}. Areas are mean held-out success (2 seeded samples per problem) over the first T "
             f"tokens. '*' = paired difference beyond 2 s.e.; '^' = the chosen rate sits at the edge of its final grid.", ""]
    lines += ["Warm starts (supervised steps to the target success):", "", "| seed | steps | held-out success |", "|---|---|---|"]
    lines += [f"| {s} | {steps} | {rate:.3f} |" for s, steps, rate in data["warm"]]
    cs = cells(data, runs)
    lines += ["", "Areas (" + what + "):", "", "| method | lr | " + " | ".join(c[0] for c in cs) + " |", "|---|---|" + "---|" * len(cs)]
    table = {c[0]: areas(runs, c[1], c[2]) for c in cs}
    for m in methods:
        tried = sorted(float(x) for x in data["selection"][m])
        edge = "^" if data["rates"][m] in (tried[0], tried[-1]) and len(tried) > 1 else ""
        lines.append(f"| {m} | {data['rates'][m]:g}{edge} | " + " | ".join(fmt(*mean_se(table[c[0]][m])) for c in cs) + " |")
    baselines = [m for m in methods if m not in SETTINGS]
    settings = [m for m in methods if m in SETTINGS]
    if baselines and settings:
        lines += ["", "Each setting minus each baseline, paired over the same seeds (all areas):", "",
                  "| setting | baseline | " + " | ".join(c[0] for c in cs) + " |", "|---|---|" + "---|" * len(cs)]
        for s in settings:
            for b in baselines:
                lines.append(f"| {s} | {b} | " + " | ".join(
                    fmt_diff(*mean_se([x - y for x, y in zip(table[c[0]][s], table[c[0]][b])])) for c in cs) + " |")
        lines += ["", "Against the best baseline of each cell (chosen on the selection seeds):", "",
                  "| setting | " + " | ".join(c[0] for c in cs) + " |", "|---|" + "---|" * len(cs)]
        best = {c[0]: best_baseline(data, baselines, c[1], c[2]) for c in cs}
        for s in settings:
            lines.append(f"| {s} | " + " | ".join(
                f"{fmt_diff(*mean_se([x - y for x, y in zip(table[c[0]][s], table[c[0]][best[c[0]]])]))} ({best[c[0]]})"
                for c in cs) + " |")
        lines += ["", "The decision rule's reading on this benchmark alone (docs/signal.md §N, its cells the two generated-token "
                  "budgets; the bandit benchmark's cells join it in benchmarks/decide.py), every setting and baseline:", ""]
        rule_cells = neural_cells(data, runs)
        for s in settings + baselines:
            late = [f"{b} at {c.name}" for b, c, _, _ in behind(rule_cells, s)]
            mean_area = sum(mean_se(c.fresh[s])[0] for c in rule_cells) / len(rule_cells)
            lines.append(f"- {s}: mean area over the generated-token cells {mean_area:.3f}; "
                         + ("admissible (behind no baseline beyond 2 s.e.)" if not late else "behind " + ", ".join(late)))
    lines += ["", "Costs per tree and the critic (reported runs):", "",
              "| method | updates | trees | dropped (+ds) | rollouts / tree | generated / tree | forward / tree | forward, cached / tree | "
              "critic MSE, first update | critic MSE, last update | critic tau² (noise removed) | rule: TGB share |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in methods:
        rs = runs[m]
        trees = sum(r["trees"] for r in rs)
        per = {k: sum(r["points"][-1][k] for r in rs) / trees for k in ("generated", "forward", "forward_cached")}
        mse = [r["critic_mse"] for r in rs if r["critic_mse"]]
        first = f"{sum(x[0] for x in mse) / len(mse):.4f}" if mse else "-"
        last = f"{sum(x[-1] for x in mse) / len(mse):.4f}" if mse else "-"
        taus = [r["critic_tau2"] for r in rs if r["critic_tau2"] is not None]
        tau = f"{sum(taus) / len(taus):.4f}" if taus else "-"
        shares = [r["rule_tgb_share"] for r in rs if r["rule_tgb_share"] is not None]
        share = f"{sum(shares) / len(shares):.2f}" if shares else "-"
        lines.append(f"| {m} | {sum(r['updates'] for r in rs) / len(rs):.1f} | {trees / len(rs):.1f} | "
                     f"{sum(r['trees_dropped'] for r in rs) / max(trees, 1):.2f} | {sum(r['rollouts'] for r in rs) / trees:.2f} | "
                     f"{per['generated']:.0f} | {per['forward']:.0f} | {per['forward_cached']:.0f} | {first} | {last} | {tau} | {share} |")
    secs = [r["seconds"] for rs in data["selection"].values() for x in rs.values() for r in x] + [r["seconds"] for r in data["fresh"]]
    lines += ["", f"{len(secs)} runs, {sum(secs) / len(secs):.1f} s each on average; {data['seconds']:.0f} s in all."]
    return lines


def curve(points: Sequence[dict], xs: Sequence[float]) -> List[float]:
    """Success in force at each generated-token count of ``xs``."""
    out, j = [], 0
    for x in xs:
        while j + 1 < len(points) and points[j + 1]["generated"] <= x:
            j += 1
        out.append(points[j]["success"])
    return out


def plot(data: Dict, path: Path) -> Optional[Path]:
    """Mean held-out success against generated tokens per method (a PNG); None without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    runs, what = reported(data)
    budget = data["run"]["budget_tokens"]
    xs = [budget * i / 100 for i in range(100)]
    fig, ax = plt.subplots(figsize=(8, 5))
    for m in data["methods"]:
        ys = [curve(r["points"], xs) for r in runs[m]]
        mean = [sum(col) / len(col) for col in zip(*ys)]
        style = "-" if m in SETTINGS else "--"
        ax.plot(xs, mean, style, label=f"{m} (lr {data['rates'][m]:g})", linewidth=2 if m == "selective" else 1)
    ax.set_xlabel("generated tokens")
    ax.set_ylabel("held-out success (sampled)")
    ax.set_title(f"bench-learn ({data['config']}): {what}")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
