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


@dataclass(frozen=True)
class CriticFreePreset:
    """The settings of the critic-free preset (``critic_free()``).

    Attributes:
        search: The tree search.
        estimator: The actor estimator (``TreeGroupBaseline()``: no advantage reads a critic).
        critic: The constant critic the search scores against (the middle of the reward range).
        visitation_weights: Whether records should carry the visitation weights (pass it to
            ``to_records``, ``collect_records`` or the integrations).
    """

    search: Selective
    estimator: Any
    critic: Any
    visitation_weights: bool

    def collector_kwargs(self) -> Dict[str, Any]:
        """``critic``, ``search`` and ``estimator`` as keywords for ``Collector``."""
        return {"critic": self.critic, "search": self.search, "estimator": self.estimator}


def critic_free(*, seed: int = 0, reward: Any = None) -> CriticFreePreset:
    """The critic-free preset, for training without a trustworthy critic (docs/signal.md §C).

    A small ``Selective`` tree whose branches go where they are cheap, scored against a
    constant prediction, with ``TreeGroupBaseline`` as the actor estimator: each edge's
    advantage is its subtree's mean return minus the tree's, so no advantage reads a critic
    and no critic server is needed. On the per-token benchmark it learned more per generated
    token than GRPO groups of 8 or 16 (docs/learning-signal.md).

    Example:
        ```python
        from focus import Collector
        from focus.search import critic_free

        preset = critic_free()
        collector = Collector(agent, **preset.collector_kwargs())
        ```

    Args:
        seed: The search's seed.
        reward: The ``RewardConfig`` the trees are prepared with, for the constant
            prediction's place in the reward range; None for ``RewardConfig()``'s [0, 1].

    Returns:
        The preset's ``search``, ``estimator``, ``critic`` and ``visitation_weights``.
    """
    from .critic import Critic
    from .preparation import DirectBranchTd, GroupBaseline, TreeGroupBaseline

    d = _rules.defaults()["critic_free"]
    sel = dict(d["selective"])
    sel["seed"] = seed
    lo, hi = (0.0, 1.0) if reward is None else (reward.reward_min, reward.reward_max)
    estimators = {e.name: e for e in (DirectBranchTd(), GroupBaseline(), TreeGroupBaseline())}
    return CriticFreePreset(
        search=Selective(**sel),
        estimator=estimators[d["estimator"]],
        critic=Critic.constant(lo + d["prediction"] * (hi - lo)),
        visitation_weights=bool(d["visitation_weights"]),
    )


def first_burst(search: Any) -> int:
    """The requests a tree sends at once when it starts (Selective's warmup, Independent's
    n): what admitting it reserves of the servers' capacity (``Policy.admit``)."""
    return int(getattr(search, "warmup", None) or getattr(search, "n", None) or 1)
