"""The user code some ``make slime-check`` modes name by dotted path, as a Slime user's
module would: a rollout sample filter, custom reward models of both Slime signatures.
Each records what it was called with in ``CALLS`` (the mode runs in one process)."""

from __future__ import annotations

from typing import Any, Dict, List

CALLS: Dict[str, List[Any]] = {"filter": [], "rm": [], "batched_rm": [], "rm_plus_minus_one": []}


def remove_first_group(args: Any, data: List[List[Any]]) -> None:
    """--rollout-sample-filter-path: Slime calls it with the rollout's groups; mark every
    element of the first group (a tree, for FOCUS) removed, as Slime's filters do."""
    CALLS["filter"].append([[getattr(s, "index", None) for s in group] for group in data])
    for sample in data[0]:
        sample.remove_sample = True


async def rm(args: Any, sample: Any) -> float:
    """--custom-rm-path, Slime's single-sample signature: reward 1 for every finished
    rollout (whatever the answer), so the tree's outcomes show the RM was used."""
    if isinstance(sample, list):
        raise TypeError(f"the single-sample RM was called with a list of {len(sample)}")
    CALLS["rm"].append((sample.prompt, sample.response, sample.label))
    return 1.0


async def batched_rm(args: Any, samples: List[Any]) -> List[float]:
    """--custom-rm-path, Slime's batched signature (a list in, a list out): reward 0 for
    every finished rollout."""
    CALLS["batched_rm"].append(len(samples))
    return [0.0 for _ in samples]


async def rm_plus_minus_one(args: Any, sample: Any) -> float:
    """--custom-rm-path on a +-1 scale (as Slime's dapo RM scores): +1 for a response of
    odd length, -1 otherwise, so both ends of the scale occur."""
    CALLS["rm_plus_minus_one"].append(sample.response)
    return 1.0 if len(sample.response) % 2 else -1.0


def _tool_collector_for(policy: Any, problem: Any) -> Any:
    """docs/slime.md's "From a Slime multi-turn generate function to a focus Env" example:
    examples/calculator_env.py's ToolEnv with the whole-turn context."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    from calculator_env import make_env

    from focus import Agent, Collector, Critic, Selective

    agent = Agent(policy=policy, env=make_env(problem), context=None, max_segments=8)
    return Collector(agent, critic=Critic.constant(0.5), search=Selective(budget=8, warmup=4))


def _tool_generate() -> Any:
    from focus.integrations.slime import make_generate

    return make_generate(_tool_collector_for)


tool_generate = _tool_generate()
