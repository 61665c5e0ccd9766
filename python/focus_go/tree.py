"""The searched tree: ``SchedulerState`` (the whole tree, held by the Go core) and
``SchedulerView`` (a read-only Python view of it).

A tree's nodes are checkpoints; the edge into a node is one policy call and the env step
that consumed it, stored as ``PackedSequence`` spans of exact token ids with a per-token
``trainable`` mask (true only on generated tokens) and behaviour log probabilities (0.0
where not generated). ``SchedulerState.to_json()`` is a lossless debugging and replay
format; ``SchedulerState.from_json()`` reads it back, validating it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Dict, Generic, List, Optional, Sequence, Tuple, TypeVar, Union

from . import _lib
from ._handle import GoObject
from .types import Failure  # re-exported: SchedulerState.failures holds them

R = TypeVar("R")


@dataclass(frozen=True)
class PackedSequence:
    """Exact token ids with a per-token trainable mask and behaviour log probabilities.

    The edges of a tree are stored as packed sequences, and in a prepared ``ActorSample``
    each span is a full training sequence: the exact context up to and including one
    generated span, trainable only on that span's generated tokens.

    Attributes:
        tokens: The token ids.
        trainable: True on the tokens the policy generated (the ones that train), False on
            conditioning tokens such as the prompt, chat glue and tool results.
        logprobs: The behaviour log probability of each generated token; 0.0 where not
            generated.

    Raises:
        ConfigError: The three tuples differ in length.
    """

    tokens: Tuple[int, ...]
    trainable: Tuple[bool, ...]
    logprobs: Tuple[float, ...]

    def __post_init__(self) -> None:
        if not (len(self.tokens) == len(self.trainable) == len(self.logprobs)):
            from .errors import ConfigError

            raise ConfigError(
                f"PackedSequence has {len(self.tokens)} tokens, {len(self.trainable)} trainable flags "
                f"and {len(self.logprobs)} logprobs; they must be equal"
            )


class SchedulerState(GoObject, Generic[R]):
    """A collected tree: the whole search tree of one collection, held in native memory.

    ``Collector.collect`` returns it (you do not build one yourself); ``prepare_samples``
    and ``Collector.prepare`` read it, and ``SchedulerView`` reads it as Python objects. It is released by ``close()``, at
    the end of a ``with`` block, or when garbage collected; using it afterwards raises
    ``InvalidHandleError``. ``to_json()`` is a lossless format for debugging and replay.

    Attributes:
        failures: The collection's failures as ``(node_id, message)`` pairs: failed
            rollouts (also marked on their nodes) and failed critic calls.
    """

    failures: Tuple[Tuple[int, str], ...] = ()

    @classmethod
    def from_json(cls, text: Union[str, bytes]) -> "SchedulerState[Any]":
        """Read a tree from its JSON form, as ``to_json`` writes it.

        Args:
            text: The JSON text.

        Returns:
            The tree.

        Raises:
            ConfigError: The tree is malformed (cycles, missing parents, mismatched lengths,
                non-finite values...); the message names the node and field.
        """
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        return cls(_lib.call_handle("focus_tree_from_json", data, len(data)))

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"]) -> "SchedulerState[Any]":
        """Read a tree from a JSON file, as ``save`` writes it.

        Args:
            path: The file.

        Returns:
            The tree.

        Raises:
            ConfigError: The tree is malformed.
        """
        with open(path, "rb") as f:
            return cls.from_json(f.read())

    def to_json(self) -> str:
        """The tree as JSON, lossless: ``from_json`` reads it back.

        Returns:
            The JSON text.
        """
        return _lib.call_string("focus_tree_to_json", _lib.c_handle(self.handle))

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write the tree to a JSON file that ``load`` reads back.

        Args:
            path: The file, overwritten if it exists.
        """
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    def _summary(self) -> Dict[str, Any]:
        return json.loads(_lib.call_string("focus_tree_summary", _lib.c_handle(self.handle)))

    @property
    def problem_id(self) -> str:
        """The id of the problem the tree was collected for ("" when it had none)."""
        return self._summary()["problem_id"]

    @property
    def stats(self) -> Dict[str, Any]:
        """The collection statistics (rollouts, generated tokens, wall seconds...), read without
        the nodes.
        """
        return dict(self._summary()["stats"] or {})

    def __len__(self) -> int:
        """The number of nodes (the root included), read without the nodes."""
        return int(self._summary()["nodes"])

    def __bool__(self) -> bool:
        return True  # a tree always has its root; truth must not call into Go

    def __repr__(self) -> str:
        return f"SchedulerState(handle={self.handle})"


