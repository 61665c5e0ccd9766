"""How a bridged collection's token ids cross the C boundary: policy.generate prefixes and
env.step token actions as arrays beside the JSON (tuples of ints on the Python side), the
prefix's array handed on to a Go policy without converting it back, replies answered in one
focus_collection_answer call per event-loop turn, and the loader's array helpers. Bad
arrays and bad handles get clear errors; nothing here may crash the process."""

from __future__ import annotations

import array
import asyncio
import copy
import ctypes
import dataclasses
import json
import math
import platform

import pytest

from focus_go import Agent, Collector, Critic, Env, MathEnv, Segments, Selective, Step, _lib
from focus_go.backends import Policy, SamplingParams, SGLangPolicy
from focus_go._bridge import _awaitable, _has_positive, _plain_json, _RecentIds
from focus_go.generation.servers import _PARAM_FIELDS, params_json
from focus_go.env import _grade, grade_math
from focus_go.errors import ConfigError, InternalError, InvalidHandleError
from focus_go.extend import SchedulerView
from focus_go.types import GenerateResult

SAMPLING = SamplingParams(temperature=1.0)


@pytest.fixture
def policy(server):
    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SAMPLING)
    yield p
    p.close()


class RecordingEnv(Env):
    """MathEnv's behaviour in Python, keeping every token action it was given."""

    action = "tokens"

    def __init__(self, label, decode, seen):
        self.label, self.decode, self.tokens, self.seen = label, decode, [], seen

    def step(self, action):
        self.seen.append(action.tokens)
        self.tokens.extend(action.tokens)
        if not action.finished:
            return Step()
        return Step(reward=1.0 if grade_math(self.decode(self.tokens), self.label) else 0.0, done=True)

    def fork(self):
        twin = RecordingEnv(self.label, self.decode, self.seen)
        twin.tokens = list(self.tokens)
        return twin


def _generated(view):
    """Every edge's generated ids, in node order."""
    return [tuple(t for s in n.spans for t, tr in zip(s.tokens, s.trainable) if tr) for n in view.nodes[1:]]


def test_prefixes_and_actions_arrive_as_tuples_of_ints(server, policy):
    problem = server.problems()[4]
    prefixes, shared = [], []
    seen: list = []

    async def complete(tokens, params):
        prefixes.append(tokens)
        buf, n = _lib.ids_arg(tokens)
        # The poll's array is handed on, not rebuilt from the tuple.
        shared.append(_lib._shared_ids.get(id(tokens), (None, None))[1] is buf and n == len(tokens))
        assert list(buf) == list(tokens)
        return await policy.agenerate_tokens(tokens, params)

    custom = Policy(format=policy.format, model="custom", complete=complete, default_params=SAMPLING)
    agent = Agent(policy=custom, env=RecordingEnv(problem.label, policy.decode, seen), context=Segments(48))
    state = asyncio.run(Collector(agent, critic=Critic.constant(0.5), search=Selective(6, 3, seed=2)).collect(problem))
    try:
        view = SchedulerView(state)
        assert prefixes and all(type(p) is tuple and all(type(t) is int for t in p) for p in prefixes)
        assert all(shared), "every prefix reached the Go policy as the poll's array"
        assert not _lib._shared_ids, "each registration ends with its request"
        assert seen and all(type(a) is tuple and all(type(t) is int for t in a) for a in seen)
        # Each env action is exactly one edge's generated ids (the same multiset of chunks).
        assert sorted(seen) == sorted(_generated(view))
        root = tuple(view.root.spans[0].tokens) if view.root.spans else None
        assert root is None or all(p[: len(root)] == root for p in prefixes)
    finally:
        state.close()


