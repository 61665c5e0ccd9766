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


def _slime_rollout_metrics() -> Any:
    """Slime's rollout-metrics module (inside Slime), or None where Slime is not importable."""
    import importlib

    try:
        return importlib.import_module("slime.observability.rollout_metrics")
    except ImportError:
        return None


# Slime's rollout metrics that count samples where a tree has finished paths: replaced by
# the per-path values (``_tree_metrics``' ``rollout/focus/...`` keys), the per-sample ones
# kept as ``rollout/focus/segment_...``.
_PER_PATH = ("truncated_ratio", "response_len/mean", "response_len/median", "response_len/max", "response_len/min")


def _slime_rollout_log(args: Any, samples: List[Any], extra: Any, rollout_time: float, ours: Dict[str, Any], module: Any) -> Dict[str, Any]:
    """What Slime's ``log_rollout_data`` logs for the rollout (the extra metrics, then its
    ``rollout/`` and ``perf/`` metrics of the samples), with focus's metrics added and
    Slime's per-sample truncation ratio and response lengths replaced by the per-path ones
    (the per-sample values kept as ``rollout/focus/segment_...``)."""
    log: Dict[str, Any] = {**(extra or {}), **ours}
    log |= {f"rollout/{k}": v for k, v in module.compute_metrics_from_samples(args, samples).items()}
    log |= {f"perf/{k}": v for k, v in module.compute_perf_metrics_from_samples(args, samples, rollout_time).items()}
    for key in _PER_PATH:
        if f"rollout/focus/{key}" in ours:
            if f"rollout/{key}" in log:
                log[f"rollout/focus/segment_{key}"] = log[f"rollout/{key}"]
            log[f"rollout/{key}"] = ours[f"rollout/focus/{key}"]
    return log


def log_rollout(rollout_id: int, args: Any, samples: List[Any], rollout_extra_metrics: Any, rollout_time: float) -> bool:
    """Rollout log hook: Slime's rollout metrics with a tree's finished paths where Slime
    counts samples, and pass@k over each tree's finished rollouts.

    A tree's samples are its segments (or paths), all COMPLETED, so Slime's own
    ``rollout/truncated_ratio`` and ``rollout/response_len/*`` would count segments: a
    ratio of 0.0 when every path was cut at the length limit, a segment's length where a
    response is a path. Slime's ``log_rollout_data`` lets its own values win over the ones
    a log hook adds, so, for a rollout of FOCUS trees inside Slime, this hook logs the
    rollout itself, as ``log_rollout_data`` would (the extra metrics, Slime's ``rollout/``
    and ``perf/`` metrics of the samples, at Slime's ``rollout/step``; nothing under
    ``--load-debug-rollout-data``), with ``rollout/truncated_ratio`` the share of the
    finished paths cut at the length limit and ``rollout/response_len/{mean,median,max,min}``
    over each finished path's generated tokens (Slime's ``effective_response_length`` of a
    path: its loss-mask tokens), and returns True so that Slime does not log it again.
    Slime's per-sample values stay as ``rollout/focus/segment_truncated_ratio`` and
    ``rollout/focus/segment_response_len/*``.

    Added to those: ``passrate/pass@k`` (k = 1, 2, 4, ... up to the largest tree; a tree's
    rollout passes when it succeeds: it ends at the top of the reward range, e.g. a correct
    MathEnv answer). A tree's rollouts share prefixes, so this is the pass rate of the
    searched tree's attempts, not of independent samples. Slime's own ``--log-passrate``
    cannot see trees (it reshapes one reward per sample into prompts x
    n_samples_per_prompt); the tree counts travel in each sample's ``metadata["focus"]``
    (``finished_rollouts``, ``successes``). Also ``rollout/focus/trained_tokens_per_tree``,
    the mean loss-mask tokens per tree (Slime's per-rollout denominator; see
    ``normalized_policy_tokens``), ``rollout/focus/truncated_ratio`` and
    ``rollout/focus/response_len/*`` (the per-path values under focus's own names), and
    what resumed partial trees saved (``rollout/focus/tokens_resumed``,
    ``rollout/focus/rollouts_resumed``, ``rollout/focus/resume_restarted``; only when a
    tree was resumed or restarted). Slime's own ``rollout/prefix_cache_hit_rate`` is the
    trees' prefix reuse (each tree's first sample carries it as ``prefix_cache_info``).

    focus's metrics are also added to ``rollout_extra_metrics`` when it is a dict. Samples
    without tree counts, or Slime not importable: the metrics go into
    ``rollout_extra_metrics`` (or, if it is not a dict, through Slime's logger) and the
    hook returns False, so Slime's default logging runs. Name it with
    ``--custom-rollout-log-function-path focus.integrations.slime.log_rollout``."""
    metrics: Dict[str, Any] = {f"passrate/{k}": v for k, v in pass_rates(_tree_outcomes(samples)).items()}
    trained = _trained_tokens_per_tree(samples)
    if trained:
        metrics["rollout/focus/trained_tokens_per_tree"] = sum(trained) / len(trained)
    metrics |= _tree_metrics(samples)
    module = _slime_rollout_metrics() if "rollout/focus/truncated_ratio" in metrics else None
    if module is not None:
        if not getattr(args, "load_debug_rollout_data", False):  # Slime logs nothing then
            _slime_log(args, rollout_id, _slime_rollout_log(args, samples, rollout_extra_metrics, rollout_time, metrics, module), "rollout/step")
    if isinstance(rollout_extra_metrics, dict):
        rollout_extra_metrics.update(metrics)
    elif metrics and module is None:
        _slime_log(args, rollout_id, metrics, "rollout/step")
    return module is not None


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
