"""Inspect a collected tree and convert prepared training data into trainer records.

Default records are dicts. An actor record (one per generated span) has ``tokens`` (the
full exact token context up to and including the span), ``loss_mask`` (true only on the
span's generated tokens), ``behavior_logprobs`` (aligned to ``tokens``, 0.0 where not
generated), ``advantage``, ``lane`` ("actor"), ``group_index``, ``estimator``,
``node_id``, ``search_pass``, ``problem_id``, ``response_start`` (the index of the first
generated token), ``response_text`` (the tokens from there, decoded once by the Go core
with the collection's tokenizer; None from a ``Batch``, which has none), ``return`` (the
sum of the environment rewards on the record's path from the root), ``finished``
(that path ends a finished rollout: terminal, not failed), ``off_policy_tokens`` (how
many tokens of the response, from ``response_start`` on, an earlier collection generated:
one the tree was resumed from with ``Collector.collect(resume=...)``; 0 for a tree never
resumed) and ``weight_versions`` (the versions of the weights that generated the
response, as the server reported them: the distinct versions of the edges holding it, in
path order; several only when the weights changed between its edges; empty when the
server reports none). A critic record (one per target) has
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
    """A callable that turns one packed actor span into your trainer's sample type.

    It is called with keyword arguments only: the span (the full context, trainable only on
    its generated tokens), its behaviour log probabilities, the prepared advantage as
    ``reward``, the lane and the group index. ``**extra`` carries the default record's other
    keys (``tokens``, ``loss_mask``, ``behavior_logprobs``, ``advantage``, ``estimator``,
    ``node_id``, ``search_pass``, ``problem_id``, ``response_start``, ``response_text``,
    ``return``, ``finished``, ``off_policy_tokens``, ``weight_versions``). With ``layout="paths"`` it also carries
    ``advantages``, the per-token advantages, which a path record's factory must use instead
    of ``reward`` (the path's last edge's advantage).

    Example:
        ```python
        def actor_record(*, span, logprobs, reward, lane, group_index, **extra):
            return {
                "tokens": span.tokens,
                "loss_mask": span.trainable,
                "behavior_logprobs": logprobs,
                "advantage": reward,
                "group": group_index,
            }

        records = batch.to_records(0, actor_factory=actor_record)
        ```
    """

    def __call__(self, *, span: PackedSequence, logprobs: tuple, reward: float, lane: Lane, group_index: int, **extra: Any) -> T:
        """Build one actor sample.

        Args:
            span: The packed sequence: exact tokens, trainable mask and log probabilities.
            logprobs: The behaviour log probabilities, aligned with ``span.tokens``.
            reward: The prepared advantage.
            lane: ``"actor"``.
            group_index: The prompt group the record belongs to.
            **extra: The default record's other keys.

        Returns:
            Your trainer's sample.
        """
        ...


class CriticSampleFactory(Protocol[T]):
    """A callable that turns a checkpoint context and its critic target into your trainer's record.

    It is called with keyword arguments only; ``**extra`` carries ``lane``, ``node_id`` and
    ``problem_id``.

    Example:
        ```python
        def critic_record(*, context, target, group_index, **extra):
            return {"input": context, "target": target, "group": group_index}

        records = batch.to_records(0, critic_factory=critic_record)
        ```
    """

    def __call__(self, *, context: str, target: float, group_index: int, **extra: Any) -> T:
        """Build one critic record.

        Args:
            context: The checkpoint's serialized context, the text the critic read.
            target: The direct-branch backup the critic should predict.
            group_index: The prompt group the record belongs to.
            **extra: ``lane``, ``node_id`` and ``problem_id``.

        Returns:
            Your trainer's critic record.
        """
        ...


def to_samples(
    result: Batch,
    group_index: int,
    *,
    sample_factory: Optional[SampleFactory[Any]] = None,
    critic_sample_factory: Optional[CriticSampleFactory[Any]] = None,
    min_abs_advantage: Optional[float] = None,
    layout: str = "spans",
    visitation_weights: bool = False,
) -> List[Any]:
    """Convert a prepared batch into actor and critic records for a trainer.

    Actor records come first (one per generated span, or one per root-to-leaf path with
    ``layout="paths"``), then critic records. Records are dicts unless you pass factories.
    The same as ``Batch.to_records``:
    ``to_samples(batch, i, sample_factory=f, critic_sample_factory=g)`` equals
    ``batch.to_records(i, actor_factory=f, critic_factory=g)``.

    Example:
        ```python
        from focus.export import to_samples

        records = to_samples(batch, group_index=0)
        ```

    Args:
        result: The prepared batch.
        group_index: Identifies the prompt group; copied into every record.
        sample_factory: Builds each actor record instead of a dict.
        critic_sample_factory: Builds each critic record instead of a dict.
        min_abs_advantage: Drops actor records whose advantage is smaller in magnitude.
        layout: ``"spans"`` or ``"paths"``, as for ``Batch.to_records``.
        visitation_weights: Export advantages multiplied by their edges' visitation
            factors, as for ``Batch.to_records``.

    Returns:
        The actor records, then the critic records.

    Raises:
        ConfigError: An unknown ``layout``, a negative or non-finite ``min_abs_advantage``.
    """
    return result.to_records(
        group_index,
        actor_factory=sample_factory,
        critic_factory=critic_sample_factory,
        min_abs_advantage=min_abs_advantage,
        layout=layout,
        visitation_weights=visitation_weights,
    )


def format_edges(result: Batch) -> str:
    """Format a prepared batch's actor weights and critic targets for inspection.

    Args:
        result: The prepared batch.

    Returns:
        The text, one edge or target per line: which segments receive positive or negative
            weights, and which targets supervise the critic.
    """
    with result._go_batch() as go:
        return _lib.call_string("focus_batch_text", _lib.c_handle(go.handle), *_lib.text_arg("edges"))


def format_tree(view: SchedulerView[Any], result: Optional[Batch] = None) -> str:
    """Format the search tree as text for inspection.

    Example:
        ```python
        from focus.export import format_tree
        from focus.extend import SchedulerView

        print(format_tree(SchedulerView(tree), batch))
        ```

    Args:
        view: A view of the collected tree.
        result: The prepared batch; when given, each node shows its actor weight.

    Returns:
        The tree, one node per line: parent-child structure, terminal states, rewards and
            critic predictions.
    """
    state = view.state
    if result is None:
        return _lib.call_string("focus_format_tree", _lib.c_handle(state.handle), _lib.c_handle(0))
    with result._go_batch() as go:
        return _lib.call_string("focus_format_tree", _lib.c_handle(state.handle), _lib.c_handle(go.handle))


def format_tree_html(view: SchedulerView[Any], result: Optional[Batch] = None, *, reward_config: Optional[RewardConfig] = None) -> str:
    """Render the tree as a self-contained HTML page.

    Nodes are coloured by refined value and edges by advantage; clicking a node shows its
    segment text, critic prediction and target.

    Args:
        view: A view of the collected tree.
        result: The prepared batch, whose advantages colour the edges.
        reward_config: The settings to compute refined values with; by default the batch's,
            else ``RewardConfig()``.

    Returns:
        The HTML document.
    """
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
