"""The ``train`` loop's arguments checked up front: every setting the loop, the SDK or
tinker-cookbook refuses is refused here, naming it, before the first request is paid for.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Sequence

from .. import Problem, _check_layout
from ...critic_rule import CriticRule
from ...errors import ConfigError

PPO_CLIP: Mapping[str, float] = MappingProxyType({"clip_low_threshold": 0.8, "clip_high_threshold": 1.2})
"""Tinker's PPO loss configuration for the paper's ratio clip, 1 ± 0.2."""

# Losses whose datums are what ``to_datum`` builds (target_tokens, logprobs, advantages).
# ``cross_entropy`` takes weights, not advantages, and ``custom`` needs
# forward_backward_custom: neither trains a tree's advantages.
RL_LOSSES = ("importance_sampling", "ppo", "cispo", "dro", "gspo", "stable_reinforce")
# The loss_fn_config keys of the losses whose configuration Tinker's loss docs list.
CLIP_KEYS = frozenset({"clip_low_threshold", "clip_high_threshold"})
# save_state / save_weights_for_sampler's ttl_seconds: 1 hour to 10 years (the SDK's
# SaveWeightsRequest), or None for never.
TTL_MIN = 3600
TTL_MAX = 10 * 365 * 86400


def _sdk_losses() -> Sequence[str]:
    """The loss names the installed SDK's ``LossFnType`` lists (all of them when it has
    none to read)."""
    import typing

    try:
        from tinker import types
    except ImportError:
        return RL_LOSSES
    names = typing.get_args(getattr(types, "LossFnType", None))
    return tuple(names) if names else RL_LOSSES


def _loss_config(loss_fn: Any, loss_fn_config: Optional[Mapping[str, Any]], where: str = "train") -> Optional[Dict[str, float]]:
    """The configuration sent with ``loss_fn``: ``loss_fn_config`` checked against the loss,
    or, when it is None or the default ``PPO_CLIP`` with a loss that takes no clip, the
    loss's default (PPO's ratio clip 1 ± 0.2 for ``ppo`` and ``cispo``, the service's own for
    the others)."""
    if not isinstance(loss_fn, str) or loss_fn not in RL_LOSSES or loss_fn not in _sdk_losses():
        offered = [name for name in RL_LOSSES if name in _sdk_losses()]
        raise ConfigError(f"{where}: loss_fn must be one of {offered}, got {loss_fn!r}")
    if loss_fn_config is None or (loss_fn_config is PPO_CLIP and loss_fn not in ("ppo", "cispo")):
        return dict(PPO_CLIP) if loss_fn in ("ppo", "cispo") else None
    if not isinstance(loss_fn_config, Mapping):
        raise ConfigError(f"{where}: loss_fn_config must be a mapping of names to numbers or None, got {type(loss_fn_config).__name__}")
    config: Dict[str, float] = {}
    for key, value in loss_fn_config.items():
        if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{where}: loss_fn_config[{key!r}] must be a finite number, got {value!r}")
        config[key] = float(value)
    if loss_fn == "importance_sampling" and config:
        raise ConfigError(f"{where}: loss_fn='importance_sampling' takes no loss_fn_config, got keys {sorted(config)}")
    if loss_fn in ("ppo", "cispo"):
        unknown = sorted(set(config) - CLIP_KEYS)
        if unknown:
            raise ConfigError(f"{where}: loss_fn={loss_fn!r} takes loss_fn_config keys {sorted(CLIP_KEYS)}, got {unknown}")
        low, high = config.get("clip_low_threshold"), config.get("clip_high_threshold")
        if low is not None and high is not None and not low < high:
            raise ConfigError(f"{where}: loss_fn_config's clip_low_threshold ({low}) must be below clip_high_threshold ({high})")
    return config


def _count(name: str, value: Any, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(f"train: {name} must be an integer >= {low}, got {value!r}")


def _number(name: str, value: Any, *, positive: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        raise ConfigError(f"train: {name} must be a finite number {'>' if positive else '>='} 0, got {value!r}")


def _ttl(name: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or not TTL_MIN <= value <= TTL_MAX:
        raise ConfigError(
            f"train: {name} must be None (never expires) or whole seconds from {TTL_MIN} (1 hour, the SDK's minimum) "
            f"to {TTL_MAX} (10 years), got {value!r}"
        )


def _check_arguments(
    *, steps: Any, critic_rule: Any, async_depth: Any, problems_per_step: Any, problems: Sequence[Any],
    eval_problems: Sequence[Any], eval_every: Any, checkpoint_every: Any, checkpoint_path: Any, rolling_save_every: Any,
    ttl_seconds: Any, rolling_ttl_seconds: Any, temperature: Any, num_substeps: Any, kl_penalty_coef: Any,
    kl_discount_factor: Any, kl_reference_client: Any, seed: Any, learning_rate: Any, loss_fn: str, layout: Any,
) -> None:
    """Refuse, naming it, any argument ``train`` cannot run as asked."""
    _count("steps", steps, 0)
    if critic_rule is not None and not isinstance(critic_rule, CriticRule):
        raise ConfigError(f"train: critic_rule must be a CriticRule, got {type(critic_rule).__name__}")
    _count("async_depth", async_depth, 0)
    _count("problems_per_step", problems_per_step, 1)
    _count("eval_every", eval_every, 0)
    if not problems:
        raise ConfigError("train: problems is empty")
    for name, items in (("problems", problems), ("eval_problems", eval_problems)):
        for i, p in enumerate(items):
            if not isinstance(p, Problem):
                raise ConfigError(f"train: {name}[{i}] is a {type(p).__name__}, expected a Problem")
    if eval_every and not eval_problems:
        raise ConfigError("train: eval_every is set but eval_problems is empty")
    if eval_problems and not eval_every:
        raise ConfigError(
            f"train: eval_problems holds {len(eval_problems)} problems but eval_every is 0, so none would be "
            "evaluated; set eval_every (evaluate every N updates, the start and the end) or leave eval_problems empty"
        )
    _count("checkpoint_every", checkpoint_every, 0)
    if checkpoint_every and checkpoint_path is None:
        raise ConfigError("train: checkpoint_every is set but checkpoint_path is not")
    _count("rolling_save_every", rolling_save_every, 0)
    if rolling_save_every and checkpoint_path is None:
        raise ConfigError("train: rolling_save_every is set but checkpoint_path is not")
    _ttl("ttl_seconds", ttl_seconds)
    _ttl("rolling_ttl_seconds", rolling_ttl_seconds)
    _number("temperature", temperature)
    _count("num_substeps", num_substeps, 1)
    _number("kl_penalty_coef", kl_penalty_coef)
    _number("kl_discount_factor", kl_discount_factor)
    if kl_penalty_coef and kl_reference_client is None:
        raise ConfigError("train: kl_penalty_coef is set but kl_reference_client is not")
    if kl_penalty_coef and kl_discount_factor:
        if loss_fn == "stable_reinforce":
            # As tinker-cookbook refuses it: the discount spreads the penalty onto prompt
            # positions, and stable_reinforce takes advantages on sampled tokens only.
            raise ConfigError(
                "train: kl_discount_factor > 0 is not supported with loss_fn='stable_reinforce' (the discounted "
                "KL penalty lands on prompt positions); set kl_discount_factor=0 or choose another loss_fn"
            )
        if layout == "spans":
            raise ConfigError(
                "train: kl_discount_factor > 0 needs layout='paths': the discounted penalty sums the later tokens' "
                "terms of a whole trajectory, which a span of a tree (shared by several paths) does not have"
            )
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"train: seed must be an integer, got {seed!r}")
    if not (isinstance(learning_rate, (int, float)) and not isinstance(learning_rate, bool)
            and math.isfinite(learning_rate) and learning_rate > 0):
        raise ConfigError(
            f"train: learning_rate must be a finite number > 0 (the loop trains at a constant learning rate, as "
            f"tinker-cookbook's RL loop does; it takes no schedule), got {learning_rate!r}"
        )
    _check_layout(layout)
