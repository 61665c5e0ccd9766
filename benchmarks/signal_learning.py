"""Learning curves per generated token for the learning-signal benchmark
(benchmarks/learning_signal.py, `make bench-signal`).

A run trains the tabular policies of ``learn_problems`` problems: it visits them in turn,
collects one tree per visit with the current policy, and takes
theta_p += lr * g_hat_p (g_hat the tree's gradient estimate, signal_trees.tree_gradient)
after each tree, until the run has generated the largest token budget. Trees of different
problems are collected concurrently; each depends only on its own problem's policy, so that
is the same run as one tree at a time. J is the mean exact expected reward over the
problems, recorded after every tree with the generated tokens and rollouts spent so far.

The area of a curve over a budget T is the mean of J over [0, T], J held from one tree to
the next (an improvement counts once its tokens are paid): the mean J a user has over the
first T tokens. Budgets are in rollout-equivalents (RE): the generated tokens of one
independent rollout, D segments of L tokens.

Each method gets its best learning rate from a grid, chosen per critic noise and budget on
the selection seeds, then runs again at that rate on fresh seeds; the tables report the
fresh seeds. A method whose chosen rate sits on an edge of its grid gets the next rate
beyond that edge (the grid's own step there), on the selection seeds again, until no chosen
rate sits on an edge or ``args.extend_lrs`` rates were added on that side
(``beyond_edges``). Paired: every method sees the same problems, the same sampler seeds on the
same visit of a problem (so the first tree of every Independent method of one size has the
same rollouts) and the same critic noise.
"""

from __future__ import annotations

import asyncio
import math
from typing import Dict, List, Optional, Sequence, Tuple

from signal_trees import Harness, Method, _u64, collect_tree, make_problems, mean_se, tree_gradient

SELECTION_SEED0 = 5000  # selection seed i: problems and noise 5000 + i
CONFIRM_SEED0 = 7000  # fresh seed i: 7000 + i


def tau_name(tau: Optional[float]) -> str:
    return "const0.5" if tau is None else f"{tau:g}"


def area(xs: Sequence[float], js: Sequence[float], budget: float) -> float:
    """Mean of the step function J(x) = js[i] for xs[i] <= x < xs[i + 1] over [0, budget]
    (the last J holds beyond the last point)."""
    total = 0.0
    for i, (x, j) in enumerate(zip(xs, js)):
        if x >= budget:
            break
        hi = xs[i + 1] if i + 1 < len(xs) else budget
        total += j * (min(hi, budget) - x)
    return total / budget


def at(xs: Sequence[float], js: Sequence[float], x: float) -> float:
    """J(x) of the step function."""
    j = js[0]
    for xi, ji in zip(xs, js):
        if xi > x:
            break
        j = ji
    return j


