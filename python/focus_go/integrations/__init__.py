"""Hand FOCUS collections to a trainer.

Every integration asks for the same thing: a ``CollectorFor`` that builds the collector
for one ``Problem`` (a plain type of ``focus_go.types``, re-exported here) under the
trainer's current policy, plus a critic sink.
``focus_go.integrations.tinker`` supplies a loop you run; ``focus_go.integrations.slime``
supplies hooks Slime calls. Both go through ``collect_records``, which you can call
directly for a trainer FOCUS does not integrate yet.

Neither trainer trains the critic: each collection's critic records go to a
``CriticSink`` (``JsonlDirectory`` writes them to files) for your value-model loop.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from .._records import Rollout, _layout_arg, jsonl, tree_records
from .. import _rules
from ..collector import Collector, _native_tokenizer
from ..errors import CollectionError, ConfigError
from ..search import first_burst
from ..generation.policy import Policy
from ..types import Problem
from ..workspace import Workspace

CollectorFor = Callable[[Policy[Any], Problem], Collector]
"""What every trainer integration asks of you: a function that builds one problem's ``Collector``.

It is called with the trainer's current policy and one ``Problem``, and returns the
``Collector`` that should collect it. The Tinker loop and the Slime hooks take the same
function. Build a fresh environment per problem so concurrent problems never share a
reference answer. The integration uses each collector once inside ``async with``, so the
collector's own ``close_services`` decides whether its services close afterwards;
policies and critics stay with their owner.

Example:
    ```python
    from focus import Agent, Collector, Critic, MathEnv, Segments, Selective

    def collector_for(policy, problem):
        agent = Agent(
            policy=policy,
            env=MathEnv(problem.label, policy.decode),
            system_prompt="Solve the problem.",
            context=Segments(256),
        )
        return Collector(agent, critic=Critic.constant(0.5), search=Selective(budget=32, warmup=16))
    ```
"""

CriticSink = Callable[[Sequence[Dict[str, Any]]], None]
"""Where critic records go: a callable that receives each collection's critic records.

