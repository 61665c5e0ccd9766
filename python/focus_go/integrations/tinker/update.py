"""One Tinker optimizer step on a batch's actor records (``update_actor``): forward_backward
and optim_step submitted back to back, awaited together, and the sampler-versus-learner KL
read off the result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ...errors import ConfigError
from .config import PPO_CLIP, _loss_config
from .steps import _cancel_and_join
from .datum import SEQUENCE_ID_KEY, _types, _without_mask, to_datum




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


async def _submit_update(training_client: Any, chunks: Sequence[Sequence[Any]], loss_fn: str, config: Any, adam: Any) -> Any:
    """Submit forward_backward and optim_step for each chunk (substep), all back to back,
    then await them all, so they land on the same clock cycle of the training service (the
    SDK orders a client's requests by submission, so each optimizer step applies its own
    chunk's gradients, computed with the previous substep's weights). The first failure
    ends the wait and is raised: the service runs a client's requests in order, so a
    request behind a refused one (the optimizer step after a rejected forward_backward)
    would never finish. Returns the forward-backward outputs and the optimizer outputs."""
    futures: List[Any] = []
    try:
        for chunk in chunks:
            futures.append(await _submitted(training_client.forward_backward(list(chunk), loss_fn, config)))
            futures.append(await _submitted(training_client.optim_step(adam)))
    except BaseException:
        await _first_failure(futures)
        raise
    results = await _first_failure(futures, raise_it=True)
    return results[0::2], results[1::2]


async def _first_failure(futures: Sequence[Any], raise_it: bool = False) -> List[Any]:
    """The results of ``futures``; waiting stops at the first failure (the others are
    cancelled), which is raised when ``raise_it``."""
    tasks = [asyncio.ensure_future(_result(f)) for f in futures]
    if not tasks:
        return []
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        await _cancel_and_join(tasks)
    failed = next((t.exception() for t in tasks if not t.cancelled() and t.exception() is not None), None)
    if failed is not None and raise_it:
        raise failed
    return [None if t.cancelled() or t.exception() is not None else t.result() for t in tasks]


def _chunks(items: Sequence[Any], n: int) -> List[Sequence[Any]]:
    """``items`` in ``min(n, len(items))`` consecutive chunks whose sizes differ by at most
    one, the larger first (the cookbook's ``split_list``)."""
    n = min(n, len(items))
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


async def update_actor(
    training_client: Any,
    records: Sequence[Mapping[str, Any]],
    *,
    learning_rate: float,
    loss_fn: str = "ppo",
    loss_fn_config: Optional[Mapping[str, float]] = PPO_CLIP,
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
        loss_fn: Tinker's loss function (one of ``importance_sampling``, ``ppo``,
            ``cispo``, ``dro``, ``gspo``, ``stable_reinforce`` that the SDK offers).
        loss_fn_config: The loss's configuration. The default ``PPO_CLIP`` (ratio clip
            1 ± 0.2) is sent with ``ppo`` and ``cispo``; with another loss it, like None,
            means the loss's own default (the service's). ``importance_sampling``
            takes none, ``ppo`` and ``cispo`` only ``clip_low_threshold`` and
            ``clip_high_threshold``.

    Returns:
        The step's metrics: the forward-backward metrics (such as ``loss:sum``) updated with
            the optimizer's.
    """
    config = _loss_config(loss_fn, loss_fn_config, where="update_actor")
    return (await _update(training_client, records, learning_rate=learning_rate, loss_fn=loss_fn, loss_fn_config=config)).metrics


@dataclass
class _Update:
    metrics: Dict[str, Any]
    tokens_trained: int  # generated tokens trained on (mask 1)
    kl: Dict[str, float]
    input_tokens: int = 0  # the datums' model input tokens (billed as trained)
    reference_tokens: int = 0  # the tokens the KL reference scored
    datums: List[Any] = field(default_factory=list)  # as trained, with their mask


async def _update(
    training_client: Any,
    records: Sequence[Mapping[str, Any]],
    *,
    learning_rate: float,
    loss_fn: str,
    loss_fn_config: Optional[Mapping[str, float]],  # as config._loss_config gives it
    num_substeps: int = 1,
    kl_reference_client: Any = None,
    kl_penalty_coef: float = 0.0,
    kl_discount_factor: float = 0.0,
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
    kl_base: Dict[str, float] = {}
    reference_tokens = 0
    if kl_penalty_coef:
        datums, kl_base, reference_tokens = await _kl_penalty(datums, kl_reference_client, kl_penalty_coef, kl_discount_factor)
    chunks = _chunks([_without_mask(d) for d in datums], num_substeps)
    backwards, optims = await _submit_update(training_client, chunks, loss_fn, config, adam)
    metrics: Dict[str, Any] = {}
    for out in backwards:  # ":sum" metrics add up over the substeps; others: the last
        for key, value in _metrics(out).items():
            metrics[key] = metrics[key] + value if key.endswith(":sum") and key in metrics else value
    for out in optims:
        metrics.update(_metrics(out))
    trained = sum(int(sum(d.loss_fn_inputs["mask"].tolist())) for d in datums)
    outputs = [o for out in backwards for o in (list(getattr(out, "loss_fn_outputs", None) or ()))]
    inputs = sum(d.model_input.length for d in datums)
    kl = {**_kl_sample_train(datums, outputs), **kl_base, **_entropy(datums)}
    return _Update(metrics, trained, kl, inputs, reference_tokens, datums)


async def _kl_penalty(datums: List[Any], reference: Any, coef: float, discount: float) -> "tuple[List[Any], Dict[str, float], int]":
    """The datums with a KL penalty against the reference model added to their
    advantages, as tinker-cookbook's ``incorporate_kl_penalty``: each generated token's
    ``d = sampled logprob - reference logprob`` (the reference scores each datum's whole
    sequence with ``compute_logprobs``), and its advantage gains ``coef * (mean d - d)``
    (mean over the batch's generated tokens), as a discounted sum of the later tokens'
    terms when ``discount`` > 0. Also ``kl_policy_base``, the mean of d, and the number of
    tokens the reference scored."""
    import dataclasses

    import numpy as np

    types = _types()
    diffs, masks, scored_tokens = await _logprob_diffs(datums, reference, "the KL reference")
    total = float(sum(m.sum() for m in masks))
    mean = float(sum(d.sum() for d in diffs)) / total if total else 0.0
    out = []
    for datum, diff, mask in zip(datums, diffs, masks):
        penalty = coef * mask * (mean - diff)
        if discount > 0:
            for t in range(len(penalty) - 2, -1, -1):
                penalty[t] += discount * penalty[t + 1]
        advantages = np.asarray(datum.loss_fn_inputs["advantages"].tolist(), dtype=np.float64) + penalty
        inputs = dict(datum.loss_fn_inputs, advantages=types.TensorData.from_numpy(advantages.astype(np.float32)))
        out.append(dataclasses.replace(datum, loss_fn_inputs=inputs))
    return out, {"kl_policy_base": mean}, scored_tokens


async def _logprob_diffs(datums: Sequence[Any], scorer: Any, what: str) -> "tuple[List[Any], List[Any], int]":
    """Each datum's ``sampled logprob - scored logprob`` per position (0 off the mask), its
    mask, and the number of tokens scored: ``scorer`` (a ``SamplingClient``) scores each
    datum's whole sequence with ``compute_logprobs``, as the cookbook's
    ``score_sequences``."""
    import numpy as np

    types = _types()
    sequences = [
        types.ModelInput.from_ints(d.model_input.to_ints() + [int(d.loss_fn_inputs["target_tokens"].tolist()[-1])]) for d in datums
    ]
    scored = await asyncio.gather(*(_result(scorer.compute_logprobs(seq)) for seq in sequences))
    diffs, masks = [], []
    for datum, ref in zip(datums, scored):
        ref_lp = np.asarray([0.0 if v is None else float(v) for v in list(ref)[1:]], dtype=np.float64)
        mask = np.asarray(datum.loss_fn_inputs["mask"].tolist(), dtype=np.float64)
        sampled = np.asarray(datum.loss_fn_inputs["logprobs"].tolist(), dtype=np.float64)
        if ref_lp.shape != sampled.shape:
            raise ConfigError(f"train: {what} scored {ref_lp.size + 1} positions of a {sampled.size + 1}-token sequence")
        diffs.append((sampled - np.nan_to_num(ref_lp)) * mask)
        masks.append(mask)
    return diffs, masks, sum(len(seq.to_ints()) for seq in sequences)


async def _post_kl(datums: Sequence[Any], sampler: Any) -> "tuple[Dict[str, float], int]":
    """How far the update moved the policy on the tokens it trained, as the cookbook's
    ``compute_post_kl``: the post-update ``sampler`` scores the datums, and over the
    generated tokens ``kl_pre_post_v1`` = mean(sampled - scored), ``kl_pre_post_v2`` =
    mean((sampled - scored)^2) / 2. Also the number of tokens scored."""
    import numpy as np

    diffs, masks, scored_tokens = await _logprob_diffs(datums, sampler, "the post-update sampler")
    flat = np.concatenate([d[m > 0] for d, m in zip(diffs, masks)]) if diffs else np.zeros(0)
    if flat.size == 0:
        return {}, scored_tokens
    return {"kl_pre_post_v1": float(flat.mean()), "kl_pre_post_v2": float(0.5 * (flat**2).mean())}, scored_tokens


def _entropy(datums: Sequence[Any]) -> Dict[str, float]:
    """The sampling distribution's entropy estimated on the generated tokens, as the
    cookbook's ``optim/entropy``: minus the mean of their sampled logprobs."""
    import numpy as np

    values = [np.asarray(d.loss_fn_inputs["logprobs"].tolist())[np.asarray(d.loss_fn_inputs["mask"].tolist()) > 0] for d in datums]
    flat = np.concatenate(values) if values else np.zeros(0)
    return {"optim/entropy": float(-flat.mean())} if flat.size else {}


def _kl_sample_train(datums: Sequence[Any], outputs: Sequence[Any]) -> Dict[str, float]:
    """Sampler-vs-learner KL estimates over the generated tokens, from the training log
    probabilities Tinker returns (``loss_fn_outputs[i]["logprobs"]``) and the behavior log
    probabilities the datums carry: ``kl_sample_train_v1`` = mean(sampled - trained),
    ``kl_sample_train_v2`` = mean((sampled - trained)^2) / 2, as the cookbook reports them.
    Empty when the output has no training logprobs."""
    import numpy as np

    outputs = list(outputs)
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
