"""The Tinker loop with the real ``tinker`` types and a fake training/sampling client with
the SDK's method shapes (tinker 0.38: ``forward_backward`` / ``optim_step`` return an
awaitable APIFuture at once, their deprecated ``*_async`` twins return one after an await
(double await), ``save_weights_and_get_sampling_client`` blocks and returns a future of the
client, ``SamplingClient.sample`` returns an awaitable future). The sampling double
generates real tokens from the simulated server through a Go SGLangPolicy."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest

tinker = pytest.importorskip("tinker")
np = pytest.importorskip("numpy")

from tinker import types  # noqa: E402
from tinker.lib.public_interfaces.api_future import AwaitableConcurrentFuture  # noqa: E402

from focus_go import MathEnv  # noqa: E402
from focus_go.backends import PolicyFormat, SamplingParams  # noqa: E402
from collectors import math_collector  # noqa: E402
from focus_go.errors import CollectionError, ConfigError  # noqa: E402
from focus_go.integrations import JsonlDirectory  # noqa: E402
from focus_go.integrations.tinker import PPO_CLIP, StepReport, to_datum, train, update_actor  # noqa: E402

_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="fake-tinker")


def _later(delay, fn):
    """A concurrent future completed with fn() after ``delay`` seconds (the service's latency)."""

    def run():
        time.sleep(delay)
        return fn()

    return AwaitableConcurrentFuture(_POOL.submit(run))


class FakeSamplingClient:
    """A frozen sampler of weights ``version``: generates from the simulated server, with the
    seed shifted per version so different weights sample differently."""

    def __init__(self, version, sim_policy, *, logprobs=True):
        self.version = version
        self.sim_policy = sim_policy
        self.logprobs = logprobs
        self.calls = 0

    def sample(self, prompt, num_samples, sampling_params, include_prompt_logprobs=False, topk_prompt_logprobs=0):
        assert isinstance(prompt, types.ModelInput) and isinstance(sampling_params, types.SamplingParams)
        assert num_samples >= 1 and sampling_params.max_tokens
        self.calls += 1
        call = self.calls
        seed = None if sampling_params.seed is None else sampling_params.seed + 1000 * self.version

        def work():
            sequences = []
            for i in range(num_samples):
                result = self.sim_policy.generate_tokens(
                    prompt.to_ints(),
                    SamplingParams(
                        temperature=sampling_params.temperature,
                        max_tokens=sampling_params.max_tokens,
                        top_p=sampling_params.top_p,
                        seed=None if seed is None else seed + i,
                        logprobs=0,
                    ),
                )
                sequences.append(types.SampledSequence(
                    stop_reason=result.stop_reason,
                    sequence_id=f"v{self.version}-{call}-{i}",
                    tokens_np=np.asarray(result.tokens, dtype=np.int32),
                    logprobs_np=np.asarray(result.logprobs, dtype=np.float32) if self.logprobs else None,
                ))
            return types.SampleResponse(sequences=sequences)

        return AwaitableConcurrentFuture(_POOL.submit(work))

    async def sample_async(self, *args, **kwargs):
        return await self.sample(*args, **kwargs)


class FakeTrainingClient:
    """Counts optimizer steps as the weight version; checks the await order."""

    def __init__(self, sim_policy, *, latency=0.05, fail_on_step=None, sampler_logprobs=True):
        self.sim_policy = sim_policy
        self.latency = latency
        self.fail_on_step = fail_on_step
        self.sampler_logprobs = sampler_logprobs
        self.version = 0
        self.events = []
        self.trained = []  # datums per forward_backward
        self.samplers = []
        self.publish_threads = set()
        self._backward = None
        self._lock = threading.Lock()

    def _event(self, *e):
        with self._lock:
            self.events.append(e)

    def forward_backward(self, data, loss_fn, loss_fn_config=None):
        assert data and all(isinstance(d, types.Datum) for d in data)
        for d in data:
            n = d.model_input.length
            assert {k: v.shape for k, v in d.loss_fn_inputs.items()} == {k: [n] for k in ("target_tokens", "logprobs", "advantages")}
        step = len(self.trained)
        self.trained.append(list(data))
        self._event("fb", step, loss_fn, dict(loss_fn_config or {}))
        if self.fail_on_step == step:
            raise RuntimeError(f"fake tinker: forward_backward rejected step {step}")

        def done():
            self._event("fb_done", step)
            return types.ForwardBackwardOutput(
                loss_fn_output_type="ArrayRecord",
                loss_fn_outputs=[{"logprobs": d.loss_fn_inputs["logprobs"]} for d in data],
                metrics={"loss:sum": float(len(data))},
            )

        self._backward = _later(self.latency, done)
        return self._backward

    def optim_step(self, optim_params=None, *, adam_params=None):
        params = optim_params or adam_params
        assert isinstance(params, types.AdamParams)
        assert self._backward is not None, "optim_step submitted before any forward_backward"
        backward = self._backward
        self._event("optim", len(self.trained) - 1, params.learning_rate)

        def done():
            # The service runs a client's requests in submission order: the step applies
            # the gradients submitted before it.
            backward.future().exception()
            with self._lock:
                self.version += 1
            self._event("optim_done", self.version)
            return types.OptimStepResponse(metrics={"optim/lr": params.learning_rate})

        return _later(self.latency, done)

    async def forward_backward_async(self, data, loss_fn, loss_fn_config=None):
        return self.forward_backward(data, loss_fn, loss_fn_config)

    async def optim_step_async(self, optim_params=None, *, adam_params=None):
        return self.optim_step(optim_params, adam_params=adam_params)

    def save_weights_and_get_sampling_client(self, name=None, retry_config=None):
        self.publish_threads.add(threading.current_thread() is threading.main_thread())
        time.sleep(0.01)  # the SDK's save blocks its caller
        client = FakeSamplingClient(self.version, self.sim_policy, logprobs=self.sampler_logprobs)
        self.samplers.append(client)
        self._event("publish", self.version)
        f = concurrent.futures.Future()
        f.set_result(client)
        return AwaitableConcurrentFuture(f)


@pytest.fixture
def training_client(sim_policy):
    return FakeTrainingClient(sim_policy)


@pytest.fixture
def model(server):
    return server.model


def make_collector_for(log):
    def collector_for(policy, problem):
        log.append(("collect", problem.id, policy.sampling_client.version))
        return math_collector(policy, problem)

    return collector_for


def prompt_tokens(server, problem):
    fmt = PolicyFormat.resolve(server.model, profile="token_chunk")
    try:
        msgs = [{"role": "system", "content": "Solve the problem."}, {"role": "user", "content": problem.prompt}]
        return list(fmt.prepare(msgs).tokens)
    finally:
        fmt.codec.tokenizer.close()


def test_spec_example_train(training_client, model, problems, tmp_path, monkeypatch):
    # integrations.txt, train (and CollectorFor) as written, inside an async function.
    monkeypatch.chdir(tmp_path)
    from focus import Agent, Collector, Critic, Segments, Selective

    def collector_for(policy, problem):
        agent = Agent(
            policy=policy,
            env=MathEnv(problem.label, policy.decode),
            system_prompt="Solve the problem.",
            context=Segments(256),
        )
        return Collector(
            agent,
            critic=Critic.constant(0.5),
            search=Selective(budget=32, warmup=16),
        )

    async def main():
        from focus.integrations import JsonlDirectory
        from focus.integrations.tinker import train

        reports = await train(
            training_client,
            model=model,
            problems=problems,
            collector_for=collector_for,
            steps=3,
            learning_rate=1e-5,
            profile="token_chunk",
            critic_sink=JsonlDirectory("critic-targets"),
        )
        return reports

    reports = asyncio.run(main())
    assert [r.batch for r in reports] == [0, 1, 2]
    assert [r.policy_lag for r in reports] == [0, 1, 1]
    assert len(training_client.trained) == 3 and training_client.version == 3
    assert len(list((tmp_path / "critic-targets").glob("*.jsonl"))) == 3


def test_async_depth_1_lag_overlap_and_exactly_once(server, training_client, model, problems):
    log, sunk, seen = [], [], []
    reports = asyncio.run(
        train(
            training_client,
            model=model,
            problems=problems,
            collector_for=make_collector_for(log),
            steps=4,
            learning_rate=2e-5,
            profile="token_chunk",
            critic_sink=sunk.extend,
            on_step=seen.append,
            shuffle=False,
        )
    )
    assert seen == reports and all(isinstance(r, StepReport) for r in reports)
    assert [(r.batch, r.behavior_step, r.learner_step, r.policy_lag) for r in reports] == [
        (0, 0, 0, 0),
        (1, 0, 1, 1),
        (2, 1, 2, 1),
        (3, 2, 3, 1),
    ]
    # The sampler each collection used is the report's behavior step.
    assert [(pid, v) for _, pid, v in log] == [(p.id, r.behavior_step) for p, r in zip(problems, reports)]
    assert all(r.metrics["loss:sum"] > 0 and r.metrics["optim/lr"] == 2e-5 for r in reports)
    # Every batch trained exactly once, in order: update k trains problem k's tree.
    assert len(training_client.trained) == 4
    for k, datums in enumerate(training_client.trained):
        prefix = prompt_tokens(server, problems[k])
        assert all(d.model_input.to_ints()[: len(prefix)] == prefix for d in datums)
    assert all(e[2] == "ppo" and e[3] == dict(PPO_CLIP) for e in training_client.events if e[0] == "fb")
    # Samplers are published from a worker thread, each used by a collection.
    events = training_client.events
    starts = [i for i, e in enumerate(events) if e[0] == "publish"]
    optim_done = [i for i, e in enumerate(events) if e[0] == "optim_done"]
    assert len(starts) == 3  # the first sampler, then one after each update whose sampler a collection uses
    assert training_client.publish_threads == {False}
    assert [s.version for s in training_client.samplers] == [0, 1, 2]
    assert all(s.calls > 0 for s in training_client.samplers)
    assert optim_done == sorted(optim_done)
    # Critic records reach the sink with their steps.
    assert sunk and {(r["group_index"], r["learner_step"], r["behavior_step"]) for r in sunk} == {
        (r.batch, r.learner_step, r.behavior_step) for r in reports
    }


def test_async_depth_1_overlaps_collection_with_update(server, sim_policy, model, problems):
    client = FakeTrainingClient(sim_policy, latency=0.3)
    log = []
    collector_for = make_collector_for(log)

    def logging_collector_for(policy, problem):
        client._event("collect", problem.id)
        return collector_for(policy, problem)

    asyncio.run(
        train(client, model=model, problems=problems, collector_for=logging_collector_for, steps=3, learning_rate=1e-5, profile="token_chunk", shuffle=False)
    )
    kinds = [e[0] if e[0] != "collect" else ("collect", e[1]) for e in client.events]
    # Collection b+1 starts before update b's gradients come back.
    for b in range(2):
        collect_next = kinds.index(("collect", problems[b + 1].id))
        fb_done = [i for i, e in enumerate(client.events) if e[:2] == ("fb_done", b)][0]
        assert collect_next < fb_done


def test_async_depth_2_keeps_two_collections_ahead(server, training_client, model, problems):
    log = []
    reports = asyncio.run(
        train(training_client, model=model, problems=problems, collector_for=make_collector_for(log), steps=5,
              learning_rate=1e-5, async_depth=2, shuffle=False, profile="token_chunk")
    )
    # The first two batches from the starting weights; then batch b+2 from the sampler
    # published after update b-1: every batch at most two updates behind.
    assert [(r.batch, r.behavior_step, r.learner_step, r.policy_lag) for r in reports] == [
        (0, 0, 0, 0),
        (1, 0, 1, 1),
        (2, 0, 2, 2),
        (3, 1, 3, 2),
        (4, 2, 4, 2),
    ]
    # The sampler each collection used is the report's behavior step.
    assert sorted((pid, v) for _, pid, v in log) == sorted((problems[r.batch % len(problems)].id, r.behavior_step) for r in reports)
    # Every batch trained exactly once, in order.
    assert len(training_client.trained) == 5
    for k, datums in enumerate(training_client.trained):
        prefix = prompt_tokens(server, problems[k % len(problems)])
        assert all(d.model_input.to_ints()[: len(prefix)] == prefix for d in datums)
    assert [s.version for s in training_client.samplers] == [0, 1, 2]


def test_async_depth_0_fresh_sampler_before_each_collection(training_client, model, problems):
    log = []
    reports = asyncio.run(
        train(
            training_client,
            model=model,
            problems=problems[:2],
            collector_for=make_collector_for(log),
            steps=3,
            learning_rate=1e-5,
            async_depth=0,
            shuffle=False,
            profile="token_chunk",
        )
    )
    assert [(r.behavior_step, r.learner_step, r.policy_lag) for r in reports] == [(0, 0, 0), (1, 1, 0), (2, 2, 0)]
    # Problems cycle; each collection used the sampler published just before it.
    assert [(pid, v) for _, pid, v in log] == [(problems[0].id, 0), (problems[1].id, 1), (problems[0].id, 2)]
    kinds = [e[0] for e in training_client.events]
    assert kinds == ["publish", "fb", "optim", "fb_done", "optim_done"] * 3


def test_on_step_raising_cancels_and_joins_outstanding_collection(training_client, model, problems):
    log = []

    class Stop(Exception):
        pass

    def on_step(report):
        raise Stop(report.batch)

    async def main():
        with pytest.raises(Stop):
            await train(
                training_client,
                model=model,
                problems=problems,
                collector_for=make_collector_for(log),
                steps=4,
                learning_rate=1e-5,
                profile="token_chunk",
                on_step=on_step,
                shuffle=False,
            )
        # Nothing of the loop is left running.
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())
    assert len(training_client.trained) == 1  # batch 1 was collecting, never trained
    assert [pid for _, pid, _ in log] == [problems[0].id, problems[1].id]


