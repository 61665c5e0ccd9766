"""Inspect a collected tree and convert prepared training data into trainer records.

Default records are dicts. An actor record (one per generated span) has ``tokens`` (the
full exact token context up to and including the span), ``loss_mask`` (true only on the
span's generated tokens), ``behavior_logprobs`` (aligned to ``tokens``, 0.0 where not
generated), ``advantage``, ``lane`` ("actor"), ``group_index``, ``estimator``,
``node_id``, ``search_pass`` and ``problem_id``. A critic record (one per target) has
``context``, ``target``, ``lane`` ("critic"), ``group_index``, ``node_id`` and
``problem_id``. Factories receive the same values as keywords.

With ``layout="paths"`` (``Batch.to_records``, ``to_samples``) an actor record is one
root-to-leaf path instead of one span: the same keys plus ``advantages``, the per-token
advantages aligned to ``tokens`` (each generated token's own edge's advantage where
``loss_mask`` is true, 0.0 elsewhere); ``advantage``, ``node_id`` and ``search_pass`` are
the path's last edge's. Every generated token is masked in exactly one record, so a
trainer that sums token losses gets the per-span layout's gradient from fewer tokens.
"""

from __future__ import annotations

from typing import Any, List, Optional, Protocol, TypeVar

from . import _lib
from .preparation import Batch, RewardConfig
from .tree import PackedSequence, SchedulerView
from .types import ESTIMATOR_KEY, LANE_KEY, Lane

T = TypeVar("T", covariant=True)


class SampleFactory(Protocol[T]):
    """Converts a packed actor span into a trainer-specific sample. Receives the span
    (full context, trainable only on its generated tokens), its behaviour log
    probabilities, the prepared advantage as ``reward``, the lane and the group index, and
    as ``**extra`` the default record's other keys (tokens, loss_mask, behavior_logprobs,
    advantage, estimator, node_id, search_pass, problem_id, and with ``layout="paths"``
    advantages: the per-token advantages, which a path record's factory must use instead
    of ``reward``, the last edge's advantage)."""

    def __call__(self, *, span: PackedSequence, logprobs: tuple, reward: float, lane: Lane, group_index: int, **extra: Any) -> T: ...


class CriticSampleFactory(Protocol[T]):
    """Converts a checkpoint context and critic target into the trainer's critic record;
    ``**extra`` carries lane, node_id and problem_id."""

    def __call__(self, *, context: str, target: float, group_index: int, **extra: Any) -> T: ...


def to_samples(
    result: Batch,
    group_index: int,
    *,
    sample_factory: Optional[SampleFactory[Any]] = None,
    critic_sample_factory: Optional[CriticSampleFactory[Any]] = None,
    min_abs_advantage: Optional[float] = None,
    layout: str = "spans",
    visitation_weights: bool = True,
) -> List[Any]:
    """Convert a prepared batch into actor and critic records for a trainer: actor
    records first (one per generated span, or one per root-to-leaf path with
    ``layout="paths"``), then critic records. The same as
    ``result.to_records(group_index, actor_factory=sample_factory,
    critic_factory=critic_sample_factory, min_abs_advantage=min_abs_advantage,
    layout=layout, visitation_weights=visitation_weights)``."""
    return result.to_records(
        group_index,
        actor_factory=sample_factory,
        critic_factory=critic_sample_factory,
        min_abs_advantage=min_abs_advantage,
        layout=layout,
        visitation_weights=visitation_weights,
    )


def format_edges(result: Batch) -> str:
    """Actor weights and critic targets of a prepared batch, for inspection."""
    with result._go_batch() as go:
        return _lib.call_string("focus_batch_text", _lib.c_handle(go.handle), *_lib.text_arg("edges"))


def format_tree(view: SchedulerView[Any], result: Optional[Batch] = None) -> str:
    """The search tree: parent-child structure, terminal states, rewards and critic
    predictions, with actor weights beside their nodes when a prepared batch is given."""
    state = view.state
    if result is None:
        return _lib.call_string("focus_format_tree", _lib.c_handle(state.handle), _lib.c_handle(0))
    with result._go_batch() as go:
        return _lib.call_string("focus_format_tree", _lib.c_handle(state.handle), _lib.c_handle(go.handle))


def format_tree_html(view: SchedulerView[Any], result: Optional[Batch] = None, *, reward_config: Optional[RewardConfig] = None) -> str:
    """A self-contained HTML picture of the tree: nodes coloured by refined value, edges by
    advantage; click a node to read its segment text, critic prediction and target."""
    cfg = (reward_config or (result.reward_config if result else None) or RewardConfig())._json()
    state = view.state
    if result is None:
        return _lib.call_string("focus_tree_html", _lib.c_handle(state.handle), cfg, len(cfg), _lib.c_handle(0))
    with result._go_batch() as go:
        return _lib.call_string("focus_tree_html", _lib.c_handle(state.handle), cfg, len(cfg), _lib.c_handle(go.handle))


__all__ = [
    "ESTIMATOR_KEY",
    "LANE_KEY",
    "CriticSampleFactory",
    "Lane",
    "SampleFactory",
    "format_edges",
    "format_tree",
    "format_tree_html",
    "to_samples",
]
