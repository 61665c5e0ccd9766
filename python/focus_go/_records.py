"""Trainer records from the Go core: the code behind ``Batch.to_records()``,
``focus_go.export.to_samples`` and the integrations' tree -> records pipeline, and the one
JSONL writer.

The Go core exports records as one flat buffer (``focus_batch_export`` for a batch,
``focus_tree_export`` for a collected tree in one call: prepare, then export); this module
turns it into the documented record dicts (see ``focus_go.export``) or hands each record's
values to a factory. Each record is built by key name; the keys and their order are the
library's (its schema's ``records``, from Go's ``export.ActorRecord`` / ``CriticRecord``,
their one definition), checked once against the keys this module fills. It sits below
both ``preparation`` and ``export`` so that neither imports the other to produce records.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import json
from dataclasses import dataclass
from typing import Any, ContextManager, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import _lib, _schema
from ._handle import GoObject
from .errors import ConfigTypeError, LibraryError
from .tree import PackedSequence

# Actor record layouts (Go's export.Layout): "spans", the default, one record per generated
# span; "paths", one record per root-to-leaf path with per-token ``advantages``.
LAYOUTS = ("spans", "paths")


# The record keys this module fills, by name, in the library's order: an actor record's,
# the keys a path record (layout "paths") has after them, and a critic record's.
ACTOR_KEYS = ("tokens", "loss_mask", "behavior_logprobs", "advantage", "lane", "group_index", "estimator",
              "node_id", "search_pass", "problem_id", "response_start", "response_text", "return", "finished",
              "off_policy_tokens", "weight_versions")
PATH_EXTRA_KEYS = ("advantages",)
CRITIC_KEYS = ("context", "target", "lane", "group_index", "node_id", "problem_id")


@functools.lru_cache(maxsize=None)
def _check_record_keys() -> None:
    """Raise LibraryError unless the library's record keys (its schema) are the ones this
    module fills, in the same order; checked once."""
    for section, filled in (("actor", ACTOR_KEYS), ("path_extra", PATH_EXTRA_KEYS), ("critic", CRITIC_KEYS)):
        library = _schema.record_keys(section)
        if library != filled:
            raise LibraryError(
                f"{_lib.library_path()} exports {section} record keys {list(library)}, but this focus_go package "
                f"fills {list(filled)}: the library and the package are from different focus-go versions"
            )


def _layout_arg(layout: Any) -> Tuple[bytes, int]:
    """``layout`` as the C string argument; its value is checked in Go."""
    if not isinstance(layout, str):
        raise ConfigTypeError(f"layout must be a str ({' or '.join(map(repr, LAYOUTS))}), got {type(layout).__name__}")
    return _lib.text_arg(layout)


def batch_records(
    go_batch: ContextManager[GoObject],
    group_index: int,
    *,
    sample_factory: Any = None,
    critic_sample_factory: Any = None,
    min_abs_advantage: Optional[float] = None,
    layout: str = "spans",
    visitation_weights: bool = False,
) -> List[Any]:
    """The records of the Go batch ``go_batch`` gives in its ``with`` block (left before
    the records are built): actor records first (one per generated span, or one per
    root-to-leaf path with ``layout="paths"``), then critic records."""
    record_layout = _layout_arg(layout)
    layout_ptr = _lib.Bytes()
    blob = ctypes.c_void_p()
    size = ctypes.c_size_t()
    with go_batch as go:
        _lib.call(
            "focus_batch_export",
            _lib.c_handle(go.handle),
            int(group_index),
            float(min_abs_advantage or 0.0),
            *record_layout,
            int(bool(visitation_weights)),
            ctypes.byref(layout_ptr),
            ctypes.byref(blob),
            ctypes.byref(size),
        )
    return _take_records(layout_ptr, blob, size, lambda view, layout: _decode_records(view, layout, group_index, sample_factory, critic_sample_factory))


def _take_records(layout_ptr: Any, blob: Any, size: Any, decode: Any) -> Any:
    """decode(view, layout) of the records buffer a call filled; the buffer is freed after."""
    layout = json.loads(_lib.take_string(layout_ptr))
    try:
        return decode(_lib.view(blob.value, size.value, "B"), layout)
    finally:
        _lib.lib().focus_buffer_free(blob)


@dataclass(frozen=True)
class Rollout:
    """One finished rollout of a tree, as Go's ``tree.Rollouts`` lists it: the node it
    finished at, its ``outcome`` (the rewards on its root-to-leaf path), whether the
    environment ended it (``done``; False: truncated) and its length in ``segments``."""

    node_id: int
    outcome: float
    done: bool
    segments: int


@dataclass(frozen=True)
class TreeRecords:
    """One collected tree's trainer records (``tree_records``): ``actor`` and ``critic``
    record dicts, the batch's ``stats`` (``Batch.stats``) and ``failures``,
    ``sample_weights``, every actor sample's advantage (one per edge, including records
    ``min_abs_advantage`` dropped), and the tree's finished ``rollouts`` (node order) and
    ``sampled_tokens`` (the generated tokens on its edges), whichever records were dropped."""

    actor: List[Dict[str, Any]]
    critic: List[Dict[str, Any]]
    stats: Mapping[str, float]
    failures: Tuple[Tuple[int, str], ...]
    sample_weights: List[float]
    rollouts: Tuple[Rollout, ...] = ()
    sampled_tokens: int = 0


def tree_records(
    state: GoObject,
    *,
    reward_config: Any,
    estimator: Any,
    group_index: int,
    min_abs_advantage: Optional[float] = None,
    layout: str = "spans",
    visitation_weights: bool = False,
    tokenizer: Any = None,
    skip_special_tokens: bool = False,
) -> TreeRecords:
    """Prepare the collected tree ``state`` with ``reward_config`` and ``estimator`` (None:
    critic targets only) and export its records for prompt group ``group_index`` in one Go
    call (``focus_tree_export``): the pipeline ``collect_records``, the Slime and Tinker
    integrations and the command line use. ``min_abs_advantage`` drops actor records whose
    advantage is smaller in magnitude (checked in Go); ``layout`` is the actor record
    layout (``"spans"`` or ``"paths"``, see ``Batch.to_records``); ``visitation_weights`` exports each
    actor advantage times its sample's visitation factor (``ActorSample.visitation``;
    ``sample_weights`` stay unweighted). ``tokenizer`` (the collection's ``HFTokenizer``)
    decodes each actor record's ``response_text`` once, in Go, leaving special tokens out
    with ``skip_special_tokens``; None leaves it None. No Batch is built; use
    ``Collector.prepare`` for the samples themselves."""
    record_layout = _layout_arg(layout)
    cfg = reward_config._json()
    name = "" if estimator is None else estimator.name
    layout_ptr, blob, size = _lib.Bytes(), ctypes.c_void_p(), ctypes.c_size_t()
    _lib.call(
        "focus_tree_export",
        _lib.c_handle(state.handle),
        cfg,
        len(cfg),
        *_lib.text_arg(name),
        int(group_index),
        float(min_abs_advantage or 0.0),
        *record_layout,
        int(bool(visitation_weights)),
        _lib.c_handle(0 if tokenizer is None else tokenizer.handle),
        int(bool(skip_special_tokens)),
        ctypes.byref(layout_ptr),
        ctypes.byref(blob),
        ctypes.byref(size),
    )

    def decode(view: memoryview, layout: Mapping[str, Any]) -> TreeRecords:
        records = _decode_records(view, layout, group_index, None, None)
        n_actor = layout["n_actor"]
        return TreeRecords(
            actor=records[:n_actor],
            critic=records[n_actor:],
            stats=dict(layout["stats"]),
            failures=tuple((f["node_id"], f["message"]) for f in layout["failures"] or ()),
            sample_weights=_lib.section(view, layout, "sample_weight", "d").tolist(),
            rollouts=tuple(Rollout(r["node_id"], r["return"], r["done"], r["segments"]) for r in layout["rollouts"]),
            sampled_tokens=layout["sampled_tokens"],
        )

    return _take_records(layout_ptr, blob, size, decode)


def jsonl(records: Iterable[Any]) -> str:
    """``records`` (JSON-serialisable dicts, finite numbers) as JSONL text: one JSON object
    per line, non-ASCII characters as they are. The one JSONL writer of the package (the
    command line's record files, ``JsonlDirectory``, the demo); raises before returning
    anything if a record cannot be serialised."""
    return "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in records)


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
    _check_record_keys()  # the literals below are the library's keys, in its order
    n_actor, n_critic = layout["n_actor"], layout["n_critic"]
    problem_id = layout["problem_id"] or None
    # Path records (layout "paths") have one more key: their per-token advantages.
    paths = layout.get("layout") == "paths"
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
        span_advantages = _lib.section(view, layout, "span_advantages", "d") if paths else None
        advantage = _lib.section(view, layout, "advantage", "d").tolist()
        node_id = _lib.section(view, layout, "node_id", "q").tolist()
        search_pass = _lib.section(view, layout, "search_pass", "q").tolist()
        estimator = _lib.section(view, layout, "estimator", "i").tolist()
        response_start = _lib.section(view, layout, "response_start", "q").tolist()
        path_return = _lib.section(view, layout, "return", "d").tolist()
        finished = _lib.section(view, layout, "finished", "?").tolist()
        off_policy = _lib.section(view, layout, "off_policy_tokens", "q").tolist()
        versions = layout["weight_versions"]
        version_offsets = _lib.section(view, layout, "weight_version_offsets", "q").tolist()
        version = _lib.section(view, layout, "weight_version", "i").tolist()
        texts: List[Optional[str]] = [None] * n_actor
        if "response_text" in layout["sections"]:
            text_offsets = _lib.section(view, layout, "response_text_offsets", "q").tolist()
            text_bytes = _lib.section(view, layout, "response_text", "B")
            texts = [str(text_bytes[text_offsets[i] : text_offsets[i + 1]], "utf-8") for i in range(n_actor)]
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
                "estimator": estimators[estimator[i]],
                "node_id": node_id[i],
                "search_pass": None if search_pass[i] < 0 else search_pass[i],
                "problem_id": problem_id,
                "response_start": response_start[i],
                "response_text": texts[i],
                "return": path_return[i],
                "finished": finished[i],
                "off_policy_tokens": off_policy[i],
                "weight_versions": [versions[v] for v in version[version_offsets[i] : version_offsets[i + 1]]],
            }
            if span_advantages is not None:
                advantages = [0.0] * len(tokens)
                advantages[k:] = span_advantages[m0:m1].tolist()
                record["advantages"] = advantages
            if sample_factory is None:
                out.append(record)
                continue
            span = PackedSequence(tuple(tokens), tuple(loss_mask), tuple(logprobs))
            extra = {k: v for k, v in record.items() if k not in ("lane", "group_index")}
            out.append(
                sample_factory(span=span, logprobs=span.logprobs, reward=advantage[i], lane="actor", group_index=group_index, **extra)
            )
    if n_critic:
        c_offsets = _lib.section(view, layout, "critic_offsets", "q").tolist()
        context = _lib.section(view, layout, "critic_context", "B")
        target = _lib.section(view, layout, "critic_target", "d").tolist()
        critic_node = _lib.section(view, layout, "critic_node_id", "q").tolist()
        for i in range(n_critic):
            text = str(context[c_offsets[i] : c_offsets[i + 1]], "utf-8")
            if critic_sample_factory is None:
                out.append(
                    {"context": text, "target": target[i], "lane": "critic", "group_index": group_index,
                     "node_id": critic_node[i], "problem_id": problem_id}
                )
            else:
                out.append(
                    critic_sample_factory(
                        context=text, target=target[i], group_index=group_index, lane="critic", node_id=critic_node[i], problem_id=problem_id
                    )
                )
    return out
