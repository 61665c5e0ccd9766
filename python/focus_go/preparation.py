"""Turn a searched tree into actor advantages and critic targets.

``DirectBranchTd`` is the FOCUS recipe: critic targets are direct-branch backups
(G_bar(s) = mean over direct children c of r(s->c) + gamma * V*(c)), and actor advantages
are segment TD errors over refined values (A = r + gamma * V*(c) - V*(s), with
V*(s) = (kappa * v_hat(s) + n_s * G_bar(s)) / (kappa + n_s)). ``GroupBaseline`` is the GRPO
baseline comparisons run against, and ``TreeGroupBaseline`` its tree form (leaf means
weighted by the tree's visitation). The arithmetic runs in the Go core; the same tree and
configuration give the same numbers bit for bit.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
from abc import abstractmethod
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union, overload

from . import _lib, _rules
from ._handle import GoObject
from ._records import batch_records
from .tree import PackedSequence, SchedulerState

_NO_DIAGNOSTICS: Mapping[str, float] = MappingProxyType({})
_NO_STATS: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True)
class RewardConfig:
    """Reward and value settings: what preparation computes values with and the search plans with.

    The refined value of a checkpoint blends the critic's prediction with the returns of
    its branches: ``V*(s) = (kappa * v(s) + n * G(s)) / (kappa + n)``, where ``v(s)`` is the
    critic's prediction, ``G(s)`` the mean direct-branch return over its ``n`` completed
    children, and ``kappa`` is ``critic_weight``. The values are checked when the object is
    built.

    Args:
        gamma: The discount per segment, in (0, 1].
        critic_weight: ``kappa``, the critic prediction's weight in pseudo-branches, in
            [0, 64]: 0 ignores the critic (tree Monte Carlo), a large value trusts it
            (TD(0)).
        reward_min: The lowest reward; environment rewards must lie in
            [``reward_min``, ``reward_max``], and the ``Selective`` scores map values into it.
        reward_max: The highest reward.
        truncated_reward: The reward of a branch cut at the length limit, with
            ``truncation="terminal"``.
        truncation: ``"terminal"`` (a truncated branch ends with ``truncated_reward``) or
            ``"bootstrap"`` (its value is the critic's prediction; valid only if the critic
            sees the remaining budget).

    Raises:
        ConfigError: A value is out of range or not finite; the message names the field.
    """

    gamma: float = 1.0
    critic_weight: float = 1.0
    reward_min: float = 0.0
    reward_max: float = 1.0
    truncated_reward: float = 0.0
    truncation: str = "terminal"

    def __post_init__(self) -> None:
        # The ranges are Go's (core/prepare RewardConfig.Validate), checked when built:
        # ConfigError naming the field, e.g. "reward: gamma is 2, must be in (0, 1]".
        _rules.check("reward", {f.name: getattr(self, f.name) for f in dataclasses.fields(self)})

    def _json(self) -> bytes:
        # Not dataclasses.asdict, which deep-copies every value: this runs on every prepare.
        return json.dumps({f.name: getattr(self, f.name) for f in dataclasses.fields(self)}).encode()


class Estimator:
    """How actor advantages are computed from a tree's values: the base of the recipes.

    ``name`` is recorded on every sample and record, under ``ESTIMATOR_KEY``.
    """

    name: ClassVar[str] = ""


@dataclass(frozen=True)
class DirectBranchTd(Estimator):
    """The FOCUS recipe: each edge's advantage is its TD error over refined values.

    For the edge from checkpoint ``s`` to child ``c``, ``A = r(s->c) + gamma * V*(c) -
    V*(s)``, where ``V*`` is the refined value (see ``RewardConfig``). With ``gamma = 1``
    the advantages along any root-to-leaf path sum to the path's return minus ``V*(root)``.
    """

    name: ClassVar[str] = "DirectBranchTd"


@dataclass(frozen=True)
class GroupBaseline(Estimator):
    """The GRPO baseline: each edge's advantage is the group-centred return of the leaves below it.

    Every edge gets the mean, over the terminal leaves below it, of ``R - mean(R)``, where
    ``R`` is a root-to-leaf path's return. On independent rollouts (``Independent(n)``)
    this is exactly GRPO's ``R_i - mean(R)`` on every edge of rollout ``i``.
    """

    name: ClassVar[str] = "GroupBaseline"


@dataclass(frozen=True)
class TreeGroupBaseline(Estimator):
    """The group baseline of the published tree methods (TreeRL, TreePO), weighted by how the tree was searched.

    Each checkpoint's value is the mean return of the terminal leaves below it, each leaf
    weighted by the tree's estimate of how likely the policy is to reach it (every child of a
    checkpoint stands for an equal share of the checkpoint's probability). The edge into
    ``c`` gets ``V(c) - V(root)``. Branching one subtree more than another therefore does not
    pull the group mean towards it. On independent rollouts (``Independent(n)``) this is
    exactly ``GroupBaseline`` (GRPO). It reads no critic; an edge with no finished leaf
    below it gets 0.
    """

    name: ClassVar[str] = "TreeGroupBaseline"


@dataclass
class ActorSample:
    """One edge's training tokens and its advantage, the actor's learning signal.

    ``prepare_samples`` creates these; a trainer uses ``weight`` as the learning signal of
    the edge's generated tokens.

    Attributes:
        node_id: The node the edge leads to.
        spans: The edge's training sequences. Each is the exact context up to and including
            one generated span, trainable only on that span's generated tokens; a chat
            template may split one edge into several spans.
        group_id: The checkpoint the edge leaves from.
        estimator: The name of the recipe that computed ``weight``.
        weight: The advantage.
        diagnostics: Named values behind the advantage (refined values, counts, ...).
        search_pass: The search round that created the edge; None when unknown.
        visitation: The edge's visitation factor. Multiplying ``weight`` by it makes a
            searched tree's edges an unbiased estimate of the on-policy gradient, in units
            of independent rollouts (1.0 on ``Independent`` rollouts). ``to_records()``
            exports ``weight * visitation`` with ``visitation_weights=True``.
    """

    node_id: int
    spans: Tuple[PackedSequence, ...]
    group_id: int
    estimator: str
    weight: float = 0.0
    diagnostics: Mapping[str, float] = field(default_factory=lambda: _NO_DIAGNOSTICS)
    search_pass: Optional[int] = None
    visitation: float = 1.0

    @property
    def edge_tokens(self) -> int:
        """The number of trainable tokens across the whole edge.

        Use it to normalise by edge when a chat template splits one edge into several spans.
        """
        return sum(sum(1 for t in span.trainable if t) for span in self.spans)


@dataclass(frozen=True)
class CriticSample:
    """A checkpoint's serialized context and its target remaining return, the critic's training data.

    The critic learns to predict ``target`` from ``context``.

    Attributes:
        node_id: The checkpoint.
        context: The text the critic read: the decoded exact token prefix of the checkpoint.
        target: The direct-branch backup, the mean over the checkpoint's completed children
            of the edge reward plus ``gamma`` times the child's refined value.
        diagnostics: Named values behind the target.
    """

    node_id: int
    context: str
    target: float
    diagnostics: Mapping[str, float] = field(default_factory=dict)


def _take_blob(name: str, handle: int, *args: Any) -> Tuple[Dict[str, Any], bytes]:
    """Call a function returning (layout JSON, C buffer) for a batch handle (and ``args``);
    copy the buffer into bytes and free it."""
    layout_ptr, blob, size = _lib.Bytes(), ctypes.c_void_p(), ctypes.c_size_t()
    _lib.call(name, _lib.c_handle(handle), *args, ctypes.byref(layout_ptr), ctypes.byref(blob), ctypes.byref(size))
    try:
        data = ctypes.string_at(blob.value, size.value) if size.value else b""
    finally:
        _lib.lib().focus_buffer_free(blob)
    return json.loads(_lib.take_string(layout_ptr)), data


class _PreparedSamples(Sequence[Any]):
    """Samples of a Go-prepared batch, built from flat columns on first access and cached.
    Equal to any sequence with equal samples (a tuple included)."""

    _what = "samples"

    def __init__(self, batch: GoObject, n: int) -> None:
        self._batch = batch
        self._n = n
        self._cache: List[Any] = [None] * n
        self._loaded = False

    def _load(self) -> None:
        """Convert the columns to lists, once: indexing a list is cheaper than a memoryview."""

    @abstractmethod
    def _make(self, i: int) -> Any:
        """Sample i, built from the loaded columns."""

    def __len__(self) -> int:
        return self._n

    def _get(self, i: int) -> Any:
        sample = self._cache[i]
        if sample is None:
            if not self._loaded:
                self._load()
                self._loaded = True
            sample = self._cache[i] = self._make(i)
        return sample

    @overload
    def __getitem__(self, i: int) -> Any: ...

    @overload
    def __getitem__(self, i: slice) -> Tuple[Any, ...]: ...

    def __getitem__(self, i: Union[int, slice]) -> Any:
        if isinstance(i, slice):
            return tuple(self._get(k) for k in range(*i.indices(len(self))))
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"{self._what} index out of range")
        return self._get(i)

    def __iter__(self) -> Iterator[Any]:
        get = self._get
        return (get(i) for i in range(self._n))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{len(self)} prepared {self._what}>"


def _diagnostic_rows(names: Sequence[str], values: memoryview, n: int) -> List[Dict[str, float]]:
    """One lane's diagnostics as one dict per sample, from the names (once) and the values
    (a dense row-major matrix)."""
    k = len(names)
    if not k:
        return [{} for _ in range(n)]
    flat = values.tolist()
    return [dict(zip(names, row)) for row in zip(*(flat[j::k] for j in range(k)))]


class _PreparedActors(_PreparedSamples, Sequence[ActorSample]):
    """The actor samples of a Go-prepared batch. Their numbers come from flat columns; their
    spans (full contexts, which Go keeps shared until asked) are fetched when a sample is
    first read."""

    _what = "actor samples"

    def __init__(self, batch: GoObject, data: memoryview, layout: Mapping[str, Any]) -> None:
        super().__init__(batch, layout["n_actor"])
        self._node_id: Sequence[int] = _lib.section(data, layout, "actor_node_id", "q")
        self._group_id: Sequence[int] = _lib.section(data, layout, "actor_group_id", "q")
        self._weight: Sequence[float] = _lib.section(data, layout, "actor_weight", "d")
        self._visitation: Sequence[float] = _lib.section(data, layout, "actor_visitation", "d")
        self._search_pass: Sequence[int] = _lib.section(data, layout, "actor_search_pass", "q")
        self._estimator: Sequence[int] = _lib.section(data, layout, "actor_estimator", "i")
        self._estimators = layout["estimators"] or []
        self._names = layout["actor_diagnostics"] or ()
        self._values = _lib.section(data, layout, "actor_diagnostics", "d")
        self._diagnostics: List[Dict[str, float]] = []

    def _load(self) -> None:
        self._node_id, self._group_id, self._weight, self._visitation, self._search_pass, self._estimator = (
            c.tolist() for c in (self._node_id, self._group_id, self._weight, self._visitation, self._search_pass, self._estimator)  # type: ignore[attr-defined]
        )
        self._diagnostics = _diagnostic_rows(self._names, self._values, self._n)

    def _make(self, i: int) -> ActorSample:
        layout, data = _take_blob("focus_batch_spans", self._batch.handle, i)
        view = memoryview(data)
        offsets = _lib.section(view, layout, "offsets", "q").tolist()
        tokens = _lib.section(view, layout, "tokens", "I")
        trainable = _lib.section(view, layout, "trainable", "?")
        logprobs = _lib.section(view, layout, "logprobs", "d")
        spans = tuple(
            PackedSequence(tuple(tokens[lo:hi].tolist()), tuple(trainable[lo:hi].tolist()), tuple(logprobs[lo:hi].tolist()))
            for lo, hi in zip(offsets, offsets[1:])
        )
        search_pass = self._search_pass[i]
        return ActorSample(
            node_id=self._node_id[i],
            spans=spans,
            group_id=self._group_id[i],
            estimator=self._estimators[self._estimator[i]],
            weight=self._weight[i],
            diagnostics=MappingProxyType(self._diagnostics[i]),
            search_pass=None if search_pass < 0 else search_pass,
            visitation=self._visitation[i],
        )


class _PreparedCritics(_PreparedSamples, Sequence[CriticSample]):
    """The critic samples of a Go-prepared batch. Their numbers come from flat columns; the
    context texts (O(depth x text) each, which Go builds only when asked) are fetched for all
    samples at once, the first time a sample is read."""

    _what = "critic samples"

    def __init__(self, batch: GoObject, data: memoryview, layout: Mapping[str, Any]) -> None:
        super().__init__(batch, layout["n_critic"])
        self._node_id: Sequence[int] = _lib.section(data, layout, "critic_node_id", "q")
        self._target: Sequence[float] = _lib.section(data, layout, "critic_target", "d")
        self._names = layout["critic_diagnostics"] or ()
        self._values = _lib.section(data, layout, "critic_diagnostics", "d")

    def _load(self) -> None:
        # Every context is fetched anyway, so every sample is built now, in one pass.
        layout, data = _take_blob("focus_batch_critic_contexts", self._batch.handle)
        offsets = _lib.section(memoryview(data), layout, "offsets", "q").tolist()
        base = layout["sections"]["context"]["offset"]
        text = data[base : base + offsets[-1]]
        contexts = [text[offsets[k] : offsets[k + 1]].decode("utf-8") for k in range(self._n)]
        diagnostics = _diagnostic_rows(self._names, self._values, self._n)
        self._cache = list(map(CriticSample, self._node_id.tolist(), contexts, self._target.tolist(), diagnostics))  # type: ignore[attr-defined]

    def _make(self, i: int) -> CriticSample:
        return self._cache[i]


@dataclass(frozen=True)
class Batch:
    """The actor and critic samples one problem's tree produced, with statistics and failures.

    ``to_records()`` converts it into records for a trainer. A batch returned by
    ``prepare_samples`` is a read-only view of samples held in native memory: ``actor`` and
    ``critic`` are sequences that build each sample on first access.

    Attributes:
        actor: The actor samples, one per trained edge.
        critic: The critic samples, one per scored checkpoint with completed children.
        reward_config: The settings the batch was prepared with.
        stats: The collection's statistics (rollouts, generated tokens, ...).
        failures: ``(node_id, message)`` pairs: failed rollouts, failed critic calls, and
            inexact edges left out of actor training.
    """

    actor: Sequence[ActorSample] = ()
    critic: Sequence[CriticSample] = ()
    reward_config: Optional[RewardConfig] = None
    stats: Mapping[str, float] = field(default_factory=lambda: _NO_STATS)
    failures: Tuple[Tuple[int, str], ...] = ()
    _go: Optional[GoObject] = field(default=None, repr=False, compare=False)
    _problem_id: str = field(default="", repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.actor) + len(self.critic)

    def to_records(
        self,
        group_index: int,
        *,
        actor_factory: Any = None,
        critic_factory: Any = None,
        min_abs_advantage: Optional[float] = None,
        layout: str = "spans",
        visitation_weights: bool = False,
    ) -> List[Any]:
        """Flatten the batch into trainer records.

        Actor records come first, one per generated span, then critic records, one per
        target. Records are dicts (the keys are listed under ``to_samples``) unless you pass
        factories for your trainer's types.

        ``layout="paths"`` (for a batch from ``prepare_samples``) cuts the actor records
        differently: one per root-to-leaf path, ending at the last generated token of its lowest
        trained edge. Every generated token is trained (``loss_mask`` true) in exactly one
        record, and the record's extra ``advantages`` key, aligned to ``tokens``, carries each
        token's own edge's advantage (0.0 on the context); ``advantage``, ``node_id`` and
        ``search_pass`` are those of the path's last edge. A trainer then reads each shared
        prefix once per leaf instead of once per segment below it, for the same gradient,
        provided it sums token losses and reads the per-token advantages (Tinker's ``to_datum``
        and the Slime hooks do).

        Args:
            group_index: Identifies the prompt group; copied into every record.
            actor_factory: Builds each actor record instead of a dict (a ``SampleFactory``).
            critic_factory: Builds each critic record instead of a dict (a
                ``CriticSampleFactory``).
            min_abs_advantage: Drops actor records whose advantage is smaller in magnitude. In
                the path layout the dropped edges stay in their paths as context.
            layout: ``"spans"`` (one actor record per generated span) or ``"paths"``.
            visitation_weights: Export each advantage multiplied by its edge's visitation
                factor (see ``ActorSample``), which makes a searched tree's records an unbiased
                on-policy gradient estimate; False (the default, which learned more per
                generated token on the benchmark) exports the unweighted advantage. In the
                path layout the factor applies to each token's own edge.

        Returns:
            The actor records, then the critic records.

        Raises:
            ConfigError: An unknown ``layout``, a negative or non-finite ``min_abs_advantage``.
        """
        return batch_records(
            self._go_batch(),
            group_index,
            sample_factory=actor_factory,
            critic_sample_factory=critic_factory,
            min_abs_advantage=min_abs_advantage,
            layout=layout,
            visitation_weights=visitation_weights,
        )

    def describe(self) -> str:
        """Render the batch as text for inspection.

        Returns:
            Each actor edge with its advantage and diagnostics, then each critic target, one per
                line.
        """
        with self._go_batch() as go:
            return _lib.call_string("focus_batch_text", _lib.c_handle(go.handle), *_lib.text_arg("describe"))

    def _go_batch(self) -> GoObject:
        """The Go batch behind this one: the prepared batch itself (not to be closed), or
        a temporary one built from Python-made samples (closed by the ``with`` block)."""
        if self._go is not None and isinstance(self.actor, _PreparedActors) and self.actor._batch is self._go:
            return _Borrowed(self._go)
        payload = {
            "problem_id": self._problem_id,
            "actor": [
                {
                    "node_id": a.node_id,
                    "group_id": a.group_id,
                    "estimator": a.estimator,
                    "weight": a.weight,
                    "diagnostics": dict(a.diagnostics),
                    "search_pass": a.search_pass,
                    "visitation": a.visitation,
                    "spans": [
                        {"tokens": list(s.tokens), "trainable": list(s.trainable), "logprobs": list(s.logprobs)}
                        for s in a.spans
                    ],
                }
                for a in self.actor
            ],
            "critic": [
                {"node_id": c.node_id, "context": c.context, "target": c.target, "diagnostics": dict(c.diagnostics)}
                for c in self.critic
            ],
            "failures": [{"node_id": n, "message": m} for n, m in self.failures],
        }
        data = json.dumps(payload).encode()
        return GoObject(_lib.call_handle("focus_batch_from_json", data, len(data)))


class _Borrowed:
    """A GoObject used in a ``with`` block without being closed at its end."""

    def __init__(self, obj: GoObject) -> None:
        self._obj = obj

    def __enter__(self) -> GoObject:
        return self._obj

    def __exit__(self, *exc: object) -> None:
        pass


@dataclass(frozen=True)
class TreeValues:
    """A tree's values under one ``RewardConfig``, as ``tree_values`` computes them.

    Attributes:
        state: The tree.
        reward_config: The settings the values were computed with.
        backup: The direct-branch backup of each node with at least one completed child, by
            node id.
        refined: The refined value of each node, by node id.
        count: The number of completed children of each node, by node id.
    """

    state: SchedulerState[Any]
    reward_config: RewardConfig
    backup: Mapping[int, float]
    refined: Mapping[int, float]
    count: Mapping[int, int]


def tree_values(state: SchedulerState[Any], reward_config: Optional[RewardConfig] = None) -> TreeValues:
    """Compute every node's direct-branch backup, refined value and completed-child count.

    Args:
        state: A collected tree.
        reward_config: The settings to compute with; None for ``RewardConfig()``.

    Returns:
        The values, by node id.
    """
    if reward_config is None:  # built here, not at import: building one calls the library
        reward_config = RewardConfig()
    cfg = reward_config._json()
    raw = json.loads(_lib.call_string("focus_tree_values", _lib.c_handle(state.handle), cfg, len(cfg)))

    def keyed(d: Mapping[str, Any]) -> Mapping[int, Any]:
        return MappingProxyType({int(k): v for k, v in (d or {}).items()})

    return TreeValues(state, reward_config, keyed(raw["backup"]), keyed(raw["refined"]), keyed(raw["count"]))


def _critic_samples(raw: Sequence[Mapping[str, Any]]) -> Tuple[CriticSample, ...]:
    return tuple(
        CriticSample(c["node_id"], c["context"], c["target"], dict(c.get("diagnostics") or {})) for c in raw or ()
    )


def critic_targets(values: TreeValues) -> List[CriticSample]:
    """The critic's training samples: the direct-branch backup at every scored checkpoint.

    Every expanded checkpoint that the critic scored gets one sample: the context the critic
    read, paired with the mean over its completed children of the edge reward plus ``gamma``
    times the child's refined value.

    Args:
        values: The tree's values, from ``tree_values``.

    Returns:
        One critic sample per scored checkpoint with completed children.
    """
    cfg = values.reward_config._json()
    raw = json.loads(_lib.call_string("focus_critic_targets", _lib.c_handle(values.state.handle), cfg, len(cfg)))
    return list(_critic_samples(raw))


def _merge_failures(tree: Tuple[Tuple[int, str], ...], collection: Tuple[Tuple[int, str], ...]) -> Tuple[Tuple[int, str], ...]:
    """The tree's failed nodes plus the collection's other failures (critic calls)."""
    # The collection's records carry more (Failure.aborted); keep them for the same pairs.
    return tuple(next((c for c in collection if c == f), f) for f in tree) + tuple(f for f in collection if f not in tree)


def prepare_samples(
    state: SchedulerState[Any],
    *,
    reward_config: RewardConfig,
    estimator: Optional[Estimator] = DirectBranchTd(),
) -> Batch:
    """Turn a searched tree into actor advantages and critic targets with a chosen recipe.

    ``Collector.prepare`` calls it with the collector's settings. Critic targets do not
    depend on the recipe: every expanded checkpoint the critic scored regresses on the mean
    of its direct-branch backups. Failed branches are left out of every backup and listed in
    ``Batch.failures``. An inexact edge (the policy's token ids or log probabilities were
    not exact, see ``NodeView.inexact``) keeps its values and critic target but makes no
    actor sample, and is listed there as ``"inexact edge: <reason>"``.

    Example:
        ```python
        from focus import DirectBranchTd, RewardConfig
        from focus.preparation import prepare_samples

        batch = prepare_samples(tree, reward_config=RewardConfig(), estimator=DirectBranchTd())
        ```

    Args:
        state: A collected tree.
        reward_config: The reward and value settings.
        estimator: The recipe for actor advantages; None prepares critic targets only.

    Returns:
        The prepared batch.
    """
    cfg = reward_config._json()
    name = "" if estimator is None else estimator.name
    out = _lib.c_handle()
    summary = _lib.call_string(
        "focus_prepare", _lib.c_handle(state.handle), cfg, len(cfg), *_lib.text_arg(name), ctypes.byref(out)
    )
    go = GoObject(out.value)
    raw = json.loads(summary)
    layout, data = _take_blob("focus_batch_columns", go.handle)
    columns = memoryview(data)
    return Batch(
        actor=_PreparedActors(go, columns, layout),
        critic=_PreparedCritics(go, columns, layout),
        reward_config=reward_config,
        stats=MappingProxyType(dict(raw["stats"])),
        failures=_merge_failures(tuple((f["node_id"], f["message"]) for f in raw["failures"] or ()), state.failures),
        _go=go,
        _problem_id=raw.get("problem_id", ""),
    )


__all__ = [
    "ActorSample",
    "Batch",
    "CriticSample",
    "DirectBranchTd",
    "Estimator",
    "GroupBaseline",
    "TreeGroupBaseline",
    "RewardConfig",
    "TreeValues",
    "critic_targets",
    "prepare_samples",
    "tree_values",
]
