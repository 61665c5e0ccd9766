"""Loss scale of FOCUS's policy-loss reducers against Slime's own default reducer.

Run with a Python that has torch and Slime's source on the path (no GPU, no Megatron:
``megatron.core.mpu`` is stood in by context-parallel size 1, the only thing Slime's
``get_sum_of_sample_mean`` reads at CP 1)::

    SLIME_SRC=/path/to/slime PYTHONPATH=python:tests FOCUS_GO_LIBRARY=build/libfocus.so \\
        python tests/slime_contract/loss_scale.py

It collects trees from the simulated server through ``make_generate`` (Selective(32, 16),
Segments(256)), builds Slime's per-rollout denominators (``rollout_mask_sums``: each
sample's rollout's summed loss mask, as ``_convert_samples_to_train_data`` does) and
prints the policy loss and its gradient norm under Slime's ``get_sum_of_sample_mean``,
``sum_policy_tokens`` and ``normalized_policy_tokens(M)`` (M the mean trained tokens per
tree). ``loss_function``'s later scaling (num_microbatches / step_global_batch_size) is
the same for all three, so these ratios are the ratios of the step losses. The last line
is JSON for a caller to check.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import types
from argparse import Namespace
from urllib.parse import urlparse


def slime_reducer_module():
    mpu = types.SimpleNamespace(get_context_parallel_world_size=lambda: 1)
    megatron, core = types.ModuleType("megatron"), types.ModuleType("megatron.core")
    core.mpu, megatron.core = mpu, core
    sys.modules.setdefault("megatron", megatron)
    sys.modules.setdefault("megatron.core", core)
    path = os.path.join(os.environ["SLIME_SRC"], "slime/backends/megatron_utils/cp_utils.py")
    spec = importlib.util.spec_from_file_location("slime_cp_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def trees(n_prompts: int = 4):
    from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
    from focus_go.sim import SimServer
    from focus.integrations.slime import make_generate

    from slime_contract import Sample

    def collector_for(policy, problem):
        agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(256))
        return Collector(agent, critic=Critic.constant(0.5), search=Selective(budget=32, warmup=16))

    with SimServer(seed=0) as server:
        args = Namespace(
            sglang_router_ip="127.0.0.1", sglang_router_port=urlparse(server.url).port, hf_checkpoint=server.model,
            rollout_temperature=1.0, rollout_top_p=1.0, rollout_top_k=-1, rollout_max_response_len=8192,
        )
        hook = make_generate(collector_for, profile="token_chunk")

        async def go():
            problems = server.problems()[:n_prompts]
            return await asyncio.gather(
                *(hook(args, Sample(group_index=i, index=i, prompt=p.prompt, label=p.label)) for i, p in enumerate(problems))
            )

        try:
            return asyncio.run(go())
        finally:
            hook.close()


def kl_shares(cp_utils, samples, masks, lengths, totals, per_rollout) -> dict:
    """The KL-loss and entropy terms' shares of each tree's loss, composed as Slime's
    policy_loss_function composes them (pg_reducer(pg) - entropy_coef * reducer(entropy) +
    kl_loss_coef * reducer(kl), the reducer Slime's get_sum_of_sample_mean), under Slime's
    default reducer and under sum_policy_tokens with --calculate-per-token-loss (Slime's
    reducer then a token sum), on the same random tensors; and with sum_policy_tokens
    alone (what the hooks refuse). Returns the largest relative difference of the shares
    from Slime's default over the trees, and the smallest ratio with the reducer alone."""
    import torch

    from focus.integrations.slime import sum_policy_tokens

    gen = torch.Generator().manual_seed(1)
    worst, alone_ratio = 0.0, float("inf")
    for rid in per_rollout:
        idx = [i for i, s in enumerate(samples) if s.rollout_id == rid]
        t_masks, t_lengths, t_totals = [masks[i] for i in idx], [lengths[i] for i in idx], [totals[i] for i in idx]
        denoms = torch.full((len(idx),), float(per_rollout[rid]))
        n = sum(t_lengths)
        pg = torch.randn(n, generator=gen) - 0.3
        kl = torch.randn(n, generator=gen).abs() * 0.4
        ent = 1.0 + 0.2 * torch.randn(n, generator=gen).abs()

        def share(pg_reducer, per_token):
            reducer = cp_utils.get_sum_of_sample_mean(t_totals, t_lengths, t_masks, denoms, per_token)
            pg_reducer = pg_reducer or reducer
            terms = [float(pg_reducer(pg)), 0.1 * float(reducer(kl)), 0.01 * float(reducer(ent))]
            total = sum(abs(t) for t in terms)
            return terms[1] / total, terms[2] / total

        default = share(None, False)
        ours = share(sum_policy_tokens(t_totals, t_lengths, t_masks, True), True)
        alone = share(sum_policy_tokens(t_totals, t_lengths, t_masks, False), False)
        worst = max(worst, *(abs(o - d) / d for o, d in zip(ours, default)))
        alone_ratio = min(alone_ratio, default[0] / alone[0])
    return {"max_rel_diff": worst, "default_over_alone_min": alone_ratio}


def main() -> dict:
    import torch

    from focus.integrations.slime import normalized_policy_tokens, sum_policy_tokens

    cp_utils = slime_reducer_module()
    samples = [s for tree in trees() for s in tree]
    masks = [torch.tensor(s.loss_mask, dtype=torch.float32) for s in samples]
    lengths = [s.response_length for s in samples]
    totals = [len(s.tokens) for s in samples]
    per_rollout: dict = {}
    for s in samples:
        per_rollout[s.rollout_id] = per_rollout.get(s.rollout_id, 0) + sum(s.loss_mask)
    rollout_mask_sums = torch.tensor([per_rollout[s.rollout_id] for s in samples], dtype=torch.float32)
    mean_tokens = sum(per_rollout.values()) / len(per_rollout)
    reducers = {
        "slime_default": cp_utils.get_sum_of_sample_mean(totals, lengths, masks, rollout_mask_sums, False),
        "sum_policy_tokens": sum_policy_tokens(totals, lengths, masks, False),
        "normalized_policy_tokens": normalized_policy_tokens(round(mean_tokens))(totals, lengths, masks, False),
    }
    torch.manual_seed(0)
    x = torch.randn(sum(lengths), requires_grad=True)
    result = {"trees": len(per_rollout), "samples": len(samples), "mean_trained_tokens_per_tree": mean_tokens}
    for name, reducer in reducers.items():
        loss = reducer(x)
        (grad,) = torch.autograd.grad(loss, x)
        ones = float(reducer(torch.ones(sum(lengths))))
        result[name] = {"loss": float(loss.detach()), "grad_norm": float(grad.norm()), "loss_of_ones": ones}
    result["kl_share"] = kl_shares(cp_utils, samples, masks, lengths, totals, per_rollout)
    base = result["slime_default"]
    for name in ("sum_policy_tokens", "normalized_policy_tokens"):
        result[name]["grad_norm_ratio"] = result[name]["grad_norm"] / base["grad_norm"]
        result[name]["ones_ratio"] = result[name]["loss_of_ones"] / base["loss_of_ones"]
        print(
            f"{name}: loss {result[name]['loss']:.4f} vs Slime's {base['loss']:.4f}; gradient norm "
            f"x{result[name]['grad_norm_ratio']:.3f}; constant loss x{result[name]['ones_ratio']:.3f}"
        )
    print(f"{result['trees']} trees, {result['samples']} samples, {mean_tokens:.1f} trained tokens per tree")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
