"""Reliability: server faults injected with the simulated server's knobs cost one branch,
never the collection, and never change the data of the branches that succeeded.

Every fault test collects the same problem twice with Independent(n) (every rollout from
the root, each seeded by its index, so a rollout's content does not depend on the others):
once against a healthy server and once with the fault. A transient fault must leave the
tree unchanged; a fault that fails a branch must leave exactly the faulted rollouts as
failed nodes, every other rollout bit-identical to the healthy run, and the prepared
records exactly those of the surviving rollouts (nothing lost, nothing invented)."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
import time
from collections import Counter

import pytest

from focus_go import Agent, Collector, Critic, Env, GroupBaseline, Independent, MathEnv, Segments, Selective, Step
from focus_go.backends import Policy, SamplingParams, SGLangPolicy, VLLMPolicy
from focus_go.env import grade_math
from focus_go.errors import CollectionError, ConfigError
from focus_go.extend import SchedulerView
from focus_go.sim import SimServer

SAMPLING = SamplingParams(temperature=1.0)
ROLLOUTS = 8


@pytest.fixture
def policy(server):
    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SAMPLING, timeout=30)
    yield p
    p.close()
    server.set_faults([])


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """The Python half of the leak check (conftest checks Go handles): every collection
    thread a test started has ended shortly after it."""
    before = {t.ident for t in threading.enumerate()}
    yield
    deadline = time.monotonic() + 60  # a guard against a leak, not a timing check
    while time.monotonic() < deadline:
        extra = [t for t in threading.enumerate() if t.ident not in before and t.name.startswith("focus-go-collection")]
        if not extra:
            break
        time.sleep(0.02)
    assert not extra, f"threads left running: {[t.name for t in extra]}"


def subtree(view, node_id):
    """A node and everything under it, without ids (which shift around a failed node)."""
    n = view.node(node_id)
    if n.failed:
        return "FAILED"
    return (
        tuple((s.tokens, s.trainable, s.logprobs) for s in n.spans),
        n.reward,
        n.done,
        n.truncated,
        tuple(subtree(view, c) for c in n.children),
    )


def rollouts(state):
    view = SchedulerView(state)
    return [subtree(view, c) for c in view.root.children]


def record_key(r):
    return (tuple(r["tokens"]), tuple(r["loss_mask"]), tuple(r["behavior_logprobs"]))


def actor_records(collector, state):
    """(node id, record key) of every actor record of the prepared batch."""
    return [(r["node_id"], record_key(r)) for r in collector.prepare(state).to_records(0) if r["lane"] == "actor"]


def descendants(view, node_id):
    out = [node_id]
    for c in view.node(node_id).children:
        out.extend(descendants(view, c))
    return out


def collect(policy, problem, *, search=None, allow_partial=True, env=None, critic=None, segments=64, **options):
    agent = Agent(policy=policy, env=env or MathEnv(problem.label, policy.decode), context=Segments(segments))
    collector = Collector(agent, critic=critic, search=search or Independent(ROLLOUTS), estimator=GroupBaseline(), **options)
    return collector, asyncio.run(collector.collect(problem, allow_partial=allow_partial))


class Healthy:
    """The fault-free reference: its rollouts and, per rollout, its actor record keys."""

    def __init__(self, collector, state):
        view = SchedulerView(state)
        self.rollouts = rollouts(state)
        records = actor_records(collector, state)
        self.records = []
        for child in view.root.children:
            ids = set(descendants(view, child))
            self.records.append(Counter(key for nid, key in records if nid in ids))
        assert sum(sum(c.values()) for c in self.records) == len(records) > 0


def make_policy(server, backend, **options):
    if backend == "vllm":
        return VLLMPolicy(model=server.model, base_url=server.url + "/v1", api_key="EMPTY", profile="token_chunk", default_params=SAMPLING, **options)
    return SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SAMPLING, **options)


@pytest.fixture(scope="module")
def references(server):
    """The fault-free reference collection of problem 0, per backend (made on first use)."""
    made = {}

    def get(backend):
        if backend not in made:
            p = make_policy(server, backend)
            try:
                collector, state = collect(p, server.problems()[0])
                made[backend] = Healthy(collector, state)
                state.close()
            finally:
                p.close()
        return made[backend]

    return get


@pytest.fixture
def healthy(references):
    return references("sglang")


@pytest.fixture(params=["sglang", "vllm"])
def backend(request, server):
    """A policy for each token backend (SGLang /generate, vLLM /v1/completions) and its
    reference collection."""
    p = make_policy(server, request.param, timeout=30)
    yield p, request.param
    p.close()
    server.set_faults([])


def assert_only_faulted_rollouts_differ(state, collector, healthy, failed):
    """``failed`` rollouts are failed nodes (listed in state.failures); every other one is
    bit-identical to the healthy run's, and the actor records are exactly the surviving
    rollouts' records. Returns the indexes of the failed rollouts."""
    got = rollouts(state)
    assert len(got) == len(healthy.rollouts) == ROLLOUTS
    lost = [i for i, r in enumerate(got) if r == "FAILED"]
    assert len(lost) == failed, f"failed rollouts {lost}, expected {failed}: {[f[1] for f in state.failures]}"
    for i, r in enumerate(got):
        if r != "FAILED":
            assert r == healthy.rollouts[i], f"rollout {i} differs from the fault-free run"
    view = SchedulerView(state)
    assert sorted(f[0] for f in state.failures) == sorted(view.root.children[i] for i in lost)
    want = Counter()
    for i, c in enumerate(healthy.records):
        if i not in lost:
            want.update(c)
    assert Counter(key for _, key in actor_records(collector, state)) == want
    return lost


