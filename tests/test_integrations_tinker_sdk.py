"""The Tinker loop driven through the real tinker SDK client classes (TrainingClient,
SamplingClient) with only the transport replaced by the service stand-in of
tinker_standin.py, so every request is built, encoded and decoded by the SDK's own code."""

from __future__ import annotations

import asyncio

import pytest

tinker = pytest.importorskip("tinker")
np = pytest.importorskip("numpy")

from tinker import types  # noqa: E402
from tinker_standin import StandinTinker  # noqa: E402

from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective  # noqa: E402
from focus_go.backends import SamplingParams, SGLangPolicy  # noqa: E402
from focus_go.integrations.tinker import to_datum, train, update_actor  # noqa: E402


@pytest.fixture
def sim_policy(server):
    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
    yield p
    p.close()


@pytest.fixture
def standin(sim_policy):
    s = StandinTinker(sim_policy)
    yield s
    s.close()


@pytest.fixture
def problems(server):
    return server.problems()[:4]


def collector_for(policy, problem):
    agent = Agent(
        policy=policy,
        env=MathEnv(problem.label, policy.decode),
        system_prompt="Solve the problem.",
        context=Segments(32),
        sampling=SamplingParams(temperature=1.0),
    )
    return Collector(agent, critic=Critic.constant(0.5), search=Selective(budget=4, warmup=2))


def run_train(standin, server, problems, **kwargs):
    client = standin.training_client()
    args = dict(model=server.model, problems=problems, collector_for=collector_for, steps=3, learning_rate=1e-5, profile="token_chunk")
    args.update(kwargs)
    return asyncio.run(train(client, **args))


RECORD = {
    "tokens": [5, 6, 7, 20, 21, 22],
    "loss_mask": [False, False, False, True, True, True],
    "behavior_logprobs": [0.0, 0.0, 0.0, -0.5, -0.25, -0.125],
    "advantage": 0.5,
    "lane": "actor",
}


def test_update_lands_on_one_clock_cycle(standin):
    # Measured with the clock-cycle model: forward_backward and optim_step submitted back
    # to back share a cycle; awaiting the gradients first (the old order) costs two.
    client = standin.training_client()
    metrics = asyncio.run(update_actor(client, [RECORD], learning_rate=1e-5))
    assert standin.update_cycles() == [["fb", "optim"]]
    assert standin.version == 1 and metrics["optim/lr"] == 1e-5 and "loss:sum" in metrics

    async def awaited_in_turn():
        datum = to_datum(RECORD)
        await client.forward_backward([datum], "ppo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2})
        await client.optim_step(types.AdamParams(learning_rate=1e-5))

    asyncio.run(awaited_in_turn())
    assert standin.update_cycles() == [["fb", "optim"], ["fb"], ["optim"]]


def test_train_one_cycle_per_update_and_fresh_samplers(server, standin, problems):
    reports = run_train(standin, server, problems, steps=4)
    assert [(r.batch, r.behavior_step, r.learner_step, r.policy_lag) for r in reports] == [
        (0, 0, 0, 0),
        (1, 0, 1, 1),
        (2, 1, 2, 1),
        (3, 2, 3, 1),
    ]
    # One cycle per update (it was two: gradients were awaited before the step went out).
    assert standin.update_cycles() == [["fb", "optim"]] * 4
    assert len(standin.trained) == 4 and standin.version == 4
    # A sampler published after an update holds its weights: the published versions are
    # 0, 1, 2 and each tree sampled only from the sampler of its behavior step.
    assert [standin.samplers[s] for s in standin.sampler_order] == [0, 1, 2]
    versions = {call.version for call in standin.sample_calls}
    assert versions == {0, 1, 2}
    # Every datum the service trained on matches what the SDK built from the records.
    for datums in standin.trained:
        for d in datums:
            assert set(d.inputs) == {"target_tokens", "logprobs", "advantages"}
            assert len(d.tokens) == len(d.inputs["target_tokens"])
    assert all(call == ("ppo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}, False) for call in standin.fb_calls)


def test_failed_gradients_fail_the_update_after_both_requests_finish(sim_policy, server, problems):
    standin = StandinTinker(sim_policy, fail_on_fb=1)
    try:
        with pytest.raises(Exception, match="forward_backward 1 failed"):
            run_train(standin, server, problems, steps=3)
        # The step submitted with the failed gradients was still answered before train
        # raised: nothing of the update is left running.
        assert len(standin.trained) == 2
        assert all(op.done for op in standin._ops.values())
    finally:
        standin.close()

