"""The plain-Python reference of `make bench` (benchmarks/reference/algorithm.py) builds the
library's trainer records on its own, key for key, and the benchmark's cross-check of that
(benchmarks/run.py, section 4) stops the run when they differ. No timing assertions."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from reference import algorithm  # noqa: E402

import run  # noqa: E402  (benchmarks/run.py)


def selftest_tree(rollouts: int = 4, segments: int = 3, tokens: int = 4):
    """The benchmark's Selective-shaped tree (focus_selftest_search_tree)."""
    from focus_go import _lib
    from focus_go.tree import SchedulerState

    return SchedulerState(_lib.call_handle("focus_selftest_search_tree", rollouts, segments, tokens, 1))


def records_both(state):
    """(the reference's records, the library's), unweighted, each sorted by lane and node."""
    from focus_go import DirectBranchTd, RewardConfig
    from focus_go.preparation import prepare_samples

    tree = algorithm.from_json(json.loads(state.to_json()))
    vals = algorithm.values(tree)
    ref = algorithm.records(tree, algorithm.advantages(tree, vals), algorithm.critic_targets(tree, vals))
    lib = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd()).to_records(0, visitation_weights=False)

    def key(r):
        return r["lane"], r["node_id"]

    return sorted(ref, key=key), sorted(lib, key=key)


def test_reference_records_equal_the_librarys_key_for_key():
    """On a tree with a kept (off-policy) rollout, a reward on an inner edge, a truncated
    and a failed leaf, every record key of the library has the same value in the
    reference's record (response_start, return, finished, off_policy_tokens and
    weight_versions included)."""
    from focus_go.tree import SchedulerState

    with selftest_tree() as base:
        data = json.loads(base.to_json())
    nodes = data["nodes"]
    assert [n["parent"] for n in nodes] == [-1, 0, 1, 2, 0, 4, 5, 1, 7, 7]  # the shape edited below
    for i in (1, 2, 3):  # root -> 1 -> 2 -> 3, a rollout an earlier collection generated
        nodes[i]["off_policy"] = True
    nodes[5]["reward"] = 0.25
    for i in range(1, len(nodes)):  # the weights changed under the earlier collection's rollout
        nodes[i]["weight_version"] = "v1" if i in (1, 2, 3) else "v2" if i in (4, 5) else ""
    nodes[9]["done"], nodes[9]["truncated"] = False, True
    nodes[8]["done"], nodes[8]["failed"] = False, "the server failed"
    with SchedulerState.from_json(json.dumps(data)) as state:
        ref, lib = records_both(state)
    assert ref == lib
    actor = {r["node_id"]: r for r in lib if r["lane"] == "actor"}
    assert 8 not in actor, "a failed node has no record"
    assert [actor[i]["off_policy_tokens"] for i in (1, 2, 3, 7)] == [4, 4, 4, 0]
    assert [actor[i]["weight_versions"] for i in (1, 4, 7)] == [["v1"], ["v2"], []]
    assert (actor[6]["return"], actor[6]["finished"], actor[5]["finished"], actor[9]["finished"]) == (1.25, True, False, True)
    assert all(r["response_start"] == len(r["tokens"]) - 4 and r["response_text"] is None for r in actor.values())


def test_a_failed_cross_check_stops_the_prepare_section(monkeypatch):
    """Section 4 of `make bench` fails, naming the check, when the reference's records
    differ from the library's (here: the reference drops one key)."""
    run.crosscheck.HELD.clear()
    run.python_prepare_export([32])
    assert "prepare: the reference's records equal focus-go's, key for key (trees of at most 1,024 rollouts)" in run.crosscheck.HELD
    records = algorithm.records

    def without_finished(*args, **kwargs):
        return [{k: v for k, v in r.items() if k != "finished"} for r in records(*args, **kwargs)]

    monkeypatch.setattr(algorithm, "records", without_finished)
    with pytest.raises(AssertionError, match="cross-check failed: prepare: the reference's records equal focus-go's"):
        run.python_prepare_export([32])