# Faults the client absorbs: retried (bounded, with backoff) or read correctly anyway.
TRANSIENT = {
    "http_500": {"kind": "http_error", "status": 500, "count": 2},
    "http_503": {"kind": "http_error", "status": 503, "count": 3},
    "http_429": {"kind": "http_error", "status": 429, "count": 2},
    "close_connection": {"kind": "close_connection", "count": 2},
    "slow": {"kind": "slow", "delay": 0.2, "count": 4},
    "prompt_in_output_ids": {"kind": "prompt_in_output_ids", "count": 4},
}


@pytest.mark.parametrize("name", sorted(TRANSIENT))
def test_transient_fault_leaves_the_tree_unchanged(server, backend, references, name):
    policy, which = backend
    healthy = references(which)
    if name == "prompt_in_output_ids" and which == "vllm":
        pytest.skip("an SGLang /generate quirk")
    server.set_faults([TRANSIENT[name]])
    before = server.stats()["faults"]
    collector, state = collect(policy, server.problems()[0], allow_partial=False)
    try:
        assert state.failures == ()
        assert_only_faulted_rollouts_differ(state, collector, healthy, failed=0)
        assert server.stats()["faults"] - before == TRANSIENT[name]["count"]
    finally:
        state.close()


# Faults that fail the one rollout whose request met them, with the message recorded.
BRANCH_FAILING = {
    "http_400": ({"kind": "http_error", "status": 400}, "HTTP 400"),
    "malformed_json": ({"kind": "malformed_json"}, "policy"),
    "truncated_body": ({"kind": "truncated_body"}, "broke off"),
    "abort": ({"kind": "abort"}, "abort"),
    "extra_tokens": ({"kind": "extra_tokens", "tokens": 3}, "max_tokens was"),
    "missing_logprobs": ({"kind": "missing_logprobs"}, "logprob"),
}


@pytest.mark.parametrize("count", [1, 3])
@pytest.mark.parametrize("name", sorted(BRANCH_FAILING))
def test_branch_failing_fault_costs_exactly_its_rollouts(server, backend, references, name, count):
    policy, which = backend
    healthy = references(which)
    fault, message = BRANCH_FAILING[name]
    server.set_faults([{**fault, "count": count}])
    collector, state = collect(policy, server.problems()[0])
    try:
        lost = assert_only_faulted_rollouts_differ(state, collector, healthy, failed=count)
        assert all(message in f[1] for f in state.failures), [f[1] for f in state.failures]
        assert all(f.aborted == (name == "abort") for f in state.failures)
        view = SchedulerView(state)
        for i in lost:
            node = view.node(view.root.children[i])
            assert node.failed and node.children == () and node.tokens == ()
        stats = view.stats
        assert stats["rollouts"] == ROLLOUTS and stats["budget_unspent"] == 0
    finally:
        state.close()
    # Without allow_partial the same faults raise, keeping the tree.
    server.set_faults([{**fault, "count": count}])
    with pytest.raises(CollectionError, match="allow_partial") as info:
        collect(policy, server.problems()[0], allow_partial=False)
    assert len(info.value.failures) == count
    assert_only_faulted_rollouts_differ(info.value.state, collector, healthy, failed=count)
    info.value.state.close()


