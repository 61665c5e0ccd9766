"""prepare_samples' samples arrive as flat columns and are built on first access: they
must be exactly the samples the JSON paths describe (critic_targets, the batch's own
Go samples), compare equal to tuples, and behave as sequences."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from focus_go import ActorSample, Batch, CriticSample, DirectBranchTd, GroupBaseline, RewardConfig, _lib
from focus_go.extend import SchedulerState
from focus_go.preparation import critic_targets, prepare_samples, tree_values

from trees import figure61


@pytest.fixture
def state():
    with SchedulerState.from_json(figure61()) as s:
        yield s


@pytest.fixture
def searched(selftest):
    """A Selective-shaped tree: 16 rollouts of 4 segments of 8 tokens."""
    with SchedulerState(_lib.call_handle("focus_selftest_search_tree", 16, 4, 8, 3)) as s:
        yield s


def test_critic_samples_match_critic_targets(searched):
    for cfg in (RewardConfig(), RewardConfig(critic_weight=0), RewardConfig(gamma=0.9, critic_weight=4)):
        batch = prepare_samples(searched, reward_config=cfg, estimator=DirectBranchTd())
        # critic_targets crosses as JSON with every context: the columns must agree exactly.
        assert list(batch.critic) == critic_targets(tree_values(searched, cfg))
        assert len(batch.critic) > 10
        for c in batch.critic:
            assert isinstance(c, CriticSample) and type(c.diagnostics) is dict
            assert list(c.diagnostics) == ["v_hat", "v_star", "n_s"]
            assert c.context.startswith(batch.critic[0].context)  # node 0's context is the prompt


def test_actor_samples_match_the_go_batch(searched):
    for estimator, names in ((DirectBranchTd(), ["reward", "v_star_parent", "v_star_child", "n_s"]),
                             (GroupBaseline(), ["leaf_mean", "group_mean", "leaves"])):
        batch = prepare_samples(searched, reward_config=RewardConfig(), estimator=estimator)
        described = batch.describe().splitlines()
        assert len(batch.actor) == sum(line.startswith("actor ") for line in described)
        for a, line in zip(batch.actor, described):
            assert isinstance(a, ActorSample) and isinstance(a.diagnostics, MappingProxyType)
            assert list(a.diagnostics) == names
            assert a.estimator == estimator.name
            assert line.startswith(f"actor node={a.node_id} group={a.group_id} estimator={estimator.name} ")
            assert f" edge_tokens={a.edge_tokens}" in line
            assert (a.search_pass is None) == ("search_pass=" not in line)
        # the same samples rebuilt from Python describe identically
        copy = Batch(actor=tuple(batch.actor), critic=tuple(batch.critic))
        assert copy.describe() == batch.describe()


def test_prepared_sequences_behave_like_tuples(state):
    batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
    critic, actor = tuple(batch.critic), tuple(batch.actor)
    assert len(critic) == 3 and len(actor) == 6
    assert batch.critic == critic and critic == batch.critic and batch.actor == actor
    assert batch.critic != critic[:2] and batch.critic != ()
    assert batch.critic[-1] is batch.critic[2] and batch.critic[0] is critic[0]  # built once
    assert batch.critic[1:] == critic[1:] and isinstance(batch.critic[1:], tuple)
    with pytest.raises(IndexError):
        batch.critic[3]
    with pytest.raises(TypeError):
        hash(batch.critic)
    assert [c.node_id for c in batch.critic] == [0, 1, 2]
    assert batch.critic[0] == CriticSample(node_id=0, context="prompt", target=0.5625,
                                           diagnostics={"v_hat": 0.5, "v_star": pytest.approx(0.541667, abs=1e-6), "n_s": 2.0})
    assert "3 prepared critic samples" in repr(batch.critic)
    # a batch equals one made from tuples of the same samples
    same = Batch(actor=actor, critic=critic, reward_config=batch.reward_config, stats=batch.stats, failures=batch.failures)
    assert batch == same and same == batch


def test_critic_only_and_empty_lanes(state):
    batch = prepare_samples(state, reward_config=RewardConfig(), estimator=None)
    assert len(batch.actor) == 0 and tuple(batch.actor) == () and batch.actor == ()
    assert len(batch.critic) == 3
    assert [r["lane"] for r in batch.to_records(0)] == ["critic"] * 3