async def token_run(h: Harness, args, method: Method, tau: Optional[float], lr: float, seed: int) -> Dict:
    """One learning run until ``max(args.budgets) * RE`` generated tokens; the curve after
    every tree, and the run's token accounting."""
    problems = make_problems(seed, args.learn_problems, args.depth, args.k, args.scale)
    js = [p.values()[()] for p in problems]
    re_tokens = args.depth * args.segment_tokens
    limit = max(args.budgets) * re_tokens
    curve = {"tokens": [0], "rollouts": [0], "j": [sum(js) / len(js)]}
    totals = {"trees": 0, "tokens": 0, "rollouts": 0, "prefix_reused": 0, "prefill": 0, "prefill_cached": 0}
    visits = [0] * len(problems)
    nxt = 0
    rule = None
    if method.auto:
        from focus_go.critic_rule import CriticRule

        rule = CriticRule(threshold=method.threshold, max_kappa=method.max_kappa)
        totals.update(batches=0, dbtd_batches=0, kappa_sum=0.0)
    base_kappa = method.kappa_or(args.kappa)
    while totals["tokens"] < limit:
        kappa, estimator = base_kappa, method.estimator
        if rule is not None:
            from focus_go import RewardConfig

            choice = rule.choose(RewardConfig(critic_weight=base_kappa))
            kappa, estimator = choice.kappa, choice.estimator.name
            totals["batches"] += 1
            totals["dbtd_batches"] += estimator == "DirectBranchTd"
            totals["kappa_sum"] += kappa
        per_tree = totals["tokens"] / totals["trees"] if totals["trees"] else method.budget * re_tokens
        n = max(1, min(len(problems), math.ceil((limit - totals["tokens"]) / per_tree)))
        batch = [problems[(nxt + i) % len(problems)] for i in range(n)]
        nxt = (nxt + n) % len(problems)
        trees = await asyncio.gather(*(
            collect_tree(h, p, method, _u64("learn", seed, p.index, visits[p.index]) % (1 << 62), tau, seed,
                         kappa, args.segment_tokens, (estimator,), fit=rule is not None)
            for p in batch))
        if rule is not None:
            rule.observe([t.fit for t in trees])
        for p, t in zip(batch, trees):
            visits[p.index] += 1
            g = tree_gradient(p, t.edges[estimator], t.rollouts, method.weighted)
            for s, row in g.items():
                th = p.theta.setdefault(s, [0.0] * p.k)
                for j in range(p.k):
                    th[j] += lr * row[j]
            js[p.index] = p.values()[()]
            totals["trees"] += 1
            for key, value in (("tokens", t.tokens), ("rollouts", t.rollouts), ("prefix_reused", t.prefix_reused),
                               ("prefill", t.prefill), ("prefill_cached", t.prefill_cached)):
                totals[key] += value
            curve["tokens"].append(totals["tokens"])
            curve["rollouts"].append(totals["rollouts"])
            curve["j"].append(sum(js) / len(js))
            if totals["tokens"] >= limit:
                break
    return {**curve, "totals": totals}


def summarize(run: Dict, args) -> Dict:
    """A run's areas per budget, against generated tokens (budget * RE tokens) and against
    rollouts (budget rollouts), and its final J."""
    re_tokens = args.depth * args.segment_tokens
    return {
        "tokens": {str(b): area(run["tokens"], run["j"], b * re_tokens) for b in args.budgets},
        "rollouts": {str(b): area(run["rollouts"], run["j"], b) for b in args.budgets},
        "final": {str(b): at(run["tokens"], run["j"], b * re_tokens) for b in args.budgets},
        "totals": run["totals"],
    }


class Runs:
    """Every learning run of the benchmark, each done once: a method that reads no critic
    (GRPO) runs once per learning rate and seed and serves every critic noise."""

    def __init__(self, h: Harness, args) -> None:
        self.h, self.args = h, args
        self.tasks: Dict[Tuple, asyncio.Task] = {}

    def run(self, method: Method, tau: Optional[float], lr: float, seed: int) -> "asyncio.Task[Dict]":
        key = (method.name, tau_name(tau) if method.reads_critic else "any", lr, seed)
        if key not in self.tasks:
            self.tasks[key] = asyncio.ensure_future(token_run(self.h, self.args, method, tau, lr, seed))
        return self.tasks[key]


def best_rate(runs: Dict[float, List[Dict]], budget: int) -> float:
    """The learning rate whose selection runs (``runs``: rate -> run summaries) have the best
    mean area against tokens over ``budget`` RE; the smaller rate on a tie."""
    scores = {lr: mean_se([s["tokens"][str(budget)] for s in rs])[0] for lr, rs in runs.items()}
    return max(scores, key=lambda lr: (scores[lr], -lr))


def beyond_edges(runs: Dict[float, List[Dict]], budgets: Sequence[int], added: Dict[str, int], limit: int) -> List[float]:
    """The rates to add to a grid (the rates of ``runs``) whose chosen rate sits on an edge
    for some budget: the next one past that edge at the grid's own step there, unless
    ``limit`` rates were already added on that side (``added``, counted per side)."""
    grid = sorted(runs)
    if len(grid) < 2:
        return []
    out = []
    for lr in {best_rate(runs, b) for b in budgets}:
        if lr == grid[0] and added["low"] < limit:
            out.append(grid[0] * grid[0] / grid[1])
        elif lr == grid[-1] and added["high"] < limit:
            out.append(grid[-1] * grid[-1] / grid[-2])
    return out