def test_retries_are_bounded_with_backoff(server, policy):
    # A server that answers 503 to everything: one rollout makes 1 + 3 requests (the
    # default retry policy), waiting a jittered 0.1-0.2 s, 0.2-0.4 s and 0.4-0.8 s.
    server.set_faults([{"kind": "http_error", "status": 503}])
    before = server.stats()["requests"].get("/generate", 0)
    t0 = time.monotonic()
    collector, state = collect(policy, server.problems()[0], search=Independent(1))
    elapsed = time.monotonic() - t0
    try:
        assert server.stats()["requests"]["/generate"] - before == 4
        (failure,) = state.failures
        assert "HTTP 503" in failure[1] and "after 3 retries" in failure[1]
        assert elapsed >= 0.7, elapsed  # the backoff waited; 4 requests show it is bounded
    finally:
        state.close()


def test_retry_after_is_honoured(server, policy):
    server.set_faults([{"kind": "http_error", "status": 429, "retry_after": 1, "count": 1}])
    t0 = time.monotonic()
    collector, state = collect(policy, server.problems()[0], search=Independent(1), allow_partial=False)
    try:
        assert time.monotonic() - t0 >= 1.0
        assert state.failures == ()
    finally:
        state.close()


def test_context_length_fails_the_branch_not_the_job(server):
    # A context window that holds the prompt and one 64-token segment but not two.
    problem = server.problems()[0]
    with SimServer(seed=0) as probe:
        p = SGLangPolicy(model=probe.model, base_url=probe.url, profile="token_chunk")
        prompt = len(p.prepare([{"role": "user", "content": problem.prompt}], []).tokens)
        p.close()
    with SimServer(seed=0, max_model_len=prompt + 100) as small:
        p = VLLMPolicy(model=small.model, base_url=small.url + "/v1", api_key="EMPTY", profile="token_chunk", default_params=SAMPLING)
        try:
            collector, state = collect(p, problem, search=Independent(4))
            view = SchedulerView(state)
            failed = [n for n in view.nodes if n.failed]
            assert len(failed) == len(state.failures) > 0
            assert all("context length" in f[1] and "HTTP 400" in f[1] for f in state.failures)
            # A rollout that finished inside the window survives; a 400 is never retried.
            assert small.stats()["errors"] == len(failed)
            state.close()
        finally:
            p.close()


def test_hanging_request_times_out_and_fails_one_branch(server, policy, healthy):
    server.set_faults([{"kind": "hang", "count": 1}])
    t0 = time.monotonic()
    collector, state = collect(policy, server.problems()[0], policy_timeout=0.5)
    elapsed = time.monotonic() - t0
    try:
        assert_only_faulted_rollouts_differ(state, collector, healthy, failed=1)
        assert "deadline" in state.failures[0][1] or "timed out" in state.failures[0][1].lower()
        assert elapsed >= 0.5, elapsed  # the hang ends only at its timeout, as the failure says
    finally:
        state.close()


def test_server_that_stops_answering_mid_tree(server, policy):
    # The first 40 requests are answered, then the server goes silent (a tree needs about
    # 70): every later rollout fails after the policy timeout, each round's at once, and
    # the branches finished before are kept.
    server.set_faults([{"kind": "slow", "delay": 0, "count": 40}, {"kind": "hang"}])
    collector, state = collect(policy, server.problems()[0], search=Selective(24, 8), segments=32, policy_timeout=0.5)
    try:
        view = SchedulerView(state)
        failed = [n for n in view.nodes if n.failed]
        assert failed and len(state.failures) == len(failed)
        assert all(n.children == () and n.tokens == () for n in failed)
        assert all("deadline" in f[1] for f in state.failures)
        assert any(n.done for n in view.nodes), "the branches finished before the silence are kept"
        # Every record comes from a node that did not fail, on a path through no failed node.
        records = collector.prepare(state).to_records(0)
        for r in records:
            node = view.node(r["node_id"])
            while node is not None:
                assert not node.failed
                node = view.node(node.parent) if node.parent is not None else None
        assert view.stats["rollouts"] + view.stats["budget_unspent"] == 24
    finally:
        state.close()


def test_connection_refused_fails_every_branch_with_the_address(server):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = SGLangPolicy(model=server.model, base_url=f"http://127.0.0.1:{port}", profile="token_chunk", default_params=SAMPLING)
    try:
        problem = server.problems()[0]
        collector, state = collect(p, problem, search=Independent(4))
        assert len(state.failures) == 4
        assert all(f"127.0.0.1:{port}" in f[1] and "cannot connect" in f[1] for f in state.failures)
        assert collector.prepare(state).to_records(0) == []
        state.close()
        with pytest.raises(CollectionError, match="cannot connect") as info:
            collect(p, problem, search=Independent(2), allow_partial=False)
        info.value.state.close()
    finally:
        p.close()


