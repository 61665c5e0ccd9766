"""The generate hook's return value through every path Slime's rollout takes a group
element on (tests/slime_contract/rollout.py: generate_and_rm, generate_and_rm_group,
abort with and without --partial-rollout, the data buffer, the fully-async worker's
ordering and requeueing, the flattening before training), Slime's abort stopping a tree
at once, and the router policy's concurrency taken from Slime's args."""

from __future__ import annotations

import asyncio
import copy
import pickle
import time
from urllib.parse import urlparse

import pytest

from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
from focus_go.backends import SamplingParams, SGLangPolicy
from focus_go.sim import SimServer

from slime_contract import Sample, check_fanout, make_args
from slime_contract import rollout as slime
from collectors import math_collector
from test_integrations_slime import small_collector_for

generate_hook = None  # the hook Slime loads by dotted path (set per test)


def wide_collector_for(policy, problem):
    """Eight warmup rollouts in flight at once, a budget of 16."""
    return math_collector(policy, problem, segment=16, budget=16, warmup=8)


def slime_args(server, **overrides):
    values = dict(
        sglang_router_port=urlparse(server.url).port,
        hf_checkpoint=server.model,
        n_samples_per_prompt=2,
        custom_generate_function_path=f"{__name__}.generate_hook",
        partial_rollout=False,
        mask_offpolicy_in_partial_rollout=False,
        sglang_server_concurrency=512,
        rollout_num_gpus=1,
        rollout_num_gpus_per_engine=1,
    )
    values.update(overrides)
    return make_args(**values)


def slime_groups(server, n_groups=1, n=2):
    """What Slime's data source makes: n deep copies per prompt, distinct index."""
    problems = server.problems()
    groups = []
    for g in range(n_groups):
        p = problems[g % len(problems)]
        groups.append([Sample(group_index=g, index=g * n + k, prompt=p.prompt, label=p.label, metadata={"src": "t"}) for k in range(n)])
    return groups


@pytest.fixture
def generate_state():
    slime.install_generate_state()
    yield
    slime.uninstall()


@pytest.fixture
def hook():
    global generate_hook
    from focus.integrations.slime import make_generate

    made = []

    def make(collector_for=small_collector_for):
        global generate_hook
        generate_hook = make_generate(collector_for, profile="token_chunk")
        made.append(generate_hook)
        return generate_hook

    yield make
    for h in made:
        h.close()
    generate_hook = None


def generated(server):
    return server.stats()["requests"].get("/generate", 0)


def test_return_value_answers_as_its_source_sample(server, generate_state, hook):
    from focus.integrations.slime import TreeSamples

    hook()
    args = slime_args(server)
    [group] = slime_groups(server)
    out = asyncio.run(slime.generate_and_rm_group(args, group, {}))
    assert len(out) == 2
    for source, tree in zip(group, out):
        assert isinstance(tree, TreeSamples) and isinstance(tree, list) and len(tree) > 1
        check_fanout(list(tree))
        assert tree.source is source
        assert (tree.index, tree.group_index, tree.rollout_id) == (source.index, source.group_index, None)
        assert tree.prompt == source.prompt and tree.label == source.label and tree.session_id == source.session_id
        assert tree.status == Sample.Status.COMPLETED
        assert 0.0 <= tree.reward <= 1.0 and tree.get_reward_value(args) == tree.reward
        assert tree.response == tree[0].response and tree.response
        assert tree.response_length == sum(s.response_length for s in tree)
        assert tree.loss_mask == [m for s in tree for m in s.loss_mask]
        assert all(s.status == Sample.Status.COMPLETED and s.rollout_id == source.index for s in tree)
    # Fully async: ordered by the source's index, shipped to training (not requeued).
    assert slime.fully_async_key(out) == group[0].index
    buffer, shipped = slime.DataBuffer(args), []
    slime.fully_async_done(out, buffer, shipped)
    assert shipped == [out] and buffer.buffer == []
    # Training: Slime validates the nested rollout ids and flattens to the trees' samples.
    flat = slime.flatten_rollout([out])
    assert flat == [s for tree in out for s in tree] and all(isinstance(s, Sample) for s in flat)
    # A finished group handed back (partial rollout) comes back as it is, with no request.
    before = generated(server)
    again = asyncio.run(slime.generate_and_rm_group(args, out, {}))
    assert all(a is b for a, b in zip(again, out)) and generated(server) == before


