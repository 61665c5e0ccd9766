"""A small causal transformer, its sampler and its training log probabilities.

``TinyGPT`` is the policy (``out = vocab``) and, with ``out = 1``, the value model. The
``Sampler`` serves the policy to focus-go as a custom policy: ``complete(tokens, params)``
returns a ``GenerateResult`` with the sampled ids and the sampler's log probability of each.
Concurrent requests are batched into one forward pass per generated token. Each request's
draws come from the engine's per-request seed and the token's index, so a rollout's
tokens depend on its seed and the weights, not on which requests shared its batch (up to
the float rounding of a batched forward pass).
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import math
import struct
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    """The transformer's size: ``vocab`` ids, ``d`` wide, ``layers`` blocks of ``heads``
    heads, positions up to ``max_len``, ``out`` outputs per position."""

    vocab: int
    d: int = 64
    layers: int = 2
    heads: int = 4
    max_len: int = 96
    out: int = 0  # 0: one logit per vocabulary id (the policy); 1: a value head


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """A causal transformer. ``forward(ids)`` gives (batch, time, out) outputs; position t
    sees ids[:t+1] only, so right padding never changes a real position's output."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d)
        self.pos = nn.Embedding(cfg.max_len, cfg.d)
        self.blocks = nn.ModuleList(Block(cfg.d, cfg.heads) for _ in range(cfg.layers))
        self.ln = nn.LayerNorm(cfg.d)
        self.head = nn.Linear(cfg.d, cfg.out or cfg.vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.shape[1] > self.cfg.max_len:
            raise ValueError(f"sequence of {ids.shape[1]} tokens is longer than max_len {self.cfg.max_len}")
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))

    def parameters_count(self) -> int:
        return sum(p.numel() for p in self.parameters())


def pad(seqs: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids (batch, longest) and the lengths."""
    longest = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), longest), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(list(s), dtype=torch.long)
    return ids.to(device), torch.tensor([len(s) for s in seqs], device=device)


def token_logprobs(model: TinyGPT, seqs: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    """log p(seq[t] | seq[:t]) for t >= 1, as a (batch, longest - 1) tensor (the training
    log probabilities; positions past a sequence's end hold garbage: mask them)."""
    device = next(model.parameters()).device
    ids, _ = pad(seqs, pad_id, device)
    logp = torch.log_softmax(model(ids[:, :-1]).float(), dim=-1)
    return logp.gather(2, ids[:, 1:].unsqueeze(2)).squeeze(2)


def uniform(seed: int, step: int) -> float:
    """A uniform draw in [0, 1) from a request's seed and the index of the token drawn."""
    return (struct.unpack("<Q", hashlib.blake2b(f"{seed}:{step}".encode(), digest_size=8).digest())[0] >> 11) / float(1 << 53)


class Sampler:
    """Serves ``model`` to focus-go: ``await sampler.complete(tokens, params)`` is the
    ``complete`` of ``focus_go.backends.Policy(format=, complete=)``.

    Sampling is at temperature 1 from the full distribution (other settings raise, since
    the returned log probabilities would not be the trained policy's). Generation stops at
    ``eos`` (``stop_reason="stop"``, the eos id included in the tokens) or after
    ``max_tokens`` (``"length"``)."""

    def __init__(self, model: TinyGPT, eos: int, pad_id: int, max_batch: int = 512) -> None:
        self.model, self.eos, self.pad_id, self.max_batch = model, eos, pad_id, max_batch
        self.device = next(model.parameters()).device
        self._pending: List[Tuple[Tuple[int, ...], int, int, asyncio.Future]] = []
        self._running = False
        self.calls = 0

    async def complete(self, tokens: Sequence[int], params) -> "object":
        from focus_go.types import GenerateResult

        for name, value, allowed in (("temperature", params.temperature, (None, 1.0)), ("top_p", params.top_p, (None, 1.0)),
                                     ("top_k", params.top_k, (None, 0, -1))):
            if value not in allowed:
                raise ValueError(f"Sampler: {name}={value!r} is not supported; the sampler draws from the model's own "
                                 f"distribution (temperature 1, top_p 1, no top_k)")
        if params.max_tokens is None or params.max_tokens < 1:
            raise ValueError(f"Sampler: max_tokens must be a positive integer, got {params.max_tokens!r}")
        if params.seed is None:
            raise ValueError("Sampler: every request needs a seed (the engine seeds them)")
        future = asyncio.get_running_loop().create_future()
        self._pending.append((tuple(tokens), int(params.max_tokens), int(params.seed), future))
        if not self._running:
            self._running = True
            asyncio.get_running_loop().call_soon(self._drain)
        out, logprobs, reason = await future
        return GenerateResult(tokens=tuple(out), prefix_tokens=tuple(tokens), logprobs=logprobs, stop_reason=reason)

    def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending[:self.max_batch], self._pending[self.max_batch:]
                try:
                    results = self.generate([b[0] for b in batch], [b[1] for b in batch], [b[2] for b in batch])
                except Exception as error:  # noqa: BLE001 - every waiting request gets it
                    for b in batch:
                        if not b[3].done():
                            b[3].set_exception(error)
                    continue
                for b, r in zip(batch, results):
                    if not b[3].done():
                        b[3].set_result(r)
        finally:
            self._running = False

    @torch.no_grad()
    def generate(self, prefixes: Sequence[Sequence[int]], max_tokens: Sequence[int], seeds: Sequence[int]
                 ) -> List[Tuple[List[int], List[float], str]]:
        """Sample continuations of ``prefixes``: (ids, log probabilities, stop reason) each."""
        self.calls += 1
        n = len(prefixes)
        seqs = [list(p) for p in prefixes]
        out: List[List[int]] = [[] for _ in range(n)]
        lps: List[List[float]] = [[] for _ in range(n)]
        reason: List[Optional[str]] = [None] * n
        limit = self.model.cfg.max_len
        while True:
            active = [i for i in range(n) if reason[i] is None]
            if not active:
                break
            ids, lengths = pad([seqs[i] for i in active], self.pad_id, self.device)
            logits = self.model(ids)
            last = logits[torch.arange(len(active), device=self.device), lengths - 1].float()
            logp = torch.log_softmax(last, dim=-1).cpu()
            cdfs = logp.exp().cumsum(dim=-1).tolist()
            for row, i in enumerate(active):
                cdf = cdfs[row]
                u = uniform(seeds[i], len(out[i])) * cdf[-1]
                token = min(bisect.bisect_right(cdf, u), len(cdf) - 1)
                out[i].append(token)
                lps[i].append(float(logp[row, token]))
                seqs[i].append(token)
                if token == self.eos:
                    reason[i] = "stop"
                elif len(out[i]) >= max_tokens[i] or len(seqs[i]) >= limit:
                    reason[i] = "length"
        return [(out[i], lps[i], reason[i] or "length") for i in range(n)]


def value_of(model: TinyGPT, seqs: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    """The value model's prediction in (0, 1) at each sequence's last token."""
    device = next(model.parameters()).device
    ids, lengths = pad(seqs, pad_id, device)
    return torch.sigmoid(model(ids)[torch.arange(len(seqs), device=device), lengths - 1, 0].float())


def init_model(cfg: ModelConfig, seed: int, device: str = "cpu") -> TinyGPT:
    """A freshly initialised model, the same for the same seed."""
    torch.manual_seed(seed)
    model = TinyGPT(cfg)
    for name, p in model.named_parameters():
        if name.endswith("weight") and p.dim() == 2:
            nn.init.normal_(p, std=0.02 if "proj" not in name else 0.02 / math.sqrt(2 * cfg.layers))
    return model.to(device)