class PyMathEnv(Env):
    """MathEnv in Python (through the bridge); ``fault(correct)`` decides the final step."""

    action = "tokens"

    def __init__(self, label, decode, fault=None):
        self.label, self.decode, self.fault, self.tokens = label, decode, fault, []

    async def step(self, action):
        self.tokens.extend(action.tokens)
        if not action.finished:
            return Step()
        correct = grade_math(self.decode(self.tokens), self.label)
        if self.fault is not None and correct:
            return await self.fault()
        return Step(reward=1.0 if correct else 0.0, done=True)

    def fork(self):
        twin = type(self)(self.label, self.decode, self.fault)
        twin.tokens = list(self.tokens)
        return twin


async def _raise():
    raise RuntimeError("grader crashed")


async def _hang():
    await asyncio.sleep(3600)


async def _nan():
    return Step(reward=float("nan"), done=True)


async def _out_of_range():
    return Step(reward=7.0, done=True)


@pytest.mark.parametrize(
    "fault,message",
    [(_raise, "RuntimeError: grader crashed"), (_hang, "deadline"), (_nan, "not finite"), (_out_of_range, "outside")],
    ids=["raises", "hangs", "nan", "out_of_range"],
)
def test_env_fault_fails_exactly_the_faulted_rollouts(server, policy, healthy, fault, message):
    # The env fails every rollout whose answer is correct: exactly those are lost.
    problem = server.problems()[0]
    correct = [i for i, r in enumerate(healthy.rollouts) if _leaf_rewards(r) == [1.0]]
    assert 0 < len(correct) < ROLLOUTS, "the reference run needs both outcomes"
    env = PyMathEnv(problem.label, policy.decode, fault)
    collector, state = collect(policy, problem, env=env, env_timeout=0.5)
    try:
        lost = assert_only_faulted_rollouts_differ(state, collector, healthy, failed=len(correct))
        assert lost == correct
        assert all(message in f[1] for f in state.failures), [f[1] for f in state.failures]
    finally:
        state.close()


def _leaf_rewards(rollout):
    spans, reward, done, truncated, children = rollout
    if not children:
        return [reward] if done else []
    return [r for c in children for r in _leaf_rewards(c)]


@pytest.mark.parametrize(
    "fn,message",
    [
        (lambda contexts: [0.5] * (len(contexts) + 1), "values for"),
        # The bridge refuses to send a non-finite value (Go checks them too, see core/collect).
        (lambda contexts: [float("nan")] * len(contexts), "critic function returned nan for context 0"),
        (lambda contexts: [float("inf")] * len(contexts), "critic function returned inf for context 0"),
        (lambda contexts: 1 / 0, "ZeroDivisionError"),
    ],
    ids=["wrong_count", "nan", "inf", "raises"],
)
def test_critic_fault_leaves_checkpoints_unscored_and_rollouts_intact(server, policy, healthy, fn, message):
    collector, state = collect(policy, server.problems()[0], critic=Critic.from_function(fn))
    try:
        view = SchedulerView(state)
        assert state.failures and all(message in f[1] and f[1].startswith("critic") for f in state.failures)
        assert all(view.node(f[0]).critic is None and not view.node(f[0]).failed for f in state.failures)
        assert rollouts(state) == healthy.rollouts
    finally:
        state.close()


def test_hanging_critic_times_out(server, policy, healthy):
    async def hang(contexts):
        await asyncio.sleep(3600)

    collector, state = collect(policy, server.problems()[0], critic=Critic.from_function(hang), critic_timeout=0.3)
    try:
        assert state.failures and all("deadline" in f[1] for f in state.failures), state.failures
        assert rollouts(state) == healthy.rollouts
    finally:
        state.close()


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), 1e300, "1", True])
def test_timeout_options_are_validated(server, policy, bad):
    agent = Agent(policy=policy, env=MathEnv("1", policy.decode), context=Segments(16))
    for name in ("policy_timeout", "env_timeout", "critic_timeout"):
        with pytest.raises(ConfigError, match=name):
            Collector(agent, **{name: bad})


def test_blocking_sync_env_costs_branches_not_the_job(server, policy):
    # A synchronous step that blocks holds the event loop, so the engine's env timeout
    # fails the waiting rollouts (possibly more than the blocked one); the collection
    # still ends, and only with failed or finished rollouts.
    problem = server.problems()[0]

    class Blocking(PyMathEnv):
        def step(self, action):
            self.tokens.extend(action.tokens)
            if not action.finished:
                return Step()
            time.sleep(0.4)
            return Step(reward=1.0 if grade_math(self.decode(self.tokens), self.label) else 0.0, done=True)

    env = Blocking(problem.label, policy.decode)
    collector, state = collect(policy, problem, env=env, env_timeout=0.2, search=Independent(4))
    try:
        view = SchedulerView(state)
        assert state.failures and all("deadline" in f[1] for f in state.failures)
        assert all(view.node(c).failed or _leaf_rewards(subtree(view, c)) for c in view.root.children)
    finally:
        state.close()


