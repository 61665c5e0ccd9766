"""The path record layout (``Batch.to_records(..., layout="paths")``): one actor record per
root-to-leaf path with per-token ``advantages``. On random trees, the multiset of trained
token terms (full prefix, token, behaviour log-prob, advantage) must be exactly the
per-span layout's, so a trainer that sums token losses gets the same gradient; the tokens
sent are the sum of the leaf paths; the one-call pipeline (``tree_records``) and factories
take the layout; and Tinker's ``to_datum`` reads the per-token advantages."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from focus_go import ActorSample, Batch, DirectBranchTd, RewardConfig
from focus_go._records import tree_records
from focus_go.errors import ConfigError, ConfigTypeError
from focus_go.export import to_samples
from focus_go.extend import SchedulerState
from focus_go.preparation import prepare_samples
from focus_go.tree import PackedSequence
from trees import figure61, random_tree


def terms(records):
    """The multiset of trained token terms: (prefix, token, behaviour log-prob, advantage)."""
    out = Counter()
    for r in records:
        advs = r.get("advantages")
        for j, m in enumerate(r["loss_mask"]):
            if m:
                adv = advs[j] if advs is not None else r["advantage"]
                out[(tuple(r["tokens"][:j]), r["tokens"][j], r["behavior_logprobs"][j], adv)] += 1
            elif advs is not None:
                assert advs[j] == 0.0 and r["behavior_logprobs"][j] == 0.0
    return out


def leaf_tokens(state) -> int:
    from focus_go.extend import SchedulerView

    return sum(len(n.context_tokens) for n in SchedulerView(state).nodes if not n.children)


@pytest.mark.parametrize("seed", range(40))
def test_same_trained_terms_random_trees(seed):
    rng = random.Random(seed)
    with SchedulerState.from_json(random_tree(rng)) as state:
        batch = prepare_samples(state, reward_config=RewardConfig(critic_weight=rng.choice([0.0, 1.0, 4.0])), estimator=DirectBranchTd())
        min_abs = rng.choice([None, None, 0.1])
        spans = [r for r in batch.to_records(seed, min_abs_advantage=min_abs) if r["lane"] == "actor"]
        paths_all = batch.to_records(seed, min_abs_advantage=min_abs, layout="paths")
        paths = [r for r in paths_all if r["lane"] == "actor"]
        assert terms(paths) == terms(spans)
        assert [r for r in paths_all if r["lane"] == "critic"] == [r for r in batch.to_records(seed) if r["lane"] == "critic"]
        for r in paths:
            assert len(r["advantages"]) == len(r["tokens"]) == len(r["loss_mask"]) == len(r["behavior_logprobs"])
            assert set(r) == set(spans[0]) | {"advantages"}
        sent = sum(len(r["tokens"]) for r in paths)
        assert sent <= leaf_tokens(state)
        assert sent <= sum(len(r["tokens"]) for r in spans)
        if min_abs is None:
            # Every leaf edge has generated tokens and trains: exactly the floor.
            assert sent == leaf_tokens(state)


def test_figure61_paths():
    with SchedulerState.from_json(figure61()) as state:
        batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
        weight = {a.node_id: a.weight for a in batch.actor}
        # Unweighted, so each token carries its edge's weight (the factors: below).
        recs = [r for r in batch.to_records(2, layout="paths", visitation_weights=False) if r["lane"] == "actor"]
        assert [r["node_id"] for r in recs] == [3, 4, 5, 6]
        first = recs[0]
        n = len(first["tokens"])
        # Leaf 3's record owns edges a (node 1) and its own; the prompt is context.
        assert first["advantage"] == weight[3]
        assert [a for a, m in zip(first["advantages"], first["loss_mask"]) if m] == [weight[1]] * (n - 4) + [weight[3]]
        assert sum(recs[1]["loss_mask"]) == 1, "leaf 4's record trains only its own edge"
        assert sum(len(r["tokens"]) for r in recs) == leaf_tokens(state)

        seen = []

        def factory(*, span, logprobs, reward, lane, group_index, **extra):
            seen.append((span, reward, extra["advantages"], extra["node_id"]))
            return extra["node_id"]

        out = to_samples(batch, 2, sample_factory=factory, layout="paths", visitation_weights=False)
        assert out[:4] == [3, 4, 5, 6]
        assert seen[0][0] == PackedSequence(tuple(first["tokens"]), tuple(first["loss_mask"]), tuple(first["behavior_logprobs"]))
        assert seen[0][1] == weight[3] and seen[0][2] == first["advantages"]


def test_tree_records_paths_equal_batch_paths():
    with SchedulerState.from_json(random_tree(random.Random(7))) as state:
        cfg = RewardConfig()
        want = prepare_samples(state, reward_config=cfg, estimator=DirectBranchTd()).to_records(3, layout="paths")
        got = tree_records(state, reward_config=cfg, estimator=DirectBranchTd(), group_index=3, layout="paths")
        assert got.actor + got.critic == want


def test_layout_errors():
    with SchedulerState.from_json(figure61()) as state:
        batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
        with pytest.raises(ConfigError, match='layout is "leaves", must be "spans" or "paths"'):
            batch.to_records(0, layout="leaves")
        with pytest.raises(ConfigTypeError, match="layout must be a str"):
            batch.to_records(0, layout=1)
    span = PackedSequence(tokens=(10, 20), trainable=(False, True), logprobs=(0.0, -0.5))
    explicit = Batch(actor=(ActorSample(node_id=1, spans=(span,), group_id=0, estimator="DirectBranchTd", weight=0.4),))
    with pytest.raises(ConfigError, match="needs samples prepared from a tree"):
        explicit.to_records(0, layout="paths")
    assert explicit.to_records(0)[0]["advantage"] == 0.4, "the per-span layout stays the default"


@pytest.mark.parametrize("seed", range(12))
def test_visitation_weights_apply_per_token_in_paths(seed):
    """visitation_weights=True scales each trained token by its own edge's
    factor in the path layout: the same trained terms as the weighted per-span records, whose
    advantages are weight * visitation."""
    rng = random.Random(seed)
    with SchedulerState.from_json(random_tree(rng)) as state:
        batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
        factor = {a.node_id: a.visitation for a in batch.actor}
        weight = {a.node_id: a.weight for a in batch.actor}
        spans = [r for r in batch.to_records(0, visitation_weights=True) if r["lane"] == "actor"]
        paths = [r for r in batch.to_records(0, layout="paths", visitation_weights=True) if r["lane"] == "actor"]
        assert all(r["advantage"] == weight[r["node_id"]] * factor[r["node_id"]] for r in spans)
        assert terms(paths) == terms(spans)
        plain = [r for r in batch.to_records(0, layout="paths", visitation_weights=False) if r["lane"] == "actor"]
        assert [r for r in batch.to_records(0, layout="paths") if r["lane"] == "actor"] == plain, "unweighted by default"
        if any(f != 1.0 and weight[n] != 0.0 for n, f in factor.items()):
            assert terms(paths) != terms(plain), "a factor other than 1 changes some token's advantage"
