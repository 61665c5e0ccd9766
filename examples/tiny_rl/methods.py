"""The collection methods and one learning run, all through focus-go's public API.

Every method trains with the same ``Trainer``; methods differ only in what they collect and
how the advantages are computed:

| name | search | estimator | critic |
|---|---|---|---|
| ``selective`` | ``Selective()`` (the library's default) | the collector's default | learned |
| ``rule`` | ``Selective()`` | ``CriticRule``'s choice per update | learned |
| ``free`` | ``critic_free()`` | its ``TreeGroupBaseline`` | its constant |
| ``root-only:<n>`` | ``Independent(n)`` | ``DirectBranchTd`` | learned |
| ``grpo:<n>`` | ``Independent(n)`` | ``GroupBaseline`` | none |

``+ds`` adds dynamic sampling: a tree whose finished rollouts all returned the same is left
out of the update (its tokens still count) and collection goes on until the update has its
trees, as ``stop_alike`` stops such a tree early.

The policy is a custom policy (``Policy(format=, complete=)``) over the ``Sampler``; the
environment is ``MathEnv`` with the policy's own decoder; the critic is
``Critic.from_function`` over the value model, trained on the critic records that
``Collector.prepare`` returns.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from model import ModelConfig, Sampler, TinyGPT, init_model
from task import Codec, Problem, problems
from trainer import Trainer, rows_of, success


def tree_seed(*parts: object) -> int:
    """A 63-bit seed from ``parts`` (stable across processes)."""
    return struct.unpack("<Q", hashlib.blake2b(repr(parts).encode(), digest_size=8).digest())[0] >> 1


@dataclass(frozen=True)
class Method:
    """One collection method (see the module's table); ``Method.parse("grpo:8+ds")``."""

    name: str
    kind: str  # selective | rule | free | root-only | grpo
    n: int = 0
    dynamic: bool = False

    @staticmethod
    def parse(name: str) -> "Method":
        base, dynamic = (name[:-3], True) if name.endswith("+ds") else (name, False)
        kind, _, n = base.partition(":")
        if kind in ("selective", "rule", "free") and not n:
            return Method(name, kind, 0, dynamic)
        if kind in ("root-only", "grpo") and n.isdigit() and int(n) >= 1:
            return Method(name, kind, int(n), dynamic)
        raise ValueError(f"unknown method {name!r}: expected selective, rule, free, root-only:<n> or grpo:<n>, "
                         "each optionally with +ds")

    @property
    def learned_critic(self) -> bool:
        """Whether the method reads the learned critic (and so trains it)."""
        return self.kind in ("selective", "rule", "root-only")


def default_methods() -> List[str]:
    """The settings and the baselines of docs/signal.md §N: the default ``Selective()``, the
    critic rule, the critic-free preset, and root-only and GRPO groups at the default's warmup
    W and budget B, each with and without dynamic sampling."""
    from focus_go import Selective

    sel = Selective()
    out = ["selective", "rule", "free"]
    for n in sorted({sel.warmup, sel.budget}):
        for kind in ("root-only", "grpo"):
            out += [f"{kind}:{n}", f"{kind}:{n}+ds"]
    return out


@dataclass
class RunConfig:
    """What a learning run is: the task, the model, the batch and the budget."""

    digits: int = 3
    segment: int = 8  # tokens per segment (Segments(segment))
    max_segments: int = 8
    train_problems: int = 2000
    held_out: int = 128
    trees_per_update: int = 16
    budget_tokens: int = 64_000  # generated tokens per run
    warm_target: float = 0.15  # supervised steps until held-out success (sampled) reaches this
    evals: int = 16  # held-out evaluations per run: after the first update past each 1/evals of the budget
    model: Dict[str, int] = field(default_factory=lambda: {"d": 64, "layers": 2, "heads": 4, "max_len": 96})
    epochs: int = 2
    clip: float = 0.2
    device: str = "cpu"


@dataclass
class Setup:
    """A seed's shared pieces: the tokenizer, its focus-go format, the problems and the
    warm-started weights (every method of a seed starts from the same ones)."""

    seed: int
    cfg: RunConfig
    codec: Codec
    format: Any
    train: List[Problem]
    held_out: List[Problem]
    warm: Dict[str, Any]  # the policy's state_dict after the warm start
    warm_steps: int
    warm_success: float

    @staticmethod
    def build(seed: int, cfg: RunConfig, workdir: Path) -> "Setup":
        import torch

        from focus_go.backends import PolicyFormat
        from task import build_tokenizer

        tokdir = workdir / "tokenizer"
        if not (tokdir / "tokenizer.json").exists():
            build_tokenizer(tokdir)
        codec = Codec(tokdir)
        fmt = PolicyFormat.resolve(str(tokdir), profile="token_chunk")
        held = problems(10_000 + seed, cfg.held_out, cfg.digits)
        train = problems(seed, cfg.train_problems, cfg.digits, exclude=held)
        key = tree_seed("warm-sampled", seed, sorted(cfg.model.items()), cfg.digits, cfg.warm_target, cfg.train_problems, cfg.held_out)
        path = workdir / f"warm-{seed}-{key:016x}.pt"
        if path.exists():
            saved = torch.load(path, map_location="cpu")
        else:
            from trainer import warm_start

            model = init_model(policy_config(codec, cfg), seed, cfg.device)
            steps, rate = warm_start(model, codec, train, held, target=cfg.warm_target, seed=seed,
                                     max_new=cfg.segment * cfg.max_segments)
            saved = {"state": {k: v.cpu() for k, v in model.state_dict().items()}, "steps": steps, "success": rate}
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            torch.save(saved, tmp)
            os.replace(tmp, path)  # atomic: processes sharing the folder never read half a file
        return Setup(seed, cfg, codec, fmt, train, held, saved["state"], saved["steps"], saved["success"])

    def close(self) -> None:
        self.format.codec.tokenizer.close()


def policy_config(codec: Codec, cfg: RunConfig, out: int = 0) -> ModelConfig:
    return ModelConfig(vocab=codec.vocab_size, out=out, **cfg.model)


@dataclass
class Point:
    """An evaluated policy: the costs when it took over and its held-out success (nan for the
    run's last policy, which is never evaluated)."""

    generated: int
    forward: int  # model forward tokens without a prefix cache (every call's prefix + its output)
    forward_cached: int  # the same through a per-tree prefix cache
    success: float


@dataclass
class RunResult:
    method: str
    seed: int
    lr: float
    points: List[Point]
    updates: int = 0
    trees: int = 0
    trees_dropped: int = 0
    rollouts: int = 0
    critic_mse: List[float] = field(default_factory=list)  # per update: squared error on new targets, before training on them
    critic_tau2: Optional[float] = None  # the critic's error with the return noise removed (CriticRule's tau_hat^2)
    rule_tgb_share: Optional[float] = None  # the critic rule: share of updates prepared with TreeGroupBaseline

    def as_dict(self) -> Dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


class Learner:
    """One method's learning run from a seed's warm start."""

    def __init__(self, setup: Setup, method: Method, lr: float) -> None:
        import torch

        cfg = setup.cfg
        self.setup, self.method, self.lr, self.cfg = setup, method, lr, cfg
        self.policy: TinyGPT = init_model(policy_config(setup.codec, cfg), setup.seed, cfg.device)
        self.policy.load_state_dict({k: v.to(cfg.device) for k, v in setup.warm.items()})
        self.policy.eval()
        value = init_model(policy_config(setup.codec, cfg, out=1), setup.seed + 1, cfg.device) if method.learned_critic else None
        self.trainer = Trainer(self.policy, value, setup.codec, lr, clip=cfg.clip, epochs=cfg.epochs)
        self.sampler = Sampler(self.policy, setup.codec.eos, setup.codec.pad)
        torch.manual_seed(setup.seed)

    def _collector_kwargs(self, seed: int, choice: Any) -> Dict[str, Any]:
        from focus_go import Critic, DirectBranchTd, GroupBaseline, Independent, Selective
        from focus_go.search import critic_free

        m = self.method
        learned = Critic.from_function(self.trainer.predict) if m.learned_critic else None
        if m.kind == "selective":
            return {"critic": learned, "search": Selective(seed=seed)}
        if m.kind == "rule":
            return {"critic": learned, "search": Selective(seed=seed), "estimator": choice.estimator, "reward": choice.reward_config}
        if m.kind == "free":
            return critic_free(seed=seed).collector_kwargs()
        if m.kind == "root-only":
            return {"critic": learned, "search": Independent(m.n, seed=seed), "estimator": DirectBranchTd()}
        return {"critic": None, "search": Independent(m.n, seed=seed), "estimator": GroupBaseline()}

    async def tree(self, problem: Problem, seed: int, choice: Any) -> Tuple[Any, Any, int, int]:
        """Collect and prepare one tree: (state, batch, forward tokens, cached forward tokens)."""
        from focus_go import Agent, Collector, MathEnv, Segments
        from focus_go.backends import Policy, SamplingParams

        counts = [0, 0]
        cache: Dict[int, dict] = {}

        async def complete(tokens, params):
            result = await self.sampler.complete(tokens, params)
            node, i = cache, 0
            while i < len(tokens) and tokens[i] in node:
                node, i = node[tokens[i]], i + 1
            for t in list(tokens[i:]) + list(result.tokens):
                node = node.setdefault(t, {})
            counts[0] += len(tokens) + len(result.tokens)
            counts[1] += len(tokens) - i + len(result.tokens)
            return result

        fmt = self.setup.format
        policy = Policy(format=fmt, model="tiny-rl", complete=complete, default_params=SamplingParams(temperature=1.0))
        env = MathEnv(problem.label, policy.decode)
        agent = Agent(policy=policy, env=env, context=Segments(self.cfg.segment), max_segments=self.cfg.max_segments)
        async with Collector(agent, **self._collector_kwargs(seed, choice)) as collector:
            state = await collector.collect(problem.prompt)
            batch = collector.prepare(state)
        return state, batch, counts[0], counts[1]

    async def run(self) -> RunResult:
        from focus_go.critic_rule import CriticRule

        cfg, setup, m = self.cfg, self.setup, self.method
        first = success(self.policy, setup.codec, setup.held_out, cfg.segment * cfg.max_segments)
        res = RunResult(m.name, setup.seed, self.lr, [Point(0, 0, 0, first)])
        rule = CriticRule() if m.kind == "rule" else None
        meter = CriticRule() if m.learned_critic else None  # measures the critic's error only
        tgb_updates = 0
        generated = forward = cached = 0
        index = 0
        if cfg.evals < 1:
            raise ValueError(f"evals must be at least 1, got {cfg.evals}")
        next_eval = cfg.budget_tokens / cfg.evals  # the next evaluation's token mark
        while generated < cfg.budget_tokens:
            choice = rule.choose() if rule is not None else None
            if choice is not None and type(choice.estimator).__name__ == "TreeGroupBaseline":
                tgb_updates += 1
            kept: List[Any] = []  # the batches the update trains on
            states: List[Any] = []
            batches: List[Any] = []
            while len(kept) < cfg.trees_per_update and generated < cfg.budget_tokens:
                need = cfg.trees_per_update - len(kept)
                jobs = [self.tree(setup.train[(index + j) % len(setup.train)], tree_seed(setup.seed, index + j), choice)
                        for j in range(need)]
                index += need
                for state, batch, fwd, fwd_cached in await asyncio.gather(*jobs):
                    states.append(state)
                    batches.append(batch)
                    generated += int(batch.stats["generated_tokens"])
                    forward, cached = forward + fwd, cached + fwd_cached
                    res.trees += 1
                    res.rollouts += int(batch.stats["rollouts"])
                    finished, wins = state.stats["finished_rollouts"], state.stats["successes"]
                    if m.dynamic and finished >= 2 and wins in (0, finished):
                        res.trees_dropped += 1
                    else:
                        kept.append(batch)
            if kept:
                rows = [r for b in kept for r in rows_of(b.actor)]
                self.trainer.actor_step(rows, sum(int(b.stats["rollouts"]) for b in kept))
            # The critic learns from every tree, the ones dynamic sampling leaves out of the update too.
            critic_samples = [(c.context, c.target) for b in batches for c in b.critic]
            err = self.trainer.critic_step(critic_samples) if m.learned_critic else None
            if err is not None:
                res.critic_mse.append(err)
            reward = choice.reward_config if choice is not None else None
            if rule is not None:
                rule.observe(states, reward)
            if meter is not None:
                meter.observe(states, reward)
            for s in states:
                s.close()
            res.updates += 1
            if generated >= cfg.budget_tokens:
                res.points.append(Point(generated, forward, cached, float("nan")))
            elif generated >= next_eval:
                res.points.append(Point(generated, forward, cached,
                                        success(self.policy, setup.codec, setup.held_out, cfg.segment * cfg.max_segments)))
                while next_eval <= generated:
                    next_eval += cfg.budget_tokens / cfg.evals
        if meter is not None:
            res.critic_tau2 = meter.choose().tau_hat2
        if rule is not None:
            res.rule_tgb_share = tgb_updates / max(res.updates, 1)
        return res


def area(points: Sequence[Point], axis: str, budget: float) -> float:
    """Mean held-out success over [0, budget] of ``axis`` (generated, forward or
    forward_cached): each evaluated policy's success holds from its cost until the next
    evaluation's."""
    if budget <= 0:
        raise ValueError(f"budget must be positive, got {budget}")
    covered = getattr(points[-1], axis)
    if covered < budget:
        raise ValueError(f"the run covers {covered} {axis} tokens, less than the budget {budget}")
    total = 0.0
    for p, q in zip(points, list(points[1:]) + [None]):
        start = getattr(p, axis)
        end = budget if q is None else min(getattr(q, axis), budget)
        if start >= budget:
            break
        if end > start:
            if p.success != p.success:  # nan: the run's last policy, never evaluated
                raise ValueError(f"the run ends before {budget} {axis} tokens")
            total += p.success * (end - start)
    return total / budget
