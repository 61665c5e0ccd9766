"""Collecting trees end to end against the simulated server over loopback HTTP: the
all-Go path, Python parts through the bridge, critics, failures, cancellation."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from focus_go import (
    Agent,
    Collector,
    Critic,
    DirectBranchTd,
    Env,
    GroupBaseline,
    Independent,
    MathEnv,
    RewardConfig,
    Segments,
    Selective,
    Step,
)
from focus_go.backends import GenerateResult, Policy, SamplingParams, SGLangPolicy, VLLMPolicy
from focus_go.env import grade_math
from focus_go.errors import CollectionError, ConfigError
from focus_go.extend import SchedulerView
from focus_go.integrations import Problem

SAMPLING = SamplingParams(temperature=1.0)


@pytest.fixture
def policy(server):
    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SAMPLING)
    yield p
    p.close()


def nodes_without_timing(state):
    # weight_version is the server's provenance: a Python policy reports none.
    data = json.loads(state.to_json())
    return [{k: v for k, v in n.items() if k != "weight_version"} for n in data["nodes"]]


def test_quick_start_shape_all_go(server, policy):
    # integrations.txt, CollectorFor: Agent + MathEnv + Segments(256) + Critic.constant + Selective
    problem = server.problems()[0]
    agent = Agent(
        policy=policy,
        env=MathEnv(problem.label, policy.decode),
        system_prompt="Solve the problem.",
        context=Segments(256),
    )
    collector = Collector(agent, critic=Critic.constant(0.5), search=Selective(budget=32, warmup=16))

    async def run():
        async with collector:
            return await collector.collect(problem)

    before = server.stats()["requests"].get("/generate", 0)
    state = asyncio.run(run())
    batch = collector.prepare(state)
    assert batch.stats["rollouts"] == 32
    assert batch.stats["nodes"] == len(SchedulerView(state).nodes)
    assert server.stats()["requests"]["/generate"] > before
    view = SchedulerView(state)
    assert len(view.root.children) >= 16
    assert all(view.node(c).search_pass == 0 for c in view.root.children[:16])
    leaves = [n for n in view.nodes if n.done]
    assert leaves and all(n.reward in (0.0, 1.0) for n in leaves)
    records = batch.to_records(0)
    actor = [r for r in records if r["lane"] == "actor"]
    assert actor and all(len(r["tokens"]) == len(r["loss_mask"]) == len(r["behavior_logprobs"]) for r in actor)
    assert all(r["problem_id"] == problem.id for r in records)
    assert batch.failures == ()
    # What the state reports without its nodes agrees with the full view.
    assert len(state) == len(view) == batch.stats["nodes"]
    assert state.stats == view.stats and state.stats["rollouts"] == 32
    assert state.problem_id == view.problem_id == problem.id
    state.close()


def test_collect_is_deterministic(server, policy):
    problem = server.problems()[3]

    def collect():
        agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(32))
        return asyncio.run(Collector(agent, critic=Critic.constant(0.5), search=Selective(12, 4, seed=7)).collect(problem))

    assert nodes_without_timing(collect()) == nodes_without_timing(collect())


class PyMathEnv(Env):
    """A Python Env with MathEnv's behaviour, so it runs through the bridge."""

    action = "tokens"

    def __init__(self, label, decode):
        self.label, self.decode, self.tokens, self.forks = label, decode, [], 0

    def step(self, action):
        self.tokens.extend(action.tokens)
        if not action.finished:
            return Step()
        correct = grade_math(self.decode(self.tokens), self.label)
        return Step(reward=1.0 if correct else 0.0, done=True)

    def fork(self):
        twin = type(self)(self.label, self.decode)
        twin.tokens = list(self.tokens)
        return twin


def python_policy(go_policy):
    """A custom Completion policy (Python) that forwards to the Go transport."""

    async def complete(tokens, params):
        return await go_policy.agenerate_tokens(tokens, params)

    return Policy(format=go_policy.format, model="custom", complete=complete, default_params=SAMPLING)


