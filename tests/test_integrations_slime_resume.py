"""--partial-rollout resumes trees: an aborted tree's partial tree is kept on its source
sample and the next rollout continues it (tests/slime_contract/rollout.py's abort and
generate_and_rm, as Slime runs them)."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from focus_go.sim import SimServer

from slime_contract import Sample
from slime_contract import rollout as slime
from collectors import math_collector
from test_integrations_slime_rollout import generate_state, generated, hook, slime_args, slime_groups  # noqa: F401 (fixtures)

BUDGET = 32


def deep_collector_for(policy, problem):
    """Four warmup rollouts, then branching rounds up to a budget of 32: an abort after
    the warmup leaves finished rollouts to keep."""
    return math_collector(policy, problem, segment=16, budget=BUDGET, warmup=4)


def aborted_rollout(server, args, groups, requests):
    """Slime's abort() once the server has had `requests` /generate requests: the groups
    handed back."""

    async def rollout():
        st = slime.state(args)
        st.submit_generate_tasks(groups)
        deadline = asyncio.get_running_loop().time() + 30
        while generated(server) < requests and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.005)
        assert generated(server) >= requests, f"only {generated(server)} requests in 30 s"
        return await slime.abort(args, 7, [server.url])

    return asyncio.run(rollout())


def next_rollout(args, groups):
    slime.state(args).reset()

    async def run():
        return await asyncio.gather(*(slime.generate_and_rm_group(args, g, {}) for g in groups))

    return asyncio.run(run())


def kept_of(partial):
    nodes = json.loads(partial)["nodes"][1:]
    kept = [n for n in nodes if not n["failed"]]
    return kept, sum(1 for n in kept if n["done"] or n["truncated"])


@pytest.mark.parametrize("mask", [False, True])
def test_partial_rollout_resumes_an_aborted_tree(generate_state, hook, mask):
    with SimServer(seed=0, latency={"per_token": 0.004}) as server:
        hook(deep_collector_for)
        args = slime_args(server, partial_rollout=True, mask_offpolicy_in_partial_rollout=mask)
        groups = slime_groups(server, n_groups=2)
        handed_back = aborted_rollout(server, args, groups, 120)
        partials = {}
        for group in handed_back:
            for tree in group:
                assert tree.status == Sample.Status.ABORTED and list(tree) == [tree.source]
                partial = tree.metadata.get("focus_partial_tree")
                if partial is not None:
                    partials[tree.index] = partial
                    # Slime's abort saw a partial response and recorded when it began.
                    assert tree.metadata["start_rollout_id"] == 7 and tree.response
        assert partials, "no aborted tree kept any work"

        again = next_rollout(args, handed_back)
        saved = 0
        for group in again:
            for tree in group:
                assert tree.status == Sample.Status.COMPLETED and len(tree) > 1
                assert "focus_partial_tree" not in tree.source.metadata and tree.source.response == ""
                focus = tree[0].metadata["focus"]
                assert focus["finished_rollouts"] <= BUDGET
                if tree.index not in partials:
                    assert "rollouts_resumed" not in focus and "tokens_resumed" not in focus
                    continue
                kept, finished = kept_of(partials[tree.index])
                assert focus["rollouts_resumed"] == finished
                assert focus["tokens_resumed"] == sum(sum(sum(s["trainable"]) for s in n["spans"]) for n in kept)
                saved += focus["tokens_resumed"]
                old = [s for s in tree if s.metadata["focus"]["off_policy_tokens"] > 0]
                new = [s for s in tree if s.metadata["focus"]["off_policy_tokens"] == 0]
                assert old and new
                for s in old:
                    cut = s.metadata["focus"]["off_policy_tokens"]
                    # The earlier collection's tokens are masked only under the flag; what
                    # was generated after the resume trains.
                    assert (s.loss_mask[:cut] == [0] * cut) == mask
                    assert any(s.loss_mask[:cut]) != mask
                for s in new:
                    assert any(s.loss_mask)
        assert saved > 0
        print(f"generated tokens resumed instead of generated again: {saved}")


def test_a_partial_tree_that_cannot_be_resumed_is_collected_again(server, generate_state, hook, caplog):
    generate = hook(deep_collector_for)
    args = slime_args(server, partial_rollout=True, n_samples_per_prompt=1)
    [[sample]] = slime_groups(server, n=1)
    # A partial tree of another problem, as if stored by an earlier aborted rollout.
    bogus = json.dumps({"problem_id": "g0-i99", "nodes": [{"id": 0, "parent": -1, "children": [], "depth": 0,
                        "spans": [{"tokens": [1], "trainable": [False], "logprobs": [0.0]}]}], "stats": {}})
    sample.metadata["focus_partial_tree"] = bogus
    with caplog.at_level(logging.WARNING):
        tree = asyncio.run(generate(args, sample, {}))
    assert tree.status == Sample.Status.COMPLETED and len(tree) > 1
    assert all(s.metadata["focus"]["resume_restarted"] for s in tree)
    assert "cannot be resumed" in caplog.text and "collecting the tree again from scratch" in caplog.text
    assert "focus_partial_tree" not in sample.metadata

    from focus.integrations.slime import log_rollout

    metrics = {}
    log_rollout(0, args, list(tree), metrics, 0.0)
    assert metrics["rollout/focus/resume_restarted"] == 1.0


def test_without_partial_rollout_nothing_is_kept(generate_state, hook):
    with SimServer(seed=0, latency={"per_token": 0.004}) as server:
        hook(deep_collector_for)
        args = slime_args(server)
        groups = slime_groups(server, n_groups=1)
        aborted_rollout(server, args, groups, 60)
        assert all("focus_partial_tree" not in s.metadata for s in groups[0])
