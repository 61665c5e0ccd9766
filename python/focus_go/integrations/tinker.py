"""Tinker: a training loop that collects FOCUS trees from Tinker samplers and trains on them.

``train`` runs one collection per optimizer step: it publishes a frozen sampler of the
current weights (``save_weights_and_get_sampling_client``), collects ``problems_per_step``
problems (default 1) concurrently with collectors ``collector_for(policy, problem)``
built around it, turns the actor records into Tinker Datums (``to_datum``) and takes one
PPO step (``update_actor``: forward_backward and optim_step submitted back to back, one
clock cycle). With ``async_depth=1`` the next collection runs while the current update
trains, so each batch is at most one update behind the learner; every batch is trained
exactly once. Around that: per-step metrics (JSONL, wandb), held-out evaluation,
checkpoints of the training state with the loop's cursor (``TrainCheckpoint``,
``resume_from``), and datums tinker-cookbook's helpers read (``mask``, provenance).

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
import json
import math
import os
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Union

from ..errors import ConfigError
from . import CollectorFor, CriticSink, Problem, Workspace, _check_min_abs_advantage, _collect

PPO_CLIP: Mapping[str, float] = MappingProxyType({"clip_low_threshold": 0.8, "clip_high_threshold": 1.2})
"""Tinker's PPO loss configuration for the paper's ratio clip, 1 ± 0.2."""


@dataclass(frozen=True)
class StepReport:
    """What one actor update trained on, as ``train`` reports it after each update.

    Attributes:
        batch: The batch index.
        behavior_step: The number of updates in the weights the batch was sampled from.
        learner_step: The number of updates in the weights this update started from.
        policy_lag: ``learner_step - behavior_step``.
        metrics: Tinker's metrics: the forward-backward metrics, such as ``loss:sum``, then
            the optimizer's.
    """

    batch: int
    behavior_step: int
    learner_step: int
    policy_lag: int
    metrics: Mapping[str, Any] = field(default_factory=dict)
    trees: int = 0
    """How many trees (problems) the update trained on."""
    tokens_sampled: int = 0
    """Tokens the policy generated while collecting them."""
    tokens_trained: int = 0
    """Generated tokens in the datums sent (loss mask 1)."""
    failures: int = 0
    """Failed rollouts left out of the trees (``allow_partial=True``)."""
    stats: Mapping[str, float] = field(default_factory=dict)
    """The step's metrics as ``train`` logs them (see ``train``)."""


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
    probability 0 and mask 0; generated tokens get the record's advantage and mask 1, or,
    for a path record (``layout="paths"``, which carries per-token ``advantages``), each
    token's own advantage from it. Tinker's losses sum over tokens, so path records give
    the per-span records' gradient from fewer tokens. Arrays are int64 (targets) / float32
    ``TensorData``.

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
    per_token = record.get("advantages")
    if per_token is None:
        advantage = float(record["advantage"])
        if not math.isfinite(advantage):
            raise ConfigError(f"to_datum: advantage {advantage} is not finite")
        per_token = [advantage] * len(tokens)
    else:
        per_token = [float(a) for a in per_token]
        if len(per_token) != len(tokens):
            raise ConfigError(f"to_datum: record has {len(tokens)} tokens but {len(per_token)} advantages; they must be equal")
        bad = next((a for a, m in zip(per_token, mask) if m and not math.isfinite(a)), None)
        if bad is not None:
            raise ConfigError(f"to_datum: advantage {bad} is not finite")
    targets = np.asarray(tokens[1:], dtype=np.int64)
    lps = np.asarray([float(lp) if m else 0.0 for lp, m in zip(logprobs[1:], mask[1:])], dtype=np.float32)
    advs = np.asarray([a if m else 0.0 for a, m in zip(per_token[1:], mask[1:])], dtype=np.float32)
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
    """Take one Tinker optimizer step on a batch's actor records.

    Records with ``lane == "actor"`` are trained; critic records are skipped. The
    forward-backward and optimizer-step requests are submitted back to back, so the
    optimizer step applies these gradients, and both are awaited before returning, so a
    sampler published afterwards holds the updated weights. Adam uses ``learning_rate`` with
    betas (0.9, 0.95) and eps 1e-8.

    Args:
        training_client: A Tinker ``TrainingClient``.
        records: The records of one batch, as ``collect_records`` returns them.
        learning_rate: Adam's learning rate.
        loss_fn: Tinker's loss function.
        loss_fn_config: The loss's configuration; by default PPO with ratio clip 1 ± 0.2.

    Returns:
        The step's metrics: the forward-backward metrics (such as ``loss:sum``) updated with
            the optimizer's.
    """
    return (await _update(training_client, records, learning_rate=learning_rate, loss_fn=loss_fn, loss_fn_config=loss_fn_config)).metrics


