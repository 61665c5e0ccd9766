"""Collector.collect(resume=...): a collection continues an aborted or cancelled one's
partial tree against the simulated server."""

from __future__ import annotations

import asyncio
import json

import pytest

from focus_go import Agent, Collector, Critic, DirectBranchTd, MathEnv, RewardConfig, Segments, Selective
from focus_go._bridge import _cancelled_trees
from focus_go._records import tree_records
from focus_go.backends import GenerateResult, Policy, SamplingParams, SGLangPolicy
from focus_go.errors import CollectionError, ConfigError
from focus_go.extend import SchedulerView
from focus_go.integrations import Problem

SAMPLING = SamplingParams(temperature=1.0)
BUDGET, WARMUP = 12, 4


@pytest.fixture
def policy(server):
    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SAMPLING)
    yield p
    p.close()


def collector_of(policy, problem, complete=None, **options):
    if complete is not None:
        policy = Policy(format=policy.format, complete=complete, default_params=SAMPLING)
    agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(16))
    return Collector(agent, critic=Critic.constant(0.5), search=Selective(BUDGET, WARMUP, seed=3), **options)


def aborted_after(policy, calls):
    """A completion function that answers as the server does for `calls` calls, then with an
    "abort" finish (a trainer that aborted its rollout)."""
    seen = []

    async def complete(tokens, params):
        seen.append(1)
        if len(seen) > calls:
            return GenerateResult(tokens=(11,), prefix_tokens=tuple(tokens), text="x", stop_reason="abort", logprobs=[-0.5])
        return await policy.agenerate_tokens(tokens, params)

    return complete


def partial_tree(policy, problem, calls):
    collector = collector_of(policy, problem, aborted_after(policy, calls), stop_on_abort=True)
    with pytest.raises(CollectionError, match="aborted") as info:
        asyncio.run(collector.collect(problem))
    return info.value.state


def test_resume_keeps_the_partial_tree_and_spends_the_rest(server, policy):
    problem = server.problems()[4]
    partial = partial_tree(policy, problem, 24)
    before = SchedulerView(partial)
    kept = [n for n in before.nodes[1:] if n.failed is None]
    finished = sum(1 for n in kept if n.terminal)
    assert kept and finished < BUDGET

    with asyncio.run(collector_of(policy, problem).collect(problem, resume=partial)) as state:
        view = SchedulerView(state)
        # The kept nodes come first, marked; the new ones follow, unmarked.
        assert [n.tokens for n in view.nodes[1 : 1 + len(kept)]] == [n.tokens for n in kept]
        assert all(n.off_policy for n in view.nodes[1 : 1 + len(kept)])
        assert not any(n.off_policy for n in view.nodes[1 + len(kept) :])
        assert_off_policy_tokens(state, view)
        stats = state.stats
        assert stats["rollouts"] == BUDGET and stats["budget_unspent"] == 0
        assert stats["rollouts_resumed"] == finished and stats["resumes"] == 1
        assert stats["tokens_resumed"] == sum(sum(s.trainable.count(True) for s in n.spans) for n in kept)
    # The JSON text resumes the same way.
    text = partial.to_json()
    partial.close()
    with asyncio.run(collector_of(policy, problem).collect(problem, resume=text)) as again:
        assert json.loads(again.to_json())["nodes"] == json.loads(state_json(policy, problem, text))["nodes"]


def assert_off_policy_tokens(state, view):
    """Each actor record counts, in ``off_policy_tokens``, the tokens of its response that
    the kept (off-policy) nodes on its path hold, in both layouts: here the reference walks
    the tree through the view."""
    ends = {}  # node -> context length through its deepest off-policy node, 0 when none
    for n in view.nodes:
        ends[n.id] = len(n.context_tokens) if n.off_policy else (ends[n.parent] if n.parent is not None else 0)
    for layout in ("spans", "paths"):
        records = tree_records(state, reward_config=RewardConfig(), estimator=DirectBranchTd(), group_index=0, layout=layout)
        counts = []
        for r in records.actor:
            start = r["response_start"]
            want = min(max(ends[r["node_id"]] - start, 0), len(r["tokens"]) - start)
            assert r["off_policy_tokens"] == want, (layout, r["node_id"])
            counts.append(want)
        assert any(counts) and not all(counts), layout  # records of kept nodes and of new ones


def state_json(policy, problem, resume):
    with asyncio.run(collector_of(policy, problem).collect(problem, resume=resume)) as state:
        return state.to_json()


