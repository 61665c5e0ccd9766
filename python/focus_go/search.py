"""Search schedulers: how a collection spends its rollout budget.

``Selective(budget, warmup)`` runs ``warmup`` independent rollouts from the root, then
rounds of ``per_pass`` branches from the checkpoints whose next branch gains most under its
``score`` (by default ``value_refinement_per_token``, the critic-target gain per generated
token, docs/signal.md §P; docs/signal.md describes every score), until the budget is spent or
no checkpoint gains; by default a tree whose warmup rollouts all returned the same stops
there (``stop_alike``).
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
    """FOCUS's selective branching: warmup rollouts, then branches where they gain most.

    A collection first runs ``warmup`` independent rollouts from the root, then rounds of
    ``per_pass`` branches from the checkpoints whose next branch gains most under
    ``score``, until ``budget`` rollouts are spent or no checkpoint gains. Budgets count
    rollouts (generate-until-terminal calls), not tokens. The same inputs and seed give
    the same tree whatever order responses arrive in.

    The scores:

    - ``"value_refinement_per_token"`` (the default): ``"value_refinement"``'s gain divided
      by the tokens a rollout from the checkpoint is expected to generate; deep
      checkpoints, whose branches reuse a long prefix, cost less.
    - ``"critic_adaptive"``: depth-1 checkpoints first when the critic's
      error over the root's children looks large, otherwise as ``"gradient_variance"``.
    - ``"gradient_variance"``: the reduction of the variance of the actor's
      (visitation-weighted) gradient that one more branch buys; shallow checkpoints and
      the root score highest.
    - ``"shallow_first"``: depth-1 checkpoints, then the root, then deeper ones.
    - ``"value_refinement"``: the critic-target error one more branch removes.
    - ``"posterior_variance"``: the posterior variance of the checkpoint's value.
    - ``"uniform"``: every candidate alike.

    The learning-signal guide compares them, per generated token: the defaults,
    ``Selective(8, 4)`` with ``"value_refinement_per_token"`` and ``stop_alike``, are the
    rule with the best area there (docs/signal.md §D).

    Args:
        budget: Rollouts per tree, warmup included; failures and retries each cost one.
        warmup: Independent rollouts from the root before any branch, in [1, budget].
        per_pass: Branches planned per round.
        max_children: The most direct children of a checkpoint; the root is exempt.
        min_remaining: The generated-token room a checkpoint needs left to be branched
            from; None for the segment length.
        score: The branching criterion, one of the names above.
        seed: Seeds the sampling requests and breaks ties.
        stop_alike: Stop a tree after its warmup when every finished warmup rollout
            returned the same (an always-solved or never-solved problem), leaving the
            rest of its budget unspent (``budget_unspent`` in its stats). On by default;
            ``False`` spends the whole budget on every tree.

    Raises:
        ConfigError: A value is out of range (``warmup`` above ``budget``, a count below
            1, an unknown ``score``); the message names the field.
    """

    budget: int = 8
    warmup: int = 4
    per_pass: int = field(default=4, kw_only=True)
    max_children: int = field(default=4, kw_only=True)
    min_remaining: Optional[int] = field(default=None, kw_only=True)
    score: str = field(default="value_refinement_per_token", kw_only=True)
    seed: int = field(default=0, kw_only=True)
    stop_alike: bool = field(default=True, kw_only=True, repr=False)

    def __post_init__(self) -> None:
        _declare(self, "Selective")

    def _config(self) -> Dict[str, Any]:
        return dict(self._engine_config)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Independent:
    """``n`` independent rollouts from the root and no branching: a GRPO group.

    The baseline that selective branching is compared against, and what evaluation runs
    (``Independent(1)``).

    Args:
        n: The number of rollouts.
        seed: Seeds the sampling requests.

    Raises:
        ConfigError: ``n`` is less than 1.
    """

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
