"""The decision rule of docs/signal.md §N, applied to the two benchmarks' result files.

    python benchmarks/decide.py --signal benchmarks/results/signal/signal.json \\
        --learn benchmarks/results/learn/reduced/results.json

``--signal`` (repeatable) takes `make bench-signal`'s signal.json files, whose critic-noise
cells are joined; ``--learn`` takes `make bench-learn`'s results.json. A cell is one
benchmark at one budget: every (critic noise, budget) of the bandit benchmark and the
neural benchmark's two generated-token budgets. Only fresh seeds are read, except where the
rule says selection seeds (the best baseline of a cell).

- A method is admissible when in no cell is it behind any baseline of that cell's benchmark
  by more than two standard errors of the paired difference.
- Its mean area is each benchmark's mean over its cells, averaged over the two benchmarks;
  only methods that both benchmarks ran are candidates.
- The default is the admissible candidate with the best mean area.
- The tree teaches more per token only when that default is a tree setting ahead of each
  neural cell's best baseline (chosen on the selection seeds) by more than two standard
  errors, and the bandit cells agree in sign.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from learn import mean_se, run_area  # noqa: E402

SETTINGS = ("selective", "rule", "free")
# The bandit benchmark's names of the three settings (benchmarks/learning_signal.py's DEFAULT_SELECTIVE).
BANDIT_NAMES = {"selective8/4:value_refinement_per_token+stop": "selective",
                "selective8/4:value_refinement_per_token+stop/auto": "rule",
                "selective8/4:value_refinement+w/free": "free"}


class Cell:
    """One benchmark at one budget: per method, the fresh seeds' areas (in seed order) and
    the selection seeds' mean area at the chosen rate."""

    def __init__(self, bench: str, name: str, fresh: Dict[str, List[float]], selection: Dict[str, float]) -> None:
        self.bench, self.name, self.fresh, self.selection = bench, name, fresh, selection

    def diff(self, a: str, b: str) -> Tuple[float, float]:
        """The mean paired difference a - b over the fresh seeds and its standard error."""
        return mean_se([x - y for x, y in zip(self.fresh[a], self.fresh[b])])

    def best_baseline(self) -> str:
        return max((m for m in self.fresh if m not in SETTINGS), key=lambda m: self.selection[m])


def bandit_cells(path: Path) -> List[Cell]:
    out = []
    for tau, methods in json.loads(path.read_text())["learning"].items():
        budgets = next(iter(methods.values()))["best_lr"]
        for budget in budgets:
            fresh, sel = {}, {}
            for name, m in methods.items():
                key = BANDIT_NAMES.get(name, name)
                lr = m["best_lr"][budget]
                fresh[key] = [s["tokens"][budget] for s in m["fresh"][_lr_key(m["fresh"], lr)]["summary"]]
                sel[key] = mean_se([s["tokens"][budget] for s in m["selection"][_lr_key(m["selection"], lr)]])[0]
            out.append(Cell("bandit", f"noise {tau}, {budget} RE", fresh, sel))
    return out


def _lr_key(table: Dict[str, object], lr: float) -> str:
    """The key of ``lr`` in a table keyed by learning rates written as strings."""
    for k in table:
        if float(k) == float(lr):
            return k
    raise KeyError(f"learning rate {lr} not in {sorted(table)}")


def neural_cells(data: Dict, runs: Dict[str, List[dict]]) -> List[Cell]:
    """The neural benchmark's cells, its two generated-token budgets, from `make bench-learn`'s
    results ``data``: the areas of ``runs`` (per method, the runs reported) and each method's
    selection-seed mean at its chosen rate."""
    budget = data["run"]["budget_tokens"]
    out = []
    for t in (budget / 4, budget):
        fresh = {m: [run_area(r, "generated", t) for r in sorted(rs, key=lambda r: r["seed"])] for m, rs in runs.items()}
        sel = {m: mean_se([run_area(r, "generated", t) for r in data["selection"][m][f"{data['rates'][m]:g}"]])[0]
               for m in data["methods"]}
        out.append(Cell("neural", f"{t:.0f} generated tokens", fresh, sel))
    return out