def test_cancelling_train_cancels_outstanding_collection(sim_policy, model, problems):
    client = FakeTrainingClient(sim_policy, latency=0.2)
    reports = []

    async def main():
        task = asyncio.ensure_future(
            train(
                client,
                model=model,
                problems=problems,
                collector_for=make_collector_for([]),
                steps=10,
                learning_rate=1e-5,
                profile="token_chunk",
                on_step=reports.append,
            )
        )
        while not reports:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())
    assert 1 <= len(reports) < 10
    assert len(client.trained) in (len(reports), len(reports) + 1)
    assert client.version == len(client.trained)  # an update in flight was finished, never left half done


def test_step_that_raises_stops_loop_cleanly(sim_policy, model, problems, tmp_path):
    client = FakeTrainingClient(sim_policy, fail_on_step=1)
    sink = JsonlDirectory(tmp_path / "critic")

    async def main():
        with pytest.raises(RuntimeError, match="rejected step 1"):
            await train(
                client,
                model=model,
                problems=problems,
                collector_for=make_collector_for([]),
                steps=4,
                learning_rate=1e-5,
                profile="token_chunk",
                critic_sink=sink,
            )
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())
    assert client.version == 1 and len(client.trained) == 2
    files = list((tmp_path / "critic").glob("*.jsonl"))
    assert len(files) == 1  # only the trained batch's critic records, no partial file


