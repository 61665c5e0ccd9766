"""The FOCUS recipe in plain Python: the tree, DirectBranchTd values, advantages and critic
targets (ALGORITHM.md §5.3-5.6), the Selective plan (§5.7) and trainer records.

Written the way a careful Python engineer would for speed without leaving the standard
library: nodes are ``__slots__`` objects in a list indexed by id (parents before children,
so one reverse pass is a deepest-first backup), hot loops bind attributes to locals, and the
tie-break hash is only computed for candidates that actually tie.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Dict, List, Optional, Sequence, Tuple

SEGMENT = 256
MAX_TOTAL_TOKENS = 8192
TIE_TOLERANCE = 1e-12


class Node:
    """One checkpoint: the edge from its parent (tokens, logprobs, text) and its outcome."""

    __slots__ = (
        "id", "parent", "children", "tokens", "logprobs", "text", "done", "truncated", "failed",
        "reward", "critic", "search_pass", "depth", "path_tokens",
    )

    def __init__(self, parent: int, tokens: List[int], logprobs: List[float], text: str, search_pass: int) -> None:
        self.id = -1
        self.parent = parent
        self.children: List[int] = []
        self.tokens = tokens
        self.logprobs = logprobs
        self.text = text
        self.done = False
        self.truncated = False
        self.failed = False
        self.reward = 0.0
        self.critic: Optional[float] = None
        self.search_pass = search_pass
        self.depth = 0
        self.path_tokens = 0  # generated tokens on root..self

    @property
    def terminal(self) -> bool:
        return self.done or self.truncated


class Tree:
    """A search tree: nodes[0] is the root (the prompt); ids follow insertion order."""

    def __init__(self, problem_id: str, prompt_tokens: List[int], prompt_text: str) -> None:
        self.problem_id = problem_id
        self.prompt_tokens = prompt_tokens
        self.prompt_text = prompt_text
        root = Node(-1, [], [], "", 0)
        root.id = 0
        self.nodes: List[Node] = [root]

    def add(self, parent: int, node: Node) -> int:
        p = self.nodes[parent]
        node.id = len(self.nodes)
        node.parent = parent
        node.depth = p.depth + 1
        node.path_tokens = p.path_tokens + len(node.tokens)
        p.children.append(node.id)
        self.nodes.append(node)
        return node.id

    def path(self, node_id: int) -> List[Node]:
        """Root-exclusive path root..node, in order."""
        out = []
        nodes = self.nodes
        while node_id > 0:
            out.append(nodes[node_id])
            node_id = nodes[node_id].parent
        out.reverse()
        return out

    def context_tokens(self, node_id: int) -> List[int]:
        out = list(self.prompt_tokens)
        for n in self.path(node_id):
            out += n.tokens
        return out

    def context_text(self, node_id: int) -> str:
        return self.prompt_text + "".join(n.text for n in self.path(node_id))

    def path_key(self, node_id: int) -> Tuple[int, ...]:
        """Child indices from the root: the canonical key of §5.7.5."""
        key = []
        nodes = self.nodes
        while node_id > 0:
            parent = nodes[node_id].parent
            key.append(nodes[parent].children.index(node_id))
            node_id = parent
        key.reverse()
        return tuple(key)


# ---- values, advantages, critic targets (§5.3-5.6) ----


class Values:
    __slots__ = ("refined", "gbar", "count")

    def __init__(self, refined: List[float], gbar: List[Optional[float]], count: List[int]) -> None:
        self.refined, self.gbar, self.count = refined, gbar, count


def values(tree: Tree, kappa: float = 1.0, gamma: float = 1.0) -> Values:
    """V*(s), G_bar(s) and n_s for every node, deepest first (ids put parents first)."""
    nodes = tree.nodes
    n = len(nodes)
    refined = [0.0] * n
    gbar: List[Optional[float]] = [None] * n
    count = [0] * n
    for i in range(n - 1, -1, -1):
        nd = nodes[i]
        if nd.failed or nd.done or nd.truncated:
            continue  # terminal: V* = 0; failed: never enters a backup
        total = 0.0
        k = 0
        for c in nd.children:
            ch = nodes[c]
            if ch.failed:
                continue
            total += ch.reward + gamma * refined[c]
            k += 1
        count[i] = k
        phi = nd.critic
        if k:
            g = total / k
            gbar[i] = g
            refined[i] = g if phi is None else (kappa * phi + k * g) / (kappa + k)
        else:
            refined[i] = 0.0 if phi is None else phi
    return Values(refined, gbar, count)


def advantages(tree: Tree, vals: Values, gamma: float = 1.0) -> List[Optional[float]]:
    """A(s->c) = r + gamma V*(c) - V*(s) for every completed non-root node c."""
    refined = vals.refined
    out: List[Optional[float]] = [None] * len(tree.nodes)
    for nd in tree.nodes[1:]:
        if not nd.failed:
            out[nd.id] = nd.reward + gamma * refined[nd.id] - refined[nd.parent]
    return out


def critic_targets(tree: Tree, vals: Values) -> List[Tuple[int, float]]:
    """(node, G_bar) for every nonterminal node with n_s >= 1."""
    return [(i, g) for i, g in enumerate(vals.gbar) if g is not None]


def records(tree: Tree, adv: List[Optional[float]], targets: List[Tuple[int, float]], group_index: int = 0) -> List[dict]:
    """Trainer records, the same dicts as focus_go's Batch.to_records(): one actor record per
    edge (full context, loss mask and behaviour logprobs on the edge only), then one critic
    record per target. Contexts are built incrementally along each path (one list copy per
    record, no re-walk of the path)."""
    nodes = tree.nodes
    prompt = tree.prompt_tokens
    ctx: List[Optional[List[int]]] = [None] * len(nodes)
    ctx[0] = prompt
    texts: List[Optional[str]] = [None] * len(nodes)
    texts[0] = tree.prompt_text
    out = []
    pid = tree.problem_id or None
    for nd in nodes[1:]:
        if nd.failed:
            continue
        before = ctx[nd.parent]
        tokens = before + nd.tokens
        ctx[nd.id] = tokens
        k = len(before)
        out.append({
            "tokens": tokens,
            "loss_mask": [False] * k + [True] * len(nd.tokens),
            "behavior_logprobs": [0.0] * k + nd.logprobs,
            "advantage": adv[nd.id],
            "lane": "actor",
            "group_index": group_index,
            "estimator": "DirectBranchTd",
            "node_id": nd.id,
            "search_pass": nd.search_pass,
            "problem_id": pid,
        })
    for i, g in targets:
        text = texts[i]
        if text is None:
            text = tree.context_text(i)
        out.append({"context": text, "target": g, "lane": "critic", "group_index": group_index, "node_id": i, "problem_id": pid})
    return out


def prepare_and_export(tree: Tree, kappa: float = 1.0, group_index: int = 0) -> List[dict]:
    vals = values(tree, kappa)
    return records(tree, advantages(tree, vals), critic_targets(tree, vals), group_index)


# ---- Selective (§5.7) ----


def _unit(v: float) -> float:
    return min(max(v, 0.0), 1.0)  # r_min = 0, r_max = 1


def gain(v_sel: float, phi: Optional[float], n: int, kappa_sel: float) -> float:
    """value_refinement: the error one more branch removes from the critic target."""
    k = kappa_sel + n
    p = _unit(v_sel)
    sigma2 = p * (1 - p)
    bias = 0.0 if phi is None else (p - _unit(phi)) ** 2
    e2 = sigma2 / (k + 1) + bias
    return (2 * kappa_sel * kappa_sel * e2 + (n - kappa_sel) * sigma2) / (k * k * k)


def candidates(tree: Tree, max_children: int = 4, min_remaining: int = SEGMENT, max_total: int = MAX_TOTAL_TOKENS) -> List[int]:
    out = []
    nodes = tree.nodes
    excluded = [False] * len(nodes)
    for nd in nodes:
        ex = nd.failed or (nd.parent >= 0 and excluded[nd.parent])
        excluded[nd.id] = ex
        if ex or nd.done or nd.truncated or max_total - nd.path_tokens < min_remaining:
            continue
        if nd.id != 0 and sum(1 for c in nd.children if not nodes[c].failed) >= max_children:
            continue
        out.append(nd.id)
    return out


def _tie(seed: int, problem_id: str, round_: int, key: Tuple[int, ...]) -> int:
    data = struct.pack(f"<qq{len(key)}q", seed, round_, *key) + problem_id.encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def plan(tree: Tree, round_: int, remaining: int, seed: int = 0, per_pass: int = 4, max_children: int = 4, kappa: float = 1.0) -> List[int]:
    """One round's picks (node ids, launch order): greedy over the candidates with virtual
    counts, ties (within 1e-12) to the smallest seeded hash of the path key."""
    cands = candidates(tree, max_children)
    if not cands or remaining <= 0:
        return []
    kappa_sel = max(kappa, 1.0)
    vals = values(tree, kappa_sel)
    nodes = tree.nodes
    live: Dict[int, int] = {}
    state = []  # [node, v_sel, phi, n_s, virtual, gain]
    for c in cands:
        nd = nodes[c]
        if nd.critic is None and vals.count[c] == 0:
            continue  # no value at all: never picked
        live[c] = sum(1 for ch in nd.children if not nodes[ch].failed)
        g = gain(vals.refined[c], nd.critic, vals.count[c], kappa_sel)
        state.append([c, vals.refined[c], nd.critic, vals.count[c], 0, g])
    picks: List[int] = []
    ties: Dict[int, int] = {}
    for _ in range(min(per_pass, remaining)):
        eligible = [s for s in state if s[5] > 0]
        if not eligible:
            break
        best = max(s[5] for s in eligible)
        tied = [s for s in eligible if best - s[5] <= TIE_TOLERANCE]
        if len(tied) == 1:
            win = tied[0]
        else:
            for s in tied:
                if s[0] not in ties:
                    ties[s[0]] = _tie(seed, tree.problem_id, round_, tree.path_key(s[0]))
            win = min(tied, key=lambda s: ties[s[0]])
        picks.append(win[0])
        win[4] += 1
        if win[0] != 0 and live[win[0]] + win[4] >= max_children:
            win[5] = 0.0
        else:
            win[5] = gain(win[1], win[2], win[3] + win[4], kappa_sel)
    return picks


def from_json(data: dict) -> Tree:
    """A reference Tree from a focus_go tree's JSON (``SchedulerState.to_json()``); benchmark
    set-up, not timed. Conditioning (untrainable) tokens of the root become the prompt."""
    raw = data["nodes"]
    root = raw[0]
    prompt = [t for s in root.get("spans") or () for t in s["tokens"] or ()]
    tree = Tree(data.get("problem_id", ""), prompt, root.get("text", ""))
    tree.nodes[0].critic = root.get("critic")
    for n in raw[1:]:
        tokens: List[int] = []
        logprobs: List[float] = []
        for s in n.get("spans") or ():
            for t, tr, lp in zip(s["tokens"] or (), s["trainable"] or (), s["logprobs"] or ()):
                if tr:
                    tokens.append(t)
                    logprobs.append(lp)
        nd = Node(n["parent"], tokens, logprobs, n.get("text", ""), n.get("search_pass", 0))
        nd.done, nd.truncated, nd.failed = n.get("done", False), n.get("truncated", False), bool(n.get("failed"))
        nd.reward, nd.critic = n.get("reward", 0.0), n.get("critic")
        tree.add(n["parent"], nd)
    return tree


def _check_vectors() -> None:
    """ALGORITHM.md §6.1 at kappa=1: V*(s) = 0.541667, A(s->a) = 0.333333."""
    t = Tree("p", [1], "")
    s = t.add(0, Node(0, [2], [0.0], "", 0))
    a = t.add(s, Node(s, [3], [0.0], "", 0))
    b = t.add(s, Node(s, [4], [0.0], "", 0))
    for parent, r in ((a, 1.0), (a, 1.0), (a, 1.0), (b, 0.0)):
        leaf = Node(parent, [5], [0.0], "", 0)
        leaf.done, leaf.reward = True, r
        t.add(parent, leaf)
    for nd in t.nodes[:4]:
        nd.critic = 0.5
    vals = values(t, 1.0)
    adv = advantages(t, vals)
    assert abs(vals.refined[s] - 0.541667) < 1e-6 and abs(adv[a] - 0.333333) < 1e-6, (vals.refined, adv)


def _check_scheduler_vector() -> None:
    """ALGORITHM.md §6.2: one round picks c3, c4, c3, c4."""
    t = Tree("p", [1], "")
    t.nodes[0].critic = 0.5
    ids = []
    for phi, r in ((0.9, 1.0), (0.2, 0.0), (0.5, 1.0), (0.45, 0.0)):
        c = t.add(0, Node(0, [2] * SEGMENT, [0.0] * SEGMENT, "", 0))
        t.nodes[c].critic = phi
        leaf = Node(c, [3], [0.0], "", 0)
        leaf.done, leaf.reward = True, r
        t.add(c, leaf)
        ids.append(c)
    picks = plan(t, 1, 4)
    assert picks == [ids[2], ids[3], ids[2], ids[3]], picks


_check_vectors()
_check_scheduler_vector()
