"""The task family and its tokenizer: multi-digit addition with a scratchpad.

A problem is two ``digits``-digit numbers. The prompt is ``"347+285"`` (rendered by the chat
template as ``"347+285="``); the reference answer works column by column from the right,
writing each column's digits, the carry in and the column sum, then the result:

    7+5+0=12,4+8+1=13,3+2+1=6,\\boxed{632}<eos>

Every intermediate step matters: a wrong column sum or carry spoils the result. The reward is
1 when the last ``\\boxed{...}`` holds the right sum (``focus_go.MathEnv`` grades it), else 0.

The tokenizer is built with the ``tokenizers`` library: one token per character of the
alphabet, ``\\boxed{`` as one token, ``<eos>`` and ``<pad>`` as special tokens. It is saved as
``tokenizer.json`` beside a ``tokenizer_config.json`` whose chat template writes the user's
message and then ``=``, so ``focus_go`` loads it like any model's tokenizer.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import List, Sequence

ALPHABET = "0123456789+=,}"
BOXED = "\\boxed{"
EOS, PAD = "<eos>", "<pad>"
CHAT_TEMPLATE = ("{% for message in messages %}{{ message['content'] }}{% endfor %}"
                 "{% if add_generation_prompt %}={% endif %}")


@dataclass(frozen=True)
class Problem:
    """One addition: ``a + b``; ``prompt`` is the user's message, ``label`` the sum."""

    a: int
    b: int

    @property
    def prompt(self) -> str:
        return f"{self.a}+{self.b}"

    @property
    def label(self) -> str:
        return str(self.a + self.b)

    def solution(self) -> str:
        """The reference scratchpad and answer (without ``<eos>``)."""
        xs, ys = str(self.a)[::-1], str(self.b)[::-1]
        carry, steps = 0, []
        for i in range(max(len(xs), len(ys))):
            x = int(xs[i]) if i < len(xs) else 0
            y = int(ys[i]) if i < len(ys) else 0
            s = x + y + carry
            steps.append(f"{x}+{y}+{carry}={s}")
            carry = s // 10
        return ",".join(steps) + f",{BOXED}{self.label}}}"


def problems(seed: int, n: int, digits: int, exclude: Sequence[Problem] = ()) -> List[Problem]:
    """``n`` distinct problems of ``digits``-digit numbers drawn from ``seed``, none of
    ``exclude`` (so training problems never meet the held-out ones)."""
    if digits < 1:
        raise ValueError(f"digits must be at least 1, got {digits}")
    rng = random.Random(f"problems-{seed}-{digits}")
    lo, hi = 10 ** (digits - 1), 10 ** digits - 1
    seen, out = set(exclude), []
    if n > (hi - lo + 1) ** 2 - len(seen):
        raise ValueError(f"asked for {n} problems of {digits} digits, more than exist")
    while len(out) < n:
        p = Problem(rng.randint(lo, hi), rng.randint(lo, hi))
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def build_tokenizer(directory: Path) -> Path:
    """Build the tokenizer with the ``tokenizers`` library and save ``tokenizer.json`` and
    ``tokenizer_config.json`` (with the chat template) in ``directory``; returns it."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    vocab = {PAD: 0, EOS: 1, BOXED: 2}
    for ch in ALPHABET:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab, unk_token=PAD))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"\\boxed\{|."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([PAD, EOS])
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    config = {"chat_template": CHAT_TEMPLATE, "eos_token": EOS, "pad_token": PAD, "model_max_length": 256,
              "tokenizer_class": "PreTrainedTokenizerFast"}
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")
    return directory


class Codec:
    """The saved tokenizer, loaded with the ``tokenizers`` library, for the model's own
    needs (supervised targets, the critic's contexts, evaluation prompts)."""

    def __init__(self, directory: Path) -> None:
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.pad = self.tok.token_to_id(PAD)
        self.eos = self.tok.token_to_id(EOS)
        self.vocab_size = self.tok.get_vocab_size()

    def encode(self, text: str) -> List[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)

    def prompt_ids(self, p: Problem) -> List[int]:
        """The rendered prompt's ids (the chat template's text: message, then ``=``)."""
        return self.encode(p.prompt + "=")


def correct(text: str, p: Problem) -> bool:
    """Whether the last ``\\boxed{...}`` in ``text`` holds the sum (what MathEnv rewards for
    this alphabet: integers only)."""
    i = text.rfind(BOXED)
    if i < 0:
        return False
    j = text.find("}", i)
    return j > 0 and text[i + len(BOXED):j] == p.label