def test_collection_failing_entirely_stops_loop(sim_policy, model, problems):
    client = FakeTrainingClient(sim_policy, sampler_logprobs=False)

    async def main():
        with pytest.raises(CollectionError) as err:
            await train(
                client, model=model, problems=problems, collector_for=make_collector_for([]), steps=2,
                learning_rate=1e-5, profile="token_chunk", allow_partial=True,
            )
        assert asyncio.all_tasks() == {asyncio.current_task()}
        return err.value

    exc = asyncio.run(main())
    assert "every rollout" in str(exc) and "logprobs" in str(exc)
    if exc.state is not None:
        exc.state.close()
    assert client.trained == []


def test_train_rejects_bad_arguments(training_client, model, problems):
    cf = make_collector_for([])
    for kwargs, message in [
        ({"steps": -1}, "steps"),
        ({"async_depth": -1}, "async_depth"),
        ({"async_depth": True}, "async_depth"),
        ({"problems": []}, "problems is empty"),
        ({"problems": ["text"]}, "expected a Problem"),
        ({"min_abs_advantage": -1.0}, "min_abs_advantage"),
    ]:
        args = dict(model=model, problems=problems, collector_for=cf, steps=1, learning_rate=1e-5, profile="token_chunk")
        args.update(kwargs)
        with pytest.raises(ValueError, match=message):
            asyncio.run(train(training_client, **args))
    assert asyncio.run(train(training_client, model=model, problems=problems, collector_for=cf, steps=0, learning_rate=1e-5)) == []
    assert training_client.events == []


