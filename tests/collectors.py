"""The small MathEnv collectors the integration tests and scripts build for each problem."""

from __future__ import annotations

import asyncio
from typing import Optional

from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
from focus_go.backends import SamplingParams

TEMPERATURE_1 = SamplingParams(temperature=1.0)


def math_collector(
    policy,
    problem,
    *,
    segment: int = 32,
    budget: int = 4,
    warmup: int = 2,
    sampling: Optional[SamplingParams] = TEMPERATURE_1,
    system_prompt: str = "Solve the problem.",
    score: Optional[str] = None,
    stop_alike: bool = False,
) -> Collector:
    """A Selective(budget, warmup) collector of a MathEnv agent with Segments(segment) and
    a constant 0.5 critic; ``sampling=None`` leaves the sampling to the policy (or, under
    Slime, to Slime's settings); ``score`` None is Selective's default. ``stop_alike`` is
    off so that every tree spends its whole budget (the counts the integration tests check),
    whatever the library's default."""
    agent = Agent(
        policy=policy,
        env=MathEnv(problem.label, policy.decode),
        system_prompt=system_prompt,
        context=Segments(segment),
        sampling=sampling,
    )
    search = (Selective(budget=budget, warmup=warmup, stop_alike=stop_alike) if score is None
              else Selective(budget=budget, warmup=warmup, score=score, stop_alike=stop_alike))
    return Collector(agent, critic=Critic.constant(0.5), search=search)


def collect_tree(collector: Collector, problem):
    """One tree of ``problem``, collected in a fresh event loop with ``collector`` open for
    the collection only (its ``prepare`` still works on the state afterwards)."""

    async def collect():
        async with collector:
            return await collector.collect(problem)

    return asyncio.run(collect())