def test_recent_ids_hand_back_the_same_tuple_only_for_equal_ids():
    recent = _RecentIds(limit=2)
    prefix, generated = (5, 6, 7, 8, 9, 10, 11, 12, 13), (14, 15)
    recent.add(prefix, array.array("I", prefix), array.array("I", generated))
    context = recent.ids(array.array("I", prefix + generated))
    assert context == prefix + generated and type(context) is tuple
    assert recent.ids(array.array("I", prefix + generated)) is context, "a continuation reuses the tuple"
    assert all(x is y for x, y in zip(context, prefix)), "the prefix's ints are not rebuilt"
    action = recent.ids(array.array("I", generated))
    assert action == generated and recent.ids(array.array("I", generated)) is action, "an env action reuses the generated tuple"
    # Same length and same last ids, different earlier ones: built afresh, never reused.
    other = (4,) + (prefix + generated)[1:]
    assert recent.ids(array.array("I", other)) == other and recent.ids(array.array("I", other)) is not context
    assert recent.ids(array.array("I", [])) == ()
    # At most `limit` recent contexts (each with its generated ids) are kept, oldest out first.
    for i in range(3):
        recent.add((i,), array.array("I", [i]), array.array("I", [100 + i]))
    assert recent.ids(array.array("I", prefix + generated)) is not context
    assert len(recent) <= 4


def test_continued_prefixes_are_the_earlier_tuples_and_always_the_polled_ids(server, policy):
    # Each continuation's prefix is the earlier request's prefix plus its generated ids;
    # the collector hands over that tuple instead of building ints from the poll's buffer,
    # and what the Completion gets is still exactly the ids Go sent (the native tree's).
    problem = server.problems()[4]
    prefixes: list = []
    results: list = []

    class Id(int):
        """An int-like id of the kind a policy may return (numpy's, say)."""

    async def complete(tokens, params):
        prefixes.append(tokens)
        result = await policy.agenerate_tokens(tokens, params)
        results.append((tokens, result.tokens))
        return dataclasses.replace(result, tokens=tuple(Id(t) for t in result.tokens))

    custom = Policy(format=policy.format, model="custom", complete=complete, default_params=SAMPLING)
    search = Selective(6, 3, seed=2)
    bridged = Agent(policy=custom, env=RecordingEnv(problem.label, policy.decode, []), context=Segments(48))
    native = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(48))
    b = asyncio.run(Collector(bridged, critic=Critic.constant(0.5), search=search).collect(problem))
    a = asyncio.run(Collector(native, critic=Critic.constant(0.5), search=search).collect(problem))
    try:
        strip = lambda s: [{k: v for k, v in n.items() if "time" not in k and k != "weight_version"} for n in json.loads(s.to_json())["nodes"]]  # noqa: E731
        assert strip(a) == strip(b), "reused tuples hold exactly the polled ids"
        contexts = {p + t: (p, t) for p, t in results}
        continued = [p for p in prefixes if p in contexts]
        assert continued, "some requests continue an earlier one"
        assert all(type(p) is tuple and all(type(t) is int for t in p) for p in prefixes), "exact ints, as polled"

        # The earlier context's tuple is handed on: its ids are the very int objects of the
        # earlier prefix (ids above 256 are new objects when built from the buffer).
        def same_objects(p):
            q, _ = contexts[p]
            return all(x is y for x, y in zip(p, q))

        assert any(t > 256 for p in continued for t in p)
        assert sum(same_objects(p) for p in continued) >= len(continued) // 2, len(continued)
    finally:
        a.close()
        b.close()


@pytest.mark.skipif(platform.python_implementation() != "CPython", reason="CPython's cycle collector")
def test_bridged_id_tuples_are_not_tracked_by_the_cycle_collector(server, policy):
    # The prefixes and token actions the collector builds hold only ints, which CPython's
    # cycle collector untracks at the first collection that sees them, after traversing
    # every id twice (a 1,500-id prefix per segment, most of the young generation's cost).
    # The collector untracks them when it builds them, as a Go policy's result does its
    # generated ids; they are still exact tuples of ints.
    import gc

    problem = server.problems()[4]
    prefixes: list = []
    seen: list = []

    generated: list = []

    async def complete(tokens, params):
        prefixes.append((tokens, gc.is_tracked(tokens)))
        result = await policy.agenerate_tokens(tokens, params)  # a Go policy's result
        generated.append((result.tokens, gc.is_tracked(result.tokens)))
        return result

    class Tracking(RecordingEnv):
        def step(self, action):
            seen.append((action.tokens, gc.is_tracked(action.tokens)))
            return super().step(action)

        def fork(self):
            twin = Tracking(self.label, self.decode, self.seen)
            twin.tokens = list(self.tokens)
            return twin

    custom = Policy(format=policy.format, model="custom", complete=complete, default_params=SAMPLING)
    agent = Agent(policy=custom, env=Tracking(problem.label, policy.decode, []), context=Segments(48))
    state = asyncio.run(Collector(agent, critic=Critic.constant(0.5), search=Selective(6, 3, seed=2, stop_alike=False)).collect(problem))
    try:
        assert len(prefixes) > 6 and len(seen) > 6
        assert all(type(p) is tuple and all(type(t) is int for t in p) for p, _ in prefixes + seen + generated)
        assert [len(p) for p, tracked in prefixes if tracked] == []
        assert [len(a) for a, tracked in seen if tracked] == []
        assert [len(g) for g, tracked in generated if tracked] == []
    finally:
        state.close()


