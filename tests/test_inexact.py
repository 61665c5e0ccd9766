"""Policy(exact=False) and responses without exact provenance train no actor (issue #15 item 9).

The spec (generation.txt: "Exact actor-training spans require a backend that preserves exact
token IDs") is checked through the public API: a collection with an inexact policy records
every edge as inexact, prepares no actor sample (Batch.failures says why for each edge), keeps
every critic target, and evaluates rewards as usual.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math

import pytest

from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
from focus_go.backends import Policy, SamplingParams, SGLangPolicy
from focus_go.extend import SchedulerView

SAMPLING = SamplingParams(temperature=1.0)


@pytest.fixture
def policy(server):
    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SAMPLING)
    yield p
    p.close()


def _forwarding(go_policy, *, exact=True, edit=None):
    """A custom Completion policy over the Go transport; ``edit`` rewrites each result."""

    async def complete(tokens, params):
        result = await go_policy.agenerate_tokens(tokens, params)
        return edit(result) if edit else result

    return Policy(format=go_policy.format, model="custom", complete=complete, default_params=SAMPLING, exact=exact)


def _collect(server, policy, problem_index=2):
    problem = server.problems()[problem_index]
    agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(48))
    collector = Collector(agent, critic=Critic.constant(0.5), search=Selective(8, 4, seed=5))
    state = asyncio.run(collector.collect(problem))
    return state, collector.prepare(state)


def _assert_no_actor(state, batch, reason):
    view = SchedulerView(state)
    edges = [n for n in view.nodes if n.parent is not None]
    assert edges
    for n in edges:
        assert n.inexact and reason in n.inexact, n.inexact
        assert not any(t for s in n.spans for t in s.trainable), "an inexact edge has no trainable token"
    assert batch.actor == ()
    assert len(batch.critic) > 0, "critic targets are kept"
    assert {node for node, _ in batch.failures} == {n.id for n in edges}
    assert all(message.startswith("inexact edge: ") and reason in message for _, message in batch.failures)
    records = batch.to_records(0)
    assert records and all(r["lane"] == "critic" for r in records)
    # Evaluation still works: the leaves are graded.
    assert any(n.done and n.reward in (0.0, 1.0) for n in edges)


def test_exact_false_policy_trains_no_actor(server, policy):
    p = _forwarding(policy, exact=False)
    assert not p.trainable
    state, batch = _collect(server, p)
    _assert_no_actor(state, batch, "not token-exact")
    state.close()


def test_inexact_result_trains_no_actor(server, policy):
    p = _forwarding(policy, edit=lambda r: dataclasses.replace(r, exact_generation=False))
    state, batch = _collect(server, p)
    _assert_no_actor(state, batch, "not token-exact")
    state.close()


def test_missing_logprob_trains_no_actor(server, policy):
    def drop_first_logprob(r):
        return dataclasses.replace(r, logprobs=[math.nan] + list(r.logprobs[1:]))

    state, batch = _collect(server, _forwarding(policy, edit=drop_first_logprob))
    _assert_no_actor(state, batch, "no finite logprob")
    state.close()


def test_exact_policy_still_trains(server, policy):
    state, batch = _collect(server, _forwarding(policy))
    view = SchedulerView(state)
    assert all(n.inexact is None for n in view.nodes)
    assert len(batch.actor) == len(view.nodes) - 1
    assert batch.failures == ()
    state.close()
