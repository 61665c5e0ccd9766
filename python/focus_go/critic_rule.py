"""The estimator follows the critic: kappa and the estimator set from the critic's measured
reliability on earlier batches (docs/signal.md §R).

``CriticRule`` carries the rule's state across batches; the rule itself (the pooled
kappa_hat, the threshold, the clamp) runs in Go. Observe each batch's
trees after preparing them, and ask for the next batch's choice before collecting it:

```python
from focus_go.critic_rule import CriticRule

rule = CriticRule()
for batch in batches:
    choice = rule.choose(collector.reward)
    collector.reward, collector.estimator = choice.reward_config, choice.estimator
    trees = [await collector.collect(problem) for problem in batch]
    ...  # prepare and train
    rule.observe(trees, choice.reward_config)
```
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Union

from . import _lib
from .preparation import DirectBranchTd, Estimator, RewardConfig, TreeGroupBaseline
from .tree import SchedulerState

_ESTIMATORS = {"DirectBranchTd": DirectBranchTd, "TreeGroupBaseline": TreeGroupBaseline}


@dataclass(frozen=True)
class CriticFit:
    """One tree's (or a pool's) sums behind kappa_hat, over its critic targets (every
    checkpoint the critic scored that has completed children), in the reward range's
    normalised units.

    Attributes:
        nodes: The number of targets.
        variance: The sum of p(1-p), p the target (the direct-branch backup) clipped to [0, 1].
        squared_error: The sum of (critic prediction - target)^2.
        inverse_count: The sum of 1/n_s, n_s the target's completed children.
    """

    nodes: float = 0.0
    variance: float = 0.0
    squared_error: float = 0.0
    inverse_count: float = 0.0


def critic_fit(state: SchedulerState[Any], reward_config: Optional[RewardConfig] = None) -> CriticFit:
    """The tree's sums behind kappa_hat (what ``CriticRule.observe`` pools).

    Args:
        state: A collected tree.
        reward_config: The settings it was (or will be) prepared with; None for
            ``RewardConfig()``.

    Returns:
        The tree's ``CriticFit``.
    """
    cfg = (reward_config or RewardConfig())._json()
    raw = json.loads(_lib.call_string("focus_critic_fit", _lib.c_handle(state.handle), cfg, len(cfg)))
    return CriticFit(**{k: float(v) for k, v in raw.items()})


@dataclass(frozen=True)
class CriticChoice:
    """The rule's decision for the next batch.

    Attributes:
        estimator: ``DirectBranchTd()`` when the critic measured reliable, else
            ``TreeGroupBaseline()`` (also before any measurement).
        kappa: The next batch's ``critic_weight``: the pooled kappa_hat clamped to [0, 64],
            or the base ``critic_weight`` before any measurement.
        reward_config: The base ``RewardConfig`` with ``critic_weight = kappa``.
        measured: False while fewer than ``min_nodes`` targets are pooled.
        kappa_hat: The pooled kappa_hat (64 when the critic's error measured 0; 0 before
            any measurement).
        tau_hat2: The critic's measured squared error, return noise removed.
        sigma_hat2: The mean return variance p(1-p).
        nodes: The pooled (decayed) number of targets.
    """

    estimator: Estimator
    kappa: float
    reward_config: RewardConfig
    measured: bool
    kappa_hat: float
    tau_hat2: float
    sigma_hat2: float
    nodes: float


class CriticRule:
    """Sets each batch's ``critic_weight`` and estimator from the critic's reliability on
    earlier batches, never the batch itself (docs/signal.md §R).

    Each observed batch adds its trees' ``CriticFit`` sums to a pool in which earlier
    batches weigh ``decay`` per batch. From the pool, kappa_hat = sigma_hat^2 / tau_hat^2
    (docs/signal.md §R): the next batch gets ``critic_weight = clamp(kappa_hat, 0, 64)``, and
    ``DirectBranchTd`` when kappa_hat >= ``threshold`` (a reliable critic), else
    ``TreeGroupBaseline``. Before ``min_nodes`` targets are pooled it gives
    ``TreeGroupBaseline`` at the base ``critic_weight``.

    Args:
        threshold: The kappa_hat at or above which the critic is trusted; None for the
            library's default.
        min_nodes: The targets needed for a measurement; None for the default.
        decay: In (0, 1], the weight each earlier batch keeps per new batch; None for the
            default.
        max_kappa: In [0, 64], the most ``critic_weight`` the rule sets; None for the
            default.
        state: A ``state`` saved from an earlier rule (to resume a run); None starts empty.

    Raises:
        ConfigError: A setting out of range (checked by the library on the first call).
    """

    def __init__(
        self,
        *,
        threshold: Optional[float] = None,
        min_nodes: Optional[float] = None,
        decay: Optional[float] = None,
        max_kappa: Optional[float] = None,
        state: Optional[Mapping[str, Any]] = None,
    ) -> None:
        settings = (("threshold", threshold), ("min_nodes", min_nodes), ("decay", decay), ("max_kappa", max_kappa))
        self._settings = {k: v for k, v in settings if v is not None}
        self._state: Dict[str, Any] = dict(state) if state is not None else {"fit": dataclasses.asdict(CriticFit()), "batches": 0}
        self.rule: Dict[str, float] = self._call(None, 1.0)["rule"]  # checks the settings now

    @property
    def state(self) -> Dict[str, Any]:
        """The pooled sums and the number of batches observed (JSON-serialisable; pass it back
        as ``CriticRule(state=...)`` to resume)."""
        return json.loads(json.dumps(self._state))

    def observe(self, trees: Iterable[Union[SchedulerState[Any], CriticFit]], reward_config: Optional[RewardConfig] = None) -> None:
        """Add one batch: its trees (or their ``CriticFit``) join the pool.

        Args:
            trees: The batch's collected trees, or their fits from ``critic_fit``.
            reward_config: The settings the trees were prepared with (for trees); None for
                ``RewardConfig()``.
        """
        fits = [t if isinstance(t, CriticFit) else critic_fit(t, reward_config) for t in trees]
        self._state = self._call([dataclasses.asdict(f) for f in fits], 1.0)["state"]

    def choose(self, reward_config: Optional[RewardConfig] = None) -> CriticChoice:
        """The next batch's estimator and ``critic_weight``.

        Args:
            reward_config: The base settings (their ``critic_weight`` is used until there is a
                measurement); None for ``RewardConfig()``.

        Returns:
            The ``CriticChoice``.
        """
        base = reward_config or RewardConfig()
        c = self._call(None, base.critic_weight)["choice"]
        cfg = base if c["kappa"] == base.critic_weight else dataclasses.replace(base, critic_weight=c["kappa"])
        return CriticChoice(_ESTIMATORS[c["estimator"]](), float(c["kappa"]), cfg, bool(c["measured"]), float(c["kappa_hat"]),
                            float(c["tau_hat2"]), float(c["sigma_hat2"]), float(c["nodes"]))

    def apply(self, collector: Any) -> CriticChoice:
        """Set a fresh collector's ``reward`` (its ``critic_weight``) and ``estimator`` to the
        rule's choice, from the collector's own ``reward`` as the base.

        Args:
            collector: A ``Collector`` (or anything with ``reward`` and ``estimator``).

        Returns:
            The choice applied.
        """
        choice = self.choose(collector.reward)
        collector.reward, collector.estimator = choice.reward_config, choice.estimator
        return choice

    def _call(self, batch: Optional[list], base_kappa: float) -> Dict[str, Any]:
        req: Dict[str, Any] = {**self._settings, "state": self._state, "base_kappa": base_kappa}
        if batch is not None:
            req["batch"] = batch
        data = json.dumps(req).encode()
        return json.loads(_lib.call_string("focus_critic_rule", data, len(data)))

    def __repr__(self) -> str:
        return f"CriticRule(rule={self.rule}, batches={self._state.get('batches', 0)})"


def _fit_into(fits: List[CriticFit], reward_config: RewardConfig, then: Optional[Callable[[Any], None]] = None) -> Callable[[Any], None]:
    """An ``on_state`` callback that appends the tree's fit to ``fits``, then calls ``then``
    (the integrations' hook into a collected tree before it is closed)."""

    def on_state(state: Any) -> None:
        fits.append(critic_fit(state, reward_config))
        if then is not None:
            then(state)

    return on_state


__all__ = ["CriticChoice", "CriticFit", "CriticRule", "critic_fit"]