def test_python_env_and_completion_match_the_native_tree(server, policy):
    problem = server.problems()[7]
    search = Selective(12, 4, seed=3)

    native = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(48))
    bridged = Agent(policy=python_policy(policy), env=PyMathEnv(problem.label, policy.decode), context=Segments(48))
    critic_calls = []

    async def critic_fn(contexts):
        critic_calls.append(len(contexts))
        await asyncio.sleep(0)
        return [0.5] * len(contexts)

    a = asyncio.run(Collector(native, critic=Critic.constant(0.5), search=search).collect(problem))
    b = asyncio.run(Collector(bridged, critic=Critic.from_function(critic_fn), search=search).collect(problem))
    assert nodes_without_timing(a) == nodes_without_timing(b)
    assert sum(critic_calls) > 0


def test_sync_critic_function_values_are_recorded(server, policy):
    problem = server.problems()[1]
    agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(64))

    def critic_fn(contexts):
        return [min(0.9, len(c) / 1000) for c in contexts]

    state = asyncio.run(Collector(agent, critic=Critic.from_function(critic_fn), search=Selective(8, 4)).collect(problem))
    view = SchedulerView(state)
    scored = [n for n in view.nodes if n.critic is not None]
    assert scored and all(0 <= n.critic <= 0.9 for n in scored)


def test_independent_with_group_baseline(server, policy):
    problem = server.problems()[2]
    agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(256))
    collector = Collector(agent, search=Independent(6), estimator=GroupBaseline())
    state = asyncio.run(collector.collect(problem))
    view = SchedulerView(state)
    assert len(view.root.children) == 6
    batch = collector.prepare(state)
    assert batch.stats["rollouts"] + batch.stats["budget_unspent"] == 6
    returns = [sum(view.node(i).reward for i in range(len(view.nodes)) if view.node(i).done and _under(view, c, i)) for c in view.root.children]
    mean = sum(returns) / len(returns)
    first_edges = {a.node_id: a.weight for a in batch.actor if a.group_id == 0}
    for child, ret in zip(view.root.children, returns):
        assert first_edges[child] == pytest.approx(ret - mean)


def _under(view, ancestor, node):
    while node is not None:
        if node == ancestor:
            return True
        node = view.node(node).parent
    return False


class ExplodingEnv(PyMathEnv):
    def step(self, action):
        if action.finished:
            raise RuntimeError("grader crashed")
        return super().step(action)


def test_env_failure_raises_and_keeps_the_tree(server, policy):
    problem = server.problems()[0]
    agent = Agent(policy=policy, env=ExplodingEnv(problem.label, policy.decode), context=Segments(64))
    collector = Collector(agent, critic=Critic.constant(0.5), search=Selective(6, 3))
    with pytest.raises(CollectionError) as info:
        asyncio.run(collector.collect(problem))
    err = info.value
    assert err.state is not None and err.failures
    assert all("grader crashed" in message for _, message in err.failures)
    err.state.close()

    state = asyncio.run(collector.collect(problem, allow_partial=True))
    batch = collector.prepare(state)
    assert batch.failures and all("RuntimeError: grader crashed" in m for _, m in batch.failures)
    assert batch.stats["rollouts"] + batch.stats["budget_unspent"] == 6


def test_critic_failure_is_reported(server, policy):
    problem = server.problems()[0]
    agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(64))
    collector = Collector(agent, critic=Critic.from_function(lambda contexts: [0.5]), search=Selective(6, 3))
    state = asyncio.run(collector.collect(problem, allow_partial=True))
    batch = collector.prepare(state)
    assert any("critic" in m for _, m in batch.failures)


def test_cancelling_collect_stops_the_go_work(server, policy):
    problem = server.problems()[0]
    started = asyncio.Event

    async def slow(tokens, params):
        await asyncio.sleep(600)
        raise AssertionError("not reached")

    slow_policy = Policy(format=policy.format, complete=slow)
    agent = Agent(policy=slow_policy, env=MathEnv(problem.label, policy.decode), context=Segments(32))
    threads = threading.active_count()

    async def run():
        task = asyncio.create_task(Collector(agent, search=Selective(8, 4)).collect(problem))
        await asyncio.sleep(0.3)
        t0 = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - t0

    elapsed = asyncio.run(run())
    assert elapsed < 300, "the cancel did not wait for the policy's 600 s answer"
    for _ in range(50):
        if threading.active_count() <= threads:
            break
        time.sleep(0.05)
    assert threading.active_count() <= threads


