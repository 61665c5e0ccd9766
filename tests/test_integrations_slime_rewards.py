"""Slime's --custom-rm-path (both signatures) and --rm-type score each finished rollout of
a tree (focus_go.integrations.slime.rewards), and Slime's own call of the RM with a tree's
samples (an empty list of samples lacking a reward) does not fail."""

from __future__ import annotations

import asyncio
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
