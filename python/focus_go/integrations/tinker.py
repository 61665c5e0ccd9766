"""Tinker: a training loop that collects FOCUS trees from Tinker samplers and trains on them.

``train`` runs one collection per optimizer step: it publishes a frozen sampler of the
current weights (``save_weights_and_get_sampling_client``), collects one problem with the
collector ``collector_for(policy, problem)`` built around it, turns the actor records into
Tinker Datums (``to_datum``) and takes one PPO step (``update_actor``). With
``async_depth=1`` the next collection runs while the current update trains, so each batch
is at most one update behind the learner; every batch is trained exactly once.

The ``tinker`` package (Python >= 3.11) is imported lazily, inside the functions that
need it; importing this module does not require it.

Tinker SDK shapes relied on (read in tinker 0.38.0, the installed release, and 0.25.0):
``TrainingClient.forward_backward(data, loss_fn, loss_fn_config)`` and
``TrainingClient.optim_step(AdamParams)`` submit at once and return an ``APIFuture``
(awaitable, ``result_async()``). ``save_weights_and_get_sampling_client()`` blocks its
caller until the save is done (0.25 returns the client; 0.38 returns a future of it whose
``result()`` blocks), so it runs in a worker thread and an overlapping collection keeps
going. Sampling goes through ``TinkerPolicy`` (``SamplingClient.sample``). The ``*_async``
twins (``await (await tc.forward_backward_async(...))``) are not used: in 0.38 they are
deprecated (``optim_step_async`` warns) and only wrap the methods used here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence

from ..errors import ConfigError
from . import CollectorFor, CriticSink, Problem, Workspace, _check_min_abs_advantage, _collect

PPO_CLIP: Mapping[str, float] = MappingProxyType({"clip_low_threshold": 0.8, "clip_high_threshold": 1.2})
"""Tinker's PPO loss configuration for the paper's ratio clip, 1 +- 0.2."""


@dataclass(frozen=True)
class StepReport:
    """What one actor update trained on: the batch index, the behavior step its sampler
    came from (the number of updates in the sampled weights), the learner step (the number
    of updates in the weights this update starts from), the policy lag between them
    (``learner_step - behavior_step``), and Tinker's metrics (forward-backward metrics such
    as ``loss:sum``, then the optimizer's)."""

    batch: int
    behavior_step: int
    learner_step: int
    policy_lag: int
    metrics: Mapping[str, Any] = field(default_factory=dict)


def _types() -> Any:
    """``tinker.types``, or an ImportError saying how to get it."""
    try:
        from tinker import types
    except ImportError as exc:
        raise ImportError(
            "focus_go.integrations.tinker needs the Tinker SDK: pip install tinker (Python >= 3.11)"
        ) from exc
    return types


SEQUENCE_ID_KEY = "tinker_sequence_id"
"""The actor-record key ``train`` fills with the Tinker ``sequence_id`` of the sampled
continuation a record trains on (``to_datum`` turns it into provenance spans)."""