def test_to_datum_alignment():
    from focus.integrations.tinker import to_datum as spec_to_datum

    record = {
        "tokens": [5, 6, 7, 20, 21, 90, 22],
        "loss_mask": [False, False, False, True, True, False, True],
        "behavior_logprobs": [0.0, 0.0, 0.0, -0.5, -0.25, 0.0, -0.125],
        "advantage": 0.75,
        "lane": "actor",
    }
    datum = spec_to_datum(record)
    assert isinstance(datum, types.Datum)
    assert datum.model_input.to_ints() == [5, 6, 7, 20, 21, 90]
    inputs = datum.loss_fn_inputs
    assert set(inputs) == {"target_tokens", "logprobs", "advantages", "mask"}
    assert inputs["target_tokens"].dtype == "int64" and inputs["logprobs"].dtype == "float32"
    assert inputs["mask"].dtype == "float32" and inputs["mask"].tolist() == [0.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    assert datum.model_input_spans is None and datum.loss_fn_input_spans is None  # no sequence id
    assert inputs["target_tokens"].tolist() == [6, 7, 20, 21, 90, 22]
    assert inputs["logprobs"].tolist() == [0.0, 0.0, -0.5, -0.25, 0.0, -0.125]
    assert inputs["advantages"].tolist() == [0.0, 0.0, 0.75, 0.75, 0.0, 0.75]
    # Records from Go have tokens, loss_mask and behavior_logprobs of one length: to_datum
    # does not check it again (issue 35).
    with pytest.raises(ValueError, match="needs its response_start"):
        to_datum({**record, "tinker_sequence_id": "seq-1"})
    with pytest.raises(ValueError, match="at least 2"):
        to_datum({**record, "tokens": [1], "loss_mask": [False], "behavior_logprobs": [0.0]})


def test_update_actor_order_and_metrics(sim_policy):
    from focus.integrations.tinker import PPO_CLIP as spec_ppo_clip
    from focus.integrations.tinker import StepReport as spec_step_report
    from focus.integrations.tinker import update_actor as spec_update_actor

    assert dict(spec_ppo_clip) == {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}
    assert spec_step_report(batch=0, behavior_step=0, learner_step=0, policy_lag=0).metrics == {}
    client = FakeTrainingClient(sim_policy)
    record = {"tokens": [1, 2, 3], "loss_mask": [False, True, True], "behavior_logprobs": [0.0, -1.0, -2.0], "advantage": 0.5, "lane": "actor"}
    critic = {"context": "c", "target": 0.5, "lane": "critic"}
    metrics = asyncio.run(spec_update_actor(client, [record, critic], learning_rate=3e-5))
    assert metrics == {"loss:sum": 1.0, "optim/lr": 3e-5}
    assert client.version == 1  # the optimizer result was awaited before returning
    # Both submitted before either is awaited (one clock cycle), run in submission order.
    assert [e[0] for e in client.events] == ["fb", "optim", "fb_done", "optim_done"]
    asyncio.run(update_actor(client, [record], learning_rate=1e-5, loss_fn="importance_sampling", loss_fn_config=None))
    assert client.events[-4][2:] == ("importance_sampling", {})
    with pytest.raises(ValueError, match="no actor records"):
        asyncio.run(update_actor(client, [critic], learning_rate=1e-5))
    with pytest.raises(ValueError, match="learning_rate"):
        asyncio.run(update_actor(client, [record], learning_rate=0.0))


def test_cancel_during_update_finishes_the_step(sim_policy, model, problems):
    client = FakeTrainingClient(sim_policy, latency=0.2)

    async def main():
        task = asyncio.ensure_future(
            train(client, model=model, problems=problems, collector_for=make_collector_for([]), steps=4,
                  learning_rate=1e-5, profile="token_chunk")
        )
        while not any(e[:2] == ("fb", 1) for e in client.events):
            await asyncio.sleep(0.005)
        task.cancel()  # gradients of step 1 are in flight
        with pytest.raises(asyncio.CancelledError):
            await task
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())
    assert len(client.trained) == 2 and client.version == 2
    assert [e[0] for e in client.events if e[0] in ("fb", "optim_done")] == ["fb", "optim_done"] * 2


