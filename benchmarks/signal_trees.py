"""The bandit problems, the methods and one tree's collection for the learning-signal
benchmark (benchmarks/learning_signal.py, `make bench-signal`).

A problem is D segments, each an action token followed by L - 1 filler tokens, with K
actions; the leaf reward is Bernoulli(sigmoid(b + sum_k w_k[a_k])). The policy is tabular
per problem and state (the action prefix); its exact values V(s), Q(s, a) and the exact
policy gradient dJ/dtheta[s, a] = pi(s) pi(a|s) (Q(s, a) - V(s)) come from enumeration.
Everything a tree needs runs through the public API: a Python ``Completion`` samples the
policy, a Python ``Env`` pays the reward, ``Critic.from_function`` scores checkpoints with
clip(V(s) + N(0, tau^2), 0, 1) (the noise fixed per seed, problem and state) or
``Critic.constant(0.5)``, and ``Collector.collect`` + ``prepare_samples`` build the samples.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import math
import re
import struct
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from crosscheck import check

ACTION_CHARS = "ABCDEFGH"  # single tokens in the simulator's tokenizer; K <= 4 (loss / win tokens)
FILLER_CHAR = "."  # a single token too: the rest of every segment
State = Tuple[int, ...]

# Estimator short names in method names: "/tgb" selects TreeGroupBaseline, "/auto" the
# critic rule (focus_go.critic_rule.CriticRule: DirectBranchTd or TreeGroupBaseline and kappa
# per batch, from the critic's reliability on the run's earlier batches).
ESTIMATORS = {"dbtd": "DirectBranchTd", "grpo": "GroupBaseline", "tgb": "TreeGroupBaseline", "auto": "auto"}


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
    """One way to turn a problem into a gradient: a search, an estimator, and whether the
    edges are multiplied by their visitation factors.

    Names: ``selective:<score>[+stop][+w][/tgb|/auto[T]]`` is Selective(B, B/2, score) with B the
    run's --budget, DirectBranchTd (``/tgb``: TreeGroupBaseline; ``/auto``: the critic rule,
    which picks the estimator and kappa per batch, ``/autoT`` at threshold T, ``/autoTkK``
    with kappa at most K; ``/free``:
    TreeGroupBaseline with ``Critic.constant(0.5)`` whatever the noise, a critic-free
    preset), ``+stop`` with
    stop_alike, ``+w`` the visitation weights; ``selective<B>/<W>:...`` the same at
    Selective(B, W);
    ``root-only:<B>`` is Independent(B) + DirectBranchTd and ``grpo:<B>`` Independent(B) +
    GroupBaseline; ``root-only:<B>/<W>+stop`` and ``grpo:<B>/<W>+stop`` are the same groups
    with dynamic sampling by ``stop_alike``: W rollouts first, and a group whose W returns
    are all alike stops there (collect_tree); ``@k<kappa>`` runs at that critic_weight
    instead of the run's --kappa."""

    name: str
    search: str  # "selective" or "independent"
    budget: int
    score: str = ""
    estimator: str = "DirectBranchTd"
    weighted: bool = False
    kappa: Optional[float] = None  # its own critic_weight ("@k<kappa>" methods); None: the run's --kappa
    warmup: Optional[int] = None  # Selective's warmup; None: budget // 2
    stop_alike: bool = False
    threshold: Optional[float] = None  # the critic rule's threshold ("/auto<T>"); None: the library's
    max_kappa: Optional[float] = None  # the critic rule's max_kappa ("/auto<T>k<K>"); None: the library's
    free: bool = False  # "/free": TreeGroupBaseline with Critic.constant(0.5) at every noise (a critic-free preset)

    @property
    def auto(self) -> bool:
        """The estimator and kappa follow the critic rule, batch by batch."""
        return self.estimator == "auto"

    @property
    def first_estimator(self) -> str:
        """The estimator of a run's first batch (the rule's, before any measurement)."""
        return "TreeGroupBaseline" if self.auto else self.estimator

    @property
    def tree_key(self) -> Tuple:
        """Methods with the same key share their trees in the gradient cells (each estimator
        prepares the same tree; weights are applied afterwards)."""
        return (self.search, self.budget, self.score, "" if self.kappa is None else repr(self.kappa), self.warmup_n, self.stop_alike,
                self.free)

    @property
    def warmup_n(self) -> int:
        return self.budget // 2 if self.warmup is None else self.warmup

    def kappa_or(self, run_kappa: float) -> float:
        return run_kappa if self.kappa is None else self.kappa

    @property
    def reads_critic(self) -> bool:
        """False for Independent + a group baseline: its trees and advantages ignore the
        critic, so one run serves every critic noise."""
        return not (self.free or self.search == "independent" and self.estimator != "DirectBranchTd")