def test_tree_samples_copy_and_pickle(server, generate_state, hook):
    hook()
    args = slime_args(server, n_samples_per_prompt=1)
    [group] = slime_groups(server, n=1)
    [tree] = asyncio.run(slime.generate_and_rm_group(args, group, {}))
    for clone in (copy.deepcopy(tree), pickle.loads(pickle.dumps(tree))):
        assert type(clone) is type(tree) and clone == tree
        assert clone.source == tree.source and clone.source is not tree.source
        assert (clone.status, clone.reward, clone.index) == (tree.status, tree.reward, tree.index)


def test_a_sample_filter_reaches_every_sample_of_the_tree(server, generate_state, hook):
    """What a --rollout-sample-filter-path filter sets on a group element (a tree) reaches
    every sample Slime trains; metadata assigned whole keeps each sample's FOCUS entry."""
    hook()
    args = slime_args(server, n_samples_per_prompt=1)
    [group] = slime_groups(server, n=1)
    [tree] = asyncio.run(slime.generate_and_rm_group(args, group, {}))
    tree.remove_sample = True
    assert tree.remove_sample and tree.source.remove_sample
    assert all(s.remove_sample for s in tree)
    tree.metadata = {"filtered_by": "test"}
    assert all(s.metadata["filtered_by"] == "test" and "node_id" in s.metadata["focus"] for s in tree)
    assert tree.source.metadata == {"filtered_by": "test"}
    index = tree.index
    tree.index = index  # the source's own index; the samples keep theirs
    assert tree.source.index == index


def test_aborted_tree_is_requeued_and_regenerated(server, generate_state, hook):
    """A group with one aborted tree: the fully-async worker requeues it; resubmitted,
    the aborted tree is collected again from its source sample and the finished one is
    kept as it is."""
    hook()
    args = slime_args(server)
    [group] = slime_groups(server)
    server.set_faults([{"kind": "abort", "count": 1}])
    try:
        out = asyncio.run(slime.generate_and_rm_group(args, group, {}))
    finally:
        server.set_faults([])
    statuses = [tree.status for tree in out]
    assert sorted(s.value for s in statuses) == ["aborted", "completed"]
    aborted = next(t for t in out if t.status == Sample.Status.ABORTED)
    finished = next(t for t in out if t.status == Sample.Status.COMPLETED)
    assert list(aborted) == [aborted.source] and aborted.source.status == Sample.Status.ABORTED
    assert aborted.reward is None and aborted.response == "" and aborted.response_length == 0
    buffer, shipped = slime.DataBuffer(args), []
    slime.fully_async_done(out, buffer, shipped)
    assert shipped == [] and buffer.buffer == [out]
    again = asyncio.run(slime.generate_and_rm_group(args, buffer.get_samples(1)[0], {}))
    assert [t.index for t in again] == [s.index for s in group]
    assert all(t.status == Sample.Status.COMPLETED for t in again)
    kept = next(t for t in again if t.index == finished.index)
    redone = next(t for t in again if t.index == aborted.index)
    assert kept is finished
    assert redone is not aborted and redone.source is aborted.source and len(redone) > 1
    slime.fully_async_done(again, buffer, shipped)
    assert shipped == [again]
    flat = slime.flatten_rollout([again])
    assert len(flat) == len(kept) + len(redone)


def test_mask_offpolicy_zeroes_a_finished_trees_samples(server, generate_state, hook):
    hook()
    args = slime_args(server, partial_rollout=True, mask_offpolicy_in_partial_rollout=True)
    [group] = slime_groups(server)
    out = asyncio.run(slime.generate_and_rm_group(args, group, {}))
    lengths = [[s.response_length for s in tree] for tree in out]
    again = asyncio.run(slime.generate_and_rm_group(args, out, {}))
    for tree, lens in zip(again, lengths):
        assert [s.response_length for s in tree] == lens
        assert all(s.loss_mask == [0] * s.response_length for s in tree)
        check_fanout(list(tree))
    with pytest.raises(ValueError, match="loss_mask"):
        again[0].loss_mask = [0]