def test_configuration_errors(server, policy):
    problem = server.problems()[0]
    agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode))
    with pytest.raises(ConfigError, match="context=Segments"):
        asyncio.run(Collector(agent).collect(problem))

    class TextEnv(Env):
        action = "text"

        def step(self, action):
            return Step(done=True)

    with pytest.raises(ConfigError, match="consumes 'text' actions"):
        Agent(policy=policy, env=TextEnv(), context=Segments(16))
    with pytest.raises(ConfigError, match="warmup"):
        Selective(4, 8)
    with pytest.raises(ConfigError, match="finite"):
        Critic.constant(float("nan"))


@pytest.mark.parametrize(
    "options,message",
    [
        ({"max_retries": -1}, "max_retries must be an integer >= 0, got -1"),
        ({"max_retries": 1.5}, "max_retries must be an integer >= 0, got 1.5"),
        ({"max_retries": True}, "max_retries must be an integer >= 0, got True"),
        ({"stop_on_abort": 1}, "stop_on_abort must be True or False, got 1"),
        ({"stop_on_abort": None}, "stop_on_abort must be True or False, got None"),
    ],
)
def test_collector_options_are_checked_when_it_is_built(server, policy, options, message):
    problem = server.problems()[0]
    agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(16))
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        Collector(agent, **options)
    ok = Collector(agent, max_retries=2, stop_on_abort=True)
    assert (ok.max_retries, ok.stop_on_abort) == (2, True)
    assert (Collector(agent).max_retries, Collector(agent).stop_on_abort) == (0, False)


def test_max_retries_launches_a_failed_rollout_again_from_its_checkpoint(server, policy):
    # The first generation fails. Without retries the budget's third rollout is a branch;
    # with max_retries=1 it is the failed warmup rollout launched again from the root.
    problem = server.problems()[0]

    def collect(**options):
        calls = []

        async def flaky(tokens, params):
            calls.append(len(tokens))
            if len(calls) == 1:
                raise ConnectionError("server went away")
            return await policy.agenerate_tokens(tokens, params)

        flaky_policy = Policy(format=policy.format, complete=flaky, default_params=SAMPLING)
        agent = Agent(policy=flaky_policy, env=MathEnv(problem.label, policy.decode), context=Segments(16))
        collector = Collector(agent, critic=Critic.constant(0.5), search=Selective(3, 2, seed=1), **options)
        with asyncio.run(collector.collect(problem, allow_partial=True)) as state:
            view = SchedulerView(state)
            from_root = sum(1 for n in view.nodes if n.parent == view.root.id)
            return from_root, len(state.failures), collector.last_progress.rollouts_launched

    assert collect() == (2, 1, 3)
    assert collect(max_retries=1) == (3, 1, 3)


def test_stop_on_abort_ends_the_collection_at_the_first_aborted_generation(server, policy):
    problem = server.problems()[0]
    warmup = 3

    def agent_of(complete):
        aborting = Policy(format=policy.format, complete=complete, default_params=SAMPLING)
        return Agent(policy=aborting, env=MathEnv(problem.label, policy.decode), context=Segments(16))

    def aborted(tokens):
        return GenerateResult(tokens=(11,), prefix_tokens=tuple(tokens), text="x", stop_reason="abort", logprobs=[-0.5])

    # Off (the default): the aborted generation fails its rollout and the search goes on.
    calls = []

    async def abort_first(tokens, params):
        calls.append(len(tokens))
        return aborted(tokens) if len(calls) == 1 else await policy.agenerate_tokens(tokens, params)

    # The aborted rollout is whichever call arrives first, so the other warmup returns may
    # all be alike: stop_alike is off so that the search goes on whichever it was.
    collector = Collector(agent_of(abort_first), critic=Critic.constant(0.5), search=Selective(6, warmup, stop_alike=False))
    with asyncio.run(collector.collect(problem, allow_partial=True)) as state:
        assert [f.aborted for f in state.failures] == [True]
        assert collector.last_progress.rollouts_launched == 6

    # On: the first aborted generation ends the collection, cancelling the calls in flight
    # (here: calls only cancellation ends) and launching none, whatever allow_partial says.
    calls, cancelled = [], []

    async def abort_last_of_warmup(tokens, params):
        calls.append(len(tokens))
        if len(calls) == warmup:
            return aborted(tokens)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(len(tokens))
            raise

    collector = Collector(agent_of(abort_last_of_warmup), critic=Critic.constant(0.5), search=Selective(6, warmup),
                          stop_on_abort=True)
    with pytest.raises(CollectionError, match="aborted") as info:
        asyncio.run(asyncio.wait_for(collector.collect(problem, allow_partial=True), 300))  # a guard
    assert [f.aborted for f in info.value.failures] == [True]
    info.value.state.close()
    assert len(calls) == warmup and len(cancelled) == warmup - 1


