"""Preparation and export through the Go core: ALGORITHM.md §6.1 vectors, records,
factories, rendering, and the examples of preparation.txt and export.txt as written."""

from __future__ import annotations

import json
import math

import pytest

from focus_go import ActorSample, Batch, CriticSample, DirectBranchTd, GroupBaseline, RewardConfig, TreeGroupBaseline
from focus_go.errors import ConfigError
from focus_go.export import (
    ESTIMATOR_KEY,
    LANE_KEY,
    format_edges,
    format_tree,
    format_tree_html,
    to_samples,
)
from focus_go.extend import PackedSequence, SchedulerState, SchedulerView
from focus_go.preparation import critic_targets, prepare_samples, tree_values

from trees import figure61, tree_json

TABLE = {  # kappa: V*(a), V*(b), G_bar(s), V*(s), A(s->a), A(s->b), A(a->leaf), A(b->leaf)
    0: (1.0, 0.0, 0.5, 0.5, 0.5, -0.5, 0.0, 0.0),
    1: (0.875, 0.25, 0.5625, 0.541667, 0.333333, -0.291667, 0.125, -0.25),
    2: (0.8, 0.333333, 0.566667, 0.533333, 0.266667, -0.2, 0.2, -0.333333),
}


@pytest.fixture
def state():
    with SchedulerState.from_json(figure61()) as s:
        yield s


@pytest.mark.parametrize("kappa", [0, 1, 2])
def test_figure61_vectors(state, kappa):
    va, vb, gs, vs, a_sa, a_sb, a_leaf, b_leaf = TABLE[kappa]
    cfg = RewardConfig(critic_weight=kappa)
    values = tree_values(state, reward_config=cfg)
    assert values.refined[1] == pytest.approx(va, abs=1e-6)
    assert values.refined[2] == pytest.approx(vb, abs=1e-6)
    assert values.backup[0] == pytest.approx(gs, abs=1e-6)
    assert values.refined[0] == pytest.approx(vs, abs=1e-6)
    assert values.count[0] == 2 and values.count[1] == 3 and values.count[2] == 1

    targets = {c.node_id: c.target for c in critic_targets(values)}
    assert targets == pytest.approx({0: gs, 1: 1.0, 2: 0.0}, abs=1e-6)

    batch = prepare_samples(state, reward_config=cfg, estimator=DirectBranchTd())
    weights = {a.node_id: a.weight for a in batch.actor}
    assert weights[1] == pytest.approx(a_sa, abs=1e-6)
    assert weights[2] == pytest.approx(a_sb, abs=1e-6)
    for leaf in (3, 4, 5):
        assert weights[leaf] == pytest.approx(a_leaf, abs=1e-6)
    assert weights[6] == pytest.approx(b_leaf, abs=1e-6)
    # U1: telescoping along s -> a -> leaf
    assert weights[1] + weights[3] == pytest.approx(1.0 - vs, abs=1e-6)


def test_prepared_batch_contents(state):
    batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
    assert len(batch.actor) == 6 and len(batch.critic) == 3 and len(batch) == 9
    first = batch.actor[0]
    assert isinstance(first, ActorSample)
    assert first.estimator == "DirectBranchTd" and first.group_id == 0 and first.search_pass == 0
    (span,) = first.spans
    assert span.tokens == (1, 2, 3, 10, 11)
    assert span.trainable == (False, False, False, True, True)
    assert span.logprobs == (0.0, 0.0, 0.0, -0.5, -0.5)
    assert first.edge_tokens == 2
    leaf = batch.actor[2]
    assert leaf.spans[0].tokens == (1, 2, 3, 10, 11, 12)
    assert leaf.spans[0].trainable == (False,) * 5 + (True,)
    assert set(batch.stats) >= {
        "rollouts", "nodes", "generated_tokens", "prefix_tokens_reused", "budget_unspent",
        "advantage_mean", "advantage_std", "failures", "wall_seconds", "policy_seconds",
    }
    assert batch.stats["nodes"] == 7
    assert batch.reward_config == RewardConfig()
    assert batch.failures == ()
    assert isinstance(batch.critic[0], CriticSample)
    assert batch.critic[0].context.startswith("prompt")

    critic_only = prepare_samples(state, reward_config=RewardConfig(), estimator=None)
    assert len(critic_only.actor) == 0 and len(critic_only.critic) == 3