SCORES = ["value_refinement", "gradient_variance", "shallow_first", "critic_adaptive", "posterior_variance", "uniform"]


def selective_prefix(budget: int, warmup: int, main_budget: int = 32) -> str:
    """``selective`` for Selective(main_budget, main_budget/2), else ``selective<B>/<W>``."""
    return "selective" if (budget, warmup) == (main_budget, main_budget // 2) else f"selective{budget}/{warmup}"


def parse_selective(spec: str, main_budget: int = 32) -> Method:
    """A method from ``<B>/<W>:<score>[+stop][+w][/tgb|/free|/auto[T][kK]]`` (the --selective option)."""
    size, rest = spec.split(":", 1)
    budget, warmup = (int(x) for x in size.split("/"))
    estimator, threshold, max_kappa = "DirectBranchTd", None, None
    free = rest.endswith("/free")
    if rest.endswith(("/tgb", "/free")):
        estimator, rest = "TreeGroupBaseline", rest.rsplit("/", 1)[0]
    elif "/auto" in rest:
        rest, t = rest.split("/auto")
        t, _, k = t.partition("k")
        estimator, threshold, max_kappa = "auto", (float(t) if t else None), (float(k) if k else None)
    weighted = rest.endswith("+w")
    rest = rest.removesuffix("+w")
    stop = rest.endswith("+stop")
    score = rest.removesuffix("+stop")
    name = f"{selective_prefix(budget, warmup, main_budget)}:{spec.split(':', 1)[1]}"
    return Method(name, "selective", budget, score, estimator, weighted, warmup=warmup, stop_alike=stop, threshold=threshold, max_kappa=max_kappa, free=free)


@functools.lru_cache(maxsize=None)
def library_default() -> str:
    """The method the library's defaults run: ``Selective()``'s size, score and stop_alike,
    ``+w`` when records carry the visitation weights by default (Go's capi/binding decides
    all of them)."""
    from focus_go import Selective, _rules

    sel = Selective()
    return (f"{selective_prefix(sel.budget, sel.warmup)}:{sel.score}" + ("+stop" if sel.stop_alike else "")
            + ("+w" if _rules.defaults()["records"]["visitation_weights"] else ""))


def label(name: str) -> str:
    """A method's name in the tables, marking the library's defaults."""
    return f"{name} (the default)" if name == library_default() else name


def stop_groups(spec: str) -> List[Tuple[int, int]]:
    """The (B, W) sizes of ``--stop-groups`` ("8/4,16/8"; "" none)."""
    out = []
    for part in (x for x in spec.split(",") if x):
        b, _, w = part.partition("/")
        if not w or not 1 <= int(w) < int(b):
            raise ValueError(f"--stop-groups: {part!r} is not B/W with 1 <= W < B")
        out.append((int(b), int(w)))
    return out


def group_methods(size: int, warmup: Optional[int] = None) -> List[Method]:
    """root-only and GRPO groups of ``size``; with ``warmup``, dynamic sampling by stop_alike
    (named ``<kind>:<size>/<warmup>+stop``)."""
    suffix = "" if warmup is None else f"/{warmup}+stop"
    stop = dict(warmup=warmup, stop_alike=True) if warmup is not None else {}
    return [Method(f"root-only:{size}{suffix}", "independent", size, **stop),
            Method(f"grpo:{size}{suffix}", "independent", size, estimator="GroupBaseline", **stop)]


def all_methods(scores: Sequence[str], budget: int = 32, group_sizes: Sequence[int] = (32,), tgb_scores: Sequence[str] = (),
                extra_kappas: Sequence[float] = (), stop_sizes: Sequence[Tuple[int, int]] = ()) -> List[Method]:
    """Every score with and without weights at Selective(budget, budget/2), each of
    tgb_scores with weights and TreeGroupBaseline, root-only and GRPO for every group size
    and, with dynamic sampling, for every (B, W) of stop_sizes, at the run's kappa; then, for
    each of extra_kappas, the DirectBranchTd methods again at that kappa, named
    "<name>@k<kappa>" (the group baselines read no kappa: no variant)."""
    base = []
    for s in scores:
        base.append(Method(f"selective:{s}", "selective", budget, s))
        base.append(Method(f"selective:{s}+w", "selective", budget, s, weighted=True))
    for s in tgb_scores:
        base.append(Method(f"selective:{s}+w/tgb", "selective", budget, s, estimator="TreeGroupBaseline", weighted=True))
    groups = [m for b in group_sizes for m in group_methods(b)] + [m for b, w in stop_sizes for m in group_methods(b, w)]
    base += [m for m in groups if m.estimator == "DirectBranchTd"] + [m for m in groups if m.estimator != "DirectBranchTd"]
    out = list(base)
    for kappa in extra_kappas:
        out.extend(Method(f"{m.name}@k{kappa:g}", m.search, m.budget, m.score, m.estimator, m.weighted, float(kappa), m.warmup, m.stop_alike)
                   for m in base if m.estimator == "DirectBranchTd")
    return out


class Harness:
    """The focus_go objects shared by every collection: the simulator's tokenizer (only its
    vocabulary is used; no request reaches the simulator), the action and filler token ids,
    and the semaphore that caps the trees collected at once."""

    def __init__(self, concurrency: int = 64) -> None:
        from focus_go.backends import PolicyFormat
        from focus_go.sim import SimServer

        self.server = SimServer()
        self.format = PolicyFormat.resolve(self.server.model, profile="token_chunk")
        tok = self.format.codec.tokenizer
        self.action_ids = [tok.encode(c)[0] for c in ACTION_CHARS]
        self.action_of = {t: i for i, t in enumerate(self.action_ids)}
        self.filler = tok.encode(FILLER_CHAR)[0]
        self.concurrency = concurrency
        self._sem: Optional[asyncio.Semaphore] = None

    def semaphore(self) -> asyncio.Semaphore:
        """One per event loop (each asyncio.run makes a new loop)."""
        loop = asyncio.get_running_loop()
        if self._sem is None or getattr(self, "_loop", None) is not loop:
            self._sem, self._loop = asyncio.Semaphore(self.concurrency), loop
        return self._sem

    def close(self) -> None:
        self.format.codec.tokenizer.close()
        self.server.close()


@dataclass
class TreeResult:
    """One collected tree: the edges of each estimator asked for, and its token accounting."""

    edges: Dict[str, List[Tuple[State, int, float, float]]]  # estimator -> (state, action, advantage, visitation)
    rollouts: int
    tokens: int  # generated tokens (the library's stats)
    prefix_reused: int  # the library's prefix_tokens_reused: the branches' checkpoint prefixes
    prefill: int  # prompt and context tokens sent with every generate call (no cache)
    prefill_cached: int  # the same through a per-tree prefix cache (see collect_tree)
    fit: Any = None  # the tree's focus_go.critic_rule.CriticFit, when asked for
    alike: bool = False  # at least two finished rollouts, all with the same return (the library's stats)


async def collect_tree(h: Harness, bandit: Bandit, method: Method, seed: int, tau: Optional[float], noise_seed: int,
                       kappa: float, segment_tokens: int, estimators: Sequence[str] = (), fit: bool = False) -> TreeResult:
    """Collect one tree for ``bandit`` with ``method``'s search and prepare it with each of
    ``estimators`` (default: the method's own); with ``fit``, also return the tree's
    ``CriticFit`` (what a ``CriticRule`` observes).

    Prefill, modelled: every generate call sends its whole context; ``prefill`` counts those
    tokens, ``prefill_cached`` only those that no earlier call of the same tree sent or
    generated (a prefix cache that keeps the tree's tokens while it is searched, as a
    radix cache does): the prompt once, then nothing, since every call continues a prefix
    the tree already holds.

    A group with dynamic sampling (an Independent method with stop_alike) is collected as
    Independent(W) first and, unless its returns are all alike (the rule Selective's
    stop_alike applies to a warmup), as Independent(B) with the same seed: its first W
    rollouts are the same ones (the engine seeds warmup rollout i from the tree's seed and
    i), so that tree, and its tokens, are what a group that went on after W would have."""
    if method.search == "independent" and method.stop_alike:
        first = await collect_tree(h, bandit, replace(method, budget=method.warmup_n, stop_alike=False), seed, tau, noise_seed,
                                   kappa, segment_tokens, estimators, fit)
        if first.alike:
            return first
        return await collect_tree(h, bandit, replace(method, stop_alike=False), seed, tau, noise_seed, kappa, segment_tokens,
                                  estimators, fit)
    from focus_go import Agent, Collector, Critic, DirectBranchTd, Env, GroupBaseline, Independent, RewardConfig, Segments, Selective, Step, TreeGroupBaseline
    from focus_go.backends import Policy, SamplingParams
    from focus_go.critic_rule import critic_fit
    from focus_go.preparation import prepare_samples
    from focus_go.types import GenerateResult

    ids, action_of, filler, depth, k = h.action_ids, h.action_of, h.filler, bandit.depth, bandit.k
    counts = {"prefill": 0, "cached": 0}
    cache: Dict[int, dict] = {}

    def actions_of(tokens: Sequence[int]) -> State:
        i = len(tokens)
        while i > 0 and (tokens[i - 1] in action_of or tokens[i - 1] == filler):
            i -= 1
        return tuple(action_of[t] % k for t in tokens[i:] if t != filler)

    def through_cache(context: Sequence[int], generated: Sequence[int]) -> int:
        node, i = cache, 0
        while i < len(context) and context[i] in node:
            node, i = node[context[i]], i + 1
        missed = len(context) - i
        for t in itertools.chain(context[i:], generated):
            node = node.setdefault(t, {})
        return missed

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
            # the action token (action a is token a on a loss, token K + a on a win), so
            # paired rollouts (same seed, same path) get the same reward and the env reads
            # it without any shared state. logprobs are the policy's, log pi(a|s), then 0
            # for the fillers (probability 1).
            if _uniform("r", params.seed) < bandit.leaf_p(s + (a,)):
                token = ids[k + a]
        out = (token,) + (filler,) * (segment_tokens - 1)
        counts["prefill"] += len(tokens)
        counts["cached"] += through_cache(tokens, out)
        return GenerateResult(tokens=out, prefix_tokens=tuple(tokens), logprobs=[math.log(p[a])] + [0.0] * (segment_tokens - 1),
                              stop_reason="length")

    class BanditEnv(Env):
        action = "tokens"

        def __init__(self) -> None:
            self.actions: List[int] = []
            self.win = False

        def reset(self):
            return [{"role": "user", "content": f"bandit problem {bandit.index}"}]

        def step(self, action):
            for t in action.tokens:
                if t in action_of:
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
    text_re = re.compile("([" + re.escape(ACTION_CHARS + FILLER_CHAR) + "]*)$")

    def score(contexts: List[str]) -> List[float]:
        out = []
        for c in contexts:
            s = tuple(ACTION_CHARS.index(ch) % k for ch in text_re.search(c).group(1) if ch != FILLER_CHAR)
            out.append(min(1.0, max(0.0, values[s] + tau * _gauss("critic", noise_seed, bandit.index, s))))
        return out

    by_name = {"DirectBranchTd": DirectBranchTd, "GroupBaseline": GroupBaseline, "TreeGroupBaseline": TreeGroupBaseline}
    critic = Critic.constant(0.5) if tau is None or method.free else Critic.from_function(score)
    policy = Policy(format=h.format, model="bandit", complete=complete, default_params=SamplingParams(temperature=1.0))
    agent = Agent(policy=policy, env=BanditEnv(), context=Segments(segment_tokens), max_segments=depth + 1)
    search = (Independent(method.budget, seed=seed) if method.search == "independent"
              else Selective(method.budget, method.warmup_n, score=method.score, seed=seed, stop_alike=method.stop_alike))
    reward = RewardConfig(critic_weight=kappa)
    async with h.semaphore():
        async with Collector(agent, critic=critic, search=search, estimator=None, reward=reward) as collector:
            state = await collector.collect(f"bandit-{bandit.index}")
            try:
                edges: Dict[str, List[Tuple[State, int, float, float]]] = {}
                stats: Dict[str, float] = {}
                for name in estimators or (method.estimator,):
                    batch = prepare_samples(state, reward_config=reward, estimator=by_name[name]())
                    try:
                        rows = []
                        for a in batch.actor:
                            span = a.spans[0]
                            pos = span.trainable.index(True)
                            rows.append((actions_of(span.tokens[:pos]), action_of[span.tokens[pos]] % k, a.weight, a.visitation))
                        edges[name] = rows
                        stats = dict(batch.stats)
                    finally:
                        batch._go.close() if batch._go is not None else None
                tree_stats = state.stats
                alike = tree_stats["finished_rollouts"] >= 2 and not tree_stats["outcomes_differ"]
                result = TreeResult(edges, int(stats["rollouts"]), int(stats["generated_tokens"]), int(stats["prefix_tokens_reused"]),
                                    counts["prefill"], counts["cached"], critic_fit(state, reward) if fit else None, alike)
                # Every rollout is D segments of L tokens, each generated or reused from a prefix.
                check(result.tokens + result.prefix_reused == result.rollouts * depth * segment_tokens,
                      "bandit trees: every tree's generated plus reused prefix tokens are its rollouts x D x L (the library's stats)")
                return result
            finally:
                state.close()


def tree_gradient(bandit: Bandit, edges: Sequence[Tuple[State, int, float, float]], rollouts: int, weighted: bool) -> Dict[State, List[float]]:
    """(1/R) sum over edges of c * A * grad log pi(a|s), c the visitation factor or 1."""
    g: Dict[State, List[float]] = {}
    r = max(rollouts, 1)
    for s, a, adv, vis in edges:
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
