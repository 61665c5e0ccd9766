"""A CPU-only stand-in for the parts of Slime (THUDM/slime) that call FOCUS hooks.

Slime itself needs torch, Ray and Megatron, so the tests call the hooks the way Slime's
code does, written from its source (commit 624b824a, files named below):

- ``Sample``: the field set, defaults and ``Status`` values of ``slime.utils.types.Sample``
  (torch-typed fields hold plain values here).
- ``load_function``: ``slime.utils.misc.load_function`` resolves a dotted path by
  importing everything before the last dot and taking the attribute after it.
- ``generate_and_rm``: ``slime.rollout.sglang_rollout.generate_and_rm`` awaits the custom
  generate hook as ``fn(args, sample, sampling_params)``; a list return with any ABORTED
  sample is passed on as is, otherwise samples without a reward go to the reward model.
- ``check_fanout``: ``slime.observability.rollout_data_utils.validate_rollout_id_annotated``
  (siblings from one rollout share a non-None rollout_id) and the length asserts of
  ``RolloutManager._convert_samples_to_train_data`` (slime/ray/rollout.py).
- ``make_args``: the ``args`` attributes the hooks read, with Slime's defaults.
- ``compute_pass_rate``: ``slime.observability.metric_utils.compute_pass_rate``, which both
  of Slime's ``--log-passrate`` paths use: rewards in consecutive groups of ``group_size``
  (one prompt each), a reward equal to 1 a pass, ``pass@k`` for k = 1, 2, 4, ... up to the
  group size as the mean over groups of the unbiased estimate
  ``1 - prod_{i=n-c+1..n} (1 - k / i)``; nothing for a group size of 1.
"""

from __future__ import annotations

import importlib
import inspect
from argparse import Namespace
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


@dataclass
class Sample:
    """Field-for-field stand-in for ``slime.utils.types.Sample``."""

    group_index: int | None = None
    index: int | None = None
    rollout_id: int | None = None
    prompt: str | list[dict[str, str]] = ""
    tokens: list[int] = field(default_factory=list)
    multimodal_inputs: dict[str, Any] | None = None
    multimodal_train_inputs: dict[str, Any] | None = None
    multimodal_train_input_id: str | None = None
    apply_chat_template_kwargs: dict = field(default_factory=dict)
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    rollout_top_p_token_ids: list[int] | None = None
    rollout_top_p_token_offsets: list[int] | None = None
    rollout_routed_experts: list[list[int]] | None = None
    remove_sample: bool = False
    teacher_log_probs: list[float] | None = None

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    status: Status = Status.PENDING
    metadata: dict = field(default_factory=dict)
    generate_function_path: str | None = None
    custom_rm_path: str | None = None
    train_metadata: dict | None = None
    session_id: str | None = None
    non_generation_time: float = 0.0

    @dataclass
    class SpecInfo:
        spec_accept_token_num: int = 0
        spec_draft_token_num: int = 0
        spec_verify_ct: int = 0
        completion_token_num: int = 0

    spec_info: SpecInfo = field(default_factory=SpecInfo)

    @dataclass
    class PrefixCacheInfo:
        cached_tokens: int = 0
        total_prompt_tokens: int = 0

    prefix_cache_info: PrefixCacheInfo = field(default_factory=PrefixCacheInfo)

    def get_reward_value(self, args: Any) -> float:
        return self.reward if not args.reward_key else self.reward[args.reward_key]


def load_function(path: str) -> Any:
    """Resolve ``package.module.attr`` as Slime's loader does."""
    module_name, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module_name), attr)


def make_args(**overrides: Any) -> Namespace:
    """The args attributes FOCUS hooks read, with Slime's defaults."""
    values = dict(
        sglang_router_ip="127.0.0.1",
        sglang_router_port=None,
        hf_checkpoint=None,
        rollout_temperature=1.0,
        rollout_top_p=1.0,
        rollout_top_k=-1,
        rollout_max_response_len=1024,
        rollout_stop=None,
        rollout_stop_token_ids=None,
        apply_chat_template=False,
        input_key="input",
        label_key="label",
        n_samples_per_prompt=1,
        reward_key=None,
        advantage_estimator="grpo",
        normalize_advantages=False,
        custom_rm_path=None,
        group_rm=False,
        calculate_per_token_loss=False,
    )
    values.update(overrides)
    return Namespace(**values)


async def generate_and_rm(args: Namespace, sample: Sample, sampling_params: dict, evaluation: bool = False) -> Any:
    """Call the custom generate hook as Slime does and apply its reward rule for lists."""
    fn = load_function(args.custom_generate_function_path)
    if "evaluation" in inspect.signature(fn).parameters:
        out = await fn(args, sample, sampling_params, evaluation=evaluation)
    else:
        out = await fn(args, sample, sampling_params)
    if isinstance(out, list):
        if any(s.status == Sample.Status.ABORTED for s in out):
            return out
        missing = [s for s in out if s.reward is None]
        assert not missing, "FOCUS samples carry their reward; none should need the reward model"
        return out
    if out.status != Sample.Status.ABORTED:
        assert out.reward is not None
    return out


def compute_pass_rate(flat_rewards: list[float], group_size: int) -> dict[str, float]:
    """Slime's pass@k over flat rewards in groups of ``group_size`` (see the module doc)."""
    if group_size == 1:
        return {}
    assert len(flat_rewards) % group_size == 0, (len(flat_rewards), group_size)
    groups = [flat_rewards[i : i + group_size] for i in range(0, len(flat_rewards), group_size)]
    out = {}
    k = 1
    while k <= group_size:
        estimates = []
        for g in groups:
            n, c = len(g), sum(1 for r in g if r == 1)
            if n - c < k:
                estimates.append(1.0)
            else:
                miss = 1.0
                for i in range(n - c + 1, n + 1):
                    miss *= 1.0 - k / i
                estimates.append(1.0 - miss)
        out[f"pass@{k}"] = sum(estimates) / len(estimates)
        k *= 2
    return out


def check_fanout(samples: list[Sample]) -> None:
    """Slime's checks on one generate call's list of samples before training."""
    if len(samples) > 1:
        ids = [s.rollout_id for s in samples]
        assert None not in ids, f"rollout_id unset on some siblings: {ids}"
        assert len(set(ids)) == 1, f"siblings must share rollout_id: {ids}"
    for s in samples:
        assert len(s.loss_mask) == s.response_length, (len(s.loss_mask), s.response_length)
        assert len(s.rollout_log_probs) == s.response_length
        assert s.response_length <= len(s.tokens)
