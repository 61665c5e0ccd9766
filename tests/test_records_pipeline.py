"""The records pipeline: one Go call from a collected tree to trainer records
(``tree_records``, what collect_records, the Slime and Tinker integrations and the CLI use)
must give exactly the records prepare_samples + Batch.to_records give; the record keys come
from the library; the spans of a prepared sample cross in the columnar format; and the one
JSONL writer writes what the files have always held."""

from __future__ import annotations

import ctypes
import json
import math

import pytest

from focus_go import ActorSample, Batch, DirectBranchTd, GroupBaseline, RewardConfig, _lib
from focus_go._records import jsonl, tree_records
from focus_go.errors import FocusError
from focus_go.extend import SchedulerState
from focus_go.preparation import prepare_samples
from focus_go.tree import PackedSequence
from focus_go.types import ESTIMATOR_KEY, LANE_KEY


@pytest.fixture
def searched(selftest):
    """A Selective-shaped tree: 16 rollouts of 4 segments of 8 tokens."""
    with SchedulerState(_lib.call_handle("focus_selftest_search_tree", 16, 4, 8, 3)) as s:
        yield s


def _close(batch):
    if batch._go is not None:
        batch._go.close()


@pytest.mark.parametrize("estimator", [DirectBranchTd(), GroupBaseline(), None])
@pytest.mark.parametrize("min_abs", [None, 0.05, 1e9])
def test_tree_records_equal_prepare_then_to_records(searched, estimator, min_abs):
    cfg = RewardConfig(gamma=0.9, critic_weight=2)
    batch = prepare_samples(searched, reward_config=cfg, estimator=estimator)
    try:
        want = batch.to_records(7, min_abs_advantage=min_abs)
        weights = [a.weight for a in batch.actor]
        stats = dict(batch.stats)
    finally:
        _close(batch)
    got = tree_records(searched, reward_config=cfg, estimator=estimator, group_index=7, min_abs_advantage=min_abs)
    assert got.actor + got.critic == want
    assert all(r["lane"] == "actor" for r in got.actor) and all(r["lane"] == "critic" for r in got.critic)
    assert got.sample_weights == weights, "every sample's weight, whatever the threshold dropped"
    assert got.stats == stats
    assert got.failures == ()
    if min_abs == 1e9:
        assert got.actor == [] and got.critic
    # Byte for byte the same JSONL.
    assert jsonl(got.actor + got.critic) == jsonl(want)


def test_tree_records_refuses_a_bad_threshold(searched):
    with pytest.raises(FocusError, match="min_abs_advantage is -1, must be >= 0"):
        tree_records(searched, reward_config=RewardConfig(), estimator=DirectBranchTd(), group_index=0, min_abs_advantage=-1.0)


def _export_layout(batch):
    layout_ptr, blob, size = _lib.Bytes(), ctypes.c_void_p(), ctypes.c_size_t()
    with batch._go_batch() as go:
        _lib.call("focus_batch_export", _lib.c_handle(go.handle), 0, 0.0, *_lib.text_arg(""), 0, ctypes.byref(layout_ptr), ctypes.byref(blob), ctypes.byref(size))
    _lib.lib().focus_buffer_free(blob)
    return json.loads(_lib.take_string(layout_ptr))


def test_record_keys_come_from_the_library(searched):
    batch = prepare_samples(searched, reward_config=RewardConfig(), estimator=DirectBranchTd())
    try:
        layout = _export_layout(batch)
        records = batch.to_records(0)
    finally:
        _close(batch)
    actor_keys, critic_keys = layout["actor_keys"], layout["critic_keys"]
    assert actor_keys == ["tokens", "loss_mask", "behavior_logprobs", "advantage", "lane", "group_index", "estimator",
                          "node_id", "search_pass", "problem_id", "response_start", "response_text", "return", "finished",
                          "off_policy_tokens", "weight_versions"]
    assert critic_keys == ["context", "target", "lane", "group_index", "node_id", "problem_id"]
    assert ESTIMATOR_KEY in actor_keys and LANE_KEY in actor_keys and LANE_KEY in critic_keys
    assert [list(r) for r in records if r["lane"] == "actor"] == [actor_keys] * sum(r["lane"] == "actor" for r in records)
    assert [list(r) for r in records if r["lane"] == "critic"] == [critic_keys] * sum(r["lane"] == "critic" for r in records)


def test_prepared_spans_cross_as_columns(searched):
    batch = prepare_samples(searched, reward_config=RewardConfig(), estimator=DirectBranchTd())
    try:
        records = [r for r in batch.to_records(0) if r["lane"] == "actor"]
        spans = [s for a in batch.actor for s in a.spans]
    finally:
        _close(batch)
    # Each span is one actor record: the same tokens, mask and logprobs.
    assert [(list(s.tokens), list(s.trainable), list(s.logprobs)) for s in spans] == [
        (r["tokens"], r["loss_mask"], r["behavior_logprobs"]) for r in records
    ]
    assert all(type(t) is int for s in spans for t in s.tokens)
    assert all(type(t) is bool for s in spans for t in s.trainable)


def test_explicit_batch_spans_round_trip():
    """A Python-made batch crosses as JSON into Go's own sample type and its spans come back
    through the columnar format, including a sample without spans."""
    span = PackedSequence((1, 2, 3), (False, True, True), (0.0, -0.5, -0.25))
    batch = Batch(actor=(ActorSample(node_id=1, spans=(span, span), group_id=0, estimator="Custom", weight=0.5),
                         ActorSample(node_id=2, spans=(), group_id=0, estimator="Custom", weight=-1.0, search_pass=3)))
    records = batch.to_records(2)
    assert [(r["tokens"], r["loss_mask"], r["node_id"], r["search_pass"]) for r in records] == [
        ([1, 2, 3], [False, True, True], 1, None), ([1, 2, 3], [False, True, True], 1, None)]
    # Go checks each span's lengths (a Python PackedSequence already refuses them).
    bad = json.dumps({"problem_id": "", "critic": [], "failures": [], "actor": [
        {"node_id": 1, "group_id": 0, "estimator": "x", "weight": 0.0, "diagnostics": {}, "search_pass": None,
         "spans": [{"tokens": [1, 2], "trainable": [True], "logprobs": [0.0, 0.0]}]}]}).encode()
    with pytest.raises(FocusError, match=r"actor\[0\]\.spans\[0\] has 2 tokens, 1 trainable flags and 2 logprobs"):
        _lib.call_handle("focus_batch_from_json", bad, len(bad))


def test_jsonl_is_the_record_files_format():
    records = [{"context": "naïve \u2028 \"q\"\n", "target": 0.1, "lane": "critic", "group_index": 0, "node_id": 1, "problem_id": None}]
    text = jsonl(records)
    assert text == json.dumps(records[0], ensure_ascii=False, allow_nan=False) + "\n"
    assert "naïve" in text and text.count("\n") == 1
    assert jsonl([]) == ""
    with pytest.raises(ValueError):
        jsonl([{"target": math.nan}])
