"""The training-side hooks: keep FOCUS advantages through Slime's reward post-processing
(``preserve_advantages``), lay them over the response tokens (``advantages``), and sum
the policy loss over tokens (``sum_policy_tokens``, ``normalized_policy_tokens``).

torch is imported only inside the functions that receive tensors.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Tuple

from ...errors import ConfigError
from .samples import TOKEN_ADVANTAGES_KEY, _token_advantages
from .settings import _check_training


def _reward_value(args: Any, sample: Any, i: int) -> float:
    reward = getattr(sample, "reward", None)
    key = getattr(args, "reward_key", None)
    if isinstance(reward, Mapping):
        if not key:
            raise ConfigError(f"sample {i} has a dict reward but --reward-key is not set")
        reward = reward[key]
    if reward is None:
        raise ConfigError(
            f"sample {i} (index={getattr(sample, 'index', None)}, status={getattr(sample, 'status', None)}) "
            "has no reward; FOCUS samples carry their advantage as reward (aborted samples must not reach training)"
        )
    value = float(reward)
    if not math.isfinite(value):
        raise ConfigError(f"sample {i} reward {value} is not finite")
    return value


def preserve_advantages(args: Any, samples: List[Any]) -> Tuple[List[float], ...]:
    """Reward post-process hook: return the FOCUS advantages unchanged, so Slime's group
    centering does not alter them. Slime calls it with the flat list of the rollout's
    samples and expects ``(raw_rewards, rewards)``, both one float per sample; here both
    are the samples' rewards (the advantages ``to_sample`` stored). Name it with
    ``--custom-reward-post-process-path focus.integrations.slime.preserve_advantages``.

    For a path sample (``make_generate(..., layout="paths")``) the second list holds its
    per-token response advantages instead of a float: of the sample's fields, Slime sends
    only ``rewards`` per sample to the train actor's ``rollout_data`` (``train_metadata``
    stops in the rollout manager's train data), and ``advantages`` reads them there.

    Refuses (ConfigError naming the flag) the Slime settings that would train something
    other than these advantages, as the generate hook does (docs/slime.md, "Training
    settings")."""
    _check_training(args)
    raw = [_reward_value(args, s, i) for i, s in enumerate(samples)]
    rewards: List[Any] = []
    for r, s in zip(raw, samples):
        per_token = _token_advantages(s)
        rewards.append(r if per_token is None else list(per_token))
    return raw, rewards


def _is_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "dtype")


