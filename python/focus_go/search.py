"""Search schedulers: how a collection spends its rollout budget.

``Selective(budget, warmup)`` runs ``warmup`` independent rollouts from the root, then
rounds of ``per_pass`` branches from the checkpoints whose next branch most reduces the
error of their value estimate (ALGORITHM.md §5.7), until the budget is spent or no
checkpoint gains. ``Independent(n)`` is n rollouts from the root with no branching (GRPO
groups), the baseline every comparison runs against. Budgets count rollouts
(generate-until-terminal calls), not tokens. The same inputs and seed give the same tree
whatever order responses arrive in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .errors import ConfigError

SCORES = ("value_refinement", "posterior_variance", "uniform")


@dataclass(frozen=True)
class Selective:
    """FOCUS's selective branching. ``max_children`` caps direct children per checkpoint
    (the root is exempt); ``min_remaining`` is the token room a checkpoint needs left to be
    branched from (default: the segment length); ``score`` picks the branching criterion."""

    budget: int = 32
    warmup: int = 16
    per_pass: int = field(default=4, kw_only=True)
    max_children: int = field(default=4, kw_only=True)
    min_remaining: Optional[int] = field(default=None, kw_only=True)
    score: str = field(default="value_refinement", kw_only=True)
    seed: int = field(default=0, kw_only=True)

    def __post_init__(self) -> None:
        for name in ("budget", "warmup", "per_pass", "max_children"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"Selective: {name} must be an integer >= 1, got {value!r}")
        if self.warmup > self.budget:
            raise ConfigError(f"Selective: warmup ({self.warmup}) must not exceed budget ({self.budget})")
        if self.min_remaining is not None and (not isinstance(self.min_remaining, int) or self.min_remaining < 0):
            raise ConfigError(f"Selective: min_remaining must be None or an integer >= 0, got {self.min_remaining!r}")
        if self.score not in SCORES:
            raise ConfigError(f"Selective: unknown score {self.score!r}, expected one of {', '.join(SCORES)}")

    def _config(self) -> dict:
        return {
            "budget": self.budget, "warmup": self.warmup, "per_pass": self.per_pass,
            "max_children": self.max_children, "min_remaining": self.min_remaining or 0,
            "score": self.score, "seed": self.seed, "independent": False,
        }


@dataclass(frozen=True)
class Independent:
    """``n`` independent rollouts from the root, no branching (a GRPO group)."""

    n: int = 16
    seed: int = field(default=0, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or self.n < 1:
            raise ConfigError(f"Independent: n must be an integer >= 1, got {self.n!r}")

    def _config(self) -> dict:
        return {"budget": self.n, "warmup": self.n, "per_pass": 1, "max_children": 1, "min_remaining": 0,
                "score": "value_refinement", "seed": self.seed, "independent": True}