@dataclass
class _Update:
    metrics: Dict[str, Any]
    tokens_trained: int
    kl: Dict[str, float]


async def _update(
    training_client: Any,
    records: Sequence[Mapping[str, Any]],
    *,
    learning_rate: float,
    loss_fn: str,
    loss_fn_config: Optional[Mapping[str, float]],
) -> _Update:
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
    trained = sum(int(sum(d.loss_fn_inputs["mask"].tolist())) for d in datums)
    return _Update(metrics, trained, _kl_sample_train(datums, backward))


def _kl_sample_train(datums: Sequence[Any], backward: Any) -> Dict[str, float]:
    """Sampler-vs-learner KL estimates over the generated tokens, from the training log
    probabilities Tinker returns (``loss_fn_outputs[i]["logprobs"]``) and the behavior log
    probabilities the datums carry: ``kl_sample_train_v1`` = mean(sampled - trained),
    ``kl_sample_train_v2`` = mean((sampled - trained)^2) / 2, as the cookbook reports them.
    Empty when the output has no training logprobs."""
    import numpy as np

    outputs = list(getattr(backward, "loss_fn_outputs", None) or ())
    if len(outputs) != len(datums):
        return {}
    diffs = []
    for datum, out in zip(datums, outputs):
        trained = out.get("logprobs") if isinstance(out, Mapping) else None
        if trained is None:
            return {}
        train_lp = np.asarray(trained.tolist() if hasattr(trained, "tolist") else trained, dtype=np.float64).reshape(-1)
        sampled = np.asarray(datum.loss_fn_inputs["logprobs"].tolist(), dtype=np.float64)
        mask = np.asarray(datum.loss_fn_inputs["mask"].tolist()) > 0
        if train_lp.shape != sampled.shape:
            return {}
        diffs.append(sampled[mask] - train_lp[mask])
    flat = np.concatenate(diffs) if diffs else np.zeros(0)
    if flat.size == 0:
        return {}
    return {"kl_sample_train_v1": float(flat.mean()), "kl_sample_train_v2": float(0.5 * (flat**2).mean())}


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
    critic: List[List[Dict[str, Any]]]  # one list per tree: the sink gets each collection's
    trees: int = 0
    failures: int = 0
    tokens_sampled: int = 0
    outcomes: List[float] = field(default_factory=list)
    seconds: float = 0.0


