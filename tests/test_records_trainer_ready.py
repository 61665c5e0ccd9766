"""Issue 35: each actor record carries what the trainer adapters need, built once in Go:
``response_start`` (where the trained response starts in ``tokens``), ``response_text``
(that response decoded once with the collection's tokenizer), ``return`` (the rewards on
the record's path) and ``finished`` (its edge ends a finished rollout). The Slime and
Tinker adapters build their samples and datums from them without re-deriving anything,
and those samples and datums are the ones they built before (digests recorded before the
change, by ``trainer_snapshots.py``)."""

from __future__ import annotations

import json

import pytest

from focus_go import DirectBranchTd, RewardConfig
from focus_go._records import tree_records
from focus_go.backends import SGLangPolicy
from focus_go.errors import ConfigError
from focus_go.tree import SchedulerState, SchedulerView

from collectors import collect_tree, math_collector
from trainer_snapshots import slime_snapshots, snapshot_digests, tinker_snapshots

NEW_KEYS = ["response_start", "response_text", "return", "finished", "off_policy_tokens", "weight_versions"]

# trainer_snapshots.py's digests of the Slime samples and Tinker datums, taken before the
# records carried these keys (the adapters derived them, and decoded each sample's text
# through a C call).
# The Slime generate cases were taken again when the samples gained the tree's
# truncated_rollouts, outcomes_differ and rollout_tokens (metadata["focus"]) and its prefix
# reuse in the first sample's prefix_cache_info (issue 37); with those reset the samples
# gave the digests before (dropped a52b261887c029db, paths_skip_special a39d090aed843927,
# spans 65ab1317bb13e2c2). They were taken again when each sample gained its record's
# weight versions (metadata["focus"]["weight_versions"] and Slime's own weight_versions
# field, ["default"] on the simulated server); with both reset to [] the samples gave the
# digests before (dropped 2816cf1756aa9e86, paths_skip_special 231790b53bccb4b7, spans
# 6974f1049d750e18).
SLIME_BEFORE = {
    "dropped": "4e7ede3ac7f41cc8",
    "evaluate": "e3c0c42938f50a01",
    "paths_skip_special": "0ab5ab3c7c776acd",
    "spans": "ad7aa3c542966388",
}
TINKER_BEFORE = {
    "datums_paths": "591f8623fe3729a4",
    "datums_spans": "9356ae59643f2559",
    "train_datums": "74fc96a020c0782c",
    "train_stats": "f788ca80ec226134",
}


def test_slime_samples_are_unchanged(server):
    assert snapshot_digests(slime_snapshots(server)) == SLIME_BEFORE


def test_tinker_datums_and_stats_are_unchanged(server):
    pytest.importorskip("tinker")
    pytest.importorskip("numpy")
    assert snapshot_digests(tinker_snapshots(server)) == TINKER_BEFORE


@pytest.fixture
def policy(server):
    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
    yield p
    p.close()


def _reference(view):
    """Per node, from the full tree: the return of its path and whether it finished."""
    returns, finished = {}, {}
    for node in view.nodes:
        total, n = 0.0, node
        path = []
        while n.parent is not None:
            path.append(n)
            n = view.node(n.parent)
        for n in reversed(path):
            total += float(n.reward)
        returns[node.id] = total
        finished[node.id] = bool(node.terminal and not node.failed)
    return returns, finished


@pytest.mark.parametrize("layout", ["spans", "paths"])
@pytest.mark.parametrize("skip", [False, True])
def test_record_fields_from_the_full_length_tokens(server, policy, layout, skip):
    """Every actor record's new keys against a reference computed here from its full-length
    tokens and the tree: the first trained token, its tokens from there decoded by the
    policy (what the Slime hook did per sample), the path's summed rewards, terminal and
    not failed; and the tree's finished rollouts and generated tokens."""
    problem = server.problems()[1]
    collector = math_collector(policy, problem)

    with collect_tree(collector, problem) as state:
        view = SchedulerView(state)
        records = tree_records(
            state, reward_config=RewardConfig(), estimator=DirectBranchTd(), group_index=3, layout=layout,
            tokenizer=policy.format.codec.tokenizer, skip_special_tokens=skip,
        )
        plain = tree_records(state, reward_config=RewardConfig(), estimator=DirectBranchTd(), group_index=3, layout=layout)
    returns, finished = _reference(view)
    assert records.actor and len(records.actor) == len(plain.actor)
    ended = 0
    for record, without_text in zip(records.actor, plain.actor):
        tokens, mask = record["tokens"], record["loss_mask"]
        start = mask.index(True) if True in mask else len(mask)
        assert list(record)[-(len(NEW_KEYS) + (layout == "paths")):][: len(NEW_KEYS)] == NEW_KEYS
        assert record["response_start"] == start
        assert record["response_text"] == policy.decode(tokens[start:], skip_special_tokens=skip)
        assert record["return"] == returns[record["node_id"]]
        assert record["finished"] is finished[record["node_id"]]
        assert record["off_policy_tokens"] == 0  # a tree never resumed
        assert record["weight_versions"] == ["default"]  # the simulated server's weights
        ended += record["finished"]
        assert without_text == {**record, "response_text": None}
    assert ended, "some record ends a finished rollout"
    leaves = [n for n in view.nodes if finished[n.id]]
    assert [(r.node_id, r.outcome, r.done, r.segments) for r in records.rollouts] == [
        (n.id, returns[n.id], n.done, n.depth) for n in leaves
    ]
    assert records.sampled_tokens == sum(sum(s.trainable) for n in view.nodes for s in n.spans)


