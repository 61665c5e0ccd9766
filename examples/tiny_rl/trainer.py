"""One trainer for every method: the supervised warm start, the policy-gradient step and the
critic's step.

The policy-gradient step is the same for every collection method: for each prepared
``ActorSample`` (one edge of a tree, with its advantage ``weight``) and each of its spans,
the importance ratio r = exp(log pi(token) - the sampler's log probability) on the span's
generated tokens, PPO's clipped objective min(r A, clip(r, 1 - eps, 1 + eps) A), summed over
the tokens and the edges and divided by the batch's rollouts (the estimators' unit: a tree's
edges estimate the gradient in units of independent rollouts). Adam with gradient-norm
clipping; ``epochs`` passes over each batch.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

import torch

from model import Sampler, TinyGPT, token_logprobs, value_of
from task import Codec, Problem, correct


@dataclass(frozen=True)
class Row:
    """One training sequence: ids, which of them were generated (trainable), the sampler's
    log probability of each (0 elsewhere) and the advantage."""

    tokens: Tuple[int, ...]
    trainable: Tuple[bool, ...]
    logprobs: Tuple[float, ...]
    advantage: float


def rows_of(actor_samples: Iterable) -> List[Row]:
    """The rows of prepared ``ActorSample``s: one per span, each with its edge's weight."""
    return [Row(tuple(s.tokens), tuple(s.trainable), tuple(s.logprobs), float(a.weight)) for a in actor_samples for s in a.spans]


def ppo_loss(model: TinyGPT, rows: Sequence[Row], rollouts: int, clip: float, pad_id: int) -> torch.Tensor:
    """-(1/rollouts) sum over rows and their trainable tokens of
    min(r A, clip(r, 1 - clip, 1 + clip) A), r = exp(log pi - the sampler's log probability)."""
    if rollouts < 1:
        raise ValueError(f"rollouts must be at least 1, got {rollouts}")
    new = token_logprobs(model, [r.tokens for r in rows], pad_id)
    mask = torch.zeros_like(new)
    old = torch.zeros_like(new)
    adv = torch.tensor([r.advantage for r in rows], dtype=new.dtype, device=new.device).unsqueeze(1)
    for i, r in enumerate(rows):
        if r.trainable[0]:
            raise ValueError("a row's first token is trainable: nothing conditions it")
        n = len(r.tokens) - 1
        mask[i, :n] = torch.tensor(r.trainable[1:], dtype=new.dtype)
        old[i, :n] = torch.tensor(r.logprobs[1:], dtype=new.dtype)
    ratio = torch.exp((new - old) * mask)
    objective = torch.minimum(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv)
    return -(objective * mask).sum() / rollouts