def test_batch_without_actor_records_is_a_clear_error(training_client, model, problems):
    async def main():
        with pytest.raises(ValueError, match="batch 0 .* no actor records .*min_abs_advantage=1000000000.0"):
            await train(
                training_client, model=model, problems=problems, collector_for=make_collector_for([]), steps=2,
                learning_rate=1e-5, profile="token_chunk", min_abs_advantage=1e9,
            )
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())
    assert training_client.trained == []


def test_to_datum_path_record():
    """A path record's per-token advantages reach loss_fn_inputs one position later;
    context tokens get advantage 0 whatever the record's scalar advantage."""
    record = {
        "tokens": [5, 6, 7, 20, 21, 90, 22],
        "loss_mask": [False, False, False, False, True, False, True],
        "behavior_logprobs": [0.0, 0.0, 0.0, 0.0, -0.25, 0.0, -0.125],
        "advantage": 0.75,
        "advantages": [0.0, 0.0, 0.0, 0.0, -0.5, 0.0, 0.75],
        "lane": "actor",
    }
    inputs = to_datum(record).loss_fn_inputs
    assert inputs["advantages"].tolist() == [0.0, 0.0, 0.0, -0.5, 0.0, 0.75]
    assert inputs["mask"].tolist() == [0.0, 0.0, 0.0, 1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="7 tokens but 2 advantages"):
        to_datum({**record, "advantages": [0.0, 1.0]})
    with pytest.raises(ValueError, match="not finite"):
        to_datum({**record, "advantages": [0.0] * 4 + [float("nan"), 0.0, 0.0]})