def advantages(args: Any, rollout_data: Dict[str, Any]) -> None:
    """Advantage hook: broadcast each sample's FOCUS advantage (``rollout_data["rewards"]``,
    kept by ``preserve_advantages``) over its response tokens, overriding the estimator
    Slime's argument parser selected. Sets ``rollout_data["advantages"]`` and
    ``rollout_data["returns"]`` (returns are zero: critic targets are exported separately),
    one per sample, shaped like ``rollout_data["kl"][i]`` (Slime's per-sample response
    tensors on this rank, CP-local when context parallel > 1) or, without ``kl``, of
    ``response_lengths[i]`` entries. Tensors when Slime passes tensors (torch is imported
    only then), plain lists otherwise. Refuses, naming the flag, the Slime settings that
    would train something other than these advantages (``--normalize-advantages``, which
    would whiten them, ``--kl-coef``, the ``ppo`` estimator, ...; docs/slime.md, "Training
    settings"). Name it with
    ``--custom-advantage-function-path focus.integrations.slime.advantages``.

    Path samples (``layout="paths"``): a sample whose reward entry is a list (put there by
    ``preserve_advantages``), or whose ``rollout_data["metadata"][i]`` (a Slime that
    forwards ``train_metadata``) holds ``"focus_advantages"``, gets those per-token
    advantages instead of a broadcast; they need context parallel size 1, like
    ``sum_policy_tokens``. Its ``rollout_data["rewards"]`` entry is then replaced by the
    mean advantage of its trained tokens, so Slime's train-side logging sees one float per
    sample. ``--use-kl-loss`` and ``--entropy-coef`` are Slime's own loss terms, unaffected
    (next to ``sum_policy_tokens`` they need ``--calculate-per-token-loss``)."""
    _check_training(args)
    rewards = list(rollout_data["rewards"])
    shapes = rollout_data.get("kl")
    if shapes is None:
        shapes = rollout_data.get("response_lengths")
        if shapes is None:
            raise ConfigError("rollout_data has neither 'kl' nor 'response_lengths' to shape advantages by")
    shapes = list(shapes)
    if len(shapes) != len(rewards):
        raise ConfigError(f"rollout_data has {len(rewards)} rewards but {len(shapes)} samples")
    metadata = rollout_data.get("metadata")
    masks = rollout_data.get("loss_masks")
    advs: List[Any] = []
    rets: List[Any] = []
    for i, (reward, like) in enumerate(zip(rewards, shapes)):
        per_token = None
        if metadata is not None and isinstance(metadata[i], Mapping):
            per_token = metadata[i].get(TOKEN_ADVANTAGES_KEY)
        if per_token is None and (isinstance(reward, (list, tuple)) or (_is_tensor(reward) and reward.dim() > 0)):
            per_token = reward
        if per_token is not None:
            adv, ret, rewards[i] = _per_token_advantages(i, per_token, like, None if masks is None else masks[i])
            advs.append(adv)
            rets.append(ret)
            continue
        value = float(reward)
        if _is_tensor(like):
            import torch

            advs.append(torch.full_like(like, value, dtype=torch.float32))
            rets.append(torch.zeros_like(like, dtype=torch.float32))
        else:
            n = like if isinstance(like, int) else len(like)
            advs.append([value] * n)
            rets.append([0.0] * n)
    rollout_data["advantages"] = advs
    rollout_data["returns"] = rets
    rollout_data["rewards"] = rewards


def _per_token_advantages(i: int, per_token: Any, like: Any, mask: Any) -> Tuple[Any, Any, float]:
    """Sample i's advantages and returns from its per-token response advantages, shaped
    like ``like``, and the mean advantage over its trained tokens."""
    values = [float(a) for a in (per_token.tolist() if _is_tensor(per_token) else per_token)]
    n = int(like.numel()) if _is_tensor(like) else (like if isinstance(like, int) else len(like))
    if len(values) != n:
        raise ConfigError(
            f"sample {i}: {len(values)} per-token advantages for {n} response tokens on this rank "
            "(path records need context parallel size 1)"
        )
    flags = [float(m) for m in (mask.tolist() if _is_tensor(mask) else mask)] if mask is not None else [1.0] * n
    trained = [v for v, m in zip(values, flags) if m]
    mean = sum(trained) / len(trained) if trained else 0.0
    if _is_tensor(like):
        import torch

        adv = torch.tensor(values, dtype=torch.float32, device=like.device).reshape(like.shape)
        return adv, torch.zeros_like(like, dtype=torch.float32), mean
    return values, [0.0] * n, mean


def _context_parallel_size() -> int:
    try:
        from megatron.core import mpu  # type: ignore[import-not-found]

        return int(mpu.get_context_parallel_world_size())
    except Exception:  # noqa: BLE001 - no Megatron, or parallel state not initialised
        return 1