def test_vllm_policy_collects_too(server):
    problem = server.problems()[4]
    policy = VLLMPolicy(model=server.model, base_url=server.url + "/v1", api_key="EMPTY", profile="token_chunk", default_params=SAMPLING)
    try:
        agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(128))
        state = asyncio.run(Collector(agent, critic=Critic.constant(0.5), search=Selective(8, 4, stop_alike=False)).collect(problem))
        assert SchedulerView(state).stats["rollouts"] == 8
    finally:
        policy.close()


class WatchedEnv(MathEnv):
    """A Python MathEnv that reads its collector's live progress on every step."""

    def __init__(self, label, decode, seen):
        super().__init__(label, decode)
        self.seen = seen
        self.collector = None

    def step(self, action):
        self.seen.extend(self.collector.progress())
        return super().step(action)

    def fork(self):
        child = WatchedEnv(self.label, self.decode, self.seen)
        child.collector = self.collector
        return child


def test_progress_counts_grow_while_collecting_and_end_at_the_tree_stats(server, policy):
    problem = server.problems()[0]
    seen = []
    env = WatchedEnv(problem.label, policy.decode, seen)
    collector = Collector(Agent(policy=policy, env=env, context=Segments(64)), search=Selective(8, 4, stop_alike=False))
    env.collector = collector
    polled = []

    async def run():
        async def poll():
            while True:
                polled.extend(collector.progress())
                await asyncio.sleep(0.001)

        watcher = asyncio.create_task(poll())
        try:
            return await collector.collect(problem)
        finally:
            watcher.cancel()

    assert collector.progress() == [] and collector.last_progress is None
    state = asyncio.run(run())
    assert seen, "the env steps read the progress while the tree runs"
    assert all(not p.done and p.budget == 8 and p.rollouts_launched >= 1 for p in seen)
    assert seen[-1].segments >= 1 and seen[-1].generated_tokens >= 1, "a step follows an accepted response"
    for reads in (seen, polled):
        for a, b in zip(reads, reads[1:]):
            for name in ("rollouts_launched", "rollouts_finished", "rollouts_failed", "segments", "generated_tokens"):
                assert getattr(b, name) >= getattr(a, name), (name, a, b)
    assert collector.progress() == [], "nothing runs once collect returned"
    end = collector.last_progress
    stats = state.stats
    assert end.done and end.eta_seconds is None
    assert end.rollouts_finished == stats["rollouts"]
    assert end.generated_tokens == stats["generated_tokens"]
    assert end.rollouts_launched == 8 - stats["budget_unspent"]
    assert end.rollouts_failed == 0
    assert end.segments == len(state) - 1
    state.close()


class DefaultForkEnv(PyMathEnv):
    """PyMathEnv with the base class's fork: a deep copy of an env that holds policy.decode."""

    fork = Env.fork


def test_default_fork_of_an_env_holding_the_policy_shares_the_policy(server, policy):
    env = DefaultForkEnv("42", policy.decode)
    twin = env.fork()
    assert twin is not env and twin.tokens is not env.tokens
    assert twin.decode.__self__ is policy  # a Go handle is shared by copies, never duplicated
    ids = list(range(100, 120))
    assert twin.decode(ids) == policy.decode(ids)
    problem = server.problems()[3]
    agent = Agent(policy=policy, env=DefaultForkEnv(problem.label, policy.decode), context=Segments(48))

    async def run():
        async with Collector(agent, critic=Critic.constant(0.5), search=Selective(6, 2, seed=1)) as c:
            state = await c.collect(problem)
            state.close()

    asyncio.run(run())
