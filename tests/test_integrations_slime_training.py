"""Issue 47: Slime's training settings with FOCUS trees. Every setting that would train
something other than the tree's advantages is refused naming it, at the generate hook's
first call (before any request) and again by the train-side hooks; Slime's KL-loss and
entropy terms keep, next to focus's token-sum reducer, the weight per token that Slime's
default reducer gives them. Slime is stood in by tests/slime_contract (the real loss code
is driven by test_integrations_slime_real.py and ``make slime-check``)."""

from __future__ import annotations

import asyncio
from urllib.parse import urlparse

import pytest

from slime_contract import Sample, make_args
from test_integrations_slime import small_collector_for

REFUSED = [
    (dict(loss_type="sft_loss"), "--loss-type sft_loss"),
    (dict(advantage_estimator="ppo"), "--advantage-estimator ppo"),
    (dict(advantage_estimator="reinforce_plus_plus"), "--advantage-estimator reinforce_plus_plus"),
    (dict(advantage_estimator="reinforce_plus_plus_baseline"), "--advantage-estimator reinforce_plus_plus_baseline"),
    (dict(kl_coef=0.1), "--kl-coef 0.1 with --advantage-estimator grpo"),
    (dict(kl_coef=0.1, advantage_estimator="gspo"), "--kl-coef 0.1 with --advantage-estimator gspo"),
    (dict(normalize_advantages=True), "--normalize-advantages"),
    (dict(compute_advantages_and_returns=False), "--disable-compute-advantages-and-returns"),
    (dict(use_opd=True, opd_kl_coef=1.0), "--use-opd"),
    (dict(custom_reward_post_process_path=None, rewards_normalization=True), "--custom-reward-post-process-path"),
    (
        dict(use_kl_loss=True, kl_loss_coef=0.1, custom_pg_loss_reducer_function_path="focus.integrations.slime.sum_policy_tokens"),
        "--use-kl-loss.*--calculate-per-token-loss",
    ),
    (
        dict(entropy_coef=0.01, custom_pg_loss_reducer_function_path="focus_go.integrations.slime.sum_policy_tokens"),
        "--entropy-coef 0.01.*--calculate-per-token-loss",
    ),
    (
        dict(use_kl_loss=True, kl_loss_coef=0.1, calculate_per_token_loss=True,
             custom_pg_loss_reducer_function_path=f"{__name__}.normalized"),
        "--use-kl-loss.*normalized_policy_tokens",
    ),
]


def _normalized():
    from focus.integrations.slime import normalized_policy_tokens

    return normalized_policy_tokens(512)


normalized = _normalized()


@pytest.mark.parametrize("change, match", REFUSED, ids=[m.split()[0].strip("-.*") + str(i) for i, (_, m) in enumerate(REFUSED)])
def test_settings_that_train_something_else_are_refused_first(server, change, match):
    from focus.integrations.slime import make_generate
    from focus_go.errors import ConfigError

    calls = []

    def collector_for(policy, problem):
        calls.append(problem)
        return small_collector_for(policy, problem)

    hook = make_generate(collector_for, profile="token_chunk")
    args = make_args(sglang_router_port=urlparse(server.url).port, hf_checkpoint=server.model, **change)
    p = server.problems()[0]
    try:
        with pytest.raises(ConfigError, match=match):
            asyncio.run(hook(args, Sample(group_index=0, index=0, prompt=p.prompt, label=p.label), {}))
    finally:
        hook.close()
    assert calls == []  # refused before a collector was built or a request sent


@pytest.mark.parametrize("change, match", REFUSED[:9])
def test_train_side_hooks_refuse_them_too(change, match):
    from focus.integrations.slime import advantages, preserve_advantages
    from focus_go.errors import ConfigError

    args = make_args(**change)
    with pytest.raises(ConfigError, match=match):
        advantages(args, {"rewards": [0.5], "kl": [[0.0, 0.0]]})
    with pytest.raises(ConfigError, match=match):
        preserve_advantages(args, [Sample(reward=0.5)])


ACCEPTED = [
    dict(),
    dict(advantage_estimator="gspo"),
    dict(advantage_estimator="cispo"),
    dict(loss_type="custom_loss", custom_loss_function_path="mymodule.loss"),
    dict(use_kl_loss=True, kl_loss_coef=0.1, entropy_coef=0.01, calculate_per_token_loss=True,
         custom_pg_loss_reducer_function_path="focus.integrations.slime.sum_policy_tokens"),
    dict(use_kl_loss=True, kl_loss_coef=0.1, entropy_coef=0.01),  # Slime's own reducer: its own weights
    dict(custom_reward_post_process_path=None, rewards_normalization=False),
    dict(custom_reward_post_process_path="focus.integrations.slime.preserve_advantages", rewards_normalization=True),
    dict(use_tis=True, use_rollout_logprobs=True, eps_clip=0.3, eps_clip_high=0.4, num_steps_per_rollout=2),
]