@dataclass(frozen=True)
class NodeView:
    """One node of a tree, read-only: a checkpoint and the edge that reached it from its parent.

    Attributes:
        id: The node id; the root is 0.
        parent: The parent's id; None for the root.
        children: The children's ids, in launch order.
        depth: The number of edges from the root.
        done: Whether the environment ended the episode on this edge.
        truncated: Whether a length limit cut the path on this edge.
        failed: The failure message of a failed rollout; None when it did not fail.
        reward: The environment's reward on the edge.
        critic: The critic's prediction for this checkpoint; None when not scored.
        search_pass: The search round that created the edge.
        tokens: The edge's token ids: generated tokens and conditioning such as tool
            results.
        spans: The edge as packed sequences, trainable only on generated tokens.
        context_tokens: The exact token prefix up to and including this edge.
        text: The decoded text of the edge.
        observation: The environment's observation after the edge, as text.
        inexact: Why the edge trains no actor (the policy's ids were not exact, or a token
            had no finite log probability); None for an exact edge.
        off_policy: Whether an earlier collection generated the edge, under an older
            policy: the tree was resumed from it (``Collector.collect(resume=...)``).
    """

    id: int
    parent: Optional[int]
    children: Tuple[int, ...]
    depth: int
    done: bool
    truncated: bool
    failed: Optional[str]
    reward: float
    critic: Optional[float]
    search_pass: int
    tokens: Tuple[int, ...]
    spans: Tuple[PackedSequence, ...]
    context_tokens: Tuple[int, ...]
    text: str
    observation: str = ""
    inexact: Optional[str] = None
    """Why the edge trains no actor (the policy's ids were not exact, or a token had no
    finite logprob); None for an exact edge. Its tokens are conditioning only."""
    off_policy: bool = False
    """Whether an earlier collection this tree was resumed from generated the edge."""

    @property
    def terminal(self) -> bool:
        """Whether the node ends its path: done or truncated."""
        return self.done or self.truncated


class SchedulerView(Generic[R]):
    """A read-only Python view of a collected tree, taken as a snapshot when the view is made.

    Example:
        ```python
        from focus.extend import SchedulerView

        view = SchedulerView(tree)
        leaves = [node for node in view.nodes if node.terminal]
        ```

    Args:
        state: The tree.
    """

    def __init__(self, state: SchedulerState[R]) -> None:
        self.state = state
        self._data: Dict[str, Any] = json.loads(state.to_json())

    @property
    def problem_id(self) -> str:
        """The id of the problem the tree was collected for ("" when it had none)."""
        return self._data.get("problem_id", "")

    @property
    def stats(self) -> Dict[str, Any]:
        """The collection statistics (rollouts, generated tokens, wall seconds...)."""
        return dict(self._data.get("stats") or {})

    @cached_property
    def nodes(self) -> Sequence[NodeView]:
        """Every node, indexed by id; the root first."""
        raw = self._data["nodes"]
        views: List[NodeView] = []
        for n in raw:
            spans = tuple(
                PackedSequence(tuple(s["tokens"] or ()), tuple(s["trainable"] or ()), tuple(s["logprobs"] or ()))
                for s in n.get("spans") or ()
            )
            tokens = tuple(t for s in spans for t in s.tokens)
            parent = n["parent"]
            context = (views[parent].context_tokens if parent >= 0 else ()) + tokens
            views.append(
                NodeView(
                    id=n["id"],
                    parent=None if parent < 0 else parent,
                    children=tuple(n.get("children") or ()),
                    depth=n["depth"],
                    done=n.get("done", False),
                    truncated=n.get("truncated", False),
                    failed=n.get("failed") or None,
                    reward=n.get("reward", 0.0),
                    critic=n.get("critic"),
                    search_pass=n.get("search_pass", 0),
                    tokens=tokens,
                    spans=spans,
                    context_tokens=context,
                    text=n.get("text", ""),
                    observation=n.get("observation", ""),
                    inexact=n.get("inexact") or None,
                    off_policy=bool(n.get("off_policy", False)),
                )
            )
        return tuple(views)

    @property
    def root(self) -> NodeView:
        """The root node: the prompt."""
        return self.nodes[0]

    def node(self, node_id: int) -> NodeView:
        """One node by id.

        Args:
            node_id: The node's id.

        Returns:
            The node.
        """
        return self.nodes[node_id]

    def __len__(self) -> int:
        return len(self._data["nodes"])
