"""pass@k for Slime's logs: over each tree's finished rollouts (``log_rollout``) and per
eval dataset (``log_eval_rollout``), with the estimator Slime's ``--log-passrate`` uses
(``pass_rates``).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Sequence, Tuple

from ...errors import ConfigError


def _pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of n attempts with c passes: 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_rates(outcomes: Sequence[Tuple[int, int]]) -> Dict[str, float]:
    """pass@k over problems given as ``(attempts, passes)`` pairs, for k = 1, 2, 4, ... up
    to the most attempts: each ``pass@k`` is the mean unbiased estimate over the problems
    with at least k attempts (the estimator Slime's ``compute_pass_rate`` uses)."""
    most = max((n for n, _ in outcomes), default=0)
    out: Dict[str, float] = {}
    k = 1
    while k <= most:
        values = [_pass_at_k(n, c, k) for n, c in outcomes if n >= k]
        out[f"pass@{k}"] = sum(values) / len(values)
        k *= 2
    return out


def _tree_outcomes(samples: Sequence[Any]) -> List[Tuple[int, int]]:
    """One ``(finished_rollouts, successes)`` per tree among ``samples`` (the siblings of a
    tree carry the same counts in ``metadata["focus"]``; keyed by problem id)."""
    trees: Dict[Any, Tuple[int, int]] = {}
    for s in samples:
        focus = (getattr(s, "metadata", None) or {}).get("focus") or {}
        if "finished_rollouts" in focus and focus["finished_rollouts"] > 0:
            trees[focus.get("problem_id")] = (int(focus["finished_rollouts"]), int(focus["successes"]))
    return list(trees.values())


def _trained_tokens_per_tree(samples: Sequence[Any]) -> List[int]:
    """Each tree's trained (loss-mask) tokens over its samples: Slime's per-rollout
    ``rollout_mask_sums`` entry, the M that ``normalized_policy_tokens`` should be near."""
    trees: Dict[Any, int] = {}
    for s in samples:
        focus = (getattr(s, "metadata", None) or {}).get("focus") or {}
        if "finished_rollouts" in focus and not getattr(s, "remove_sample", False):
            key = focus.get("problem_id")
            trees[key] = trees.get(key, 0) + sum(1 for m in (getattr(s, "loss_mask", None) or ()) if m)
    return list(trees.values())


def _tree_focus(samples: Sequence[Any]) -> List[Dict[str, Any]]:
    """Each tree's ``metadata["focus"]`` once (its samples carry the same tree counts)."""
    trees: Dict[Any, Dict[str, Any]] = {}
    for s in samples:
        focus = (getattr(s, "metadata", None) or {}).get("focus") or {}
        if "finished_rollouts" in focus:
            trees.setdefault(focus.get("problem_id"), focus)
    return list(trees.values())


def _statistics(values: Sequence[float]) -> Dict[str, float]:
    """Slime's compute_statistics: mean, median, max, min."""
    ordered = sorted(float(v) for v in values)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return {"mean": sum(ordered) / n, "median": median, "max": ordered[-1], "min": ordered[0]}


def _tree_metrics(samples: Sequence[Any]) -> Dict[str, float]:
    """The trees' own rollout metrics where Slime's per-sample ones count segments:
    ``rollout/focus/truncated_ratio`` (finished rollouts cut at the length limit over all
    finished rollouts; Slime's ``rollout/truncated_ratio`` counts samples, which are
    segments and always COMPLETED) and ``rollout/focus/response_len/{mean,median,max,min}``
    (the generated tokens of each finished rollout's root-to-leaf path; Slime's
    ``rollout/response_len/*`` are per segment), from the counts Go recorded in each
    tree's stats."""
    trees = _tree_focus(samples)
    finished = sum(int(f["finished_rollouts"]) for f in trees)
    out: Dict[str, float] = {}
    if finished:
        out["rollout/focus/truncated_ratio"] = sum(int(f.get("truncated_rollouts", 0)) for f in trees) / finished
    lengths = [n for f in trees for n in (f.get("rollout_tokens") or ())]
    if lengths:
        out |= {f"rollout/focus/response_len/{k}": v for k, v in _statistics(lengths).items()}
    return out | _resume_metrics(trees)


def _resume_metrics(trees: Sequence[Dict[str, Any]]) -> Dict[str, float]:
    """What ``--partial-rollout`` resumes saved, when a tree of the rollout was resumed or
    restarted: ``rollout/focus/tokens_resumed`` and ``rollout/focus/rollouts_resumed`` (the
    generated tokens and finished rollouts kept from aborted collections instead of being
    generated again) and ``rollout/focus/resume_restarted`` (the trees whose kept partial
    tree could not be resumed and were collected again from scratch)."""
    resumed = [f for f in trees if f.get("rollouts_resumed") or f.get("tokens_resumed") or f.get("resume_restarted")]
    if not resumed:
        return {}
    return {
        "rollout/focus/tokens_resumed": float(sum(int(f.get("tokens_resumed", 0)) for f in resumed)),
        "rollout/focus/rollouts_resumed": float(sum(int(f.get("rollouts_resumed", 0)) for f in resumed)),
        "rollout/focus/resume_restarted": float(sum(1 for f in resumed if f.get("resume_restarted"))),
    }


def _slime_log(args: Any, rollout_id: int, metrics: Dict[str, Any], step_key: str) -> None:
    """Log ``metrics`` through Slime's own logger at the rollout's step (inside Slime only)."""
    from slime.observability import logging_utils  # type: ignore[import-not-found]
    from slime.observability.metric_utils import compute_rollout_step  # type: ignore[import-not-found]

    metrics = {**metrics, step_key: compute_rollout_step(args, rollout_id)}
    logging_utils.log(args, metrics, step_key=step_key)


def log_rollout(rollout_id: int, args: Any, samples: List[Any], rollout_extra_metrics: Any, rollout_time: float) -> bool:
    """Rollout log hook: add pass@k over each tree's finished rollouts to Slime's rollout
    metrics, as ``passrate/pass@k`` (k = 1, 2, 4, ... up to the largest tree; a tree's
    rollout passes when it finishes with the top reward, e.g. a correct MathEnv answer).
    A tree's rollouts share prefixes, so this is the pass rate of the searched tree's
    attempts, not of independent samples.

    Slime's own ``--log-passrate`` cannot see trees (it reshapes one reward per sample into
    prompts x n_samples_per_prompt); the tree counts travel in each sample's
    ``metadata["focus"]`` (``finished_rollouts``, ``successes``). It also reports
    ``rollout/focus/trained_tokens_per_tree``, the mean loss-mask tokens per tree (Slime's
    per-rollout denominator; see ``normalized_policy_tokens``), and the trees' truncation
    and per-rollout response lengths (``rollout/focus/truncated_ratio``,
    ``rollout/focus/response_len/*``), and what resumed partial trees saved
    (``rollout/focus/tokens_resumed``, ``rollout/focus/rollouts_resumed``,
    ``rollout/focus/resume_restarted``; only when a tree was resumed or restarted). Slime's own ``rollout/prefix_cache_hit_rate`` is
    the trees' prefix reuse (each tree's first sample carries it as
    ``prefix_cache_info``). The metrics go into
    ``rollout_extra_metrics``, which Slime logs with its default rollout metrics (or, if
    Slime passed none, through Slime's logger), and the hook returns False so that
    default logging still runs. Name it with
    ``--custom-rollout-log-function-path focus.integrations.slime.log_rollout``."""
    metrics: Dict[str, Any] = {f"passrate/{k}": v for k, v in pass_rates(_tree_outcomes(samples)).items()}
    trained = _trained_tokens_per_tree(samples)
    if trained:
        metrics["rollout/focus/trained_tokens_per_tree"] = sum(trained) / len(trained)
    metrics |= _tree_metrics(samples)
    if metrics:
        if isinstance(rollout_extra_metrics, dict):
            rollout_extra_metrics.update(metrics)
        else:
            _slime_log(args, rollout_id, metrics, "rollout/step")
    return False


def _eval_group_size(args: Any, name: str) -> int:
    for dataset in getattr(args, "eval_datasets", None) or ():
        if getattr(dataset, "name", None) == name and getattr(dataset, "n_samples_per_eval_prompt", None):
            return int(dataset.n_samples_per_eval_prompt)
    return int(getattr(args, "n_samples_per_eval_prompt", 1) or 1)


def log_eval_rollout(rollout_id: int, args: Any, data: Dict[str, Any], extra_metrics: Any) -> bool:
    """Eval log hook: pass@k per eval dataset as ``eval/<name>-pass@k``, the keys and
    semantics of Slime's ``--log-passrate`` (each eval prompt's
    ``n_samples_per_eval_prompt`` outcome rewards, a reward of 1 a pass), for runs that
    cannot pass ``--log-passrate`` (n_samples_per_prompt > 1 with FOCUS trees). The
    group size is the dataset's own ``n_samples_per_eval_prompt`` where its eval config
    sets one. Nothing is added when ``--log-passrate`` is on (Slime computes the same).
    Returns False, so Slime's default eval logging still runs. Name it with
    ``--custom-eval-rollout-log-function-path focus.integrations.slime.log_eval_rollout``."""
    if getattr(args, "log_passrate", False):
        return False
    metrics: Dict[str, Any] = {}
    for name, result in (data or {}).items():
        rewards = list(result.get("rewards") or ())
        n = _eval_group_size(args, name)
        if n < 2 or not rewards:
            continue
        if len(rewards) % n:
            raise ConfigError(
                f"log_eval_rollout: eval dataset {name!r} has {len(rewards)} rewards, not a multiple of its "
                f"n_samples_per_eval_prompt {n}"
            )
        groups = [rewards[i : i + n] for i in range(0, len(rewards), n)]
        outcomes = [(n, sum(1 for r in g if r == 1)) for g in groups]
        metrics |= {f"eval/{name}-{k}": v for k, v in pass_rates(outcomes).items()}
    if metrics:
        if isinstance(extra_metrics, dict):
            extra_metrics.update(metrics)
        else:
            _slime_log(args, rollout_id, metrics, "eval/step")
    return False
