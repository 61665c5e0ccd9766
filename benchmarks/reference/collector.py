"""A plain-Python Selective collector: asyncio + one pooled aiohttp session against an
SGLang ``/generate`` server, the same search as focus-go's ``Selective(32, 16)`` with
``Segments(256)`` (§5.7 of ALGORITHM.md): 16 warmup rollouts from the root, then rounds of
up to 4 greedy branches from the best-scoring checkpoints, each rollout generating 256-token
segments until the model stops or 8,192 tokens, a constant critic of 0.5, and a last-boxed
math grader at the end of each path.

Design (reviewed for fairness, so that the comparison measures the runtime and not a
careless reference):
- One ``aiohttp.ClientSession`` with a ``TCPConnector(limit=...)`` shared by every tree:
  keep-alive connections are reused, as focus-go's pooled client does.
- Bodies are built once per segment from a shared template dict; the response is parsed
  with ``resp.json()`` (aiohttp's json.loads), reading only ``output_ids`` (the engine reads
  logprobs too, so this reads less), ``text`` and ``finish_reason``; logprobs come from
  ``output_token_logprobs`` with one list comprehension.
- Each rollout builds its nodes privately and the round inserts them in launch order (the
  determinism rule); the prefix is the parent's context list plus the new segment, extended
  in place within a rollout (no re-walk of the tree).
- The grader works on the decoded text the server already returns (no tokenizer call).
- The critic is a constant 0.5 assigned when a node is created (focus-go asks its critic once
  per candidate; with a constant critic this is the same prediction).
- Prompt token ids are computed once per problem before timing starts.
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional, Tuple

from .algorithm import MAX_TOTAL_TOKENS, SEGMENT, Node, Tree, plan
from .grade import grade

BUDGET, WARMUP = 32, 16


class Rollout:
    __slots__ = ("start", "nodes", "failed")

    def __init__(self, start: int) -> None:
        self.start = start
        self.nodes: List[Node] = []
        self.failed = False


class ReferenceCollector:
    """Collects Selective trees from ``url`` over a shared pooled aiohttp session."""

    def __init__(self, session: Any, url: str, critic: float = 0.5, budget: int = BUDGET, warmup: int = WARMUP) -> None:
        self.session = session
        self.endpoint = url + "/generate"
        self.critic = critic
        self.budget, self.warmup = budget, warmup
        self.template = {
            "return_logprob": True, "logprob_start_len": -1, "top_logprobs_num": 0,
            "return_text_in_logprobs": False, "stream": False,
        }
        self.requests = 0

    async def _generate(self, ids: List[int], max_new: int, seed: int) -> Tuple[List[int], List[float], str, bool]:
        body = dict(self.template)
        body["input_ids"] = ids
        body["sampling_params"] = {"max_new_tokens": max_new, "temperature": 1.0, "no_stop_trim": True, "sampling_seed": seed}
        async with self.session.post(self.endpoint, json=body) as resp:
            resp.raise_for_status()
            data = await resp.json()
        self.requests += 1
        meta = data["meta_info"]
        lps = meta["output_token_logprobs"]
        return data["output_ids"], [t[0] for t in lps], data["text"], meta["finish_reason"]["type"] != "length"

    async def _rollout(self, tree: Tree, ctx: List[int], start: int, label: str, seed: int, search_pass: int) -> Rollout:
        out = Rollout(start)
        prefix = list(ctx)
        node = tree.nodes[start]
        generated = node.path_tokens
        text = tree.context_text(start)
        k = 0
        try:
            while True:
                tokens, logprobs, piece, finished = await self._generate(prefix, min(SEGMENT, MAX_TOTAL_TOKENS - generated), (seed * 1_000_003 + k) & 0x7FFFFFFF)
                k += 1
                generated += len(tokens)
                text += piece
                nd = Node(-1, tokens, logprobs, piece, search_pass)
                out.nodes.append(nd)
                if finished:
                    nd.done = True
                    nd.reward = 1.0 if grade(text, label) else 0.0
                    return out
                if generated >= MAX_TOTAL_TOKENS:
                    nd.truncated = True
                    return out
                nd.critic = self.critic
                prefix += tokens
        except (OSError, asyncio.TimeoutError, KeyError, ValueError):
            out.failed = True
            return out

    def _insert(self, tree: Tree, ctxs: Dict[int, List[int]], r: Rollout) -> None:
        if r.failed:
            nd = Node(-1, [], [], "", 0)
            nd.failed = True
            tree.add(r.start, nd)
            return
        parent = r.start
        for nd in r.nodes:
            parent = tree.add(parent, nd)

    async def collect(self, problem_id: str, prompt_ids: List[int], label: str, seed: int = 0) -> Tree:
        tree = Tree(problem_id, prompt_ids, "")
        tree.nodes[0].critic = self.critic
        ctxs: Dict[int, List[int]] = {0: prompt_ids}
        spent = 0
        launches = [(0, seed * 7919 + i, 0) for i in range(self.warmup)]
        round_ = 0
        while launches:
            spent += len(launches)
            rollouts = await asyncio.gather(*(
                self._rollout(tree, self._context(tree, ctxs, s), s, label, sd, p) for s, sd, p in launches
            ))
            for r in rollouts:
                self._insert(tree, ctxs, r)
            round_ += 1
            if spent >= self.budget:
                break
            picks = plan(tree, round_, self.budget - spent, seed=seed)
            launches = [(n, seed * 7919 + round_ * 131 + j, round_) for j, n in enumerate(picks)]
        return tree

    @staticmethod
    def _context(tree: Tree, ctxs: Dict[int, List[int]], node_id: int) -> List[int]:
        ctx = ctxs.get(node_id)
        if ctx is None:
            ctx = tree.context_tokens(node_id)
            ctxs[node_id] = ctx
        return ctx


async def run(url: str, problems: List[Dict[str, Any]], prompt_ids: Dict[str, List[int]], seconds: float, parallel: int, connections: int) -> Dict[str, Any]:
    """Collect trees from `parallel` concurrent workers; steady-state segments/s and CPU
    over a `seconds` window (see window.py)."""
    import aiohttp

    from .window import Window, run_workers

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections)) as session:
        collector = ReferenceCollector(session, url)

        async def one_tree(i: int) -> int:
            p = problems[i % len(problems)]
            tree = await collector.collect(p["id"], prompt_ids[p["id"]], p["label"], seed=i)
            return sum(1 for n in tree.nodes[1:] if not n.failed)

        out = await run_workers(parallel, Window(seconds), one_tree)
    out["requests"] = collector.requests
    return out
