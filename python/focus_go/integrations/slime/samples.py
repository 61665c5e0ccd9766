"""Slime samples from FOCUS records, and the list that stands for a tree in Slime's group.

``to_sample`` turns one actor record into a response-aligned Slime ``Sample``; a
``TreeSamples`` is what the generate hook returns for one source sample: the tree's
samples as a list that also answers, as one group element, for the source sample (status,
reward, index, ...). Slime's ``Sample`` class is always taken from the sample Slime passes
in; nothing here imports Slime.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .. import Problem
from ...errors import ConfigError


# Sample fields a segment fills itself; every other field is copied from the source sample.
_RESPONSE_FIELDS = frozenset(
    {
        "tokens",
        "response",
        "response_length",
        "reward",
        "loss_mask",
        "rollout_log_probs",
        "rollout_top_p_token_ids",
        "rollout_top_p_token_offsets",
        "rollout_routed_experts",
        "teacher_log_probs",
        "remove_sample",
        "status",
        "rollout_id",
        "metadata",
        "spec_info",
        "prefix_cache_info",
        "non_generation_time",
    }
)


# The source fields copied when the sample type is not a dataclass.
_SOURCE_FIELDS = (
    "group_index",
    "index",
    "prompt",
    "multimodal_inputs",
    "multimodal_train_inputs",
    "multimodal_train_input_id",
    "apply_chat_template_kwargs",
    "label",
    "weight_versions",
    "generate_function_path",
    "custom_rm_path",
    "train_metadata",
    "session_id",
)


def _problem_from(args: Any, sample: Any) -> Problem:
    """The Problem a Slime sample asks for: prompt and label filled by --input-key and
    --label-key (a sample without a label gives ``label=None``: the environment decides
    whether it needs one), id from the sample's group and index."""
    prompt = getattr(sample, "prompt", None)
    if not prompt:
        raise ConfigError(
            f"Slime sample (index={getattr(sample, 'index', None)}) has an empty prompt; check --input-key "
            f"(input_key is {getattr(args, 'input_key', None)!r})"
        )
    group, index = getattr(sample, "group_index", None), getattr(sample, "index", None)
    return Problem(
        prompt=prompt,
        label=getattr(sample, "label", None),
        id=f"g{group}-i{index}",
        metadata=dict(getattr(sample, "metadata", None) or {}),
    )


def _rollout_id(source: Any) -> int:
    rid = getattr(source, "rollout_id", None)
    if rid is None:
        rid = getattr(source, "index", None)
    if rid is None:
        raise ConfigError("Slime sample has neither rollout_id nor index; Slime's data source sets index on every sample")
    return rid


def _build_sample(
    source: Any,
    sample_type: Any,
    record: Mapping[str, Any],
    *,
    reward: float,
    status: str,
    response: str,
    focus: Mapping[str, Any],
) -> Any:
    """A response-aligned Slime sample of an actor record, as Go built it: tokens = prompt
    + response, cut at the record's ``response_start``, and loss_mask and
    rollout_log_probs over the response only (0.0 log probability where not trained, as in
    the record)."""
    tokens = record["tokens"]
    start = record["response_start"]
    mask = [1 if m else 0 for m in record["loss_mask"][start:]]
    if dataclasses.is_dataclass(sample_type):
        names = [f.name for f in dataclasses.fields(sample_type) if f.name not in _RESPONSE_FIELDS]
    else:
        names = list(_SOURCE_FIELDS)
    kwargs: Dict[str, Any] = {n: copy.deepcopy(getattr(source, n)) for n in names if hasattr(source, n)}
    metadata = dict(getattr(source, "metadata", None) or {})
    metadata["focus"] = dict(focus)
    return sample_type(
        **kwargs,
        rollout_id=_rollout_id(source),
        tokens=list(tokens),
        response=response,
        response_length=len(tokens) - start,
        reward=float(reward),
        loss_mask=mask,
        rollout_log_probs=list(record["behavior_logprobs"][start:]),
        metadata=metadata,
        status=getattr(sample_type.Status, status),
    )


