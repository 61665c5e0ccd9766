"""The critic rule (docs/signal.md §R) and the critic-free preset (§C) through the Python API:
the rule runs in Go; the Python object only carries its state across batches."""

from __future__ import annotations

import json

import pytest

from focus_go import Critic, DirectBranchTd, RewardConfig, Selective, TreeGroupBaseline
from focus_go.critic_rule import CriticFit, CriticRule, critic_fit
from focus_go.errors import ConfigError
from focus_go.extend import SchedulerState
from focus_go.search import CriticFreePreset, critic_free

from trees import figure61

FIG61 = CriticFit(nodes=3, variance=0.25, squared_error=0.5, inverse_count=1 / 3 + 1 + 0.5)


@pytest.mark.parametrize("kappa", [0.0, 1.0, 64.0])
def test_fit_is_taken_at_kappa_zero(kappa):
    """§R.3: the §6.1 tree's fit compares each prediction with the tree's Monte Carlo
    returns (kappa 0), whatever the batch's kappa: s's backup is (1 + 0)/2."""
    with SchedulerState.from_json(figure61()) as state:
        fit = critic_fit(state, RewardConfig(critic_weight=kappa))
    assert fit.nodes == 3
    assert (fit.variance, fit.squared_error) == pytest.approx((0.25, 0.5))
    assert fit.inverse_count == pytest.approx(11 / 6)


def test_rule_vector():
    """docs/signal.md §R.3's sequence under the default rule."""
    rule = CriticRule()
    assert rule.rule == {"threshold": 0.5, "min_nodes": 8, "decay": 0.9, "max_kappa": 64}
    first = rule.choose()
    assert (type(first.estimator), first.kappa, first.measured) == (TreeGroupBaseline, 1.0, False)
    assert first.reward_config == RewardConfig()

    with SchedulerState.from_json(figure61()) as a, SchedulerState.from_json(figure61()) as b:
        rule.observe([a, b])
    c = rule.choose(RewardConfig(critic_weight=2.0))
    assert (type(c.estimator), c.kappa, c.measured, c.nodes) == (TreeGroupBaseline, 2.0, False, 6.0)

    rule.observe([FIG61])
    c = rule.choose()
    assert rule.state["batches"] == 2 and c.nodes == pytest.approx(8.4)
    assert c.measured and isinstance(c.estimator, DirectBranchTd)  # kappa_hat 0.72 >= 0.5
    assert c.kappa == pytest.approx(0.72) and c.kappa_hat == c.kappa
    assert c.reward_config == RewardConfig(critic_weight=c.kappa)

    rule.observe([CriticFit(nodes=10, variance=2.5, squared_error=1.0, inverse_count=5)])
    c = rule.choose()
    assert isinstance(c.estimator, DirectBranchTd)
    assert (c.sigma_hat2, c.tau_hat2, c.kappa) == pytest.approx((0.1782460, 0.0310520, 5.7402402), abs=1e-7)
    assert CriticRule(max_kappa=1.0, state=rule.state).choose().kappa == 1.0

    low = CriticRule()
    low.observe([CriticFit(nodes=10, variance=2.5, squared_error=8.75, inverse_count=5)])
    c = low.choose()
    assert isinstance(c.estimator, TreeGroupBaseline) and c.kappa == pytest.approx(1 / 3)


def test_state_resumes_and_is_json():
    rule = CriticRule(min_nodes=1)
    rule.observe([CriticFit(nodes=10, variance=2.5, squared_error=0.25, inverse_count=5)])
    saved = json.loads(json.dumps(rule.state))
    again = CriticRule(min_nodes=1, state=saved)
    c = again.choose()
    assert c == rule.choose()
    assert isinstance(c.estimator, DirectBranchTd) and c.kappa == 64.0  # tau_hat^2 clipped to 0


@pytest.mark.parametrize("kw", [{"threshold": -1.0}, {"min_nodes": 0.0}, {"decay": 0.0}, {"decay": 1.5}, {"max_kappa": 65.0},
                                {"state": {"fit": {"nodes": -1}, "batches": 0}}])
def test_bad_settings_are_refused(kw):
    with pytest.raises(ConfigError):
        CriticRule(**kw)


def test_apply_sets_a_collector():
    class Fake:
        reward = RewardConfig(gamma=0.9, critic_weight=3.0)
        estimator = DirectBranchTd()

    rule = CriticRule(min_nodes=1)
    fake = Fake()
    choice = rule.apply(fake)
    assert isinstance(fake.estimator, TreeGroupBaseline) and fake.reward == RewardConfig(gamma=0.9, critic_weight=3.0)
    rule.observe([FIG61])
    fake2 = Fake()
    choice = rule.apply(fake2)
    assert fake2.reward == RewardConfig(gamma=0.9, critic_weight=choice.kappa) and choice.kappa == pytest.approx(0.72)


def test_critic_free_preset():
    """docs/signal.md §C: the preset's settings come from Go (capi/binding)."""
    p = critic_free(seed=3)
    assert isinstance(p, CriticFreePreset)
    assert p.search == Selective(8, 4, score="value_refinement", stop_alike=False, seed=3)
    assert isinstance(p.estimator, TreeGroupBaseline)
    assert isinstance(p.critic, Critic) and p.visitation_weights is True
    assert p.collector_kwargs() == {"critic": p.critic, "search": p.search, "estimator": p.estimator}
    assert "0.5" in repr(critic_free().critic)
    assert "5" in repr(critic_free(reward=RewardConfig(reward_min=0.0, reward_max=10.0)).critic)
