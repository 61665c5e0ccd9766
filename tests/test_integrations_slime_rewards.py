"""Slime's --custom-rm-path (both signatures) and --rm-type score each finished rollout of
a tree (focus_go.integrations.slime.rewards), and Slime's own call of the RM with a tree's
samples (an empty list of samples lacking a reward) does not fail."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import List
from urllib.parse import urlparse

import pytest

from slime_contract import Sample, load_function, make_args
from test_integrations_slime import small_collector_for

CALLS: List[str] = []


async def single_rm(args, sample):
    if isinstance(sample, list):
        raise TypeError("called with a list")
    CALLS.append(sample.response)
    return 1.0


async def batched_rm(args, samples: list):
    CALLS.extend(s.response for s in samples)
    return [{"score": 0.0} for _ in samples]


def _tree(server, **args_values):
    from focus.integrations.slime import make_generate

    hook = make_generate(small_collector_for, profile="token_chunk")
    args = make_args(sglang_router_port=urlparse(server.url).port, hf_checkpoint=server.model, **args_values)
    p = server.problems()[0]
    try:
        tree = asyncio.run(hook(args, Sample(group_index=0, index=0, prompt=p.prompt, label=p.label, metadata={}), {}))
    finally:
        hook.close()
    return args, tree


@pytest.mark.parametrize("path,successes", [(f"{__name__}.single_rm", "all"), (f"{__name__}.batched_rm", "none")])
def test_custom_rm_scores_every_done_rollout(server, path, successes):
    CALLS.clear()
    args, tree = _tree(server, custom_rm_path=path, reward_key="score")
    focus = tree[0].metadata["focus"]
    done = focus["finished_rollouts"] - focus["truncated_rollouts"]
    assert done > 0 and len(CALLS) == done and all(CALLS)
    assert focus["successes"] == (done if successes == "all" else 0)
    # Slime's list branch: the RM of args.custom_rm_path with the samples lacking a reward.
    assert args.focus_custom_rm_path == path
    assert asyncio.run(load_function(args.custom_rm_path)(args, [s for s in tree if s.reward is None])) == []
    one = asyncio.run(load_function(args.custom_rm_path)(args, tree[0]))
    assert one == (1.0 if successes == "all" else {"score": 0.0})


def test_custom_rm_refusals(server):
    from focus_go.errors import ConfigError

    with pytest.raises(ConfigError, match="--custom-rm-path no_such_module.rm"):
        _tree(server, custom_rm_path="no_such_module.rm")
    CALLS.clear()
    with pytest.raises(Exception, match="reward-key"):
        _tree(server, custom_rm_path=f"{__name__}.batched_rm", allow_partial=False)


def test_batched_signature_rule():
    from focus_go.integrations.slime.rewards import _is_batched

    async def a(args, sample): ...
    async def b(args, samples): ...
    async def c(args, xs: "list[Sample]"): ...
    async def d(args, xs: List[int]): ...
    assert [_is_batched(f) for f in (a, b, c, d, single_rm, batched_rm)] == [False, True, True, True, False, True]


# Reward models on other scales than the collector's [0, 1] (issue 47): each is Slime's
# reward of a rollout, which Slime puts no range on.
async def rm_42(args, sample):
    CALLS.append(sample.response)
    return 42.0


async def rm_0_to_5(args, sample):
    CALLS.append(sample.response)
    return float(len(sample.response) % 6)


async def rm_plus_minus_one(args, sample):
    CALLS.append(sample.response)
    return 1.0 if len(sample.response) % 2 else -1.0


async def rm_nan(args, sample):
    return float("nan")


def _declared(low, high):
    """small_collector_for with the reward range declared as [low, high]."""
    import dataclasses

    def collector_for(policy, problem):
        collector = small_collector_for(policy, problem)
        collector.reward = dataclasses.replace(collector.reward, reward_min=low, reward_max=high)
        return collector

    return collector_for


def _tree_of(server, collector_for, allow_partial, **args_values):
    from focus.integrations.slime import make_generate

    hook = make_generate(collector_for, profile="token_chunk", allow_partial=allow_partial)
    args = make_args(sglang_router_port=urlparse(server.url).port, hf_checkpoint=server.model, **args_values)
    p = server.problems()[0]
    try:
        return asyncio.run(hook(args, Sample(group_index=0, index=0, prompt=p.prompt, label=p.label, metadata={}), {}))
    finally:
        hook.close()


@pytest.mark.parametrize("allow_partial", [True, False])
@pytest.mark.parametrize("rm", ["rm_42", "rm_0_to_5", "rm_plus_minus_one"])
def test_any_reward_scale_trains_as_given(server, rm, allow_partial):
    """An RM on any scale trains every answer, as if the collector had declared its scale:
    no answer is a failure, and the tree (advantages included) equals the tree collected
    with RewardConfig(reward_min, reward_max) declaring the range of the scores seen."""
    CALLS.clear()
    tree = _tree_of(server, small_collector_for, allow_partial, custom_rm_path=f"{__name__}.{rm}")
    scores = {float(s) for s in (asyncio.run(globals()[rm](None, Sample(response=r))) for r in list(CALLS))}
    low, high = min(0.0, *scores), max(1.0, *scores)
    assert low < 0 or high > 1  # the RM left the collector's [0, 1]
    CALLS.clear()
    declared = _tree_of(server, _declared(low, high), allow_partial, custom_rm_path=f"{__name__}.{rm}")
    focus = tree[0].metadata["focus"]
    done = focus["finished_rollouts"] - focus["truncated_rollouts"]
    assert done > 0 and len(CALLS) == done  # every finished rollout scored, none dropped as a failure
    assert focus["finished_rollouts"] == 4  # the whole budget: no rollout failed
    assert [s.reward for s in tree] == [s.reward for s in declared]
    assert [s.tokens for s in tree] == [s.tokens for s in declared]
    # A success reaches the top of the scale: the +1 answers, the 5s, every 42.
    assert focus["successes"] == declared[0].metadata["focus"]["successes"]
    if rm == "rm_plus_minus_one":
        assert 0 < focus["successes"] < focus["finished_rollouts"]
        assert any(s.reward < 0 for s in tree) and any(s.reward > 0 for s in tree)
        assert tree.reward == focus["successes"] / focus["finished_rollouts"] < 1.0


@pytest.mark.parametrize("allow_partial", [True, False])
def test_non_finite_reward_is_refused_naming_the_rm(server, allow_partial):
    from focus_go.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"--custom-rm-path {__name__}\.rm_nan returned nan"):
        _tree_of(server, small_collector_for, allow_partial, custom_rm_path=f"{__name__}.rm_nan")


def _dapo_stand_in(monkeypatch):
    """slime.rollout.rm_hub.async_rm for --rm-type dapo, as Slime's compute_score answers:
    a dict with score 1.0 (correct) or -1.0 (incorrect), acc and pred."""
    import sys
    import types

    async def async_rm(args, sample, **kwargs):
        assert args.rm_type == "dapo"
        correct = bool(len(sample.response) % 2)
        return {"score": 1.0 if correct else -1.0, "acc": correct, "pred": sample.response[-8:]}

    module = types.ModuleType("slime.rollout.rm_hub")
    module.async_rm = async_rm
    for name in ("slime", "slime.rollout"):
        monkeypatch.setitem(sys.modules, name, sys.modules.get(name) or types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "slime.rollout.rm_hub", module)


def test_rm_type_dapo_trains_every_answer(server, monkeypatch):
    from focus_go.errors import ConfigError

    _dapo_stand_in(monkeypatch)
    tree = _tree_of(server, small_collector_for, True, rm_type="dapo", reward_key="score")
    focus = tree[0].metadata["focus"]
    assert focus["finished_rollouts"] == 4 and 0 < focus["successes"] < 4
    assert any(s.reward < 0 for s in tree)
    # Without --reward-key, the dict is refused naming its keys and the flag (not a failed rollout).
    with pytest.raises(ConfigError, match=r"--rm-type dapo returned a dict .*'score'.*--reward-key"):
        _tree_of(server, small_collector_for, True, rm_type="dapo")


def test_env_reward_on_another_scale_and_evaluation(server):
    """An environment's own rewards (no reward model) on a -5..5 scale train as given too,
    and an evaluation call returns the RM's -1 or +1 outcome."""
    from focus_go import MathEnv

    class FiveScale(MathEnv):
        def step(self, action):
            step = super().step(action)
            return dataclasses.replace(step, reward=10.0 * step.reward - 5.0)

        def fork(self):
            return _as_five(super().fork())

    def _as_five(env):
        twin = object.__new__(FiveScale)
        twin.__dict__.update(env.__dict__)
        return twin

    def collector_for(policy, problem):
        collector = small_collector_for(policy, problem)
        collector.agent.env = _as_five(collector.agent.env)
        return collector

    tree = _tree_of(server, collector_for, True)
    focus = tree[0].metadata["focus"]
    assert focus["finished_rollouts"] == 4 and any(s.reward < 0 for s in tree)

    from focus.integrations.slime import make_evaluate

    hook = make_evaluate(small_collector_for, profile="token_chunk")
    args = make_args(sglang_router_port=urlparse(server.url).port, hf_checkpoint=server.model,
                     custom_rm_path=f"{__name__}.rm_plus_minus_one")
    p = server.problems()[0]
    try:
        out = asyncio.run(hook(args, Sample(index=0, prompt=p.prompt, label=p.label, metadata={}), {}))
    finally:
        hook.close()
    assert out.reward in (-1.0, 1.0) and out.status == Sample.Status.COMPLETED


GROWING = [1.0]


async def rm_growing(args, sample):
    GROWING[0] *= 2.0
    return GROWING[0]


def test_a_scale_that_keeps_growing_is_refused(server):
    """An RM that sets a new extreme in every tree: the hook collects the tree again at
    most MAX_RESCALES times, then refuses naming the RM and RewardConfig."""
    from focus_go.errors import ConfigError
    from focus_go.integrations.slime.rewards import MAX_RESCALES

    GROWING[0] = 1.0
    with pytest.raises(ConfigError, match=rf"--custom-rm-path {__name__}\.rm_growing returned .*after {MAX_RESCALES} .*RewardConfig"):
        _tree_of(server, small_collector_for, True, custom_rm_path=f"{__name__}.rm_growing")