class Trainer:
    """Adam on the policy with the PPO step; Adam on the value model with a cross-entropy
    step toward the critic targets."""

    def __init__(self, policy: TinyGPT, value: Optional[TinyGPT], codec: Codec, lr: float, *, clip: float = 0.2,
                 epochs: int = 2, minibatch: int = 256, value_lr: float = 1e-3, value_steps: int = 4, max_norm: float = 1.0) -> None:
        self.policy, self.value, self.codec = policy, value, codec
        self.clip, self.epochs, self.minibatch, self.max_norm, self.value_steps = clip, epochs, minibatch, max_norm, value_steps
        self.opt = torch.optim.Adam(policy.parameters(), lr=lr)
        self.value_opt = torch.optim.Adam(value.parameters(), lr=value_lr) if value is not None else None

    def actor_step(self, rows: Sequence[Row], rollouts: int) -> float:
        """``epochs`` passes of the PPO step over ``rows`` (a batch of ``rollouts``); the
        last pass's loss. Rows with a zero advantage carry no gradient and are skipped."""
        rows = [r for r in rows if r.advantage != 0.0]
        if not rows:
            return 0.0
        loss_value = 0.0
        for _ in range(self.epochs):
            self.opt.zero_grad()
            total = 0.0
            for start in range(0, len(rows), self.minibatch):
                loss = ppo_loss(self.policy, rows[start:start + self.minibatch], rollouts, self.clip, self.codec.pad)
                loss.backward()
                total += float(loss.detach())
            torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_norm)
            self.opt.step()
            loss_value = total
        return loss_value

    def predict(self, contexts: Sequence[str]) -> List[float]:
        """The value model's predictions for critic contexts (decoded checkpoint prefixes)."""
        assert self.value is not None
        with torch.no_grad():
            return value_of(self.value, [self.codec.encode(c) for c in contexts], self.codec.pad).tolist()

    def critic_step(self, samples: Sequence[Tuple[str, float]]) -> Optional[float]:
        """Train the value model on (context, target) pairs; returns their squared error
        before the step (the critic's error on targets it has not trained on)."""
        if self.value is None or not samples:
            return None
        seqs = [self.codec.encode(c) for c, _ in samples]
        target = torch.tensor([min(1.0, max(0.0, t)) for _, t in samples], device=next(self.value.parameters()).device)
        with torch.no_grad():
            before = float(((value_of(self.value, seqs, self.codec.pad) - target) ** 2).mean())
        for _ in range(self.value_steps):
            self.value_opt.zero_grad()
            p = value_of(self.value, seqs, self.codec.pad).clamp(1e-6, 1 - 1e-6)
            loss = torch.nn.functional.binary_cross_entropy(p, target)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.value.parameters(), self.max_norm)
            self.value_opt.step()
        return before


def success(model: TinyGPT, codec: Codec, problems: Sequence[Problem], max_new: int, samples: int = 2, batch: int = 256) -> float:
    """Held-out success of the policy as RL samples it (temperature 1): the share of right
    answers over ``samples`` draws per problem. The draws' seeds are fixed, so every
    evaluation (and every method) is measured on the same random numbers."""
    model.eval()
    sampler = Sampler(model, codec.eos, codec.pad)
    jobs = [(p, k) for p in problems for k in range(samples)]
    hits = 0
    for start in range(0, len(jobs), batch):
        chunk = jobs[start:start + batch]
        outs = sampler.generate([codec.prompt_ids(p) for p, _ in chunk], [max_new] * len(chunk),
                                [1_000_003 * k + 7 * i for i, (_, k) in enumerate(chunk, start)])
        hits += sum(correct(codec.decode(o), p) for (o, _, _), (p, _) in zip(outs, chunk))
    return hits / len(jobs)


def supervised(model: TinyGPT, codec: Codec, problems: Sequence[Problem], steps: int, opt: torch.optim.Optimizer, batch: int,
               seed: int) -> None:
    """``steps`` steps of teacher forcing on the reference solutions (loss on the answer's
    tokens only)."""
    rng = random.Random(seed)
    for _ in range(steps):
        chunk = [problems[rng.randrange(len(problems))] for _ in range(batch)]
        prompts = [codec.prompt_ids(p) for p in chunk]
        seqs = [q + codec.encode(p.solution()) + [codec.eos] for q, p in zip(prompts, chunk)]
        logp = token_logprobs(model, seqs, codec.pad)
        mask = torch.zeros_like(logp)
        for i, (q, s) in enumerate(zip(prompts, seqs)):
            mask[i, len(q) - 1:len(s) - 1] = 1.0
        loss = -(logp * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()


def warm_start(model: TinyGPT, codec: Codec, train: Sequence[Problem], held_out: Sequence[Problem], *, target: float,
               chunk: int = 25, max_steps: int = 3000, lr: float = 1e-3, batch: int = 32, seed: int = 0,
               max_new: int = 64) -> Tuple[int, float]:
    """Supervised steps in chunks of ``chunk`` until held-out success (``success``) reaches
    ``target`` (or ``max_steps``); returns (steps, success)."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    steps, rate = 0, success(model, codec, held_out, max_new)
    while rate < target and steps < max_steps:
        model.train()
        supervised(model, codec, train, chunk, opt, batch, seed * 100003 + steps)
        steps += chunk
        rate = success(model, codec, held_out, max_new)
    return steps, rate