async def _gather_all(coros: Sequence[Any]) -> List[Any]:
    """Run coroutines concurrently; if one raises, cancel and join the others, then raise."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        pending = [t for t in tasks if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


class _MetricsLog:
    """One JSON line per step to ``path`` (always, when given) and to wandb (when asked)."""

    def __init__(self, path: Optional[Union[str, "os.PathLike[str]"]], wandb_project: Optional[str]):
        self._file = None
        self._wandb = None
        if wandb_project is not None:
            try:
                import wandb
            except ImportError as exc:
                raise ConfigError("train: wandb_project was given but wandb is not installed (pip install wandb)") from exc
            self._wandb = wandb.init(project=wandb_project)
        if path is not None:
            self._file = open(path, "a", encoding="utf-8")

    def write(self, step: int, values: Mapping[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps({"step": step, **values}, sort_keys=True) + "\n")
            self._file.flush()
        if self._wandb is not None:
            self._wandb.log(dict(values), step=step)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        if self._wandb is not None:
            self._wandb.finish()


@dataclass(frozen=True)
class TrainCheckpoint:
    """One checkpoint of the ``train`` loop: the Tinker training state and the loop's cursor.

    ``train`` draws no random numbers itself (problem order is fixed; search seeds come from
    ``collector_for``), so the cursor is the whole loop state.

    Attributes:
        state_path: Where ``TrainingClient.save_state`` saved the weights and optimizer.
        learner_step: The number of updates applied.
        next_batch: The next batch to collect (problem position ``next_batch *
            problems_per_step``).
        problems_per_step: The loop's ``problems_per_step``.
        problems: The length of the problem list.
        problem_ids: Identifies the problem list the cursor points into.
    """

    state_path: str
    learner_step: int
    next_batch: int
    problems_per_step: int
    problems: int
    problem_ids: str

    def to_json(self) -> str:
        """The checkpoint as one JSON line, as ``train`` appends it to ``checkpoint_path``."""
        return json.dumps(
            {
                "state_path": self.state_path,
                "learner_step": self.learner_step,
                "next_batch": self.next_batch,
                "problems_per_step": self.problems_per_step,
                "problems": self.problems,
                "problem_ids": self.problem_ids,
            },
            sort_keys=True,
        )


def load_checkpoint(path: Union[str, "os.PathLike[str]"]) -> TrainCheckpoint:
    """Read the last checkpoint recorded in a ``checkpoint_path`` file written by ``train``.

    Resume with a training client created from its ``state_path`` (the SDK's
    ``ServiceClient.create_training_client_from_state_with_optimizer``) and
    ``train(..., resume_from=checkpoint)``.

    Args:
        path: The JSONL file ``train`` appends checkpoints to.

    Returns:
        The last checkpoint.

    Raises:
        ConfigError: The file cannot be read, holds no checkpoint, or its last line is not
            one.
    """
    try:
        lines = [line for line in open(path, encoding="utf-8").read().splitlines() if line.strip()]
    except OSError as exc:
        raise ConfigError(f"load_checkpoint: cannot read {os.fspath(path)!r}: {exc}") from exc
    if not lines:
        raise ConfigError(f"load_checkpoint: {os.fspath(path)!r} has no checkpoint")
    try:
        raw = json.loads(lines[-1])
        return TrainCheckpoint(
            state_path=str(raw["state_path"]),
            learner_step=int(raw["learner_step"]),
            next_batch=int(raw["next_batch"]),
            problems_per_step=int(raw["problems_per_step"]),
            problems=int(raw["problems"]),
            problem_ids=str(raw["problem_ids"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"load_checkpoint: the last line of {os.fspath(path)!r} is not a checkpoint: {exc}") from exc


def _problem_ids(problems: Sequence[Problem]) -> str:
    """A fingerprint of the problem list's ids and order."""
    import hashlib

    return hashlib.sha256(json.dumps([repr(p.id) for p in problems]).encode()).hexdigest()[:16]


async def _save_state(training_client: Any, name: str) -> str:
    """Save the training state (weights and optimizer) under ``name``; its tinker:// path."""
    response = await _result(training_client.save_state(name))
    path = getattr(response, "path", None)
    if not isinstance(path, str) or not path:
        raise ConfigError(f"train: save_state returned {type(response).__name__} without a path")
    return path