Neither trainer trains the critic, so each collection's critic records (dicts with
``context``, ``target``, ``lane``, ``group_index``, ``node_id`` and ``problem_id``) are
handed to this callable, once per collection; your value-model loop reads them back.
``JsonlDirectory`` is a ready-made sink.
"""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe_stem(text: str, limit: int = 64) -> str:
    """A file-name fragment that cannot leave the directory: only letters, digits, ``.``,
    ``_`` and ``-``, no leading dot, at most ``limit`` characters."""
    stem = _UNSAFE.sub("_", text).lstrip(".")[:limit]
    return stem or "records"


def _write_atomic(path: Path, text: str, suffix: str = ".part") -> None:
    """Write ``text`` to ``path`` through a synced temporary file (``.tmp-*<suffix>``) in the
    same directory, renamed into place: a reader sees the old file or the whole new one."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class JsonlDirectory:
    """A critic sink that writes each call's critic records to a new JSONL file in a directory.

    One JSON object per line, one file per call. Each file is written to a temporary name
    in the same directory and renamed into place, so a reader never sees a partial file and
    concurrent collectors, threads and worker processes never interleave lines. File names
    are ``<problem id, made safe>-<uuid4>.jsonl``; a problem id cannot move the file out of
    the directory. A call without records writes nothing. Instances are picklable (they hold
    only the path), so one sink can be handed to spawned worker processes.

    Example:
        ```python
        from focus.integrations import JsonlDirectory

        sink = JsonlDirectory("critic-targets")
        ```

    Args:
        directory: The directory, created if missing.
    """

    def __init__(self, directory: Union[str, Path]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def __call__(self, records: Sequence[Dict[str, Any]]) -> None:
        """Write ``records`` to a new file; write nothing for an empty sequence.

        Args:
            records: JSON-serialisable dicts with finite numbers.

        Raises:
            TypeError: A record holds a value JSON cannot represent; raised before any
                file is created.
            ValueError: A record holds a non-finite number; raised before any file is
                created.
        """
        records = list(records)
        if not records:
            return
        lines = jsonl(records)
        problem_id = records[0].get("problem_id") if isinstance(records[0], Mapping) else None
        name = f"{_safe_stem(str(problem_id if problem_id is not None else 'records'))}-{uuid.uuid4().hex}.jsonl"
        self.directory.mkdir(parents=True, exist_ok=True)
        _write_atomic(self.directory / name, lines, suffix=".jsonl.part")

    def __repr__(self) -> str:
        return f"JsonlDirectory({str(self.directory)!r})"


def _all_rollouts_failed(state: Any) -> bool:
    """Whether no root-to-leaf path of the tree finished without failing (the engine's
    count, in the tree's stats)."""
    return bool(state.stats["all_failed"])


def _check_min_abs_advantage(min_abs_advantage: Optional[float]) -> None:
    """Refuse a bad ``min_abs_advantage`` before any collection (the Go rule, core/export;
    the filtering itself happens in Go's export)."""
    if min_abs_advantage is not None:
        _rules.check("min_abs_advantage", {"value": float(min_abs_advantage)})


def _check_layout(layout: str) -> None:
    """Refuse a bad record ``layout`` before any collection (the Go rule, core/export)."""
    _layout_arg(layout)
    _rules.check("record_layout", {"value": layout})


class _Collected(NamedTuple):
    """What ``_collect`` returns: the kept actor records, the critic records, the
    collection's failures, (only when asked for) the first actor record
    ``min_abs_advantage`` dropped if it dropped every one, and the tree's finished
    rollouts and generated tokens (Go's, whatever records were dropped)."""

    actor: List[Dict[str, Any]]
    critic: List[Dict[str, Any]]
    failures: Tuple[Tuple[int, str], ...]
    dropped: Optional[Dict[str, Any]] = None
    rollouts: Tuple[Rollout, ...] = ()
    sampled_tokens: int = 0


async def _collect(
    collector: Collector,
    problem: Problem,
    *,
    group_index: int,
    workspace_for: Optional[Callable[[Problem], Workspace]],
    allow_partial: bool,
    min_abs_advantage: Optional[float] = None,
    keep_dropped: bool = False,
    on_state: Optional[Callable[[Any], None]] = None,
    layout: str = "spans",
    visitation_weights: bool = False,
    tokenizer: Any = None,
    skip_special_tokens: bool = False,
    resume: Any = None,
) -> _Collected:
    """``collect_records`` also returning the failures and the tree's rollouts: collect the
    tree, then prepare and export it in one Go call (``tree_records``, which applies
    ``min_abs_advantage``). ``keep_dropped`` also returns the first actor record when the
    threshold dropped them all (Slime keeps its group's shape with it). ``on_state`` sees
    the collected tree (its SchedulerState) before it is closed. ``layout`` is the actor
    record layout (``Batch.to_records``). ``visitation_weights`` exports each actor
    advantage times its edge's visitation factor (``ActorSample.visitation``).
    ``tokenizer`` decodes each actor record's ``response_text`` in Go (None: no text),
    without special tokens if ``skip_special_tokens``. ``resume`` is a partial tree the
    collection continues (``Collector.collect(resume=...)``)."""
    _check_layout(layout)  # a bad layout fails before any collection
    if not isinstance(problem, Problem):
        raise ConfigError(f"collect_records: problem must be a Problem, got {type(problem).__name__}")
    if not isinstance(collector, Collector):
        raise ConfigError(f"collect_records: collector must be a Collector, got {type(collector).__name__}")
    async with contextlib.AsyncExitStack() as stack:
        if workspace_for is not None:
            workspace = workspace_for(problem)
            if not isinstance(workspace, Workspace):
                raise ConfigError(f"collect_records: workspace_for returned {type(workspace).__name__}, expected a Workspace")
            if collector.workspace is None:
                collector.workspace = workspace
            elif collector.workspace is not workspace:
                raise ConfigError(
                    "collect_records: the collector already has its own workspace; give it none, or drop workspace_for"
                )
            await stack.enter_async_context(workspace)
        # The tree starts once the policy has room for it (Policy.admit: its requests in
        # flight, queued and reserved below its capacity), so a loop that starts many
        # collections at once keeps the servers full without flooding them.
        admit = getattr(collector.agent.policy, "admit", None)
        if admit is not None:
            await stack.enter_async_context(await admit(first_burst(collector.search)))
        async with collector:
            state = await collector.collect(problem, allow_partial=allow_partial, resume=resume)
    failures = tuple(state.failures)
    dropped = None
    try:
        if failures and _all_rollouts_failed(state):
            exc = CollectionError(
                f"collect_records: every rollout of problem {problem.id!r} failed "
                f"({len(failures)} failures; first: {failures[0][1]})"
            )
            exc.state = state  # type: ignore[attr-defined]
            exc.failures = failures  # type: ignore[attr-defined]
            state = None  # the exception owns it now
            raise exc

        def export(threshold: Optional[float]) -> Any:
            return tree_records(
                state, reward_config=collector.reward, estimator=collector.estimator, group_index=group_index,
                min_abs_advantage=threshold, layout=layout, visitation_weights=visitation_weights,
                tokenizer=tokenizer, skip_special_tokens=skip_special_tokens,
            )

        records = export(min_abs_advantage)
        if on_state is not None:
            on_state(state)
        if keep_dropped and not records.actor and records.sample_weights and min_abs_advantage:
            dropped = next(iter(export(None).actor), None)
    finally:
        if state is not None:
            state.close()
    return _Collected(records.actor, records.critic, failures, dropped, records.rollouts, records.sampled_tokens)


async def collect_records(
    collector: Collector,
    problem: Problem,
    *,
    group_index: int,
    workspace_for: Optional[Callable[[Problem], Workspace]] = None,
    min_abs_advantage: Optional[float] = None,
    allow_partial: bool = False,
    layout: str = "spans",
    visitation_weights: bool = False,
) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Collect one problem with one collector and return its ``(actor, critic)`` records.

    Both trainer integrations call it for each problem; call it directly for a trainer FOCUS
    does not integrate yet. The records are dicts (the keys are listed under
    ``to_samples``), with ``group_index`` on every record.

    With a token-server policy (``SGLangPolicy``, ``VLLMPolicy``) the collection first waits
    for the policy to admit the tree: start as many ``collect_records`` as you like at once,
    and trees begin, in the order they asked, as the servers' requests in flight drop below
    their capacity. The collector is used once, inside ``async with``; its policy and critic
    stay with their owner.

    Args:
        collector: The collector for this problem.
        problem: The problem.
        group_index: Identifies the prompt group; copied into every record.
        workspace_for: Returns the problem's ``Workspace``. It becomes the collector's
            workspace (a collector built with a different one is refused) and is entered
            before the collector and left after it, so the collection's tools run in it.
        min_abs_advantage: Drops actor records whose advantage is smaller in magnitude.
        allow_partial: Keep a collection with failed rollouts or critic calls. A collection
            in which every rollout failed still raises, because it has nothing to train on.
        layout: ``"spans"`` (one actor record per generated span) or ``"paths"`` (one per
            root-to-leaf path, with per-token ``advantages``; see ``Batch.to_records``).
        visitation_weights: Export each advantage multiplied by its edge's visitation
            factor (``ActorSample.visitation``), an unbiased on-policy gradient estimate from
            a searched tree; False (the default) exports the unweighted advantage.

    Returns:
        The actor records and the critic records.

    Raises:
        CollectionError: Rollouts or critic calls failed and ``allow_partial`` is False, or
            every rollout failed. Its ``state`` and ``failures`` keep what was collected;
            close ``state`` when done.
        ConfigError: An argument is invalid, checked before anything is collected.
    """
    _check_min_abs_advantage(min_abs_advantage)  # a bad threshold fails before any collection
    collected = await _collect(
        collector, problem, group_index=group_index, workspace_for=workspace_for, allow_partial=allow_partial,
        min_abs_advantage=min_abs_advantage, layout=layout, visitation_weights=visitation_weights,
        tokenizer=_native_tokenizer(collector.agent.policy),
    )
    return collected.actor, collected.critic


__all__ = ["CollectorFor", "CriticSink", "JsonlDirectory", "Problem", "collect_records"]