@pytest.mark.parametrize("change", ACCEPTED)
def test_settings_that_train_the_trees_advantages_pass(change):
    from focus.integrations.slime import advantages

    data = {"rewards": [0.5, -0.25], "kl": [[0.0, 0.0], [0.0]]}
    advantages(make_args(**change), data)
    assert data["advantages"] == [[0.5, 0.5], [-0.25]]


# ---- the KL-loss and entropy weights next to focus's reducer ---------------------------------


def _slime_policy_loss(pg, kl, entropy, reduce_pg, reduce, kl_loss_coef, entropy_coef):
    """Slime's policy_loss_function's composition (slime/backends/megatron_utils/loss.py):
    loss = pg_reducer(pg) - entropy_coef * sum_of_sample_mean(entropy)
    + kl_loss_coef * sum_of_sample_mean(kl); returns the loss and the KL term."""
    kl_term = kl_loss_coef * reduce(kl)
    return reduce_pg(pg) - entropy_coef * reduce(entropy) + kl_term, kl_term


def _slime_reducer(lengths, masks, denoms, per_token):
    """Slime's get_sum_of_sample_mean at context parallel 1 (cp_utils.py): each sample's
    masked sum over its rollout's mask total, or (calculate_per_token_loss) the masked sum."""

    def reduce(x):
        out, start = 0.0, 0
        for n, mask, denom in zip(lengths, masks, denoms):
            part = sum(v * m for v, m in zip(x[start : start + n], mask))
            out += part if per_token else part / max(denom, 1)
            start += n
        return out

    return reduce


def test_kl_loss_share_per_tree_equals_slimes_default():
    """One tree's samples (one rollout id) in a micro-batch: with sum_policy_tokens and
    --calculate-per-token-loss, the KL term's share of the loss equals the share under
    Slime's default reducer; with sum_policy_tokens alone it falls by the tree's tokens."""
    import random

    from focus.integrations.slime import sum_policy_tokens

    rng = random.Random(3)
    lengths = [rng.randint(20, 90) for _ in range(6)]
    masks = [[1 if rng.random() < 0.8 else 0 for _ in range(n)] for n in lengths]
    total = sum(map(sum, masks))
    denoms = [total] * len(lengths)  # rollout_mask_sums: the tree's trained tokens on every sample
    n = sum(lengths)
    pg = [rng.gauss(-0.3, 1.0) for _ in range(n)]
    kl = [abs(rng.gauss(0.0, 0.4)) for _ in range(n)]
    ent = [abs(rng.gauss(1.0, 0.2)) for _ in range(n)]

    def share(reduce_pg, per_token):
        reduce = _slime_reducer(lengths, masks, denoms, per_token)
        loss, kl_term = _slime_policy_loss(pg, kl, ent, reduce_pg or reduce, reduce, 0.1, 0.01)
        return kl_term / loss

    default = share(None, False)
    ours = share(sum_policy_tokens([0] * len(lengths), lengths, masks, True), True)
    summed_alone = share(sum_policy_tokens([0] * len(lengths), lengths, masks, False), False)
    assert ours == pytest.approx(default, rel=1e-9)
    assert abs(summed_alone) < abs(default) / 20  # what the refusal above prevents


# A user module exposing focus's reducer under its own name is recognised too.
my_reducer = None


def test_a_reexported_sum_reducer_is_recognised():
    from focus.integrations.slime import sum_policy_tokens
    from focus_go.errors import ConfigError
    from focus_go.integrations.slime.settings import _check_training

    global my_reducer
    my_reducer = sum_policy_tokens
    with pytest.raises(ConfigError, match="--entropy-coef 0.01"):
        _check_training(make_args(entropy_coef=0.01, custom_pg_loss_reducer_function_path=f"{__name__}.my_reducer"))
    _check_training(make_args(entropy_coef=0.01, calculate_per_token_loss=True,
                              custom_pg_loss_reducer_function_path=f"{__name__}.my_reducer"))


def test_path_samples_need_preserve_advantages(server):
    from focus.integrations.slime import make_generate
    from focus_go.errors import ConfigError

    hook = make_generate(small_collector_for, profile="token_chunk", layout="paths")
    args = make_args(sglang_router_port=urlparse(server.url).port, hf_checkpoint=server.model,
                     custom_reward_post_process_path=None, rewards_normalization=False)
    p = server.problems()[0]
    try:
        with pytest.raises(ConfigError, match="layout=\"paths\".*preserve_advantages"):
            asyncio.run(hook(args, Sample(group_index=0, index=0, prompt=p.prompt, label=p.label), {}))
    finally:
        hook.close()