def test_partial_rollout_abort_stops_every_tree_at_once(generate_state, hook):
    """Slime's abort() mid-tree with --partial-rollout: every tree stops with no request
    sent after the abort, each comes back ABORTED with its source sample, the groups go
    back to the buffer and are collected again next rollout."""
    with SimServer(seed=0, latency={"per_token": 0.02}) as server:
        hook(wide_collector_for)
        args = slime_args(server, partial_rollout=True)
        groups = slime_groups(server, n_groups=2)

        async def rollout():
            st = slime.state(args)
            st.submit_generate_tasks(groups)
            while generated(server) < 4 * 8:  # every warmup request of the four trees is out
                await asyncio.sleep(0.01)
            marks = {}

            def on_aborted():
                marks["requests"], marks["time"] = generated(server), time.monotonic()

            handed_back = await slime.abort(args, 0, [server.url], on_aborted)
            marks["returned"] = time.monotonic() - marks["time"]
            return handed_back, marks

        handed_back, marks = asyncio.run(rollout())
        after = generated(server) - marks["requests"]
        print(f"requests after the abort: {after}; abort to return: {marks['returned']:.3f} s")
        assert after == 0
        assert len(handed_back) == 2
        for group in handed_back:
            for tree in group:
                assert tree.status == Sample.Status.ABORTED and list(tree) == [tree.source]
                assert "start_rollout_id" not in tree.metadata  # nothing generated is kept
        buffer = slime.DataBuffer(args)
        buffer.add_samples(handed_back)
        slime.state(args).reset()

        async def next_rollout():
            return await asyncio.gather(*(slime.generate_and_rm_group(args, g, {}) for g in buffer.get_samples(2)))

        again = asyncio.run(next_rollout())
        assert all(t.status == Sample.Status.COMPLETED and len(t) > 1 for g in again for t in g)
        assert sorted(slime.fully_async_key(g) for g in again) == [0, 2]


def test_abort_flag_alone_cancels_the_tree(generate_state, hook):
    """Slime's GenerateState.aborted, before any /abort_request reaches the server: the
    hook cancels the tree's requests in flight itself."""
    with SimServer(seed=0, latency={"per_token": 0.05}) as server:
        hook(wide_collector_for)
        args = slime_args(server, n_samples_per_prompt=1)
        [group] = slime_groups(server, n=1)

        async def run():
            task = asyncio.ensure_future(slime.generate_and_rm_group(args, group, {}))
            while generated(server) < 8:
                await asyncio.sleep(0.01)
            slime.state(args).aborted = True
            at = generated(server)
            out = await asyncio.wait_for(task, 30)
            return out, generated(server) - at

        [tree], after = asyncio.run(run())
        assert after == 0 and tree.status == Sample.Status.ABORTED
        assert server.stats()["aborted"] == 0  # nobody aborted them on the server


def test_hook_does_not_start_after_the_abort(server, generate_state, hook):
    generate = hook()
    args = slime_args(server, n_samples_per_prompt=1)
    [[sample]] = slime_groups(server, n=1)
    slime.state(args).aborted = True
    before = generated(server)
    out = asyncio.run(generate(args, sample, {}))
    assert out.status == Sample.Status.ABORTED and list(out) == [sample] and generated(server) == before


def test_refused_rollout_modes(server, hook):
    generate = hook()
    [[sample]] = slime_groups(server, n=1)
    with pytest.raises(ValueError, match="group-rm"):
        asyncio.run(generate(slime_args(server, group_rm=True), sample, {}))
    for mode in (
        {"partial_rollout": True},
        {"rollout_function_path": "slime.rollout.fully_async_rollout.generate_rollout_fully_async"},
    ):
        with pytest.raises(ValueError, match="rollout-sample-hook-path"):
            asyncio.run(generate(slime_args(server, rollout_sample_hook_path=["m.hook"], **mode), sample, {}))
    for stock in ("check_reward_nonzero_std", "check_reward_nonzero_std_with_fallback"):
        path = f"slime.rollout.filter_hub.dynamic_sampling_filters.{stock}"
        with pytest.raises(ValueError, match="focus.integrations.slime.tree_has_signal"):
            asyncio.run(generate(slime_args(server, dynamic_sampling_filter_path=path), sample, {}))