def test_default_records(state):
    batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
    records = batch.to_records(7)
    actor = [r for r in records if r[LANE_KEY] == "actor"]
    critic = [r for r in records if r[LANE_KEY] == "critic"]
    assert len(actor) == 6 and len(critic) == 3
    r = actor[2]
    assert r["tokens"] == [1, 2, 3, 10, 11, 12]
    assert r["loss_mask"] == [False] * 5 + [True]
    assert r["behavior_logprobs"] == [0.0] * 5 + [-0.5]
    # The default records carry the plain advantage, weight 0.125; visitation-weighted ones
    # multiply node 3's factor in (one of a's three children: w = R pi_hat = 4 * 1/6 = 2/3,
    # docs/signal.md §V.4).
    assert r["advantage"] == pytest.approx(0.125)
    assert batch.actor[2].weight == pytest.approx(0.125) and batch.actor[2].visitation == pytest.approx(2 / 3)
    weighted = [r for r in batch.to_records(7, visitation_weights=True) if r[LANE_KEY] == "actor"]
    assert weighted[2]["advantage"] == pytest.approx(0.125 * 2 / 3)
    assert {k: v for k, v in weighted[2].items() if k != "advantage"} == {k: v for k, v in r.items() if k != "advantage"}
    assert r["group_index"] == 7 and r[ESTIMATOR_KEY] == "DirectBranchTd"
    assert r["node_id"] == 3 and r["search_pass"] == 1 and r["problem_id"] == "p0"
    assert set(r) == {"tokens", "loss_mask", "behavior_logprobs", "advantage", "lane", "group_index",
                      "estimator", "node_id", "search_pass", "problem_id", "response_start", "response_text", "return", "finished",
                      "off_policy_tokens", "weight_versions"}
    assert (r["response_start"], r["response_text"], r["return"], r["finished"], r["off_policy_tokens"], r["weight_versions"]) == (
        5, None, 1.0, True, 0, [])
    assert set(critic[0]) == {"context", "target", "lane", "group_index", "node_id", "problem_id"}
    assert to_samples(batch, group_index=7) == records

    kept = batch.to_records(0, min_abs_advantage=0.2)
    assert sorted(r["node_id"] for r in kept if r["lane"] == "actor") == [1, 2, 6]
    assert sum(r["lane"] == "critic" for r in kept) == 3


def test_group_baseline_on_independent_chains():
    # three chains root -> c_i -> leaf with returns 1, 0, 1: A = R_i - 2/3 on every edge
    text = tree_json([
        (0, 0.0, False, 0.5, (5,)), (0, 0.0, False, 0.5, (6,)), (0, 0.0, False, 0.5, (7,)),
        (1, 1.0, True, None, (8,)), (2, 0.0, True, None, (9,)), (3, 1.0, True, None, (10,)),
    ])
    with SchedulerState.from_json(text) as s:
        batch = prepare_samples(s, reward_config=RewardConfig(), estimator=GroupBaseline())
    weights = {a.node_id: a.weight for a in batch.actor}
    for node, ret in [(1, 1.0), (4, 1.0), (2, 0.0), (5, 0.0), (3, 1.0), (6, 1.0)]:
        assert weights[node] == pytest.approx(ret - 2 / 3)
    assert {a.estimator for a in batch.actor} == {"GroupBaseline"}


def test_tree_group_baseline_vector(state):
    """docs/signal.md §T.3 on the §6.1 tree: leaf means weighted by reach (a's three leaves
    1/6 each, b's leaf 1/2) give V(root) = 1/2, V(a) = 1, V(b) = 0, and A = V(c) - V(root);
    GroupBaseline's unweighted group mean is 3/4. The records name the estimator."""
    batch = prepare_samples(state, reward_config=RewardConfig(), estimator=TreeGroupBaseline())
    weights = {a.node_id: a.weight for a in batch.actor}
    assert weights == pytest.approx({1: 0.5, 2: -0.5, 3: 0.5, 4: 0.5, 5: 0.5, 6: -0.5}, abs=1e-12)
    assert {a.estimator for a in batch.actor} == {"TreeGroupBaseline"}
    assert batch.actor[0].diagnostics == pytest.approx({"leaf_mean": 1.0, "group_mean": 0.5, "leaves": 3.0})
    records = batch.to_records(0)
    assert {r[ESTIMATOR_KEY] for r in records if r["lane"] == "actor"} == {"TreeGroupBaseline"}
    grpo = prepare_samples(state, reward_config=RewardConfig(), estimator=GroupBaseline())
    assert grpo.actor[0].diagnostics["group_mean"] == pytest.approx(0.75)


def test_factories(state):
    batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
    seen = []

    def actor(*, span, logprobs, reward, lane, group_index, **extra):
        seen.append(extra)
        return ("A", len(span.tokens), reward, lane, group_index, extra["node_id"], logprobs == span.logprobs)

    def critic(*, context, target, group_index, **extra):
        return ("C", target, group_index, extra["lane"], extra["node_id"])

    records = batch.to_records(3, actor_factory=actor, critic_factory=critic)
    assert records[0] == ("A", 5, pytest.approx(1 / 3, abs=1e-9), "actor", 3, 1, True)
    # With visitation weights the factory's reward is the weighted advantage (node 1: w = 2).
    weighted = batch.to_records(3, actor_factory=actor, critic_factory=critic, visitation_weights=True)
    assert weighted[0] == ("A", 5, pytest.approx(2 / 3, abs=1e-9), "actor", 3, 1, True)
    assert records[-1][0] == "C" and records[-1][2:4] == (3, "critic")
    assert {"tokens", "loss_mask", "behavior_logprobs", "advantage", "estimator", "search_pass", "problem_id"} <= set(seen[0])