def test_serving_the_bridge_leaves_no_reference_cycles_per_request(server, policy):
    # Every request a bridged collection serves (polls, replies, generate calls) is freed
    # by reference counting: garbage for the cycle collector would cost its time on every
    # segment (a ctypes.cast per poll left one cycle each). A collection's end leaves a few
    # cycles (its ending exception's traceback), whatever its size, and nothing big.
    import gc

    problem = server.problems()[3]
    served = []

    async def complete(tokens, params):
        served.append(len(tokens))
        return await policy.agenerate_tokens(tokens, params)

    custom = Policy(format=policy.format, model="custom", complete=complete, default_params=SAMPLING)

    def garbage(budget: int, segment: int):
        agent = Agent(policy=custom, env=RecordingEnv(problem.label, policy.decode, []), context=Segments(segment))
        collector = Collector(agent, critic=Critic.constant(0.5), search=Selective(budget, min(budget, 4), seed=1))

        async def main():
            state = await collector.collect(problem, allow_partial=True)
            state.close()

        served.clear()
        gc.collect()
        gc.disable()
        try:
            asyncio.run(main())
            found = gc.collect()
        finally:
            gc.enable()
        return found, len(served)

    garbage(2, 64)  # first-use caches are not garbage
    small, few = garbage(2, 64)
    large, many = garbage(8, 8)
    assert many > few + 40
    assert large - small < (many - few) / 4, f"{small} objects in cycles for {few} requests, {large} for {many}"


def test_bridged_tree_matches_the_native_one_with_empty_and_long_chunks(server, policy):
    # Segments(1) makes one-token chunks, Segments(300) chunks longer than 256 ids; both
    # paths give the same tree.
    problem = server.problems()[2]

    async def complete(tokens, params):
        return await policy.agenerate_tokens(tokens, params)

    custom = Policy(format=policy.format, model="custom", complete=complete, default_params=SAMPLING)
    for tokens in (1, 300):
        search = Selective(4, 2, seed=5)
        native = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(tokens), max_segments=6)
        bridged = Agent(policy=custom, env=RecordingEnv(problem.label, policy.decode, []), context=Segments(tokens), max_segments=6)
        a = asyncio.run(Collector(native, critic=Critic.constant(0.5), search=search).collect(problem, allow_partial=True))
        b = asyncio.run(Collector(bridged, critic=Critic.constant(0.5), search=search).collect(problem, allow_partial=True))
        try:
            strip = lambda s: [{k: v for k, v in n.items() if "time" not in k and k != "weight_version"} for n in json.loads(s.to_json())["nodes"]]  # noqa: E731
            assert strip(a) == strip(b)
        finally:
            a.close()
            b.close()


def test_a_positive_logprob_is_named_as_before(server, policy):
    # 0.0, NaN (no logprob) and -inf are fine; the first positive one is named exactly.
    problem = server.problems()[0]

    async def complete(tokens, params):
        result = await policy.agenerate_tokens(tokens, params)
        lps = list(result.logprobs)
        lps[:4] = [0.0, math.nan, -math.inf, 2.5][: len(lps)]
        return dataclasses.replace(result, logprobs=lps)

    custom = Policy(format=policy.format, model="custom", complete=complete, default_params=SAMPLING)
    agent = Agent(policy=custom, env=MathEnv(problem.label, policy.decode), context=Segments(16))
    state = asyncio.run(Collector(agent, critic=Critic.constant(0.5), search=Selective(2, 2)).collect(problem, allow_partial=True))
    try:
        assert state.failures
        assert all("policy returned logprob 2.5 for generated token 3; logprobs must be <= 0 (NaN for none)" in f[1] for f in state.failures)
    finally:
        state.close()


