"""Visitation weights (docs/signal.md): every actor sample carries w(s->c) = R * pi_hat(c),
records apply it unless told not to (``visitation_weights=False``), and ``weight`` stays
the advantage."""

from __future__ import annotations

import pytest

from focus_go import ActorSample, Batch, DirectBranchTd, RewardConfig, _lib
from focus_go._records import tree_records
from focus_go.extend import SchedulerState
from focus_go.preparation import prepare_samples
from focus_go.tree import PackedSequence

from trees import figure61

# The §6.1 tree: s -> a (3 terminal children), b (1 terminal child); R = 4 leaves.
VISITATION = {1: 2.0, 2: 2.0, 3: 2 / 3, 4: 2 / 3, 5: 2 / 3, 6: 2.0}
ADVANTAGE = {1: 0.333333, 2: -0.291667, 3: 0.125, 4: 0.125, 5: 0.125, 6: -0.25}  # kappa = 1


@pytest.fixture
def state():
    with SchedulerState.from_json(figure61()) as s:
        yield s


def test_samples_carry_the_factor_and_weight_keeps_its_meaning(state):
    batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
    assert {a.node_id: a.visitation for a in batch.actor} == pytest.approx(VISITATION, abs=1e-12)
    assert {a.node_id: a.weight for a in batch.actor} == pytest.approx(ADVANTAGE, abs=1e-6)


@pytest.mark.parametrize("min_abs", [None, 0.2])
def test_records_apply_the_factor_when_switched_on(state, min_abs):
    batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
    plain = [r for r in batch.to_records(0, min_abs_advantage=min_abs) if r["lane"] == "actor"]
    assert plain == [r for r in batch.to_records(0, min_abs_advantage=min_abs, visitation_weights=False) if r["lane"] == "actor"]
    weighted = [r for r in batch.to_records(0, min_abs_advantage=min_abs, visitation_weights=True) if r["lane"] == "actor"]
    assert [r["node_id"] for r in plain] == [r["node_id"] for r in weighted], "the threshold compares the weight"
    for p, w in zip(plain, weighted):
        assert p["advantage"] == pytest.approx(ADVANTAGE[p["node_id"]], abs=1e-6)
        assert w["advantage"] == pytest.approx(ADVANTAGE[w["node_id"]] * VISITATION[w["node_id"]], abs=1e-6)
        assert {k: v for k, v in p.items() if k != "advantage"} == {k: v for k, v in w.items() if k != "advantage"}
    one = tree_records(state, reward_config=RewardConfig(), estimator=DirectBranchTd(), group_index=0,
                       min_abs_advantage=min_abs)
    assert one.actor == plain
    weighted_tree = tree_records(state, reward_config=RewardConfig(), estimator=DirectBranchTd(), group_index=0,
                                 min_abs_advantage=min_abs, visitation_weights=True)
    assert weighted_tree.actor == weighted
    assert one.sample_weights == pytest.approx([ADVANTAGE[k] for k in sorted(ADVANTAGE)], abs=1e-6), "unweighted"


def test_python_made_samples_keep_their_factor():
    span = PackedSequence((1, 2), (False, True), (0.0, -0.5))
    batch = Batch(actor=(ActorSample(node_id=1, spans=(span,), group_id=0, estimator="C", weight=0.4, visitation=0.25),
                         ActorSample(node_id=2, spans=(span,), group_id=0, estimator="C", weight=0.4)))
    adv = [r["advantage"] for r in batch.to_records(0, visitation_weights=True)]
    assert adv == pytest.approx([0.1, 0.4])


def test_independent_chains_are_unweighted(selftest):
    # A Selective-shaped tree's root chains: every factor is positive, and the factors of
    # the root's edges sum to the number of leaves.
    with SchedulerState(_lib.call_handle("focus_selftest_search_tree", 16, 4, 8, 3)) as s:
        batch = prepare_samples(s, reward_config=RewardConfig(), estimator=DirectBranchTd())
        root = [a.visitation for a in batch.actor if a.group_id == 0]
        assert all(a.visitation > 0 for a in batch.actor)
        assert sum(root) == pytest.approx(batch.stats["rollouts"])