def test_batch_records_carry_the_keys_without_text(server, policy):
    """Batch.to_records has no tokenizer: response_text is None; the other keys are set, in
    the library's key order after the keys users already had."""
    problem = server.problems()[0]
    collector = math_collector(policy, problem)

    with collect_tree(collector, problem) as state:
        batch = collector.prepare(state)
        records = [r for r in batch.to_records(0) if r["lane"] == "actor"]
    assert list(records[0])[-len(NEW_KEYS):] == NEW_KEYS
    assert all(r["response_text"] is None for r in records)
    assert all(r["response_start"] == r["loss_mask"].index(True) for r in records)


def _versions_reference(view, versions, record):
    """The distinct weight versions of the edges holding ``record``'s response (tokens
    ``response_start`` to its end), in path order, from the tree's edges."""
    path, node = [], view.node(record["node_id"])
    while node.parent is not None:
        path.append(node)
        node = view.node(node.parent)
    start, end, out = record["response_start"], len(record["tokens"]), []
    for n in reversed(path):
        lo, hi = len(view.node(n.parent).context_tokens), len(n.context_tokens)
        v = versions.get(n.id)
        if v and lo < end and hi > start and v not in out:
            out.append(v)
    return out


@pytest.mark.parametrize("layout", ["spans", "paths"])
def test_records_name_the_weight_versions_of_their_response(server, policy, layout):
    """A tree whose edges came from two weight versions (the server's "default", then
    "step-2" on every edge below depth 1): each actor record names the distinct versions
    of the edges holding its response, in path order; a tree whose server reported no
    version gives records naming none."""
    problem = server.problems()[1]
    collector = math_collector(policy, problem)

    with collect_tree(collector, problem) as state:
        data = json.loads(state.to_json())
    versions = {}
    for i, node in enumerate(data["nodes"]):
        assert i == 0 or node["weight_version"] == "default"
        if node.get("parent", -1) > 0:
            node["weight_version"] = "step-2"
        versions[i] = node.get("weight_version")
    assert "step-2" in versions.values()
    with SchedulerState.from_json(json.dumps(data)) as mixed:
        view = SchedulerView(mixed)
        records = tree_records(mixed, reward_config=RewardConfig(), estimator=DirectBranchTd(), group_index=0, layout=layout)
    assert records.actor
    seen = set()
    for record in records.actor:
        want = _versions_reference(view, versions, record)
        assert record["weight_versions"] == want, record["node_id"]
        seen.add(tuple(want))
    assert ("step-2",) in seen and (("default", "step-2") in seen) == (layout == "paths")

    for node in data["nodes"]:
        node.pop("weight_version", None)
    with SchedulerState.from_json(json.dumps(data)) as unversioned:
        records = tree_records(unversioned, reward_config=RewardConfig(), estimator=DirectBranchTd(), group_index=0, layout=layout)
    assert records.actor and all(r["weight_versions"] == [] for r in records.actor)


def test_to_sample_takes_the_records_response():
    from focus.integrations.slime import to_sample

    from slime_contract import Sample

    record = {
        "tokens": [1, 2, 10, 11], "loss_mask": [False, False, True, True], "behavior_logprobs": [0.0, 0.0, -0.5, -0.25],
        "advantage": 0.5, "lane": "actor", "group_index": 0, "estimator": "DirectBranchTd", "node_id": 2,
        "search_pass": 0, "problem_id": "p", "response_start": 2, "response_text": "from Go", "return": 1.0, "finished": True,
    }
    source = Sample(group_index=0, index=4, prompt="q")
    out = to_sample(record, source, None, Sample)
    assert (out.response, out.response_length, out.loss_mask) == ("from Go", 2, [1, 1])
    # A record without text (Batch.to_records) is decoded with the tokenizer given.
    assert to_sample({**record, "response_text": None}, source, lambda ids: str(ids), Sample).response == "[10, 11]"
    with pytest.raises(ConfigError, match="no response_start"):
        to_sample({k: v for k, v in record.items() if k != "response_start"}, source, None, Sample)


def test_the_adapters_derive_nothing_again():
    """The functions that re-derived what Go exports are gone."""
    import focus_go.integrations._outcomes as outcomes
    import focus_go.integrations.slime.samples as samples
    import focus_go.integrations.slime.settings as settings

    assert not hasattr(outcomes, "outcomes"), "finished rollouts and returns come from Go"
    assert not hasattr(settings, "_response_text"), "the response text is decoded in Go"
    assert not hasattr(samples, "_decode")