def _edges(state):
    """Each edge's generated (trainable) ids and their logprobs, in node order."""
    out = []
    for node in json.loads(state.to_json())["nodes"][1:]:
        pairs = [(t, lp) for s in node["spans"] for t, lp, tr in zip(s["tokens"], s["logprobs"], s["trainable"]) if tr]
        out.append(([t for t, _ in pairs], [float(lp) for _, lp in pairs]))
    return out


def test_a_go_policys_result_is_handed_on_as_the_arrays_go_returned(server, policy):
    # The arrays a Go policy's result carries are exactly its tokens and logprobs; a copy
    # of the result keeps them, a changed one (or one built anew) does not.
    from focus_go.generation.servers import go_arrays

    problem = server.problems()[0]
    prompt = policy.prepare([{"role": "user", "content": problem.prompt}])
    result = policy.generate_tokens(prompt.tokens, SamplingParams(max_tokens=32, temperature=1.0))
    arrays = go_arrays(result)
    assert arrays is not None
    assert arrays[0].typecode == "I" and tuple(arrays[0]) == result.tokens
    assert arrays[1].typecode == "d" and list(arrays[1]) == result.logprobs
    assert go_arrays(dataclasses.replace(result)) is None, "a new result is checked again"
    copied = copy.copy(result)
    assert go_arrays(copied) is not None, "same tuple, equal logprobs"
    result.logprobs[0] = -7.0
    assert go_arrays(result) is None, "a logprob changed in place"
    result.logprobs[0] = arrays[1][0]
    result.tokens = result.tokens[:-1]
    assert go_arrays(result) is None, "other tokens"
    assert go_arrays(GenerateResult(tokens=(1,), logprobs=[-1.0])) is None
    result.tokens = copied.tokens  # the very tuple again
    assert go_arrays(result) is not None
    numpy = pytest.importorskip("numpy")
    result.logprobs = numpy.array(result.logprobs)
    assert go_arrays(result) is None, "logprobs that are no longer a list"


@pytest.mark.parametrize("change", ["logprob", "positive", "tokens"])
def test_a_go_result_the_completion_changes_is_what_the_tree_keeps(server, policy, change):
    # A Completion that changes the Go policy's result it hands on, in place or by building
    # another, gets its changes into the tree (and checked), not the arrays Go returned.
    problem = server.problems()[0]
    returned: list = []

    async def complete(tokens, params):
        result = await policy.agenerate_tokens(tokens, params)
        if change == "logprob":
            result.logprobs[0] = -7.0
        elif change == "positive":
            result.logprobs[-1] = 0.5
        elif len(result.tokens) > 1:
            result = dataclasses.replace(result, tokens=result.tokens[:-1], logprobs=result.logprobs[:-1])
        returned.append((list(result.tokens), list(result.logprobs)))
        return result

    custom = Policy(format=policy.format, model="custom", complete=complete, default_params=SAMPLING)
    agent = Agent(policy=custom, env=MathEnv(problem.label, policy.decode), context=Segments(16))
    state = asyncio.run(Collector(agent, critic=Critic.constant(0.5), search=Selective(4, 2, seed=1)).collect(problem, allow_partial=True))
    try:
        if change == "positive":
            assert state.failures
            assert all("logprobs must be <= 0 (NaN for none)" in f[1] for f in state.failures)
            return
        assert not state.failures
        edges = _edges(state)
        assert len(edges) == len(returned)
        assert sorted(map(repr, edges)) == sorted(map(repr, returned))
        if change == "logprob":
            assert all(lps[0] == -7.0 for _, lps in edges)
    finally:
        state.close()


@pytest.mark.parametrize(
    "values",
    [
        [],
        [-1.0, -0.0, 0.0, -math.inf, -1e-300],
        [math.nan, -1.0, math.nan],
        [math.nan, 0.5],
        [-1.0, 3.0, math.nan],
        [-2, 0, 1],
        [math.inf],
        [False, True],
    ],
)
def test_positive_check_matches_the_elementwise_one(values):
    assert _has_positive(values) is any(v > 0 for v in values)


def test_positive_check_raises_for_what_cannot_compare():
    with pytest.raises(TypeError):
        _has_positive([-1.0, None])
    with pytest.raises(TypeError):
        any(v > 0 for v in [-1.0, None])


