"""Trainer records from a Go-prepared batch: the code behind ``Batch.to_records()`` and
``focus_go.export.to_samples``.

The Go core exports a batch as one flat buffer (``focus_batch_export``); this module turns
it into the documented record dicts (see ``focus_go.export``) or hands each record's values
to a factory. It sits below both ``preparation`` and ``export`` so that neither imports the
other to produce records.
"""

from __future__ import annotations

import ctypes
import gc
import json
from typing import Any, ContextManager, List, Optional

from . import _lib
from ._handle import GoObject
from .tree import PackedSequence
from .types import ESTIMATOR_KEY


def batch_records(
    go_batch: ContextManager[GoObject],
    group_index: int,
    *,
    sample_factory: Any = None,
    critic_sample_factory: Any = None,
    min_abs_advantage: Optional[float] = None,
) -> List[Any]:
    """The records of the Go batch ``go_batch`` gives in its ``with`` block (left before
    the records are built): actor records first (one per generated span), then critic
    records."""
    layout_ptr = _lib.Bytes()
    blob = ctypes.c_void_p()
    size = ctypes.c_size_t()
    with go_batch as go:
        _lib.call(
            "focus_batch_export",
            _lib.c_handle(go.handle),
            int(group_index),
            float(min_abs_advantage or 0.0),
            ctypes.byref(layout_ptr),
            ctypes.byref(blob),
            ctypes.byref(size),
        )
    layout = json.loads(_lib.take_string(layout_ptr))
    try:
        view = _lib.view(blob.value, size.value, "B")
        return _decode_records(view, layout, group_index, sample_factory, critic_sample_factory)
    finally:
        _lib.lib().focus_buffer_free(blob)


def _decode_records(view, layout, group_index, sample_factory, critic_sample_factory) -> List[Any]:
    # Thousands of records holding millions of list items: a cyclic GC pass in the middle
    # would walk every list built so far (none can be in a cycle), so collect once after.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _build_records(view, layout, group_index, sample_factory, critic_sample_factory)
    finally:
        if gc_was_enabled:
            gc.enable()


def _build_records(view, layout, group_index, sample_factory, critic_sample_factory) -> List[Any]:
    n_actor, n_critic = layout["n_actor"], layout["n_critic"]
    problem_id = layout["problem_id"] or None
    estimators = layout["estimators"] or []
    out: List[Any] = []
    if n_actor:
        # Record i's tokens are record base[i]'s list extended by its own delta: the int
        # objects of a shared context are made once, not once per descendant.
        base = _lib.section(view, layout, "base", "q").tolist()
        delta_offsets = _lib.section(view, layout, "delta_offsets", "q").tolist()
        delta = _lib.section(view, layout, "delta_tokens", "I")
        span_start = _lib.section(view, layout, "span_start", "q").tolist()
        span_offsets = _lib.section(view, layout, "span_offsets", "q").tolist()
        span_mask = _lib.section(view, layout, "span_mask", "?")
        span_logprobs = _lib.section(view, layout, "span_logprobs", "d")
        advantage = _lib.section(view, layout, "advantage", "d").tolist()
        node_id = _lib.section(view, layout, "node_id", "q").tolist()
        search_pass = _lib.section(view, layout, "search_pass", "q").tolist()
        estimator = _lib.section(view, layout, "estimator", "i").tolist()
        token_lists: List[List[int]] = []
        for i in range(n_actor):
            k = span_start[i]
            m0, m1 = span_offsets[i], span_offsets[i + 1]
            own = delta[delta_offsets[i] : delta_offsets[i + 1]].tolist()
            b = base[i]
            tokens = token_lists[b] + own if b >= 0 else own
            token_lists.append(tokens)
            # Filled in place: the context part is one repeated object, and the span part
            # is written into it, without the temporary lists a concatenation makes.
            loss_mask = [False] * len(tokens)
            loss_mask[k:] = span_mask[m0:m1].tolist()
            logprobs = [0.0] * len(tokens)
            logprobs[k:] = span_logprobs[m0:m1].tolist()
            record = {
                "tokens": tokens,
                "loss_mask": loss_mask,
                "behavior_logprobs": logprobs,
                "advantage": advantage[i],
                "lane": "actor",
                "group_index": group_index,
                ESTIMATOR_KEY: estimators[estimator[i]],
                "node_id": node_id[i],
                "search_pass": None if search_pass[i] < 0 else search_pass[i],
                "problem_id": problem_id,
            }
            if sample_factory is None:
                out.append(record)
                continue
            span = PackedSequence(tuple(record["tokens"]), tuple(record["loss_mask"]), tuple(record["behavior_logprobs"]))
            extra = {k: v for k, v in record.items() if k not in ("lane", "group_index")}
            out.append(
                sample_factory(span=span, logprobs=span.logprobs, reward=record["advantage"], lane="actor", group_index=group_index, **extra)
            )
    if n_critic:
        c_offsets = _lib.section(view, layout, "critic_offsets", "q").tolist()
        context = _lib.section(view, layout, "critic_context", "B")
        target = _lib.section(view, layout, "critic_target", "d").tolist()
        c_node = _lib.section(view, layout, "critic_node_id", "q").tolist()
        for i in range(n_critic):
            text = str(context[c_offsets[i] : c_offsets[i + 1]], "utf-8")
            if critic_sample_factory is None:
                out.append(
                    {"context": text, "target": target[i], "lane": "critic", "group_index": group_index, "node_id": c_node[i], "problem_id": problem_id}
                )
            else:
                out.append(
                    critic_sample_factory(context=text, target=target[i], group_index=group_index, lane="critic", node_id=c_node[i], problem_id=problem_id)
                )
    return out
