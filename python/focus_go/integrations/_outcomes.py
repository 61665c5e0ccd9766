"""Outcome rewards of collected rollouts, shared by the trainer integrations.

A rollout's outcome is the sum of the env rewards on its root-to-leaf path (undiscounted,
as the environment scored it), unlike the actor advantage a tree trains on. ``outcomes``
reads them off a collected tree; ``evaluate_outcome`` runs the one unbranched rollout of
a collector's agent that evaluation uses (``Independent(1)``, no critic) and returns its
outcome.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

from ..errors import ConfigError, ConfigTypeError, InternalError


@dataclass(frozen=True)
class TreeOutcomes:
    """What one collected tree sampled: the outcome of each finished rollout and the
    number of tokens the policy generated in it."""

    outcomes: List[float]
    tokens_sampled: int


def outcomes(view: Any) -> TreeOutcomes:
    """The outcomes of a tree's finished (done or truncated, not failed) rollouts, in node
    order, and its generated-token count. ``view`` is a SchedulerView."""
    by_id = {n.id: n for n in view.nodes}
    values: List[float] = []
    for node in view.nodes:
        if not node.terminal or node.failed:
            continue
        total = 0.0
        n = node
        while n.parent is not None:
            total += float(n.reward)
            n = by_id[n.parent]
        values.append(total)
    generated = sum(sum(1 for t in span.trainable if t) for n in view.nodes for span in n.spans)
    return TreeOutcomes(values, generated)


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
    from ..tree import SchedulerView

    state = await unbranched_rollout(base, problem, workspace_for=workspace_for)
    try:
        result = outcomes(SchedulerView(state))
    finally:
        state.close()
    if len(result.outcomes) != 1:
        raise InternalError(f"evaluate_outcome: expected one finished rollout, found {len(result.outcomes)}")
    return result