def _answer(handle, ids, payload, ends, generated, tokens, logprobs):
    arrays = [array.array("Q", ids), array.array("Q", ends), array.array("q", generated), array.array("I", tokens), array.array("d", logprobs)]
    a = [x.buffer_info()[0] if x else None for x in arrays]
    answered = ctypes.c_size_t()
    _lib.call("focus_collection_answer", handle, len(ids), a[0], payload, len(payload), a[1], a[2], a[3], a[4], len(tokens), ctypes.byref(answered))
    return answered.value


def test_answer_batches_refuse_bad_arrays_and_handles(server, policy):
    problem = server.problems()[1]
    checked: list = []
    collector = None

    async def complete(tokens, params):
        if not checked:
            (run,) = collector._running
            h = _lib.c_handle(run.handle)
            bad = [
                ((h, [1], b"{}", [3], [-1], [], []), "payload end 3 is outside [0, 2]"),
                ((h, [1, 2], b"{}{}", [4, 2], [-1, -1], [], []), "payload end 2 is outside [4, 4]"),
                ((h, [1], b"{}", [2], [2], [5], [-1.0]), "generated count 2"),
                ((h, [1], b"{}", [2], [-2], [], []), "generated count -2"),
                ((h, [1], b"{}", [2], [0], [5], [-1.0]), "the answers take 0 ids but 1 were given"),
            ]
            for args, message in bad:
                with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
                    _answer(*args)
            # Ids nobody waits for are skipped, not errors.
            assert _answer(h, [10**9], b"{}", [2], [-1], [], []) == 0
            with pytest.raises(ConfigError, match="must not be NULL"):
                _lib.call("focus_collection_answer", h, 1, None, b"{}", 2, None, None, None, None, 0, None)
            with pytest.raises(InvalidHandleError):
                _answer(_lib.c_handle(987654321), [1], b"{}", [2], [-1], [], [])
            checked.append(True)
        return await policy.agenerate_tokens(tokens, params)

    custom = Policy(format=policy.format, model="custom", complete=complete, default_params=SAMPLING)
    agent = Agent(policy=custom, env=MathEnv(problem.label, policy.decode), context=Segments(32))
    collector = Collector(agent, critic=Critic.constant(0.5), search=Selective(3, 2, stop_alike=False))
    state = asyncio.run(collector.collect(problem))
    try:
        assert checked, "the checks ran inside a live collection"
        assert state.failures == () and SchedulerView(state).stats["rollouts"] == 3, "refused batches answered nothing"
    finally:
        state.close()


@pytest.mark.parametrize(
    "value",
    [
        {"observation": None, "reward": 0.5, "done": True, "info": {"a": [1, "é\\\"", None, -0.0, 1e300]}, "object": 3},
        {"text": "\\boxed{x}\n\u2028", "stop_reason": "length", "matched_stop": 7, "exact": False},
        [],
        "plain",
    ],
)
def test_reply_json_is_the_text_of_json_dumps(value):
    assert _plain_json(value) == json.dumps(value, allow_nan=False).encode()


@pytest.mark.parametrize("bad,error", [({"reward": math.nan}, ValueError), ({"reward": -math.inf}, ValueError),
                                       ({"info": object()}, TypeError), ({1.5: "key"}, None)])
def test_reply_json_refuses_what_json_dumps_refuses(bad, error):
    try:
        expected = json.dumps(bad, allow_nan=False).encode()
    except Exception as exc:
        assert type(exc) is error
        with pytest.raises(error):
            _plain_json(bad)
    else:
        assert error is None and _plain_json(bad) == expected


def test_params_json_is_the_text_of_json_dumps():
    for values in ({}, {"max_tokens": 256, "temperature": 1.0, "logprobs": 0, "seed": 5, "stop": ['x"é'], "stop_token_ids": [1, 2]}):
        params = SamplingParams._from_engine(values)
        expected = json.dumps({k: getattr(params, k) for k in _PARAM_FIELDS if getattr(params, k) is not None}).encode()
        assert params_json(params) == expected


def test_awaitable_check_matches_inspect():
    import inspect

    async def coro():
        return 1

    c = coro()
    future = asyncio.Future(loop=asyncio.new_event_loop())
    for value in ({}, Step(), "", (), [], None, 3, c, future, object()):
        assert _awaitable(value) == inspect.isawaitable(value)
    c.close()


