"""Outcome rewards of collected rollouts, shared by the trainer integrations.

A rollout's outcome is the sum of the env rewards on its root-to-leaf path (undiscounted,
as the environment scored it), unlike the actor advantage a tree trains on. Go decides
which rollouts finished and what they returned (``core/tree``'s ``Finished`` and
``Returns``) and exports them with a tree's records: ``TreeOutcomes.of`` reads them from a
collection. ``evaluate_outcome`` runs the one unbranched rollout of a collector's agent
that evaluation uses (``Independent(1)``, no critic) and returns its outcome;
``rollout_record`` gives that rollout with its path record (Slime's evaluation sample).
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional

from .._records import Rollout, tree_records
from ..errors import ConfigError, ConfigTypeError, InternalError


@dataclass(frozen=True)
class TreeOutcomes:
    """What one collected tree sampled: the outcome of each finished rollout and the
    number of tokens the policy generated in it."""

    outcomes: List[float]
    tokens_sampled: int

    @classmethod
    def of(cls, collected: Any) -> "TreeOutcomes":
        """The outcomes of a collection (``_collect``'s result, or ``TreeRecords``): its
        finished rollouts' returns in node order and its generated tokens, as Go exported them."""
        return cls([r.outcome for r in collected.rollouts], collected.sampled_tokens)


class RolloutRecord(NamedTuple):
    """``rollout_record``'s answer: the rollout, its path record (None when the rollout
    generated no token) and the tree's generated tokens."""

    rollout: Rollout
    record: Optional[Dict[str, Any]]
    sampled_tokens: int


def rollout_record(
    state: Any, base: Any, *, tokenizer: Any = None, skip_special_tokens: bool = False, caller: str = "evaluate_outcome"
) -> RolloutRecord:
    """The one finished rollout of an unbranched tree (``unbranched_rollout``'s) and its
    path record (``layout="paths"``: tokens, loss mask, log probabilities, response start,
    return and finished flag, and the response text when ``tokenizer`` is given), all
    exported by Go in one call.
    The preparation is only the record's vehicle (its advantage is not used): ``base``'s
    reward range with terminal truncation, since an evaluation has no critic to bootstrap
    from, and ``DirectBranchTd``. Raises InternalError unless exactly one rollout finished."""
    from ..preparation import DirectBranchTd

    reward = base.reward
    if reward.truncation != "terminal":
        reward = dataclasses.replace(reward, truncation="terminal")
    records = tree_records(
        state, reward_config=reward, estimator=DirectBranchTd(), group_index=0, layout="paths",
        tokenizer=tokenizer, skip_special_tokens=skip_special_tokens,
    )
    if len(records.rollouts) != 1:
        raise InternalError(f"{caller}: expected one finished rollout, found {len(records.rollouts)}")
    rollout = records.rollouts[0]
    record = next((r for r in records.actor if r["node_id"] == rollout.node_id), None)
    return RolloutRecord(rollout, record, records.sampled_tokens)


async def unbranched_rollout(
    base: Any,
    problem: Any,
    *,
    workspace_for: Optional[Callable[[Any], Any]] = None,
    build: Optional[Callable[..., Any]] = None,
) -> Any:
    """Run the one unbranched rollout evaluation uses: ``base``'s agent under
    ``Independent(1)``, no critic, the collector's reward and estimator settings, and
    return the collected SchedulerState (the caller closes it). A workspace from
    ``workspace_for`` is entered around the rollout. ``build(base, search=, critic=,
    workspace=)`` makes the collector instead of a plain copy (Slime applies a call's
    sampling settings there)."""
    from ..collector import Collector
    from ..search import Independent
    from . import Workspace

    workspace = base.workspace
    if workspace_for is not None:
        workspace = workspace_for(problem)
        if not isinstance(workspace, Workspace):
            raise ConfigTypeError(f"workspace_for returned {type(workspace).__name__}, expected a Workspace")
        if base.workspace is not None and base.workspace is not workspace:
            raise ConfigError("the collector already has its own workspace; give it none, or drop workspace_for")
    if build is not None:
        collector = build(base, search=Independent(1), critic=None, workspace=workspace)
    else:
        collector = Collector(
            base.agent,
            critic=None,
            search=Independent(1),
            reward=base.reward,
            estimator=base.estimator,
            workspace=workspace,
            close_services=base.close_services,
        )
    async with contextlib.AsyncExitStack() as stack:
        if workspace_for is not None:
            await stack.enter_async_context(workspace)
        async with collector:
            return await collector.collect(problem)


async def evaluate_outcome(base: Any, problem: Any, *, workspace_for: Optional[Callable[[Any], Any]] = None) -> TreeOutcomes:
    """One unbranched rollout (``unbranched_rollout``) of ``base``'s agent on ``problem``,
    its outcome as a one-element TreeOutcomes."""
    state = await unbranched_rollout(base, problem, workspace_for=workspace_for)
    try:
        rollout, _, sampled_tokens = rollout_record(state, base)
    finally:
        state.close()
    return TreeOutcomes([rollout.outcome], sampled_tokens)
