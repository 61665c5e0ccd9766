"""Slime's dynamic sampling on trees: ``tree_has_signal``, the tree-aware filter for
``--dynamic-sampling-filter-path``.

Slime's stock ``check_reward_nonzero_std`` keeps a group whose elements' rewards differ.
A group element here is a whole tree whose reward is its success rate: with one tree per
prompt the standard deviation of one value is undefined and every group is dropped (the
rollout never fills its batch), and with several trees it drops groups whose trees carry
within-tree advantages. The generate hook refuses it, naming this filter.
"""

from __future__ import annotations

from typing import Any, List


def _tree_outcomes_differ(element: Any) -> bool:
    """Whether a group element (a tree's ``TreeSamples``, or any list of its samples)
    comes from a tree whose finished rollouts did not all end alike, as Go recorded in
    its stats (``outcomes_differ``, carried in each sample's ``metadata["focus"]``)."""
    samples = element if isinstance(element, list) else [element]
    for s in samples:
        focus = (getattr(s, "metadata", None) or {}).get("focus") or {}
        if "outcomes_differ" in focus:
            return bool(focus["outcomes_differ"]) and not getattr(s, "remove_sample", False)
    return False


def tree_has_signal(args: Any, samples: List[Any], **kwargs: Any) -> Any:
    """Dynamic sampling filter for trees: keep a prompt's group when at least one of its
    trees has finished rollouts that did not all end alike (their returns differ: some
    correct and some not, for ``MathEnv``), so its advantages carry an outcome to learn
    from; drop it otherwise, with the reason ``tree_all_alike`` (Slime logs
    ``rollout/dynamic_filter/drop_tree_all_alike``). It works with any
    ``--n-samples-per-prompt``, 1 included. Name it with
    ``--dynamic-sampling-filter-path focus.integrations.slime.tree_has_signal``.

    Args:
        args: Slime's arguments (unused).
        samples: One prompt's group: ``n_samples_per_prompt`` trees.

    Returns:
        Slime's ``DynamicFilterOutput`` (a bool outside Slime).
    """
    keep = any(_tree_outcomes_differ(element) for element in samples)
    try:
        from slime.rollout.filter_hub.base_types import DynamicFilterOutput  # type: ignore[import-not-found]
    except ImportError:
        return keep
    return DynamicFilterOutput(keep=keep, reason=None if keep else "tree_all_alike")
