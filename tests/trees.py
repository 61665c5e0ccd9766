"""Hand-built trees for tests, in the Go core's JSON tree format."""

from __future__ import annotations

import json
import random
from typing import Any, Dict, List, Optional, Sequence, Tuple

# (parent, reward, done, critic, generated tokens)
Edge = Tuple[int, float, bool, Optional[float], Sequence[int]]


def tree_json(edges: Sequence[Edge], *, prompt: Sequence[int] = (1, 2, 3), root_critic: Optional[float] = 0.5,
              problem_id: str = "p0", failed: Dict[int, str] = None) -> str:
    """Nodes 1..n are the edges in order (parents must come first); node 0 is the root."""
    failed = failed or {}
    nodes: List[Dict[str, Any]] = [
        {
            "id": 0, "parent": -1, "children": [], "depth": 0,
            "spans": [{"tokens": list(prompt), "trainable": [False] * len(prompt), "logprobs": [0.0] * len(prompt)}],
            "reward": 0.0, "text": "prompt", "done": False, "truncated": False, "failed": "",
            "critic": root_critic, "search_pass": 0,
        }
    ]
    for i, (parent, reward, done, critic, tokens) in enumerate(edges, start=1):
        nodes[parent]["children"].append(i)
        nodes.append(
            {
                "id": i, "parent": parent, "children": [], "depth": nodes[parent]["depth"] + 1,
                "spans": [{"tokens": list(tokens), "trainable": [True] * len(tokens), "logprobs": [-0.5] * len(tokens)}],
                "reward": reward, "text": f"edge {i}", "done": done, "truncated": False,
                "failed": failed.get(i, ""), "critic": None if done else critic, "search_pass": 0 if parent == 0 else 1,
            }
        )
    return json.dumps({"problem_id": problem_id, "nodes": nodes, "stats": {}})


def figure61() -> str:
    """ALGORITHM.md §6.1: s has children a and b; a has 3 terminal children with r = 1, 1, 1;
    b has 1 terminal child with r = 0. Every V_phi = 0.5."""
    return tree_json(
        [
            (0, 0.0, False, 0.5, (10, 11)),  # 1 = a
            (0, 0.0, False, 0.5, (20, 21)),  # 2 = b
            (1, 1.0, True, None, (12,)),
            (1, 1.0, True, None, (13,)),
            (1, 1.0, True, None, (14,)),
            (2, 0.0, True, None, (22,)),
        ]
    )


def random_tree(rng: random.Random) -> str:
    """A random searched tree in the core's JSON format: rollouts from the root or from a
    random open checkpoint, 1-4 segments each, edges of glue + generated tokens."""
    def spans(n_glue: int, n_gen: int):
        out = []
        if n_glue:
            out.append({"tokens": [rng.randrange(1000) for _ in range(n_glue)], "trainable": [False] * n_glue, "logprobs": [0.0] * n_glue})
        out.append({"tokens": [rng.randrange(1000) for _ in range(n_gen)], "trainable": [True] * n_gen,
                    "logprobs": [-rng.expovariate(1.0) for _ in range(n_gen)]})
        return out

    prompt = [rng.randrange(1000) for _ in range(rng.randint(1, 6))]
    nodes = [{"id": 0, "parent": -1, "children": [], "depth": 0,
              "spans": [{"tokens": prompt, "trainable": [False] * len(prompt), "logprobs": [0.0] * len(prompt)}],
              "reward": 0.0, "text": "p", "done": False, "truncated": False, "failed": "", "critic": rng.random(), "search_pass": 0}]
    open_nodes = []
    for rollout in range(rng.randint(1, 12)):
        at = rng.choice(open_nodes) if open_nodes and rng.random() < 0.7 else 0
        for seg in range(rng.randint(1, 4)):
            done = seg == 3 or rng.random() < 0.3
            nid = len(nodes)
            nodes[at]["children"].append(nid)
            nodes.append({"id": nid, "parent": at, "children": [], "depth": nodes[at]["depth"] + 1,
                          "spans": spans(rng.randint(0, 3), rng.randint(1, 6)),
                          "reward": float(rng.randint(0, 1)) if done else 0.0, "text": "e", "done": done, "truncated": False,
                          "failed": "", "critic": None if done else rng.random(), "search_pass": 0 if at == 0 else 1})
            at = nid
            if done:
                break
            open_nodes.append(nid)
    # Open leaves (cancelled rollouts) keep their critic so the tree prepares.
    return json.dumps({"problem_id": "rand", "nodes": nodes, "stats": {}})