def _decode_response(tokenizer: Any, tokens: Sequence[int]) -> str:
    """The text of a response a record carries no text for (to_sample's ``tokenizer``)."""
    if tokenizer is None or not tokens:
        return ""
    decode = getattr(tokenizer, "decode", None)
    if decode is not None:
        return decode(list(tokens), skip_special_tokens=False)
    return tokenizer(list(tokens))


# The train_metadata key holding a path sample's per-token response advantages.
TOKEN_ADVANTAGES_KEY = "focus_advantages"


def _token_advantages(sample: Any) -> Optional[List[float]]:
    """A path sample's per-token response advantages (to_sample of a path record), else None."""
    meta = getattr(sample, "train_metadata", None)
    if isinstance(meta, Mapping):
        return meta.get(TOKEN_ADVANTAGES_KEY)
    return None


def to_sample(record: Mapping[str, Any], source: Any, tokenizer: Any, sample_type: Any) -> Any:
    """Turn one actor record into a response-aligned Slime sample.

    The response starts at the record's first generated token, its ``response_start``:
    ``tokens`` is the full exact context, ``response_length`` counts from that token to
    the end, and ``loss_mask`` / ``rollout_log_probs`` cover the response only
    (conditioning tokens inside it, such as tool results, keep loss mask zero and log
    probability 0.0). ``response`` is the record's ``response_text``, decoded once in Go
    with the collection's tokenizer. ``reward`` carries the FOCUS advantage, ``status`` is
    COMPLETED, and ``rollout_id`` is the source's (its ``index`` if unset), so every
    segment of one tree shares it. The other fields (prompt, label, group_index, index,
    session_id, ...) are copied from ``source``; ``metadata`` gains a ``"focus"`` entry
    with the record's node_id, search_pass, estimator, problem_id, group_index and
    weight_versions (the weight versions that generated the response; ``[]`` when the
    server reported none). A record that names weight versions also sets the sample's own
    ``weight_versions`` (Slime's field for the versions that generated it) to them;
    otherwise that field is the source's. ``tokenizer``
    decodes the response text of a record that carries none (``response_text`` None: the
    records of ``Batch.to_records``, which has no tokenizer): any object with
    ``decode(ids, skip_special_tokens=False)``, a callable, or None for no text.
    ``sample_type`` is Slime's ``Sample`` class (``type(source)``).

    A path record (``layout="paths"``: it has per-token ``advantages``) becomes one sample
    whose response starts at its first trained token and whose ``train_metadata`` gains
    ``"focus_advantages"``, one advantage per response token (0.0 where the loss mask is
    0); ``reward`` is the path's last edge's advantage. ``preserve_advantages`` and
    ``advantages`` then train every token on its own advantage."""
    start = record.get("response_start")
    if start is None:
        raise ConfigError(
            f"to_sample: record for node {record.get('node_id')} has no response_start; actor records from "
            "focus-go (collect_records, to_records) carry it"
        )
    tokens = record["tokens"]
    if start >= len(tokens):
        raise ConfigError(f"to_sample: record for node {record.get('node_id')} has no generated (loss_mask) token")
    response = record.get("response_text")
    if response is None:
        response = _decode_response(tokenizer, tokens[start:])
    focus = {k: record.get(k) for k in ("node_id", "search_pass", "estimator", "problem_id", "group_index")}
    versions = list(record.get("weight_versions") or [])
    focus["weight_versions"] = versions
    sample = _build_sample(
        source, sample_type, record, reward=float(record["advantage"]), status="COMPLETED", response=response, focus=focus
    )
    if versions and hasattr(sample, "weight_versions"):
        sample.weight_versions = list(versions)
    per_token = record.get("advantages")
    if per_token is not None:
        if len(per_token) != len(tokens):
            raise ConfigError(f"to_sample: record has {len(tokens)} tokens but {len(per_token)} advantages; they must be equal")
        # A path record: each response token's own advantage rides in train_metadata
        # (0.0 where the loss mask is 0); preserve_advantages hands it to the advantages hook.
        meta = dict(getattr(sample, "train_metadata", None) or {})
        meta[TOKEN_ADVANTAGES_KEY] = [float(a) if m else 0.0 for a, m in zip(per_token[start:], sample.loss_mask)]
        sample.train_metadata = meta
    return sample