def _rollout_segments(rollout):
    """The generated tokens of each segment along a chain rollout (Independent)."""
    spans, _reward, _done, _truncated, children = rollout
    tokens = [t for (toks, trainable, _lp) in spans for t, tr in zip(toks, trainable) if tr]
    return [tokens] + (_rollout_segments(children[0]) if children else [])


def _hits(tokens):
    return bool(tokens) and tokens[0] % 3 == 0


async def _p_raise(result):
    raise RuntimeError("policy crashed")


async def _p_wrong_type(result):
    return "a string"


async def _p_extra_tokens(result):
    # More than the 64-token segment whatever the response's own length.
    extra = 65
    return dataclasses.replace(result, tokens=tuple(result.tokens) + (1,) * extra, logprobs=list(result.logprobs) + [0.0] * extra)


async def _p_misaligned(result):
    return dataclasses.replace(result, logprobs=list(result.logprobs)[:-1])


async def _p_positive_logprob(result):
    # (A NaN logprob, no logprob, is not a fault: the edge is kept as inexact and trains no
    # actor; tests/test_inexact.py covers it.)
    return dataclasses.replace(result, logprobs=[0.5] * len(result.logprobs))


async def _p_hang(result):
    await asyncio.sleep(3600)


@pytest.mark.parametrize(
    "fault,message",
    [
        (_p_raise, "RuntimeError: policy crashed"),
        (_p_wrong_type, "expected GenerateResult"),
        (_p_extra_tokens, "max_tokens was"),
        (_p_misaligned, "logprob"),
        (_p_positive_logprob, "logprobs must be <= 0"),
        (_p_hang, "deadline"),
    ],
    ids=["raises", "wrong_type", "extra_tokens", "misaligned_logprobs", "positive_logprobs", "hangs"],
)
def test_python_policy_fault_fails_exactly_the_faulted_rollouts(server, policy, healthy, fault, message):
    # A custom Completion policy (served through the bridge) that misbehaves on the
    # segments whose first token is divisible by 3: exactly the rollouts with such a
    # segment in the fault-free run are lost.
    async def complete(tokens, params):
        result = await policy.agenerate_tokens(tokens, params)
        return await fault(result) if _hits(result.tokens) else result

    custom = Policy(format=policy.format, model="custom", complete=complete, default_params=SAMPLING)
    expected = [i for i, r in enumerate(healthy.rollouts) if any(_hits(s) for s in _rollout_segments(r))]
    assert 0 < len(expected) < ROLLOUTS
    problem = server.problems()[0]
    collector, state = collect(custom, problem, env=MathEnv(problem.label, policy.decode), policy_timeout=0.5)
    try:
        lost = assert_only_faulted_rollouts_differ(state, collector, healthy, failed=len(expected))
        assert lost == expected
        assert all(message in f[1] for f in state.failures), [f[1] for f in state.failures]
    finally:
        state.close()


def test_env_fork_failure_after_a_step_is_named(server, policy):
    """The engine asks a Python env to step and fork in one request; a failing fork fails
    that rollout with a message naming both."""
    problem = server.problems()[0]

    class ForkOnce(PyMathEnv):
        def fork(self):
            if self.tokens:
                raise OSError("cannot copy the sandbox")
            return super().fork()

    collector, state = collect(policy, problem, env=ForkOnce(problem.label, policy.decode), search=Selective(4, 2))
    try:
        assert state.failures
        assert all("env: step and fork" in f[1] and "OSError: cannot copy the sandbox" in f[1] for f in state.failures)
    finally:
        state.close()


def test_env_fork_failure_costs_the_branches_not_the_job(server, policy):
    problem = server.problems()[0]

    class NoFork(PyMathEnv):
        def fork(self):
            raise OSError("cannot copy the sandbox")

    collector, state = collect(policy, problem, env=NoFork(problem.label, policy.decode), search=Independent(4))
    try:
        assert len(state.failures) == 4
        assert all("env: fork" in f[1] and "OSError: cannot copy the sandbox" in f[1] for f in state.failures)
        assert collector.prepare(state).to_records(0) == []
    finally:
        state.close()
    with pytest.raises(CollectionError, match="cannot copy the sandbox") as info:
        collect(policy, problem, env=NoFork(problem.label, policy.decode), search=Independent(2), allow_partial=False)
    assert len(info.value.failures) == 2
    info.value.state.close()