def test_resume_refuses_another_problem_and_bad_input(server, policy):
    problem = server.problems()[4]
    other = Problem(prompt=problem.prompt, label=problem.label, id="another")
    with partial_tree(policy, problem, 24) as partial:
        with pytest.raises(ConfigError, match=f'collect: resume: the tree is of problem "{problem.id}", this collection is of problem "another"'):
            asyncio.run(collector_of(policy, other).collect(other, resume=partial))
    with pytest.raises(ConfigError, match="resume must be a SchedulerState or its JSON text, got int"):
        asyncio.run(collector_of(policy, problem).collect(problem, resume=3))
    with pytest.raises(ConfigError, match="resume is not a tree's JSON"):
        asyncio.run(collector_of(policy, problem).collect(problem, resume="[1]"))


def test_a_collection_cancelled_from_python_leaves_its_tree_to_the_sink(server, policy):
    problem = server.problems()[4]
    calls = []

    async def slow_after_some(tokens, params):
        calls.append(1)
        if len(calls) > 24:
            await asyncio.Event().wait()
        return await policy.agenerate_tokens(tokens, params)

    async def run():
        sink = []
        token = _cancelled_trees.set(sink)
        try:
            task = asyncio.ensure_future(collector_of(policy, problem, slow_after_some).collect(problem))
            while len(calls) <= 24:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            _cancelled_trees.reset(token)
        return sink

    sink = asyncio.run(run())
    assert len(sink) == 1
    with sink[0] as state:
        assert len(state) > 1
        with asyncio.run(collector_of(policy, problem).collect(problem, resume=state)) as resumed:
            assert resumed.stats["rollouts"] == BUDGET


def collect_with(policy, problem, env, segments, resume):
    agent = Agent(policy=policy, env=env, context=Segments(segments))
    collector = Collector(agent, critic=Critic.constant(0.5), search=Selective(BUDGET, WARMUP, seed=3))
    return asyncio.run(collector.collect(problem, resume=resume))


def test_resume_regrades_the_kept_rollouts_with_its_env(server, policy):
    # A MathEnv of another label grades the kept rollouts again: no reward of the old
    # label survives beside the new ones, and the change is counted.
    problem = server.problems()[4]
    partial = partial_tree(policy, problem, 24)
    kept = [n for n in SchedulerView(partial).nodes[1:] if n.failed is None and n.terminal]
    right = [n for n in kept if n.reward == 1.0]
    assert right, "the partial tree needs a rewarded rollout"
    wrong_label = r"\boxed{-12345}"
    with collect_with(policy, problem, MathEnv(wrong_label, policy.decode), 16, partial) as state:
        view = SchedulerView(state)
        assert all(n.reward == 0.0 for n in view.nodes if n.terminal and n.failed is None)
        assert state.stats["rewards_regraded"] == len(right)
    # A reward edited in the saved state is not trained on: the env grades it again.
    data = json.loads(partial.to_json())
    leaf = next(n for n in data["nodes"] if n["done"] and not n["failed"])
    leaf["reward"] = 1.0 - leaf["reward"]
    with collect_with(policy, problem, MathEnv(problem.label, policy.decode), 16, json.dumps(data)) as state:
        assert state.stats["rewards_regraded"] == 1
        assert SchedulerView(state).nodes[leaf["id"]].reward == 1.0 - leaf["reward"]
    partial.close()


@pytest.mark.parametrize("segments", [8, 64])
def test_resume_refuses_another_segment_rule(server, policy, segments):
    problem = server.problems()[4]
    partial = partial_tree(policy, problem, 24)
    try:
        assert partial.stats["segment_rule"] == "Segments(16)"
        with pytest.raises(ConfigError, match=rf"cut by Segments\(16\), this collection cuts by Segments\({segments}\)"):
            collect_with(policy, problem, MathEnv(problem.label, policy.decode), segments, partial)
    finally:
        partial.close()


def test_resume_refuses_a_tree_that_keeps_nothing(server, policy):
    problem = server.problems()[4]
    partial = partial_tree(policy, problem, 0)  # the first call is aborted: every node failed
    try:
        assert all(n.failed for n in SchedulerView(partial).nodes[1:])
        with pytest.raises(ConfigError, match="the tree keeps nothing"):
            asyncio.run(collector_of(policy, problem).collect(problem, resume=partial))
    finally:
        partial.close()
