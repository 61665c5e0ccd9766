"""Search schedulers: how a collection spends its rollout budget.

``Selective(budget, warmup)`` runs ``warmup`` independent rollouts from the root, then
rounds of ``per_pass`` branches from the checkpoints whose next branch gains most under its
``score`` (by default ``critic_adaptive``, aimed at the actor's gradient, docs/signal.md
§F; ALGORITHM.md §5.7 for the rest), until the budget is spent or no checkpoint gains.
``Independent(n)`` is n rollouts from the root with no branching (GRPO groups), the
baseline every comparison runs against. Budgets count rollouts
(generate-until-terminal calls), not tokens. The same inputs and seed give the same tree
whatever order responses arrive in.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Dict, Optional

from . import _rules

def _declare(obj: Any, kind: str) -> None:
    """Check ``obj``'s fields with the Go rules (ConfigError naming the field) and keep
    the engine's search config they normalise to."""
    config = _rules.check(kind, {f.name: getattr(obj, f.name) for f in fields(obj)})
    object.__setattr__(obj, "_engine_config", config)


@dataclass(frozen=True)
class Selective:
    """FOCUS's selective branching. ``max_children`` caps direct children per checkpoint
    (the root is exempt); ``min_remaining`` is the token room a checkpoint needs left to be
    branched from (default: the segment length); ``score`` picks the branching criterion:
    ``"critic_adaptive"`` (the default: depth-1 checkpoints first when the critic's error
    over the root's children looks large, else as ``"gradient_variance"``; docs/signal.md
    §F), ``"gradient_variance"`` (the reduction of the visitation-weighted actor gradient's
    variance, shallow checkpoints and the root first; docs/signal.md §S),
    ``"shallow_first"`` (depth-1 checkpoints, then the root, then deeper ones),
    ``"value_refinement"`` (the critic-target error one more branch removes; the default
    before 2026-12-02, README "Changed defaults"), ``"posterior_variance"`` or
    ``"uniform"``. The defaults and ranges are the Go engine's (``core/search``; the
    literal defaults here are tested against them), checked at construction."""

    budget: int = 32
    warmup: int = 16
    per_pass: int = field(default=4, kw_only=True)
    max_children: int = field(default=4, kw_only=True)
    min_remaining: Optional[int] = field(default=None, kw_only=True)
    score: str = field(default="critic_adaptive", kw_only=True)
    seed: int = field(default=0, kw_only=True)

    def __post_init__(self) -> None:
        _declare(self, "Selective")

    def _config(self) -> Dict[str, Any]:
        return dict(self._engine_config)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Independent:
    """``n`` independent rollouts from the root, no branching (a GRPO group). The engine
    runs it as Go's ``search.Independent(n)``."""

    n: int = 16
    seed: int = field(default=0, kw_only=True)

    def __post_init__(self) -> None:
        _declare(self, "Independent")

    def _config(self) -> Dict[str, Any]:
        return dict(self._engine_config)  # type: ignore[attr-defined]


def first_burst(search: Any) -> int:
    """The requests a tree sends at once when it starts (Selective's warmup, Independent's
    n): what admitting it reserves of the servers' capacity (``Policy.admit``)."""
    return int(getattr(search, "warmup", None) or getattr(search, "n", None) or 1)