def sum_policy_tokens(
    total_lengths: Any,
    response_lengths: Any,
    loss_masks: List[Any],
    calculate_per_token_loss: bool = False,
) -> Callable[[Any], Any]:
    """Policy-loss reducer hook: sum masked token losses instead of averaging them, so
    each generated token contributes its segment's advantage once.

    Slime calls the factory positionally per micro-batch with
    ``(total_lengths, response_lengths, loss_masks, calculate_per_token_loss)`` and applies
    the returned reducer to the concatenated per-token policy loss of the micro-batch's
    samples (``sum(response_lengths)`` entries). The reducer returns
    ``sum_i sum_t loss[i, t] * loss_mask[i, t]`` (a scalar tensor for tensor input, a
    float for plain lists); ``calculate_per_token_loss`` does not change a sum. Requires
    context parallel size 1 (with CP > 1 each rank sees only its chunks of a sequence):
    the factory checks Megatron's parallel state when present and the reducer checks the
    input length. Name it with
    ``--custom-pg-loss-reducer-function-path focus.integrations.slime.sum_policy_tokens``."""
    cp = _context_parallel_size()
    if cp != 1:
        raise ConfigError(f"sum_policy_tokens requires context parallel size 1, got {cp}")
    lengths = [int(n) for n in response_lengths]
    masks = list(loss_masks)
    if len(masks) != len(lengths):
        raise ConfigError(f"sum_policy_tokens: {len(lengths)} response lengths but {len(masks)} loss masks")
    expected = sum(lengths)

    def reducer(x: Any) -> Any:
        n = int(x.numel()) if _is_tensor(x) else len(x)
        if n != expected:
            raise ConfigError(
                f"sum_policy_tokens: the loss has {n} token entries but the response lengths sum to {expected}; "
                "this reducer requires context parallel size 1"
            )
        if _is_tensor(x):
            import torch

            total = x.new_zeros(())
            for part, mask in zip(torch.split(x, lengths, dim=0), masks):
                total = total + (part * torch.as_tensor(mask, dtype=x.dtype, device=x.device)).sum()
            return total
        total_f = 0.0
        start = 0
        for length, mask in zip(lengths, masks):
            total_f += sum(float(v) * float(m) for v, m in zip(x[start : start + length], mask))
            start += length
        return total_f

    return reducer


def normalized_policy_tokens(tokens_per_rollout: int) -> Callable[..., Callable[[Any], Any]]:
    """A policy-loss reducer factory on the scale of Slime's default: ``sum_policy_tokens``
    divided by a fixed token count per rollout (as Dr. GRPO divides by a constant instead
    of each response's length).

    Slime's default reducer averages each rollout's masked token losses (the denominator
    is the rollout's ``rollout_mask_sums`` entry, every sibling sample of a tree counted)
    and ``loss_function`` then scales by ``num_microbatches / step_global_batch_size``, so
    the step loss is the mean over rollouts of each rollout's token mean. With
    ``sum_policy_tokens`` the per-rollout token mean becomes a per-rollout token sum: the
    loss and gradient are larger by the rollout's masked token count M (a tree's trained
    tokens), for example about 1,300x for 32-rollout trees. Dividing the sum by a constant
    C keeps every generated token's weight equal across trees (what summing is for) while
    the loss and gradient norm are M/C times Slime's default: with C near the mean M of
    your trees, ``--lr`` and ``--clip-grad`` of a GRPO recipe carry over.

    Expose it from your module:

    ```python
    reducer = normalized_policy_tokens(1024)
    ```

    and name that attribute: ``--custom-pg-loss-reducer-function-path mymodule.reducer``.

    Slime calls the factory as ``(total_lengths, response_lengths, loss_masks,
    calculate_per_token_loss)``. ``--calculate-per-token-loss`` is refused: Slime then
    divides by the step's token count itself (use ``sum_policy_tokens`` there). Context
    parallel size 1 is required, as for ``sum_policy_tokens``."""
    if isinstance(tokens_per_rollout, bool) or not isinstance(tokens_per_rollout, int) or tokens_per_rollout < 1:
        raise ConfigError(f"normalized_policy_tokens: tokens_per_rollout must be an int >= 1, got {tokens_per_rollout!r}")

    def factory(
        total_lengths: Any,
        response_lengths: Any,
        loss_masks: List[Any],
        calculate_per_token_loss: bool = False,
    ) -> Callable[[Any], Any]:
        if calculate_per_token_loss:
            raise ConfigError(
                "normalized_policy_tokens: --calculate-per-token-loss already divides the loss by the step's "
                "token count; use focus.integrations.slime.sum_policy_tokens with it"
            )
        summed = sum_policy_tokens(total_lengths, response_lengths, loss_masks, calculate_per_token_loss)
        return lambda x: summed(x) / tokens_per_rollout

    factory.tokens_per_rollout = tokens_per_rollout  # type: ignore[attr-defined]
    return factory