def _warmup(collector: Any) -> int:
    """How many rollouts a collector's search starts from the root at once."""
    search = getattr(collector, "search", None)
    for name in ("warmup", "n"):
        value = getattr(search, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 1


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


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
    problems_per_step: int = 1,
    log_path: Optional[Union[str, "os.PathLike[str]"]] = None,
    wandb_project: Optional[str] = None,
    eval_problems: Sequence[Problem] = (),
    eval_every: int = 0,
    checkpoint_every: int = 0,
    checkpoint_path: Optional[Union[str, "os.PathLike[str]"]] = None,
    checkpoint_name: str = "focus",
    resume_from: Optional[Union[str, "os.PathLike[str]", TrainCheckpoint]] = None,
    share_warmup_prompt: bool = True,
    layout: str = "spans",
    visitation_weights: bool = True,
) -> List[StepReport]:
    """Run the one-step asynchronous Tinker loop and return one ``StepReport`` per update.

    Each update collects trees from a frozen sampler, trains on them, and publishes a new
    sampler, overlapping the next collection with the current update. With
    ``async_depth=1`` (the default) the collection of batch b+1 starts, from the newest
    published sampler, before update b: each batch is at most one update behind the learner
    and every batch trains exactly once. ``async_depth=0`` publishes a fresh sampler before
    each collection (no lag, no overlap).

    Each update trains on ``problems_per_step`` trees, collected concurrently from the same
    sampler. Problems are taken in order, cycling the list: batch b collects
    ``problems[(b * k + i) % len(problems)]`` for i < k = ``problems_per_step``, with
    ``group_index = b * k + i``. Each tree gets its own ``TinkerPolicy`` around the batch's
    sampler (format ``PolicyFormat.resolve(model, profile=profile)``, loaded once) and a
    fresh collector from ``collector_for(policy, problem)``. After each update, each
    collection hands its critic records to ``critic_sink`` with ``behavior_step`` and
    ``learner_step`` added, and ``on_step`` receives the ``StepReport``.

    A tree's warmup rollouts all start from the root prompt, so their first requests go to
    the sampler as one ``sample(num_samples=warmup)`` request
    (``TinkerPolicy.share_first_prompt``).

    Metrics: each ``StepReport.stats`` holds ``trees``, ``rollouts``, ``failures``,
    ``reward_mean`` and ``success_rate`` (outcome reward of the finished rollouts, the sum
    of their environment rewards; success is an outcome > 0), ``abs_advantage_mean``,
    ``tokens_sampled``, ``tokens_trained``, ``policy_lag``, ``loss`` (Tinker's
    ``loss:sum``), ``kl_sample_train_v1`` and ``kl_sample_train_v2`` (sampler-versus-learner
    KL over the trained tokens) and ``time_collect_s``, ``time_update_s`` and
    ``time_step_s``. Evaluation adds ``eval/reward_mean``, ``eval/success_rate`` and
    ``eval/problems``: one unbranched rollout per held-out problem (``Independent(1)``, no
    critic), scored by outcome.

    If the loop stops early (the awaiting task is cancelled, or a collection, update, sink
    or ``on_step`` raises), an outstanding collection is cancelled and joined before the
    exception propagates. An update in flight when the task is cancelled is finished first,
    so gradients are never left without their optimizer step; nothing is trained twice or
    half.

    Example:
        ```python
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
        ```

    Args:
        training_client: A Tinker ``TrainingClient``; after a resume, one created from the
            checkpoint's ``state_path`` (the SDK's
            ``create_training_client_from_state_with_optimizer``).
        model: The model directory or Hugging Face id, for the tokenizer and chat template.
        problems: The training problems, taken in order and cycled.
        collector_for: Builds the collector for each problem.
        steps: The number of updates, counted from the start of the run.
        learning_rate: Adam's learning rate.
        critic_sink: Receives each tree's critic records; None drops them.
        async_depth: 1 overlaps each collection with the previous update; 0 does not.
        profile: The parser profile of the samplers' format (see
            ``PolicyFormat.resolve``).
        loss_fn: Tinker's loss function.
        loss_fn_config: The loss's configuration; by default PPO with ratio clip 1 ± 0.2.
        workspace_for: Gives each problem its own ``Workspace``, as in
            ``collect_records``.
        min_abs_advantage: Drops actor records whose advantage is smaller in magnitude.
        allow_partial: Keep a collection with failures.
        on_step: Called with each ``StepReport``.
        problems_per_step: Trees per update.
        log_path: Appends each step's stats as one JSON line, ``{"step": learner_step + 1,
            ...}``.
        wandb_project: Also logs the stats with ``wandb.log`` (wandb must be installed).
        eval_problems: Held-out problems for evaluation.
        eval_every: Evaluate after every N-th update; 0 never.
        checkpoint_every: Save the training state after every N-th update; 0 never.
        checkpoint_path: The JSONL file each ``TrainCheckpoint`` line is appended to.
        checkpoint_name: The prefix of the saved states' names
            (``f"{checkpoint_name}-{step:06d}"``).
        resume_from: A checkpoint file or ``TrainCheckpoint`` to continue from: the first
            batch collected is its ``next_batch``, learner steps go on from its
            ``learner_step`` (its sampler holds the resumed weights, lag 0), and the
            problem list and ``problems_per_step`` must be the ones checkpointed.
        share_warmup_prompt: False sends the warmup rollouts' first requests one by one.
        layout: ``"spans"`` or ``"paths"`` (one datum per root-to-leaf path with per-token
            advantages: the same gradient from fewer tokens, since Tinker's losses sum over
            tokens).
        visitation_weights: Multiply each advantage by its edge's visitation factor
            (``ActorSample.visitation``); False trains on the unweighted advantage.

    Returns:
        One report per update.
    """
    from ..generation.format import PolicyFormat
    from ..tree import SchedulerView
    from ._outcomes import evaluate_outcome, outcomes

    if not isinstance(steps, int) or steps < 0:
        raise ConfigError(f"train: steps must be an integer >= 0, got {steps!r}")
    if async_depth not in (0, 1):
        raise ConfigError(f"train: async_depth must be 0 or 1, got {async_depth!r}")
    if not isinstance(problems_per_step, int) or isinstance(problems_per_step, bool) or problems_per_step < 1:
        raise ConfigError(f"train: problems_per_step must be an integer >= 1, got {problems_per_step!r}")
    if not isinstance(eval_every, int) or isinstance(eval_every, bool) or eval_every < 0:
        raise ConfigError(f"train: eval_every must be an integer >= 0, got {eval_every!r}")
    problems = list(problems)
    if not problems:
        raise ConfigError("train: problems is empty")
    for i, p in enumerate(problems):
        if not isinstance(p, Problem):
            raise ConfigError(f"train: problems[{i}] is a {type(p).__name__}, expected a Problem")
    eval_problems = list(eval_problems)
    for i, p in enumerate(eval_problems):
        if not isinstance(p, Problem):
            raise ConfigError(f"train: eval_problems[{i}] is a {type(p).__name__}, expected a Problem")
    if eval_every and not eval_problems:
        raise ConfigError("train: eval_every is set but eval_problems is empty")
    if not isinstance(checkpoint_every, int) or isinstance(checkpoint_every, bool) or checkpoint_every < 0:
        raise ConfigError(f"train: checkpoint_every must be an integer >= 0, got {checkpoint_every!r}")
    if checkpoint_every and checkpoint_path is None:
        raise ConfigError("train: checkpoint_every is set but checkpoint_path is not")
    first_batch, learner_step = 0, 0  # learner_step: updates applied so far
    if resume_from is not None:
        resume = resume_from if isinstance(resume_from, TrainCheckpoint) else load_checkpoint(resume_from)
        if resume.problems_per_step != problems_per_step:
            raise ConfigError(
                f"train: resume_from was saved with problems_per_step={resume.problems_per_step}, got {problems_per_step}"
            )
        if resume.problems != len(problems) or resume.problem_ids != _problem_ids(problems):
            raise ConfigError("train: resume_from was saved with another problem list (ids or order differ)")
        first_batch, learner_step = resume.next_batch, resume.learner_step
    _check_min_abs_advantage(min_abs_advantage)  # validate the threshold before any work
    _types()  # fail before any collection when the SDK is missing
    if steps <= first_batch:
        return []

    from ..generation.tinker import TinkerPolicy

    fmt = PolicyFormat.resolve(model, profile=profile)
    k = problems_per_step

    async def collect_tree(index: int, sampler: Any) -> Any:
        problem = problems[index % len(problems)]
        policy = TinkerPolicy(sampler, model=model, format=fmt)
        seen: List[Any] = []
        try:
            collector = collector_for(policy, problem)
            warmup = _warmup(collector)
            if warmup > 1 and share_warmup_prompt:
                policy.share_first_prompt(warmup)
            actor, critic, failures, _ = await _collect(
                collector, problem, group_index=index, workspace_for=workspace_for, allow_partial=allow_partial,
                min_abs_advantage=min_abs_advantage, on_state=lambda state: seen.append(outcomes(SchedulerView(state))),
                layout=layout,
                visitation_weights=visitation_weights,
            )
            _add_sequence_ids(actor, policy.sequence_ids)
        finally:
            policy.close()
        return actor, critic, failures, seen[0]

    async def collect(batch: int, sampler: Any, behavior_step: int) -> _Collected:
        start = time.monotonic()
        trees = await _gather_all([collect_tree(batch * k + i, sampler) for i in range(k)])
        out = _Collected(batch, behavior_step, [], [], trees=len(trees))
        for actor, critic, failures, tree in trees:
            out.actor.extend(actor)
            out.critic.append(list(critic))
            out.failures += len(failures)
            out.tokens_sampled += tree.tokens_sampled
            out.outcomes.extend(tree.outcomes)
        out.seconds = time.monotonic() - start
        return out

    async def evaluate() -> Dict[str, float]:
        sampler = await _publish(training_client)

        async def one(problem: Problem) -> float:
            policy = TinkerPolicy(sampler, model=model, format=fmt)
            try:
                result = await evaluate_outcome(collector_for(policy, problem), problem, workspace_for=workspace_for)
            finally:
                policy.close()
            return result.outcomes[0]

        values = await _gather_all([one(p) for p in eval_problems])
        return {
            "eval/problems": float(len(values)),
            "eval/reward_mean": _mean(values),
            "eval/success_rate": _mean([1.0 if v > 0 else 0.0 for v in values]),
        }

    log = _MetricsLog(log_path, wandb_project)
    reports: List[StepReport] = []
    fingerprint = _problem_ids(problems)
    pending: Optional["asyncio.Future[_Collected]"] = None
    current: Optional["asyncio.Future[_Collected]"] = None
    try:
        if async_depth == 1:
            sampler, sampler_step = await _publish(training_client), learner_step
            pending = asyncio.ensure_future(collect(first_batch, sampler, sampler_step))
        for b in range(first_batch, steps):
            step_start = time.monotonic()
            if async_depth == 0:
                sampler, sampler_step = await _publish(training_client), learner_step
                pending = asyncio.ensure_future(collect(b, sampler, sampler_step))
            assert pending is not None
            current, pending = pending, None
            collected = await current
            if not collected.actor:
                ids = [problems[(b * k + i) % len(problems)].id for i in range(k)]
                which = f"problem {ids[0]!r}" if k == 1 else f"problems {ids!r}"
                raise ConfigError(
                    f"train: batch {b} ({which}) has no actor records to train on"
                    + ("" if min_abs_advantage is None else f" with min_abs_advantage={min_abs_advantage}")
                )
            if async_depth == 1 and b + 1 < steps:
                # The next collection overlaps this update, from the newest sampler.
                pending = asyncio.ensure_future(collect(b + 1, sampler, sampler_step))
            update_start = time.monotonic()
            update = asyncio.ensure_future(
                _update(
                    training_client,
                    collected.actor,
                    learning_rate=learning_rate,
                    loss_fn=loss_fn,
                    loss_fn_config=loss_fn_config,
                )
            )
            try:
                result = await asyncio.shield(update)
            except asyncio.CancelledError:
                # Submitted gradients without their optimizer step would leak into the next
                # update: finish the step, then stop.
                await asyncio.gather(update, return_exceptions=True)
                raise
            update_seconds = time.monotonic() - update_start
            metrics = dict(result.metrics or {})
            lag = learner_step - collected.behavior_step
            stats: Dict[str, float] = {
                "trees": float(collected.trees),
                "rollouts": float(len(collected.outcomes)),
                "failures": float(collected.failures),
                "reward_mean": _mean(collected.outcomes),
                "success_rate": _mean([1.0 if v > 0 else 0.0 for v in collected.outcomes]),
                "abs_advantage_mean": _mean([abs(float(r["advantage"])) for r in collected.actor]),
                "tokens_sampled": float(collected.tokens_sampled),
                "tokens_trained": float(result.tokens_trained),
                "policy_lag": float(lag),
                "time_collect_s": collected.seconds,
                "time_update_s": update_seconds,
            }
            if "loss:sum" in metrics:
                stats["loss"] = float(metrics["loss:sum"])
            stats.update(result.kl)
            learner_step += 1
            if eval_every and learner_step % eval_every == 0:
                stats.update(await evaluate())
            if checkpoint_every and learner_step % checkpoint_every == 0:
                assert checkpoint_path is not None
                state_path = await _save_state(training_client, f"{checkpoint_name}-{learner_step:06d}")
                record = TrainCheckpoint(state_path, learner_step, b + 1, k, len(problems), fingerprint)
                with open(checkpoint_path, "a", encoding="utf-8") as f:
                    f.write(record.to_json() + "\n")
            stats["time_step_s"] = time.monotonic() - step_start
            report = StepReport(
                batch=b,
                behavior_step=collected.behavior_step,
                learner_step=learner_step - 1,
                policy_lag=lag,
                metrics=MappingProxyType(metrics),
                trees=collected.trees,
                tokens_sampled=collected.tokens_sampled,
                tokens_trained=result.tokens_trained,
                failures=collected.failures,
                stats=MappingProxyType(stats),
            )
            reports.append(report)
            log.write(learner_step, stats)
            if critic_sink is not None:
                for tree_critic in collected.critic:
                    critic_sink(
                        [dict(r, behavior_step=report.behavior_step, learner_step=report.learner_step) for r in tree_critic]
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
        log.close()
        fmt.codec.tokenizer.close()


__all__ = ["PPO_CLIP", "SEQUENCE_ID_KEY", "StepReport", "TrainCheckpoint", "load_checkpoint", "to_datum", "train", "update_actor"]