def to_datum(record: Mapping[str, Any]) -> Any:
    """Turn one actor record into a Tinker ``Datum``: the model input is
    ``tokens[:-1]``, and ``target_tokens``, ``logprobs`` (behavior log probabilities),
    ``advantages`` and ``mask`` are read one position later (position i predicts token
    i+1). Conditioning tokens (prompt, observations: loss_mask false) get advantage 0, log
    probability 0 and mask 0; generated tokens get the record's advantage and mask 1.
    Arrays are int64 (targets) / float32 ``TensorData``.

    ``mask`` is the key tinker-cookbook's helpers read (``rl/metrics.py``'s KL metrics);
    Tinker's losses take none, so ``update_actor`` removes it before sending, as the
    cookbook's ``train_step`` does. When the record carries the sampled sequence's
    ``tinker_sequence_id`` (``train`` adds it) and its tokens are that request's prompt
    followed by exactly the tokens it sampled, the datum also carries provenance spans
    (``Datum.with_provenance``): the prompt part is ``PromptProvenanceSpan`` positions of
    the request's prompt, the sampled part ``SampledProvenanceSpan`` positions of its
    sampled tokens, as the cookbook's ``trajectory_to_data`` builds them; Tinker's
    ``stable_reinforce`` loss needs them."""
    types = _types()
    import numpy as np

    tokens = [int(t) for t in record["tokens"]]
    mask = list(record["loss_mask"])
    logprobs = list(record["behavior_logprobs"])
    if not (len(tokens) == len(mask) == len(logprobs)):
        raise ConfigError(
            f"to_datum: record has {len(tokens)} tokens, {len(mask)} loss_mask entries and "
            f"{len(logprobs)} behavior_logprobs; they must be equal"
        )
    if len(tokens) < 2:
        raise ConfigError(f"to_datum: record has {len(tokens)} tokens; a datum needs at least 2")
    if mask[0]:
        raise ConfigError("to_datum: the first token is marked generated; a datum needs a prompt token to predict it")
    advantage = float(record["advantage"])
    if not math.isfinite(advantage):
        raise ConfigError(f"to_datum: advantage {advantage} is not finite")
    targets = np.asarray(tokens[1:], dtype=np.int64)
    lps = np.asarray([float(lp) if m else 0.0 for lp, m in zip(logprobs[1:], mask[1:])], dtype=np.float32)
    advs = np.asarray([advantage if m else 0.0 for m in mask[1:]], dtype=np.float32)
    weights = np.asarray([1.0 if m else 0.0 for m in mask[1:]], dtype=np.float32)
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(targets),
            "logprobs": types.TensorData.from_numpy(lps),
            "advantages": types.TensorData.from_numpy(advs),
            "mask": types.TensorData.from_numpy(weights),
        },
    )
    sequence_id = record.get(SEQUENCE_ID_KEY)
    if isinstance(sequence_id, str) and sequence_id:
        prompt_len = mask.index(True) if True in mask else len(mask)
        sampled = len(tokens) - prompt_len
        if sampled > 0 and all(mask[prompt_len:]):
            prompt_span, sampled_span = types.PromptProvenanceSpan, types.SampledProvenanceSpan
            # The input drops the sequence's last token and the targets its first.
            inputs = [prompt_span(sequence_id=sequence_id, offset=0, length=prompt_len)]
            if sampled > 1:
                inputs.append(sampled_span(sequence_id=sequence_id, offset=0, length=sampled - 1))
            targets_spans = []
            if prompt_len > 1:
                targets_spans.append(prompt_span(sequence_id=sequence_id, offset=1, length=prompt_len - 1))
            targets_spans.append(sampled_span(sequence_id=sequence_id, offset=0, length=sampled))
            datum = datum.with_provenance(model_input=inputs, loss_fn_inputs=targets_spans)
    return datum


def _without_mask(datum: Any) -> Any:
    """The datum as Tinker's losses take it: ``mask`` removed, provenance kept."""
    import dataclasses

    if "mask" not in datum.loss_fn_inputs:
        return datum
    return dataclasses.replace(datum, loss_fn_inputs={k: v for k, v in datum.loss_fn_inputs.items() if k != "mask"})


async def _result(future: Any) -> Any:
    """The value of a Tinker future: an APIFuture (``result_async``), any awaitable, or a
    ``concurrent.futures.Future``; anything else is already the value."""
    if hasattr(future, "result_async"):
        return await future.result_async()
    if inspect.isawaitable(future):
        return await future
    if isinstance(future, concurrent.futures.Future):
        return await asyncio.wrap_future(future)
    return future


def _metrics(output: Any) -> Dict[str, Any]:
    metrics = getattr(output, "metrics", None)
    return dict(metrics) if metrics else {}


async def _submitted(call: Any) -> Any:
    """A Tinker call's future once the request is submitted: the SDK's methods submit when
    called and return the future; a coroutine (an older SDK's ``*_async`` shape) submits
    when awaited and returns the future."""
    return await call if inspect.iscoroutine(call) else call