def _datum_terms(datums):
    """(input prefix, target, behaviour log-prob, advantage) of every masked datum position."""
    from collections import Counter

    out = Counter()
    for d in datums:
        inputs, x = d.loss_fn_inputs, d.model_input.to_ints()
        for i, (m, t, lp, a) in enumerate(zip(inputs["mask"].tolist(), inputs["target_tokens"].tolist(),
                                               inputs["logprobs"].tolist(), inputs["advantages"].tolist())):
            if m:
                out[(tuple(x[: i + 1]), t, lp, a)] += 1
    return out


def test_to_datum_paths_same_terms_fewer_tokens():
    """The datums of both layouts of one tree train the same (prefix, target, log-prob,
    advantage) terms; Tinker's losses sum over them, so the gradient is the same, and the
    path datums hold fewer tokens."""
    import random

    from trees import random_tree

    from focus_go import DirectBranchTd, RewardConfig
    from focus_go.extend import SchedulerState
    from focus_go.preparation import prepare_samples

    for seed in range(10):
        with SchedulerState.from_json(random_tree(random.Random(seed))) as state:
            batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
            spans = [to_datum(r) for r in batch.to_records(0) if r["lane"] == "actor"]
            paths = [to_datum(r) for r in batch.to_records(0, layout="paths") if r["lane"] == "actor"]
        assert _datum_terms(paths) == _datum_terms(spans)
        assert sum(d.model_input.length for d in paths) <= sum(d.model_input.length for d in spans)
@pytest.mark.parametrize("flag", [False, True])
def test_train_passes_visitation_weights_to_each_collection(training_client, model, problems, monkeypatch, flag):
    # The datums' advantages come from the collection's records (collect_records, where the
    # weighting itself is tested); train hands its visitation_weights to every collection.
    import focus_go.integrations.tinker.loop as tinker_mod  # the module of train, which calls _collect

    seen = []
    real = tinker_mod._collect

    async def spy(*a, **kw):
        seen.append(kw.get("visitation_weights"))
        return await real(*a, **kw)

    monkeypatch.setattr(tinker_mod, "_collect", spy)

    async def main():
        return await train(training_client, model=model, problems=problems, collector_for=make_collector_for([]), steps=1,
                           learning_rate=1e-5, profile="token_chunk", visitation_weights=flag)

    reports = asyncio.run(main())
    assert len(reports) == 1 and seen and all(v is flag for v in seen)


def test_train_critic_rule_sets_each_batch_from_earlier_ones(training_client, model, problems, monkeypatch):
    # The rule observes every batch's trees after its collection and sets the collectors of
    # the batches that start later (docs/signal.md §R); the first batch has no measurement.
    import focus_go.integrations.tinker.loop as tinker_mod
    from focus_go.critic_rule import CriticRule

    seen = []
    real = tinker_mod._collect

    async def spy(collector, *a, **kw):
        seen.append((type(collector.estimator).__name__, collector.reward.critic_weight, rule.state["batches"]))
        return await real(collector, *a, **kw)

    monkeypatch.setattr(tinker_mod, "_collect", spy)
    rule = CriticRule(min_nodes=1)
    reports = asyncio.run(train(training_client, model=model, problems=problems, collector_for=make_collector_for([]),
                                steps=3, learning_rate=1e-5, profile="token_chunk", critic_rule=rule, async_depth=0))
    assert len(reports) == 3 and rule.state["batches"] == 3
    assert [b for _, _, b in seen] == [0, 1, 2]
    assert seen[0][:2] == ("TreeGroupBaseline", 1.0)
    choice = rule.choose()
    assert choice.measured and choice.nodes > 0
    with pytest.raises(ConfigError, match="critic_rule"):
        asyncio.run(train(training_client, model=model, problems=problems, collector_for=make_collector_for([]),
                          steps=1, learning_rate=1e-5, critic_rule="auto"))