async def learning(h: Harness, args, methods: List[Method], taus: List[Optional[float]], log=print) -> Dict:
    """Select each method's learning rate per critic noise and budget on the selection
    seeds (extending its grid past an edge its choice sits on, up to ``args.extend_lrs``
    rates a side), confirm on fresh seeds. Returns, per noise, per method: the selection
    areas of every learning rate run, the chosen rate per budget, and the fresh seeds'
    summaries and curves at each chosen rate."""
    runs = Runs(h, args)
    sel_seeds = [SELECTION_SEED0 + i for i in range(args.seeds)]
    fresh_seeds = [CONFIRM_SEED0 + i for i in range(args.confirm_seeds)]
    out: Dict = {}
    sel: Dict = {}

    async def select(cells: Dict[tuple, List[float]]) -> int:
        """Run each (tau, method)'s rates on the selection seeds into sel; the runs started."""
        pending = {(tau_name(tau), m.name, lr): [runs.run(m, tau, lr, s) for s in sel_seeds]
                   for (tau, m), lrs in cells.items() for lr in lrs}
        started = len({id(t) for ts in pending.values() for t in ts if not t.done()})
        for (tn, name, lr), tasks in pending.items():
            sel.setdefault(tn, {}).setdefault(name, {})[lr] = [summarize(r, args) for r in await asyncio.gather(*tasks)]
        return started

    # Phase 1: every learning rate on the selection seeds, all cells at once; then the
    # grids of the cells whose choice sits on an edge, one rate further each time.
    cells = {(tau, m): list(args.lrs) for tau in taus for m in methods}
    n = await select(cells)
    log(f"  learning: {n} selection runs ({len(methods)} methods, {len(taus)} noises, {len(args.lrs)} learning rates, "
        f"{len(sel_seeds)} seeds)")
    added = {(tau_name(tau), m.name): {"low": 0, "high": 0} for tau in taus for m in methods}
    while True:
        more = {}
        for tau, m in cells:
            key = (tau_name(tau), m.name)
            lrs = beyond_edges(sel[key[0]][m.name], args.budgets, added[key], args.extend_lrs)
            for lr in lrs:
                added[key]["low" if lr < min(sel[key[0]][m.name]) else "high"] += 1
            if lrs:
                more[(tau, m)] = lrs
        if not more:
            break
        n = await select(more)
        log(f"  learning: {n} more selection runs, past a grid edge ({len(more)} cells)")
    log("  learning: selection done")
    # Phase 2: the best rate per budget (by area against tokens), on fresh seeds.
    confirm = {}
    for tau in taus:
        tn = tau_name(tau)
        for m in methods:
            rates = sel[tn][m.name]
            best = {str(b): best_rate(rates, b) for b in args.budgets}
            out.setdefault(tn, {})[m.name] = {
                "selection": {f"{lr:g}": rates[lr] for lr in sorted(rates)},
                "best_lr": best,
            }
            for lr in set(best.values()):
                confirm[(tn, m.name, lr)] = [runs.run(m, tau, lr, s) for s in fresh_seeds]
    log(f"  learning: {len({id(t) for ts in confirm.values() for t in ts}) - 0} confirmation runs on {len(fresh_seeds)} fresh seeds")
    for (tn, name, lr), tasks in confirm.items():
        done = await asyncio.gather(*tasks)
        out[tn][name].setdefault("fresh", {})[f"{lr:g}"] = {
            "summary": [summarize(r, args) for r in done],
            "curves": [{k: r[k] for k in ("tokens", "rollouts", "j")} for r in done],
        }
    log("  learning: confirmation done")
    return out
