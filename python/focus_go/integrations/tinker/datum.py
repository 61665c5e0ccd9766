"""Tinker Datums from FOCUS actor records (``to_datum``), with the provenance of the
sampled sequence a record trains on (``SEQUENCE_ID_KEY``).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping

from ...errors import ConfigError


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
    followed by exactly the tokens it sampled (split at the record's ``response_start``),
    the datum also carries provenance spans
    (``Datum.with_provenance``): the prompt part is ``PromptProvenanceSpan`` positions of
    the request's prompt, the sampled part ``SampledProvenanceSpan`` positions of its
    sampled tokens, as the cookbook's ``trajectory_to_data`` builds them; Tinker's
    ``stable_reinforce`` loss needs them."""
    types = _types()
    import numpy as np

    tokens = [int(t) for t in record["tokens"]]
    mask = list(record["loss_mask"])
    logprobs = list(record["behavior_logprobs"])
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
        prompt_len = record.get("response_start")
        if prompt_len is None:
            raise ConfigError(
                f"to_datum: a record with {SEQUENCE_ID_KEY} needs its response_start (actor records from focus-go carry it)"
            )
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


def _add_sequence_ids(actor: List[Dict[str, Any]], sequence_ids: Mapping[tuple, str]) -> None:
    """Name, in each actor record, the sampled sequence it trains on: its tokens split at
    its response start (the first generated token) are a (prompt, sampled tokens) pair the
    policy saw."""
    for record in actor:
        cut = record["response_start"]
        tokens = tuple(int(t) for t in record["tokens"])
        if cut >= len(tokens):
            continue
        sequence_id = sequence_ids.get((tokens[:cut], tokens[cut:]))
        if sequence_id is not None:
            record[SEQUENCE_ID_KEY] = sequence_id