class TreeSamples(list):
    """What the generate hook returns for one Slime sample: the tree's Slime samples as a
    list (Slime flattens it into the rollout's training samples), which also answers, as
    one element of Slime's group, for the source sample it was collected for.

    Slime's rollout code reads group elements as samples: fully-async orders groups by
    ``index`` and requeues those with an ABORTED ``status``; ``abort()`` reads
    ``response`` and ``metadata``; a group handed back by ``--partial-rollout`` is
    resubmitted, and ``generate_and_rm`` returns COMPLETED elements as they are after
    checking ``response`` and ``reward``, masks ``loss_mask`` over ``response_length``
    under ``--mask-offpolicy-in-partial-rollout``, and passes the other elements back to
    the hook (which collects their source sample again, resuming the partial tree an
    aborted one kept under ``--partial-rollout``). So:

    - ``source``: the Slime sample the tree was collected for (a resubmitted TreeSamples
      is collected again from it);
    - ``status``: COMPLETED for a collected tree, ABORTED for one Slime aborted (the list
      then holds just the source sample, status ABORTED, nothing to train; under
      ``--partial-rollout`` the source's ``metadata["focus_partial_tree"]`` keeps the tree
      so far and its ``response`` the first kept segment's text, so that Slime records
      ``start_rollout_id`` as for its own partial samples);
    - ``reward``: the tree's success rate (successes / finished rollouts; what Slime's
      group filters and logs see), None when aborted; ``get_reward_value(args)`` returns it;
    - ``response``: the first sample's text (the source's when aborted); ``response_length`` and
      ``loss_mask``: the samples' response lengths summed and their loss masks
      concatenated; assigning ``loss_mask`` (as long as ``response_length``) splits it
      over the samples;
    - every other attribute (``index``, ``group_index``, ``rollout_id``, ``prompt``,
      ``label``, ``metadata``, ``session_id``, ...) is the source's when read. ``index``
      is the sample's index, so ``list.index`` is not available;
    - assigning any other attribute (what a ``--rollout-sample-filter-path`` filter does,
      e.g. ``remove_sample = True``) sets it on the source and on every sample of the
      tree, so it reaches the samples Slime trains; ``metadata`` and ``train_metadata``
      are merged into each sample's own (its ``"focus"`` entry and per-token advantages
      kept). A change made in place (``element.metadata["k"] = v``) reaches the source
      only.
    """

    _OWN = ("source", "status", "reward")

    def __init__(self, samples: Sequence[Any], source: Any, *, status: Any, reward: Optional[float]) -> None:
        super().__init__(samples)
        self.__dict__.update(source=source, status=status, reward=reward)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the list and this class lack.
        source = self.__dict__.get("source")
        if source is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(source, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._OWN:
            self.__dict__[name] = value
        elif name == "loss_mask":
            self._set_loss_mask(value)
        elif name == "index":
            self.source.index = value
        else:
            setattr(self.source, name, value)
            # A group element stands for the whole tree: what a sample filter sets on it
            # (remove_sample, ...) reaches every sample Slime trains.
            for s in self:
                if s is not self.source:
                    setattr(s, name, _merged(name, getattr(s, name, None), value))

    def __reduce__(self) -> Any:
        return (_rebuild_tree_samples, (list(self), self.source, self.status, self.reward))

    def __deepcopy__(self, memo: Dict[int, Any]) -> "TreeSamples":
        source = copy.deepcopy(self.source, memo)
        samples = [source if s is self.source else copy.deepcopy(s, memo) for s in self]
        return TreeSamples(samples, source, status=self.status, reward=self.reward)

    @property
    def index(self) -> Any:  # type: ignore[override]
        """The source's ``index`` (Slime's sample index), not ``list.index``."""
        return self.source.index

    @index.setter
    def index(self, value: Any) -> None:
        self.source.index = value

    @property
    def response(self) -> str:
        return self[0].response if self else ""

    @property
    def response_length(self) -> int:
        return sum(int(s.response_length) for s in self)

    @property
    def loss_mask(self) -> Optional[List[int]]:
        masks = [s.loss_mask for s in self]
        if any(m is None for m in masks):
            return None
        return [m for mask in masks for m in mask]

    def _set_loss_mask(self, value: Sequence[int]) -> None:
        value = list(value)
        if len(value) != self.response_length:
            raise ConfigError(
                f"TreeSamples loss_mask: got {len(value)} entries for a tree of {len(self)} samples with "
                f"{self.response_length} response tokens in all"
            )
        start = 0
        for s in self:
            s.loss_mask = value[start : start + s.response_length]
            start += s.response_length

    def get_reward_value(self, args: Any) -> Optional[float]:
        """The tree's reward (its success rate), whatever ``--reward-key`` says: FOCUS
        rewards are plain floats."""
        return self.reward


def _merged(name: str, own: Any, value: Any) -> Any:
    """What a tree's sample gets when ``name`` is assigned ``value`` on the tree: a copy,
    with the sample's own FOCUS entries kept for ``metadata`` and ``train_metadata``."""
    if name == "metadata" and isinstance(value, Mapping) and isinstance(own, Mapping) and "focus" in own:
        return {**value, "focus": own["focus"]}
    if name == "train_metadata" and isinstance(value, Mapping) and isinstance(own, Mapping) and TOKEN_ADVANTAGES_KEY in own:
        return {**value, TOKEN_ADVANTAGES_KEY: own[TOKEN_ADVANTAGES_KEY]}
    return copy.copy(value)


def _rebuild_tree_samples(samples: List[Any], source: Any, status: Any, reward: Optional[float]) -> TreeSamples:
    return TreeSamples(samples, source, status=status, reward=reward)


def _source_sample(sample: Any) -> Any:
    """The Slime sample to collect for: a TreeSamples Slime hands back (an aborted
    tree resubmitted by the buffer or the fully-async worker) is collected again from
    its source, reset to PENDING."""
    if isinstance(sample, TreeSamples):
        source = sample.source
        source.status = type(source).Status.PENDING
        return source
    return sample


# The source sample's metadata key holding an aborted tree's partial tree (its JSON) under
# --partial-rollout, which the next generate call for the sample resumes.
PARTIAL_TREE_KEY = "focus_partial_tree"


def _aborted_tree(source: Any, partial: Optional["_PartialTree"] = None) -> TreeSamples:
    """An aborted tree: the source sample alone, status ABORTED, nothing to train, so
    Slime keeps it out of training (and fully-async / partial rollout requeue it).

    With ``partial`` (``--partial-rollout``: the tree so far kept some work) the partial
    tree's JSON is stored in ``source.metadata["focus_partial_tree"]`` for the next
    generate call to resume, and ``source.response`` holds its first kept edge's text, so
    Slime's ``abort()`` treats the sample as one with a partial response and records
    ``metadata["start_rollout_id"]``, as for its own partial samples."""
    if partial is not None:
        metadata = dict(getattr(source, "metadata", None) or {})
        metadata[PARTIAL_TREE_KEY] = partial.json
        source.metadata = metadata
        source.response = partial.text
    source.status = type(source).Status.ABORTED
    return TreeSamples([source], source, status=source.status, reward=None)


@dataclasses.dataclass(frozen=True)
class _PartialTree:
    """An aborted tree's work worth keeping: its JSON and its first kept edge's text."""

    json: str
    text: str


def _partial_tree(state: Any) -> Optional[_PartialTree]:
    """The work an aborted collection's tree so far keeps (a node that did not fail), or
    None when it kept none."""
    if state is None:
        return None
    return _partial_from_json(state.to_json())


def _partial_from_json(text: str) -> Optional[_PartialTree]:
    """``_partial_tree`` of a tree's JSON."""
    nodes = json.loads(text).get("nodes") or ()
    kept = [n for n in nodes[1:] if not n.get("failed")]
    if not kept:
        return None
    return _PartialTree(text, kept[0].get("text") or " ")


def _take_partial_tree(source: Any) -> Optional[str]:
    """Take the partial tree an earlier aborted collection stored on ``source``: return its
    JSON and remove it from the sample, clearing the placeholder response that went with it.
    Returns None if the sample holds no partial tree."""
    metadata = getattr(source, "metadata", None)
    if not isinstance(metadata, dict) or PARTIAL_TREE_KEY not in metadata:
        return None
    partial = metadata.pop(PARTIAL_TREE_KEY)
    source.response = ""
    return partial


def _success_rate(stats: Optional[Mapping[str, Any]]) -> float:
    stats = stats or {}
    finished = int(stats.get("finished_rollouts") or 0)
    return float(stats.get("successes") or 0) / finished if finished else 0.0


def _with_tree_outcomes(samples: List[Any], stats: Mapping[str, Any]) -> List[Any]:
    """Add the tree's outcomes (its stats, as Go recorded them) to every sample's
    ``metadata["focus"]``: ``finished_rollouts`` and ``successes`` (what ``log_rollout``
    turns into pass@k), ``outcomes_differ`` (what ``tree_has_signal`` keeps a tree by),
    ``truncated_rollouts`` and ``rollout_tokens`` (the generated tokens of each finished
    rollout's path), for ``log_rollout``'s truncation and length metrics, and, for a
    resumed tree only (``--partial-rollout``), ``rollouts_resumed`` and ``tokens_resumed``
    (what it kept from its aborted collection)."""
    for s in samples:
        focus = s.metadata.setdefault("focus", {})
        focus["finished_rollouts"] = int(stats.get("finished_rollouts", 0))
        focus["successes"] = int(stats.get("successes", 0))
        focus["outcomes_differ"] = bool(stats.get("outcomes_differ", False))
        focus["truncated_rollouts"] = int(stats.get("truncated_rollouts", 0))
        focus["rollout_tokens"] = list(stats.get("rollout_tokens") or ())
        if stats.get("resumes"):
            focus["rollouts_resumed"] = int(stats.get("rollouts_resumed", 0))
            focus["tokens_resumed"] = int(stats.get("tokens_resumed", 0))
    _with_prefix_reuse(samples, stats)
    return samples


def _with_prefix_reuse(samples: List[Any], stats: Mapping[str, Any]) -> None:
    """The tree's prefix reuse as Slime's prefix-cache counts, on its first sample (Slime
    sums them over the rollout's samples into ``rollout/prefix_cache_hit_rate``): the
    prefix tokens branches started from (``prefix_tokens_reused``) as cached tokens, out
    of those plus the tokens generated (``generated_tokens``)."""
    info = getattr(samples[0], "prefix_cache_info", None) if samples else None
    if info is None or not hasattr(info, "cached_tokens"):
        return
    reused = int(stats.get("prefix_tokens_reused", 0))
    info.cached_tokens = reused
    info.total_prompt_tokens = reused + int(stats.get("generated_tokens", 0))


def _mark_off_policy(samples: Sequence[Any], records: Sequence[Mapping[str, Any]], mask: bool) -> None:
    """Mark each sample of a resumed tree with the response tokens an earlier collection
    generated (``metadata["focus"]["off_policy_tokens"]``: its record's
    ``off_policy_tokens``, counted in Go) and, with ``mask``
    (``--mask-offpolicy-in-partial-rollout``), zero their loss mask: the segments generated
    after the resume still train."""
    for sample, record in zip(samples, records):
        cut = int(record["off_policy_tokens"])
        sample.metadata.setdefault("focus", {})["off_policy_tokens"] = cut
        if mask and cut:
            sample.loss_mask = [0] * cut + list(sample.loss_mask[cut:])
            per_token = _token_advantages(sample)
            if per_token is not None:  # a path sample: 0.0 where the loss mask is 0
                sample.train_metadata[TOKEN_ADVANTAGES_KEY] = [0.0] * cut + list(per_token[cut:])