def test_view_and_ids_arg():
    buf = array.array("I", [7, 0, 2**32 - 1])
    mv = _lib.view(buf.buffer_info()[0], 3, "I")
    assert mv.tolist() == [7, 0, 2**32 - 1] and mv.readonly
    assert _lib.view(None, 0, "d").tolist() == []
    with pytest.raises(InternalError, match="no buffer for 3 values"):
        _lib.view(None, 3, "I")
    ids, n = _lib.ids_arg((1, 2, 3))
    assert isinstance(ids, array.array) and list(ids) == [1, 2, 3] and n == 3
    assert _lib.ids_arg(()) == (None, 0)
    with pytest.raises(ConfigError, match=r"\[0, 2\*\*32\)"):
        _lib.ids_arg((1, -1))
    with pytest.raises(ConfigError, match="must be integers"):
        _lib.ids_arg((1, "x"))
    # A registered tuple hands over its array; an equal but different tuple does not.
    key = (5, 6)
    shared = array.array("I", key)
    _lib.share_ids(key, shared)
    try:
        assert _lib.ids_arg(key)[0] is shared
        assert _lib.ids_arg(tuple([5, 6]))[0] is not shared
    finally:
        _lib.unshare_ids(key)
    assert _lib.ids_arg(key)[0] is not shared


@pytest.mark.parametrize(
    "text,label",
    [
        ("so \\boxed{\\frac{1}{2}}", "0.5"),
        ("é \\boxed{42} done", "42"),
        ("no box here", "3"),
        ("a\x00b \\boxed{7}", "7"),
        ("\\boxed{5}", "5\x00"),
        ("lone \ud800 surrogate \\boxed{1}", "1"),
    ],
)
def test_grade_text_matches_the_json_request(text, label):
    data = json.dumps({"text": text, "label": label}).encode()
    assert _grade(text, label) == json.loads(_lib.call_string("focus_math_grade", data, len(data)))


def test_a_poll_takes_every_request_queued_by_the_time_it_is_served(server, policy, monkeypatch):
    # A poll completes as soon as one request is queued, and the serving task runs a loop
    # turn (or, on a busy loop, much) later; the requests queued meanwhile (the rest of a
    # burst: one answer call wakes several rollouts) are taken in the same batch instead
    # of a poll round trip each.
    from focus_go import _async, _bridge

    problem = server.problems()[4]
    real_call, real_poll, batches = _async.call, _bridge._poll, []

    slept: list = []

    async def busy_loop_call(name, *args, **kwargs):
        result = await real_call(name, *args, **kwargs)
        if name == "focus_collection_poll" and released.is_set() and not slept:
            slept.append(True)  # the poll the burst completes: its task runs much later
            await asyncio.sleep(0.5)
        return result

    async def recorded(handle, recent):
        requests = await real_poll(handle, recent)
        batches.append([r["kind"] for r in requests])
        return requests

    monkeypatch.setattr(_async, "call", busy_loop_call)
    monkeypatch.setattr(_bridge, "_poll", recorded)
    done: list = []
    released = asyncio.Event()

    async def complete(tokens, params):
        # The warmup's four generates are answered together, in one answer call, so their
        # rollouts' env steps come in one burst.
        result = await policy.agenerate_tokens(tokens, params)
        done.append(result)
        if len(done) == 4:
            released.set()
        await released.wait()
        return result

    custom = Policy(format=policy.format, model="custom", complete=complete, default_params=SAMPLING)
    agent = Agent(policy=custom, env=RecordingEnv(problem.label, policy.decode, []), context=Segments(48))
    state = asyncio.run(Collector(agent, critic=Critic.constant(0.5), search=Selective(4, 4, seed=2)).collect(problem))
    state.close()
    assert max(b.count("env.step") for b in batches) == 4, batches[:8]


def test_a_poll_keeps_what_it_took_when_the_bridge_closes_before_the_rest(monkeypatch):
    from focus_go import _async, _bridge
    from focus_go.errors import OperationCancelled

    taken = [{"id": 7, "kind": "env.close", "object": 3, "payload": None}]

    async def first_ones(name, *args, **kwargs):
        return list(taken)

    def closed(handle, recent, limit):
        raise OperationCancelled("bridge: closed")

    monkeypatch.setattr(_async, "call", first_ones)
    monkeypatch.setattr(_bridge, "_poll_now", closed)
    assert asyncio.run(_bridge._poll(1, _RecentIds())) == taken