def learn_cells(path: Path) -> List[Cell]:
    data = json.loads(path.read_text())
    if not data["fresh"]:
        raise ValueError(f"{path} has no fresh seeds (a --selection-only run decides nothing)")
    runs: Dict[str, List[dict]] = {}
    for r in data["fresh"]:
        runs.setdefault(r["method"], []).append(r)
    return neural_cells(data, runs)


def behind(cells: Sequence[Cell], m: str) -> List[Tuple[str, Cell, float, float]]:
    """Where method ``m`` is behind a baseline beyond two standard errors: (baseline, cell,
    the paired difference, its standard error) each."""
    out = []
    for c in cells:
        for b in c.fresh:
            if b != m and b not in SETTINGS:
                d, se = c.diff(m, b)
                if d < -2 * se:
                    out.append((b, c, d, se))
    return out


def decide(cells: Sequence[Cell]) -> List[str]:
    """The rule's reading, as markdown lines."""
    benches = sorted({c.bench for c in cells})
    candidates = [m for m in cells[0].fresh if all(m in c.fresh for c in cells)]
    lines = ["| method | admissible | " + " | ".join(f"mean area, {b}" for b in benches) + " | mean | behind (beyond 2 s.e.) |",
             "|---|---|" + "---|" * len(benches) + "---|---|"]
    score = {}
    admissible = {}
    for m in candidates:
        late = [f"{b} ({c.bench}, {c.name}: {d:+.3f} ± {se:.3f})" for b, c, d, se in behind(cells, m)]
        per = [sum(mean_se(c.fresh[m])[0] for c in cells if c.bench == b) / sum(c.bench == b for c in cells) for b in benches]
        score[m], admissible[m] = sum(per) / len(per), not late
        lines.append(f"| {m} | {'yes' if not late else 'no'} | " + " | ".join(f"{x:.3f}" for x in per)
                     + f" | {score[m]:.3f} | {'; '.join(late) or '-'} |")
    ok = [m for m in candidates if admissible[m]]
    if not ok:
        lines += ["", "No candidate is admissible: every one is behind a baseline somewhere."]
        return lines
    default = max(ok, key=lambda m: score[m])
    lines += ["", f"The rule's default: **{default}** (mean area {score[default]:.3f})."]
    if default in SETTINGS:
        lines += ["", f"{default} against each cell's best baseline (chosen on the selection seeds):", ""]
        for c in cells:
            b = c.best_baseline()
            d, se = c.diff(default, b)
            lines.append(f"- {c.bench}, {c.name}: {d:+.3f} ± {se:.3f} against {b}{' *' if abs(d) > 2 * se else ''}")
        neural = [c.diff(default, c.best_baseline()) for c in cells if c.bench == "neural"]
        bandit = [c.diff(default, c.best_baseline())[0] for c in cells if c.bench == "bandit"]
        teaches = bool(neural) and all(d > 2 * se for d, se in neural) and all(d > 0 for d in bandit)
        lines += ["", "The tree teaches more per token than the best plain group: "
                  + ("yes." if teaches else "not shown." if neural else "not shown (no neural cell).")]
    else:
        lines += ["", "A plain group is the default: the tree is not shown to teach more per token."]
    return lines


def main(argv: Sequence[str] = ()) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--signal", action="append", default=[], help="a `make bench-signal` signal.json (repeatable)")
    ap.add_argument("--learn", action="append", default=[], help="a `make bench-learn` results.json")
    args = ap.parse_args(list(argv) or None)
    cells = [c for p in args.signal for c in bandit_cells(Path(p))] + [c for p in args.learn for c in learn_cells(Path(p))]
    if not cells:
        ap.error("give at least one --signal or --learn file")
    print("\n".join(decide(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
