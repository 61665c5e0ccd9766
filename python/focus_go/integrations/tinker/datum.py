"""Tinker Datums from FOCUS actor records (``to_datum``), with the provenance of the
sampled sequence a record trains on (``SEQUENCE_ID_KEY``).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Tuple

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

SEQUENCES_KEY = "tinker_sequences"
# The path-record key train fills with the sampled sequences a path is made of: a list of
# [sequence_id, start of its sampled tokens, their number], in order.


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
    ``stable_reinforce`` loss needs them. A path record ``train`` collected names each
    request its path is made of (key ``tinker_sequences``: ``[sequence_id, start, length]``
    per request, in order); its spans tile them, each request's prompt positions since the
    previous request followed by its sampled tokens. Conditioning tokens after the last
    generated one (a tool turn's record ends with the tool's response, the start of the
    next request's prompt) are left out of the datum: they predict nothing it trains, as
    the cookbook's datums end with a trajectory's last action.

    The record's ``off_policy_tokens`` is not read: Tinker has no partial rollout (``train``
    never resumes a tree), so its records have none. Nor is its ``weight_versions``: a
    datum holds only model input and loss inputs, and ``train``'s sampler, a Python policy,
    reports no weight version (its records name none)."""
    types = _types()
    import numpy as np

    tokens = [int(t) for t in record["tokens"]]
    mask = list(record["loss_mask"])
    logprobs = list(record["behavior_logprobs"])
    # Conditioning tokens after the last generated one (a tool turn's response, which
    # opens the next request's prompt) predict nothing trained: the datum ends before them.
    end = _generated_end(mask)
    if end >= 2:
        tokens, mask, logprobs = tokens[:end], mask[:end], logprobs[:end]
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
        if len(per_token) != len(record["tokens"]):
            raise ConfigError(
                f"to_datum: record has {len(record['tokens'])} tokens but {len(per_token)} advantages; they must be equal"
            )
        per_token = per_token[: len(tokens)]
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
    sequences = _sequences(record, tokens, mask)
    if sequences:
        spans = _provenance_spans(types, sequences)
        # The input drops the sequence's last token and the targets its first.
        inputs, targets_spans = _drop_position(spans, last=True), _drop_position(spans, last=False)
        if any(isinstance(sp, types.SampledProvenanceSpan) for sp in targets_spans):
            datum = datum.with_provenance(model_input=inputs, loss_fn_inputs=targets_spans)
    return datum


def _sequences(record: Mapping[str, Any], tokens: List[int], mask: List[Any]) -> List[Tuple[str, int, int]]:
    """The sampled sequences a record's tokens are made of, as (sequence_id, start of its
    sampled tokens, their number), in order; empty when the record names none."""
    named = record.get(SEQUENCES_KEY)
    if named:
        return [(str(sid), int(start), int(length)) for sid, start, length in named]
    sequence_id = record.get(SEQUENCE_ID_KEY)
    if not (isinstance(sequence_id, str) and sequence_id):
        return []
    prompt_len = record.get("response_start")
    if prompt_len is None:
        raise ConfigError(
            f"to_datum: a record with {SEQUENCE_ID_KEY} needs its response_start (actor records from focus-go carry it)"
        )
    sampled = _generated_end(mask) - prompt_len
    if sampled > 0 and all(mask[prompt_len : prompt_len + sampled]):
        return [(sequence_id, prompt_len, sampled)]
    return []


def _generated_end(mask: List[Any]) -> int:
    """The position after the last generated token (0 when there is none)."""
    return next((i + 1 for i in range(len(mask) - 1, -1, -1) if mask[i]), 0)


def _provenance_spans(types: Any, sequences: List[Tuple[str, int, int]]) -> List[Any]:
    """Spans tiling every token of the record: before each sequence's sampled tokens, the
    tokens since the previous sequence as positions of its request's prompt."""
    spans: List[Any] = []
    cursor = 0
    for sequence_id, start, length in sequences:
        if start > cursor:
            spans.append(types.PromptProvenanceSpan(sequence_id=sequence_id, offset=cursor, length=start - cursor))
        spans.append(types.SampledProvenanceSpan(sequence_id=sequence_id, offset=0, length=length))
        cursor = start + length
    return spans


def _drop_position(spans: List[Any], *, last: bool) -> List[Any]:
    """The spans of the same tokens without the last (or the first) position."""
    import dataclasses

    spans = list(spans)
    edge = spans[-1] if last else spans[0]
    if edge.length == 1:
        return spans[:-1] if last else spans[1:]
    if last:
        spans[-1] = dataclasses.replace(edge, length=edge.length - 1)
    else:
        spans[0] = dataclasses.replace(edge, offset=edge.offset + 1, length=edge.length - 1)
    return spans


def _without_mask(datum: Any) -> Any:
    """The datum as Tinker's losses take it: ``mask`` removed, provenance kept."""
    import dataclasses

    if "mask" not in datum.loss_fn_inputs:
        return datum
    return dataclasses.replace(datum, loss_fn_inputs={k: v for k, v in datum.loss_fn_inputs.items() if k != "mask"})


def _add_sequence_ids(actor: List[Dict[str, Any]], sequence_ids: Mapping[tuple, str]) -> None:
    """Name, in each actor record, the sampled sequences it trains on. A span record's
    tokens split at its response start (the first generated token) are a (prompt, sampled
    tokens) pair the policy saw (``SEQUENCE_ID_KEY``). A path record (per-token
    ``advantages``) is a chain of them: from each generated token not yet covered, the
    longest sampled continuation of the tokens before it that the path goes on with
    (``SEQUENCES_KEY``); a path with a generated token no request sampled gets none. A span
    record that is not one pair (generated runs with an observation between them) is named
    as a chain too. Conditioning tokens after the last generated one (a tool's response)
    need no request: the datum leaves them out."""
    by_prompt: Dict[tuple, List[Tuple[tuple, str]]] = {}
    for (prompt, sampled), sequence_id in sequence_ids.items():
        by_prompt.setdefault(prompt, []).append((sampled, sequence_id))
    for record in actor:
        cut = record["response_start"]
        tokens = tuple(int(t) for t in record["tokens"])
        if cut >= len(tokens):
            continue
        end = _generated_end(record["loss_mask"])
        if record.get("advantages") is None:
            sequence_id = sequence_ids.get((tokens[:cut], tokens[cut : max(cut, end)]))
            if sequence_id is not None:
                record[SEQUENCE_ID_KEY] = sequence_id
                continue
        chain = _chain(tokens[:end], record["loss_mask"], by_prompt)
        if chain:
            record[SEQUENCES_KEY] = chain


def _chain(tokens: tuple, mask: List[Any], by_prompt: Mapping[tuple, List[Tuple[tuple, str]]]) -> List[Tuple[str, int, int]]:
    chain: List[Tuple[str, int, int]] = []
    position = 0
    while True:
        start = next((i for i in range(position, len(tokens)) if mask[i]), None)
        if start is None:
            # Tokens after the last sampled sequence have no request to name them.
            return chain if chain and position == len(tokens) else []
        matches = [(len(s), sid) for s, sid in by_prompt.get(tokens[:start], ()) if tokens[start : start + len(s)] == s and s]
        if not matches:
            return []
        length, sequence_id = max(matches)
        chain.append((sequence_id, start, length))
        position = start + length
