"""Learning signal per rollout on synthetic bandit trees (`make bench-signal`).

Where the truth is known, measure how good a gradient each search + estimator gives a
trainer. Everything runs through the public API: a Python ``Completion`` samples a tabular
softmax policy, a Python ``Env`` pays the leaf reward, a ``Critic.from_function`` scores
checkpoints, ``Collector.collect`` + ``Collector.prepare`` build the samples, and the
gradient is read off ``Batch.actor`` (``weight``, ``visitation``, spans).

Problem: D segments of one action token each (K actions), leaf reward
Bernoulli(sigmoid(b + sum_k w_k[a_k])). The policy is tabular per problem and state
(the action prefix); its exact values V(s), Q(s, a) and the exact policy gradient
dJ/dtheta[s, a] = pi(s) pi(a|s) (Q(s, a) - V(s)) are computed by enumeration. Critic =
clip(V(s) + N(0, tau^2), 0, 1), the noise fixed per (seed, problem, state), or the constant
0.5. Paired design: for every method the same problems, the same per-rollout sampler seeds
(the engine's H(seed, problem, "w", i) for warmup rollouts: every method's first W root
rollouts are the same paths with the same rewards) and the same critic noise.

Methods (same rollout budget B per tree):
- selective:<score>[+w]: Selective(B, B/2, score=<score>) + DirectBranchTd; +w multiplies
  each edge by its visitation factor (ActorSample.visitation, docs/signal.md);
- root-only: Independent(B) + DirectBranchTd; grpo: Independent(B) + GroupBaseline.
Every collection runs at kappa = 1 (RewardConfig.critic_weight; --kappa changes it).
--extra-kappas adds every method but GRPO again at other kappas, named "<method>@k<kappa>",
on the same seeds, so a kappa-0 method is paired with the kappa-1 ones in one run.

A tree's gradient estimate is (1/R) sum_edges c * A * grad log pi(a|s) with R its completed
rollouts and c = 1 (or the visitation factor). Metrics:
- gradient error: sqrt(sum |alpha g_hat - g|^2 / sum |g|^2) over all trees of a cell, with
  alpha the best global step size of that method in that cell (so a trainer's learning
  rate can absorb any constant scale, but not per-tree scale noise);
- advantage MSE: mean over edges of (A - (V(c) - V(s)))^2 (reported, never tuned on);
- learning: 64 problems, 8 per step; each step collects 8 trees with the current policy and
  takes theta += lr * alpha * g_hat (alpha from the gradient-error cell); J = mean exact
  expected reward over the 64 problems, against rollouts and generated tokens.
Paired differences are over seeds (each seed: its own problems, sampler seeds and noise);
"+-" is one standard error of the mean paired difference.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import itertools
import json
import math
import re
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
ACTION_CHARS = "ABCDEFGH"  # single tokens in the simulator's tokenizer; K <= 4 (loss / win tokens)
State = Tuple[int, ...]


def _u64(*parts: object) -> int:
    return struct.unpack("<Q", hashlib.blake2b(repr(parts).encode(), digest_size=8).digest())[0]


def _uniform(*parts: object) -> float:
    return (_u64(*parts) >> 11) / float(1 << 53)


def _gauss(*parts: object) -> float:
    u1, u2 = max(_uniform(*parts, 1), 1e-300), _uniform(*parts, 2)
    return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


@dataclass
class Bandit:
    """One problem: depth D, K actions, reward logit b + sum_k w[k][a_k]; a tabular softmax
    policy theta[state] (logits) over the K actions."""

    index: int
    depth: int
    k: int
    b: float
    w: List[List[float]]
    theta: Dict[State, List[float]] = field(default_factory=dict)

    def states(self) -> List[State]:
        return [s for d in range(self.depth) for s in itertools.product(range(self.k), repeat=d)]

    def probs(self, s: State) -> List[float]:
        z = self.theta.get(s)
        if z is None:
            return [1 / self.k] * self.k
        m = max(z)
        e = [math.exp(v - m) for v in z]
        t = sum(e)
        return [v / t for v in e]

    def leaf_p(self, actions: Sequence[int]) -> float:
        return sigmoid(self.b + sum(self.w[i][a] for i, a in enumerate(actions)))

    def values(self) -> Dict[State, float]:
        """V(s) for every prefix s (leaves: the success probability)."""
        v: Dict[State, float] = {}
        for leaf in itertools.product(range(self.k), repeat=self.depth):
            v[leaf] = self.leaf_p(leaf)
        for d in range(self.depth - 1, -1, -1):
            for s in itertools.product(range(self.k), repeat=d):
                p = self.probs(s)
                v[s] = sum(p[a] * v[s + (a,)] for a in range(self.k))
        return v

    def gradient(self, v: Dict[State, float]) -> Dict[State, List[float]]:
        """dJ/dtheta[s][a] = pi(s) pi(a|s) (Q(s, a) - V(s))."""
        reach: Dict[State, float] = {(): 1.0}
        g: Dict[State, List[float]] = {}
        for s in self.states():
            p = self.probs(s)
            g[s] = [reach[s] * p[a] * (v[s + (a,)] - v[s]) for a in range(self.k)]
            for a in range(self.k):
                reach[s + (a,)] = reach[s] * p[a]
        return g


def make_problems(seed: int, n: int, depth: int, k: int, scale: float) -> List[Bandit]:
    out = []
    for i in range(n):
        b = _gauss("b", seed, i) * 0.5
        w = [[_gauss("w", seed, i, d, a) * scale for a in range(k)] for d in range(depth)]
        out.append(Bandit(i, depth, k, b, w))
    return out


@dataclass(frozen=True)
class Method:
    name: str
    search: str  # "selective" or "independent"
    score: str = ""
    estimator: str = "DirectBranchTd"
    weighted: bool = False
    kappa: Optional[float] = None  # its own critic_weight ("@k<kappa>" methods); None: the run's --kappa

    @property
    def tree_key(self) -> Tuple[str, str, str, str]:
        """Methods with the same key share their trees (weights are applied afterwards)."""
        return (self.search, self.score, self.estimator, "" if self.kappa is None else repr(self.kappa))

    def kappa_or(self, run_kappa: float) -> float:
        return run_kappa if self.kappa is None else self.kappa


SCORES = ["value_refinement", "gradient_variance", "shallow_first", "critic_adaptive", "posterior_variance", "uniform"]


@functools.lru_cache(maxsize=None)
def library_default() -> str:
    """The method the library's defaults run: ``Selective()``'s score, ``+w`` when records
    carry the visitation weights by default (Go's capi/binding decides both)."""
    from focus_go import Selective, _rules

    return f"selective:{Selective().score}" + ("+w" if _rules.defaults()["records"]["visitation_weights"] else "")


def label(name: str) -> str:
    """A method's name in the tables, marking the library's defaults."""
    return f"{name} (the default)" if name == library_default() else name


def all_methods(scores: Sequence[str], extra_kappas: Sequence[float] = ()) -> List[Method]:
    """Every score with and without weights, root-only and GRPO, at the run's kappa; then,
    for each of extra_kappas, the same methods at that kappa, named "<name>@k<kappa>"
    (GRPO's GroupBaseline does not read kappa: no variant)."""
    base = []
    for s in scores:
        base.append(Method(f"selective:{s}", "selective", s))
        base.append(Method(f"selective:{s}+w", "selective", s, weighted=True))
    base.append(Method("root-only", "independent"))
    base.append(Method("grpo", "independent", estimator="GroupBaseline"))
    out = list(base)
    for kappa in extra_kappas:
        out.extend(Method(f"{m.name}@k{kappa:g}", m.search, m.score, m.estimator, m.weighted, float(kappa))
                   for m in base if m.estimator != "GroupBaseline")
    return out


class Harness:
    """The focus_go objects shared by every collection: the simulator's tokenizer (only its
    vocabulary is used; no request reaches the simulator) and the action token ids."""

    def __init__(self) -> None:
        from focus_go.backends import PolicyFormat
        from focus_go.sim import SimServer

        self.server = SimServer()
        self.format = PolicyFormat.resolve(self.server.model, profile="token_chunk")
        tok = self.format.codec.tokenizer
        self.action_ids = [tok.encode(c)[0] for c in ACTION_CHARS]
        self.action_of = {t: i for i, t in enumerate(self.action_ids)}

    def close(self) -> None:
        self.format.codec.tokenizer.close()
        self.server.close()


@dataclass
class TreeResult:
    edges: List[Tuple[State, int, float, float]]  # (state, action, advantage, visitation)
    rollouts: int
    tokens: int


async def collect_tree(h: Harness, bandit: Bandit, method: Method, budget: int, seed: int,
                       tau: Optional[float], noise_seed: int, kappa: float = 1.0) -> TreeResult:
    from focus_go import Agent, Collector, Critic, DirectBranchTd, Env, GroupBaseline, Independent, RewardConfig, Segments, Selective, Step
    from focus_go.backends import Policy, SamplingParams
    from focus_go.types import GenerateResult

    ids, action_of, depth, k = h.action_ids, h.action_of, bandit.depth, bandit.k

    def actions_of(tokens: Sequence[int]) -> State:
        i = len(tokens)
        while i > 0 and tokens[i - 1] in action_of:
            i -= 1
        return tuple(action_of[t] % k for t in tokens[i:])

    async def complete(tokens, params):
        s = actions_of(tokens)
        p = bandit.probs(s)
        u = _uniform("a", params.seed, len(s))
        a, acc = k - 1, 0.0
        for j, pj in enumerate(p):
            acc += pj
            if u < acc:
                a = j
                break
        token = ids[a]
        if len(s) + 1 == depth:
            # The leaf outcome is drawn from the rollout's own sampler seed and travels in
            # the last token (action a is token a on a loss, token K + a on a win), so
            # paired rollouts (same seed, same path) get the same reward and the env reads
            # it without any shared state. logprobs are the policy's, log pi(a|s).
            if _uniform("r", params.seed) < bandit.leaf_p(s + (a,)):
                token = ids[k + a]
        return GenerateResult(tokens=(token,), prefix_tokens=tuple(tokens), logprobs=[math.log(p[a])], stop_reason="length")

    class BanditEnv(Env):
        action = "tokens"

        def __init__(self) -> None:
            self.actions: List[int] = []
            self.win = False

        def reset(self):
            return [{"role": "user", "content": f"bandit problem {bandit.index}"}]

        def step(self, action):
            for t in action.tokens:
                self.actions.append(action_of[t] % k)
                self.win = action_of[t] >= k
            if len(self.actions) < depth:
                return Step()
            return Step(reward=1.0 if self.win else 0.0, done=True)

        def fork(self):
            twin = BanditEnv()
            twin.actions = list(self.actions)
            return twin

    values = bandit.values()
    text_re = re.compile(r"([" + ACTION_CHARS + r"]*)$")

    def score(contexts: List[str]) -> List[float]:
        out = []
        for c in contexts:
            s = tuple(ACTION_CHARS.index(ch) % k for ch in text_re.search(c).group(1))
            out.append(min(1.0, max(0.0, values[s] + tau * _gauss("critic", noise_seed, bandit.index, s))))
        return out

    critic = Critic.constant(0.5) if tau is None else Critic.from_function(score)
    policy = Policy(format=h.format, model="bandit", complete=complete, default_params=SamplingParams(temperature=1.0))
    agent = Agent(policy=policy, env=BanditEnv(), context=Segments(1), max_segments=depth + 1)
    search = (Independent(budget, seed=seed) if method.search == "independent"
              else Selective(budget, budget // 2, score=method.score, seed=seed))
    estimator = GroupBaseline() if method.estimator == "GroupBaseline" else DirectBranchTd()
    async with Collector(agent, critic=critic, search=search, estimator=estimator, reward=RewardConfig(critic_weight=kappa)) as collector:
        state = await collector.collect(f"bandit-{bandit.index}")
        try:
            batch = collector.prepare(state)
            edges = []
            for a in batch.actor:
                span = a.spans[0]
                pos = span.trainable.index(True)
                edges.append((actions_of(span.tokens[:pos]), action_of[span.tokens[pos]] % k, a.weight, a.visitation))
            return TreeResult(edges, int(batch.stats["rollouts"]), int(batch.stats["generated_tokens"]))
        finally:
            state.close()
            batch._go.close() if batch._go is not None else None


def tree_gradient(bandit: Bandit, tree: TreeResult, weighted: bool) -> Dict[State, List[float]]:
    g: Dict[State, List[float]] = {}
    r = max(tree.rollouts, 1)
    for s, a, adv, vis in tree.edges:
        c = (vis if weighted else 1.0) * adv / r
        p = bandit.probs(s)
        row = g.setdefault(s, [0.0] * bandit.k)
        for j in range(bandit.k):
            row[j] += c * ((1.0 if j == a else 0.0) - p[j])
    return g


def dot(g: Dict[State, List[float]], h: Dict[State, List[float]]) -> float:
    return sum(x * y for s, row in g.items() if s in h for x, y in zip(row, h[s]))


def mean_se(xs: Sequence[float]) -> Tuple[float, float]:
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, float("nan")
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return m, math.sqrt(var / n)


async def gather_limited(coros, limit: int):
    sem = asyncio.Semaphore(limit)

    async def run(c):
        async with sem:
            return await c

    return await asyncio.gather(*(run(c) for c in coros))


# --- 1. gradient error and advantage MSE -------------------------------------------------

async def gradient_cells(h: Harness, args, methods: List[Method], taus: List[Optional[float]]) -> Dict:
    """For every tau and method: per-seed squared errors at the best global step size."""
    out: Dict = {}
    keys = sorted({m.tree_key for m in methods})
    for tau in taus:
        # trees[key][seed] = list of (bandit, gradient truth, TreeResult)
        per_seed: Dict[int, List] = {}
        jobs = []
        for seed in range(args.seeds):
            problems = make_problems(1000 + seed, args.problems, args.depth, args.k, args.scale)
            per_seed[seed] = problems
            for key in keys:
                m = next(m for m in methods if m.tree_key == key)
                for p in problems:
                    jobs.append((seed, key, p, collect_tree(h, p, m, args.budget, seed, tau, seed, m.kappa_or(args.kappa))))
        results = await gather_limited([j[3] for j in jobs], args.concurrency)
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
                    rows.append((seed, tree_gradient(p, res, m.weighted), p.gradient(v)))
                    adv_err.setdefault(seed, []).extend((adv - (v[s + (a,)] - v[s])) ** 2 for s, a, adv, _ in res.edges)
            num = sum(dot(gh, g) for _, gh, g in rows)
            den = sum(dot(gh, gh) for _, gh, _ in rows)
            alpha = num / den if den > 0 else 0.0
            errs = {}
            for seed in range(args.seeds):
                e2 = g2 = 0.0
                for sd, gh, g in rows:
                    if sd != seed:
                        continue
                    e2 += dot(g, g) - 2 * alpha * dot(gh, g) + alpha * alpha * dot(gh, gh)
                    g2 += dot(g, g)
                errs[seed] = math.sqrt(max(e2, 0.0) / g2)
            tokens = [res.tokens for items in trees[m.tree_key].values() for _, res in items]
            cell[m.name] = {
                "alpha": alpha,
                "grad_err": [errs[s] for s in range(args.seeds)],
                "adv_mse": [sum(adv_err[s]) / len(adv_err[s]) for s in range(args.seeds)],
                "tokens_per_tree": sum(tokens) / len(tokens),
            }
        out[tau_name(tau)] = cell
        print(f"  gradient cell tau={tau_name(tau)} done", file=sys.stderr, flush=True)
    return out


def tau_name(tau: Optional[float]) -> str:
    return "const0.5" if tau is None else f"{tau:g}"


# --- 2. learning curves -------------------------------------------------------------------

async def learning_run(h: Harness, args, method: Method, tau: Optional[float], lr: float, alpha: float, seed: int) -> Dict:
    problems = make_problems(5000 + seed, args.learn_problems, args.depth, args.k, args.scale)
    curve_j, curve_rollouts, curve_tokens = [], [], []
    rollouts = tokens = 0

    def mean_j() -> float:
        return sum(p.values()[()] for p in problems) / len(problems)

    curve_j.append(mean_j())
    curve_rollouts.append(0)
    curve_tokens.append(0)
    per_step = args.per_step
    for step in range(args.steps):
        batch = [problems[(step * per_step + i) % len(problems)] for i in range(per_step)]
        trees = await asyncio.gather(*(
            collect_tree(h, p, method, args.budget, _u64("learn", seed, step, p.index) % (1 << 62), tau, seed, method.kappa_or(args.kappa))
            for p in batch))
        grads = [tree_gradient(p, t, method.weighted) for p, t in zip(batch, trees)]
        for p, g, t in zip(batch, grads, trees):
            rollouts += t.rollouts
            tokens += t.tokens
            for s, row in g.items():
                th = p.theta.setdefault(s, [0.0] * p.k)
                for j in range(p.k):
                    th[j] += lr * alpha * row[j]
        curve_j.append(mean_j())
        curve_rollouts.append(rollouts)
        curve_tokens.append(tokens)
    return {"j": curve_j, "rollouts": curve_rollouts, "tokens": curve_tokens}


async def learning_cells(h: Harness, args, methods: List[Method], taus: List[Optional[float]], grad: Dict) -> Dict:
    out: Dict = {}
    for tau in taus:
        for lr in args.lrs:
            jobs, keys = [], []
            for m in methods:
                alpha = grad[tau_name(tau)][m.name]["alpha"] if tau_name(tau) in grad else 1.0
                for seed in range(args.seeds):
                    keys.append((m.name, seed))
                    jobs.append(learning_run(h, args, m, tau, lr, alpha, seed))
            runs = await gather_limited(jobs, max(1, args.concurrency // args.per_step))
            cell: Dict = {}
            for (name, seed), run in zip(keys, runs):
                cell.setdefault(name, []).append(run)
            out[f"{tau_name(tau)}/lr{lr:g}"] = cell
            print(f"  learning cell tau={tau_name(tau)} lr={lr:g} done", file=sys.stderr, flush=True)
    return out


# --- report --------------------------------------------------------------------------------

def paired(a: Sequence[float], b: Sequence[float]) -> Tuple[float, float]:
    return mean_se([x - y for x, y in zip(a, b)])


def fmt_pm(m: float, se: float) -> str:
    sig = "" if math.isnan(se) else ("*" if abs(m) > 2 * se else "")
    return f"{m:+.4f} +- {se:.4f}{sig}"


def report(args, methods: List[Method], grad: Dict, learn: Dict, default: str) -> List[str]:
    lines = [f"Bandit trees: D={args.depth}, K={args.k}, weight scale {args.scale}, B={args.budget} rollouts per tree, kappa {getattr(args, 'kappa', 1.0):g}"
             + (" ('@k' methods: their own kappa)" if parse_floats(getattr(args, "extra_kappas", "")) else "") + ", "
             f"{args.problems} problems x {args.seeds} seeds per gradient cell; learning: {args.learn_problems} problems, "
             f"{args.per_step} per step, {args.steps} steps, {args.seeds} paired seeds. '*' = paired difference > 2 s.e.", ""]
    lines.append("Gradient error (relative, best global step size; lower is better) and advantage MSE, mean over seeds:")
    lines.append("")
    lines.append("| method | " + " | ".join(f"grad err tau={t}" for t in grad) + " | " + " | ".join(f"adv MSE tau={t}" for t in grad) + " | tokens/tree |")
    lines.append("|---|" + "---|" * (2 * len(grad) + 1))
    for m in methods:
        ge = [mean_se(grad[t][m.name]["grad_err"]) for t in grad]
        am = [mean_se(grad[t][m.name]["adv_mse"]) for t in grad]
        tok = next(iter(grad.values()))[m.name]["tokens_per_tree"]
        lines.append(f"| {label(m.name)} | " + " | ".join(f"{x:.3f}" for x, _ in ge) + " | " + " | ".join(f"{x:.4f}" for x, _ in am) + f" | {tok:.0f} |")
    lines.append("")
    lines.append(f"Paired gradient-error difference, {default} minus baseline (negative: {default} better):")
    lines.append("")
    lines.append("| baseline | " + " | ".join(f"tau={t}" for t in grad) + " |")
    lines.append("|---|" + "---|" * len(grad))
    # The fixed baselines, the library's default, and every kappa variant of root-only and
    # of the library's default (--extra-kappas).
    bases = ["root-only", "grpo", "selective:gradient_variance+w", "selective:value_refinement", library_default()]
    bases += [m.name for m in methods if m.kappa is not None and m.name.split("@")[0] in ("root-only", library_default())]
    for base in dict.fromkeys(bases):
        if base == default or base not in next(iter(grad.values())):
            continue
        lines.append(f"| {label(base)} | " + " | ".join(fmt_pm(*paired(grad[t][default]["grad_err"], grad[t][base]["grad_err"])) for t in grad) + " |")
    if learn:
        lines.append("")
        lines.append("Learning: mean J over the run (equal rollouts), final J, and J at the token budget the "
                     "token-cheapest method used (equal generated tokens); paired differences vs " + default + ":")
        lines.append("")
        lines.append("| cell | method | mean J | final J | J at equal tokens | mean J diff, candidate minus this |")
        lines.append("|---|---|---|---|---|---|")
        for cell, runs in learn.items():
            tmin = min(r["tokens"][-1] for rs in runs.values() for r in rs)
            def at_tokens(r):
                js, ts = r["j"], r["tokens"]
                for i in range(1, len(ts)):
                    if ts[i] >= tmin:
                        f = (tmin - ts[i - 1]) / max(ts[i] - ts[i - 1], 1)
                        return js[i - 1] + f * (js[i] - js[i - 1])
                return js[-1]
            mj = {n: [sum(r["j"]) / len(r["j"]) for r in rs] for n, rs in runs.items()}
            for n, rs in runs.items():
                d = "" if n == default else fmt_pm(*paired(mj[default], mj[n]))
                lines.append(f"| {cell} | {label(n)} | {mean_se(mj[n])[0]:.4f} | {mean_se([r['j'][-1] for r in rs])[0]:.4f} | "
                             f"{mean_se([at_tokens(r) for r in rs])[0]:.4f} | {d} |")
    return lines


def plot(path: Path, grad: Dict, learn: Dict, methods: List[Method]) -> Optional[str]:
    """Top row: gradient error against critic noise; then one row per learning cell: J
    against rollouts (left) and against generated tokens (right), mean over seeds."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot (pip install matplotlib into .venv)"
    cells = list(learn)
    rows = 1 + (len(cells) + 1) // 2
    fig, axes = plt.subplots(rows, 4, figsize=(17, 3.6 * rows), squeeze=False)
    taus = list(grad)
    ax = axes[0][0]
    for name in grad[taus[0]]:
        ax.plot(taus, [mean_se(grad[t][name]["grad_err"])[0] for t in taus], marker="o", label=label(name),
                linestyle="-" if name.endswith("+w") or not name.startswith("selective") else ":")
    ax.set_title("gradient error vs critic noise (tau)", fontsize=9)
    ax.set_ylabel("relative gradient error")
    ax.legend(fontsize=5)
    for c in range(1, 4):
        axes[0][c].axis("off")
    for i, cell in enumerate(cells):
        r, c = 1 + i // 2, 2 * (i % 2)
        for name, rs in learn[cell].items():
            n = len(rs[0]["j"])
            j = [sum(x["j"][k] for x in rs) / len(rs) for k in range(n)]
            axes[r][c].plot([sum(x["rollouts"][k] for x in rs) / len(rs) for k in range(n)], j, label=label(name))
            axes[r][c + 1].plot([sum(x["tokens"][k] for x in rs) / len(rs) for k in range(n)], j, label=label(name))
        axes[r][c].set_title(f"J vs rollouts, tau={cell.replace('/lr', ', lr=')}", fontsize=9)
        axes[r][c + 1].set_title(f"J vs generated tokens, tau={cell.replace('/lr', ', lr=')}", fontsize=9)
        if i == 0:
            axes[r][c].legend(fontsize=6)
    for i in range(len(cells), 2 * (rows - 1)):
        r, c = 1 + i // 2, 2 * (i % 2)
        axes[r][c].axis("off")
        axes[r][c + 1].axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=60)
    return None


def parse_floats(text: str) -> List[float]:
    """A comma-separated list of numbers ("" or None: none)."""
    return [float(x) for x in str(text or "").split(",") if x]


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke test: tiny sizes, no plot")
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--scale", type=float, default=1.0, help="std of the reward-logit weights w_k[a]")
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--problems", type=int, default=32, help="problems per seed in a gradient cell")
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--taus", default="0.05,0.2,0.5,const")
    ap.add_argument("--scores", default=",".join(SCORES))
    ap.add_argument("--learn-taus", default="0.2,0.5")
    ap.add_argument("--lrs", default="16,48,128")
    ap.add_argument("--learn-problems", type=int, default=64)
    ap.add_argument("--per-step", type=int, default=8)
    ap.add_argument("--steps", type=int, default=12)
    default = library_default()
    ap.add_argument("--learn-methods", default=",".join(dict.fromkeys([
        "selective:value_refinement", "selective:value_refinement+w", "selective:gradient_variance+w", default, "root-only", "grpo"])))
    ap.add_argument("--default", default=default,
                    help="the candidate the paired differences compare against the others (default: the library's "
                         "defaults, marked '(the default)' in the tables)")
    ap.add_argument("--kappa", type=float, default=1.0, help="RewardConfig.critic_weight (kappa) of every collection; the search selects with max(kappa, 1)")
    ap.add_argument("--extra-kappas", default="", help="comma-separated kappas: every method but GRPO also runs at each, "
                    "named '<method>@k<kappa>', on the same seeds (paired with the --kappa methods)")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--out", default=str(RESULTS / "signal"))
    ap.add_argument("--replot", metavar="JSON", help="rewrite signal.md and signal.png from an earlier run's signal.json")
    args = ap.parse_args(argv)
    if args.replot:
        saved = json.loads(Path(args.replot).read_text())
        for k, v in saved["args"].items():
            if k not in ("replot", "out"):
                setattr(args, k, v)
        methods = all_methods([s for s in args.scores.split(",") if s], parse_floats(args.extra_kappas))
        learn_methods = [m for m in methods if m.name in args.learn_methods.split(",")]
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        text = "\n".join(report(args, methods, saved["gradient"], saved["learning"], args.default)) + "\n"
        print(text)
        (out / "signal.md").write_text(text)
        msg = plot(out / "signal.png", saved["gradient"], saved["learning"], learn_methods)
        if msg:
            print(msg, file=sys.stderr)
        return 0
    if args.quick:
        args.problems, args.seeds, args.budget, args.steps, args.learn_problems, args.per_step = 4, 2, 8, 2, 4, 2
        args.taus, args.learn_taus, args.lrs = "0.2,const", "0.2", "16"
    parse_tau = lambda t: None if t.startswith("const") else float(t)  # noqa: E731
    taus = [parse_tau(t) for t in args.taus.split(",") if t]
    learn_taus = [parse_tau(t) for t in args.learn_taus.split(",") if t]
    args.lrs = parse_floats(args.lrs) if isinstance(args.lrs, str) else args.lrs
    methods = all_methods([s for s in args.scores.split(",") if s], parse_floats(args.extra_kappas))
    learn_methods = [m for m in methods if m.name in args.learn_methods.split(",")]
    if 2 * args.k > len(ACTION_CHARS):
        ap.error(f"--k {args.k}: at most {len(ACTION_CHARS) // 2} actions (each has a win and a loss token)")
    if args.default not in {m.name for m in methods}:
        ap.error(f"--default {args.default!r} is not one of the methods")

    h = Harness()
    t0 = time.time()
    try:
        grad = asyncio.run(gradient_cells(h, args, methods, taus))
        learn = asyncio.run(learning_cells(h, args, learn_methods, learn_taus, grad)) if args.steps > 0 else {}
    finally:
        h.close()
    elapsed = time.time() - t0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "signal.json").write_text(json.dumps({"args": {k: v for k, v in vars(args).items()}, "gradient": grad, "learning": learn}))
    lines = report(args, methods, grad, learn, args.default)
    lines.append("")
    lines.append(f"Run time {elapsed:.0f} s.")
    text = "\n".join(lines) + "\n"
    print(text)
    (out / "signal.md").write_text(text)
    if not args.quick:
        msg = plot(out / "signal.png", grad, learn, learn_methods)
        if msg:
            print(msg, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