async def _submit_update(training_client: Any, datums: Sequence[Any], loss_fn: str, config: Any, adam: Any) -> Any:
    """Submit forward_backward and optim_step back to back, then await both, so they land
    on the same clock cycle of the training service (the SDK orders a client's requests by
    submission, so the optimizer step applies these gradients). Both results are awaited
    even when one fails, so no request of this update is left running; the first error is
    raised. Returns (forward-backward output, optimizer output)."""
    backward = await _submitted(training_client.forward_backward(datums, loss_fn, config))
    try:
        optim = await _submitted(training_client.optim_step(adam))
    except BaseException:
        await asyncio.gather(_result(backward), return_exceptions=True)
        raise
    results = await asyncio.gather(_result(backward), _result(optim), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results[0], results[1]


async def update_actor(
    training_client: Any,
    records: Sequence[Mapping[str, Any]],
    *,
    learning_rate: float,
    loss_fn: str = "ppo",
    loss_fn_config: Mapping[str, float] = PPO_CLIP,
) -> Any:
    """Take one Tinker optimizer step on a batch's actor lane (records with
    ``lane == "actor"``; critic records are skipped).

    forward_backward and optim_step are submitted back to back and then both awaited, as
    the SDK and the cookbook do, so they land on the same clock cycle of the training
    service (the SDK runs a client's requests in submission order, so the optimizer step
    applies these gradients); both results are awaited before returning, so a sampler
    published afterwards holds the updated weights. Adam uses ``learning_rate`` with the cookbook's betas (0.9, 0.95) and eps 1e-8.
    The default loss is ``ppo`` with ratio clip 1 +- 0.2. Returns the step's metrics: the
    forward-backward metrics (e.g. ``loss:sum``) updated with the optimizer's."""
    types = _types()
    datums = [to_datum(r) for r in records if r.get("lane", "actor") == "actor"]
    if not datums:
        raise ConfigError("update_actor: the batch has no actor records to train on")
    if loss_fn == "stable_reinforce":
        missing = sum(1 for d in datums if d.loss_fn_input_spans is None)
        if missing:
            raise ConfigError(
                f"update_actor: loss_fn='stable_reinforce' needs provenance on every datum; {missing} of "
                f"{len(datums)} records have no {SEQUENCE_ID_KEY} (train adds it when the sampler reports sequence ids)"
            )
    if not (isinstance(learning_rate, (int, float)) and math.isfinite(learning_rate) and learning_rate > 0):
        raise ConfigError(f"update_actor: learning_rate must be a finite number > 0, got {learning_rate!r}")
    config = None if loss_fn_config is None else {k: float(v) for k, v in loss_fn_config.items()}
    adam = types.AdamParams(learning_rate=float(learning_rate), beta1=0.9, beta2=0.95, eps=1e-8)
    backward, optim = await _submit_update(training_client, [_without_mask(d) for d in datums], loss_fn, config, adam)
    metrics = _metrics(backward)
    metrics.update(_metrics(optim))
    return metrics


async def _publish(training_client: Any) -> Any:
    """A frozen sampler of the current weights. The SDK's save blocks its caller, so it runs
    in a worker thread and the event loop (an overlapping collection) keeps going."""

    def save() -> Any:
        client = training_client.save_weights_and_get_sampling_client()
        # tinker >= 0.3x returns a future of the client; older versions the client itself.
        result = getattr(client, "result", None)
        return result() if callable(result) else client

    return await asyncio.to_thread(save)


def _add_sequence_ids(actor: List[Dict[str, Any]], sequence_ids: Mapping[tuple, str]) -> None:
    """Name, in each actor record, the sampled sequence it trains on: its tokens split at
    the first generated token are a (prompt, sampled tokens) pair the policy saw."""
    for record in actor:
        mask = list(record["loss_mask"])
        if True not in mask:
            continue
        cut = mask.index(True)
        tokens = tuple(int(t) for t in record["tokens"])
        sequence_id = sequence_ids.get((tokens[:cut], tokens[cut:]))
        if sequence_id is not None:
            record[SEQUENCE_ID_KEY] = sequence_id


@dataclass
class _Collected:
    batch: int
    behavior_step: int
    actor: List[Dict[str, Any]]
    critic: List[Dict[str, Any]]


async def train(
    training_client: Any,
    *,
    model: str,
    problems: Sequence[Problem],
    collector_for: CollectorFor,
    steps: int,
    learning_rate: float,
    critic_sink: Optional[CriticSink] = None,
    async_depth: Literal[0, 1] = 1,
    profile: Optional[str] = None,
    loss_fn: str = "ppo",
    loss_fn_config: Mapping[str, float] = PPO_CLIP,
    workspace_for: Optional[Callable[[Problem], Workspace]] = None,
    min_abs_advantage: Optional[float] = None,
    allow_partial: bool = False,
    on_step: Optional[Callable[[StepReport], None]] = None,
) -> List[StepReport]:
    """Run the one-step asynchronous Tinker loop: collect one problem per update from a
    frozen sampler, train on it, and publish a new sampler, overlapping the next collection
    with the current update. Returns one StepReport per update.

    Problems are taken in order, cycling the list (batch b collects
    ``problems[b % len(problems)]`` with ``group_index=b``). Each collection gets its own
    sampler snapshot wrapped in a ``TinkerPolicy`` (format ``PolicyFormat.resolve(model,
    profile=profile)``, loaded once and shared) and a fresh collector from
    ``collector_for(policy, problem)``. With ``async_depth=1`` (the default) the collection
    of batch b+1 starts, from the newest published sampler, before update b: each batch is
    at most one update behind the learner and every batch trains exactly once.
    ``async_depth=0`` publishes a fresh sampler before each collection (no lag, no
    overlap). ``workspace_for``, ``min_abs_advantage`` and ``allow_partial`` apply to each
    collection as in ``collect_records``. After each update the batch's critic records go to ``critic_sink`` with
    ``behavior_step`` and ``learner_step`` added, and ``on_step`` receives the StepReport.

    If the loop stops early (the awaiting task is cancelled, or a collection, update, sink
    or ``on_step`` raises), an outstanding collection is cancelled and joined before the
    exception propagates. An update in flight when the task is cancelled is finished first
    (its gradients are never left without their optimizer step); nothing is trained twice
    or half."""
    from ..generation.format import PolicyFormat

    if not isinstance(steps, int) or steps < 0:
        raise ConfigError(f"train: steps must be an integer >= 0, got {steps!r}")
    if async_depth not in (0, 1):
        raise ConfigError(f"train: async_depth must be 0 or 1, got {async_depth!r}")
    problems = list(problems)
    if not problems:
        raise ConfigError("train: problems is empty")
    for i, p in enumerate(problems):
        if not isinstance(p, Problem):
            raise ConfigError(f"train: problems[{i}] is a {type(p).__name__}, expected a Problem")
    _check_min_abs_advantage(min_abs_advantage)  # validate the threshold before any work
    _types()  # fail before any collection when the SDK is missing
    if steps == 0:
        return []

    from ..generation.tinker import TinkerPolicy

    fmt = PolicyFormat.resolve(model, profile=profile)

    async def collect(batch: int, sampler: Any, behavior_step: int) -> _Collected:
        problem = problems[batch % len(problems)]
        policy = TinkerPolicy(sampler, model=model, format=fmt)
        try:
            collector = collector_for(policy, problem)
            actor, critic, _, _ = await _collect(
                collector, problem, group_index=batch, workspace_for=workspace_for, allow_partial=allow_partial,
                min_abs_advantage=min_abs_advantage,
            )
            _add_sequence_ids(actor, policy.sequence_ids)
        finally:
            policy.close()
        return _Collected(batch, behavior_step, actor, critic)

    reports: List[StepReport] = []
    learner_step = 0  # updates applied so far
    pending: Optional["asyncio.Future[_Collected]"] = None
    current: Optional["asyncio.Future[_Collected]"] = None
    try:
        if async_depth == 1:
            sampler, sampler_step = await _publish(training_client), 0
            pending = asyncio.ensure_future(collect(0, sampler, sampler_step))
        for b in range(steps):
            if async_depth == 0:
                sampler, sampler_step = await _publish(training_client), learner_step
                pending = asyncio.ensure_future(collect(b, sampler, sampler_step))
            assert pending is not None
            current, pending = pending, None
            collected = await current
            if not collected.actor:
                problem = problems[b % len(problems)]
                raise ConfigError(
                    f"train: batch {b} (problem {problem.id!r}) has no actor records to train on"
                    + ("" if min_abs_advantage is None else f" with min_abs_advantage={min_abs_advantage}")
                )
            if async_depth == 1 and b + 1 < steps:
                # The next collection overlaps this update, from the newest sampler.
                pending = asyncio.ensure_future(collect(b + 1, sampler, sampler_step))
            update = asyncio.ensure_future(
                update_actor(
                    training_client,
                    collected.actor,
                    learning_rate=learning_rate,
                    loss_fn=loss_fn,
                    loss_fn_config=loss_fn_config,
                )
            )
            try:
                metrics = await asyncio.shield(update)
            except asyncio.CancelledError:
                # Submitted gradients without their optimizer step would leak into the next
                # update: finish the step, then stop.
                await asyncio.gather(update, return_exceptions=True)
                raise
            report = StepReport(
                batch=b,
                behavior_step=collected.behavior_step,
                learner_step=learner_step,
                policy_lag=learner_step - collected.behavior_step,
                metrics=MappingProxyType(dict(metrics or {})),
            )
            learner_step += 1
            reports.append(report)
            if critic_sink is not None:
                critic_sink(
                    [dict(r, behavior_step=report.behavior_step, learner_step=report.learner_step) for r in collected.critic]
                )
            if on_step is not None:
                on_step(report)
            if async_depth == 1 and b + 2 < steps:
                # The sampler for the collection the next iteration starts (batch b+2).
                sampler, sampler_step = await _publish(training_client), learner_step
        return reports
    finally:
        outstanding = [t for t in (current, pending) if t is not None and not t.done()]
        for t in outstanding:
            t.cancel()
        if outstanding:
            # Join them, so no collection outlives the loop; their outcome no longer matters.
            await asyncio.gather(*outstanding, return_exceptions=True)
        fmt.codec.tokenizer.close()


__all__ = ["PPO_CLIP", "SEQUENCE_ID_KEY", "StepReport", "to_datum", "train", "update_actor"]