def test_export_spec_examples():
    # export.txt, SampleFactory, as written
    from focus import ActorSample, Batch
    from focus.extend import PackedSequence

    def actor_record(*, span, logprobs, reward, lane, group_index, **extra):
        return {
            "tokens": span.tokens,
            "loss_mask": span.trainable,
            "behavior_logprobs": logprobs,
            "advantage": reward,
            "group": group_index,
        }

    span = PackedSequence(
        tokens=(10, 20), trainable=(False, True),
        logprobs=(0.0, -0.5),
    )
    edge = ActorSample(
        node_id=1, spans=(span,), group_id=0,
        estimator="DirectBranchTd", weight=0.4,
    )
    batch = Batch(actor=(edge,))
    records = batch.to_records(0, actor_factory=actor_record)
    assert records[0]["advantage"] == 0.4
    assert records[0]["tokens"] == (10, 20) and records[0]["loss_mask"] == (False, True)
    assert records[0]["behavior_logprobs"] == (0.0, -0.5)

    # export.txt, CriticSampleFactory
    from focus.export import to_samples

    def critic_record(*, context, target, group_index, **extra):
        return {"input": context, "target": target, "group": group_index}

    batch = Batch(critic=(CriticSample(node_id=0, context="x = ", target=0.75),))
    records = batch.to_records(0, critic_factory=critic_record)
    assert records == [{"input": "x = ", "target": 0.75, "group": 0}]
    records = to_samples(batch, group_index=0)
    assert records[0]["lane"] == "critic"


def test_preparation_spec_example(state):
    # preparation.txt, prepare_samples, as written (tree = a collected SchedulerState)
    from focus import DirectBranchTd, RewardConfig
    from focus.preparation import prepare_samples

    tree = state
    batch = prepare_samples(
        tree,
        reward_config=RewardConfig(),
        estimator=DirectBranchTd(),
    )
    assert len(batch.actor) == 6


def test_rendering(state):
    batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
    view = SchedulerView(state)
    text = format_tree(view, batch)
    assert "0.3333" in text or "+0.333" in text
    assert format_tree(view)
    edges = format_edges(batch)
    assert "0.5625" in edges
    described = batch.describe()
    assert len(described.splitlines()) == 9
    html = format_tree_html(view, batch)
    assert html.lstrip().lower().startswith("<!doctype html")
    # a Python-made batch renders the same way
    copy = Batch(actor=tuple(batch.actor), critic=batch.critic)
    assert copy.describe() == described


def test_view(state):
    view = SchedulerView(state)
    assert view.root.parent is None and view.root.children == (1, 2)
    a = view.node(1)
    assert a.parent == 0 and a.children == (3, 4, 5) and a.critic == 0.5 and not a.done
    leaf = view.node(3)
    assert leaf.done and leaf.reward == 1.0 and leaf.context_tokens == (1, 2, 3, 10, 11, 12)
    assert leaf.tokens == (12,) and leaf.failed is None
    assert len(view.nodes) == 7 and view.problem_id == "p0"


def test_json_round_trip(state, tmp_path):
    path = tmp_path / "tree.json"
    state.save(path)
    with SchedulerState.load(path) as again:
        assert again.to_json() == state.to_json()


def test_failed_branch_is_listed_and_excluded():
    text = tree_json(
        [(0, 0.0, False, 0.5, (5,)), (0, 0.0, False, 0.5, (6,)), (1, 1.0, True, None, (7,))],
        failed={2: "policy: sglang: HTTP 503"},
    )
    with SchedulerState.from_json(text) as s:
        batch = prepare_samples(s, reward_config=RewardConfig(critic_weight=0), estimator=DirectBranchTd())
        assert batch.failures == ((2, "policy: sglang: HTTP 503"),)
        assert {a.node_id for a in batch.actor} == {1, 3}
        assert tree_values(s, RewardConfig(critic_weight=0)).count[0] == 1


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda t: t["nodes"][3].update(reward=float("nan")), r"tree: nodes\[3\]\.reward is NaN; a finite number is required"),
        (lambda t: t["nodes"][3].update(parent=9), "node 3"),
        (lambda t: t["nodes"][2]["spans"][0].update(trainable=[True]), "node 2"),
    ],
)
def test_bad_trees_are_rejected(mutate, message):
    data = json.loads(figure61())
    mutate(data)
    with pytest.raises(ConfigError, match=message):
        SchedulerState.from_json(json.dumps(data, allow_nan=True))


def test_reward_out_of_range_names_node(state):
    data = json.loads(figure61())
    data["nodes"][3]["reward"] = 1.5
    with SchedulerState.from_json(json.dumps(data)) as s:
        with pytest.raises(ConfigError, match=r"node 3 reward"):
            prepare_samples(s, reward_config=RewardConfig(), estimator=DirectBranchTd())
    with pytest.raises(ConfigError, match="critic_weight"):
        prepare_samples(state, reward_config=RewardConfig(critic_weight=-1), estimator=DirectBranchTd())


def test_packed_sequence_lengths_checked():
    with pytest.raises(ConfigError, match="must be equal"):
        PackedSequence((1, 2), (True,), (0.0, 0.0))
    assert math.isclose(ActorSample(1, (PackedSequence((1, 2), (False, True), (0.0, -1.0)),), 0, "x").edge_tokens, 1)