def test_tree_has_signal_keeps_trees_whose_rollouts_ended_differently(server, generate_state, hook):
    from focus.integrations.slime import tree_has_signal

    hook()
    args = slime_args(server, n_samples_per_prompt=2)
    groups = slime_groups(server, n_groups=4)
    outs = [asyncio.run(slime.generate_and_rm_group(args, g, {})) for g in groups]
    for out in outs:
        differ = [t[0].metadata["focus"]["outcomes_differ"] for t in out]
        for t in out:
            f = t[0].metadata["focus"]
            assert differ[out.index(t)] == (0 < f["successes"] < f["finished_rollouts"]) or f["truncated_rollouts"]
            assert len(f["rollout_tokens"]) == f["finished_rollouts"]
        assert bool(tree_has_signal(args, out)) == any(differ)
    alike = [t for out in outs for t in out if not t[0].metadata["focus"]["outcomes_differ"]]
    if alike:
        assert not tree_has_signal(args, alike[:1])


def _peak_of(collect_with_limit):
    with SimServer(seed=0, latency={"per_token": 0.005}) as server:
        collect_with_limit(server)
        return server.stats()["peak_running"]


def test_sglang_policy_max_concurrency(server):
    from focus_go.errors import ConfigError

    def run(limit):
        def go(sim):
            kwargs = {} if limit is None else {"max_concurrency": limit}
            policy = SGLangPolicy(model=sim.model, base_url=sim.url, profile="token_chunk", **kwargs)
            try:
                prompt = policy.format.prepare([{"role": "user", "content": "What is 2 + 3?"}]).tokens

                async def many():
                    params = SamplingParams(temperature=1.0, max_tokens=16)
                    await asyncio.gather(*(policy.agenerate_tokens(prompt, params) for _ in range(10)))

                asyncio.run(many())
            finally:
                policy.close()

        return _peak_of(go)

    assert run(3) <= 3
    assert run(None) > 3  # the default (64) does not hold them back
    for bad in (0, -2, 1.5, True, "4"):
        with pytest.raises((ConfigError, TypeError), match="max_concurrency"):
            SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", max_concurrency=bad)


def test_hook_takes_concurrency_from_slime_args(hook):
    from focus.integrations.slime import router_concurrency

    # Slime's semaphore: --sglang-server-concurrency x the rollout engines behind the router.
    assert router_concurrency(make_args(sglang_server_concurrency=3, rollout_num_gpus=4, rollout_num_gpus_per_engine=2)) == 6
    assert router_concurrency(make_args(sglang_server_concurrency=3, rollout_num_engines=5, rollout_num_gpus=4)) == 15
    assert router_concurrency(make_args(sglang_server_concurrency=3, rollout_num_gpus=0)) is None
    assert router_concurrency(make_args()) is None

    def run(server_concurrency):
        def go(sim):
            generate = hook(wide_collector_for)
            args = slime_args(sim, n_samples_per_prompt=1, sglang_server_concurrency=server_concurrency,
                              rollout_num_gpus=2, rollout_num_gpus_per_engine=1)
            [[sample]] = slime_groups(sim, n=1)
            out = asyncio.run(generate(args, sample, {}))
            assert out.status == Sample.Status.COMPLETED
            assert generate.policy(args).max_concurrency == server_concurrency * 2

        return _peak_of(go)

    assert run(1) <= 2
    assert run(32) > 2


def test_an_abort_finish_ends_the_whole_tree(server, hook):
    """The hook collects with the engine's stop_on_abort: one generation SGLang aborted
    ends the tree, cancelling the requests in flight (here: calls that only cancellation
    ends) and starting none."""
    from focus_go.backends import GenerateResult, Policy

    calls, cancelled = [], []

    def collector_for(router_policy, problem):
        warmup = 4

        async def complete(tokens, params):
            calls.append(len(tokens))
            if len(calls) == warmup:  # every other warmup call is waiting
                return GenerateResult(tokens=(11,), prefix_tokens=tuple(tokens), text="x", stop_reason="abort", logprobs=[-0.5])
            try:
                await asyncio.Event().wait()  # never answered
            except asyncio.CancelledError:
                cancelled.append(len(tokens))
                raise

        policy = Policy(format=router_policy.format, model="custom", complete=complete, default_params=SamplingParams(temperature=1.0))
        agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(16))
        return Collector(agent, critic=Critic.constant(0.5), search=Selective(budget=8, warmup=warmup))

    generate = hook(collector_for)
    [[sample]] = slime_groups(server, n=1)
    out = asyncio.run(asyncio.wait_for(generate(slime_args(server, n_samples_per_prompt=1), sample, {}), 30))
    assert out.status == Sample.Status.ABORTED and list(out) == [sample]
    assert len(calls) == 4 and len(cancelled) == 3
