"""HFTokenizer encode/decode against PyPI's ``tokenizers`` on the real tokenizers of five
model families (build/testdata, ``make testdata``).

Per family: 1,000 seeded random and adversarial strings (NUL and other control bytes,
CJK, emoji and ZWJ sequences, combining marks, right-to-left text, long runs, whitespace
runs, special-token text inside ordinary text) must encode to the oracle's ids with and
without add_special_tokens, and the oracle's ids must decode to the oracle's text with and
without skip_special_tokens; so must random id sequences that include special ids. The
oracle runs batched (encode_batch/decode_batch) to keep the test fast.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from focus_go.generation.format import HFTokenizer

ROOT = Path(__file__).resolve().parents[1]
TESTDATA = Path(os.environ.get("FOCUS_TESTDATA_DIR", ROOT / "build" / "testdata"))
FAMILIES = ("qwen3", "llama3_1", "deepseek_v3", "gemma3", "gptoss")
N_STRINGS = 1000
N_ID_SEQUENCES = 300

# Special-token text of every family, written inside ordinary text.
SPECIAL_TEXT = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|begin_of_text|>",
    "<|start_header_id|>", "<|end_header_id|>", "<｜end▁of▁sentence｜>", "<｜begin▁of▁sentence｜>",
    "<｜User｜>", "<｜Assistant｜>", "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>",
    "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>", "<|call|>",
    "<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end", "im_end|>", "<|",
]

PIECES = [
    "the", " answer", " is", " \\boxed{42}", "Hello", ",", " world", "!", "def f(x):\n    return x",
    "你好", "世界", "日本語のテキスト", "한국어", "🙂", "🔍", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️",
    "e\u0301", "a\u0308\u0323", "ñ", "Å", "\u05e9\u05dc\u05d5\u05dd", "\u0645\u0631\u062d\u0628\u0627",
    "\u202e", "\u200f", "\u200b", "\u200d", "\ufeff", "\u00a0", "\u3000", "\t", "\n", "\r\n",
    " ", "  ", "\x00", "\x01", "\x07", "\x1b[0m", "\x7f", "\u0085", "\u2028", "\ufffd", "\U0001f600",
    "\U00010348", "\U0010fffd", "∑", "x²", "½", "ﬁ", "Ⅻ", "İ", "ß", "ǅ",
]


def _random_char(rng: random.Random) -> str:
    """One code point from a random plane, never a surrogate (Python str allows lone
    surrogates, UTF-8 does not)."""
    lo, hi = rng.choice([(0, 0x7F), (0x80, 0x7FF), (0x800, 0xD7FF), (0xE000, 0xFFFF), (0x10000, 0x10FFFF), (0, 0x1F)])
    return chr(rng.randint(lo, hi))


def adversarial_strings(seed: int, n: int = N_STRINGS) -> list[str]:
    """n seeded strings, each drawn from one of several shapes."""
    rng = random.Random(seed)
    out = ["", "\x00", "a\x00b", "\x00\x00\x00", "<|im_end|>\x00<|im_end|>", " \x00 ", "\x00" * 50]
    while len(out) < n:
        shape = rng.randrange(8)
        if shape == 0:  # random code points
            s = "".join(_random_char(rng) for _ in range(rng.randint(1, 40)))
        elif shape == 1:  # pieces joined
            s = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 20)))
        elif shape == 2:  # special-token text inside text
            parts = [rng.choice(PIECES + SPECIAL_TEXT) for _ in range(rng.randint(1, 12))]
            s = rng.choice(["", " ", "\n"]).join(parts)
        elif shape == 3:  # long runs
            s = rng.choice(["a", " ", "\n", "0", "🙂", "你", "-", "=", "\x00", "\t", "ab"]) * rng.randint(50, 3000)
        elif shape == 4:  # whitespace runs between words
            s = "".join(rng.choice(["x", "yz", " " * rng.randint(1, 30), "\n" * rng.randint(1, 5), "\t", "\u3000"]) for _ in range(rng.randint(2, 20)))
        elif shape == 5:  # control bytes and NUL mixed with ASCII
            s = "".join(rng.choice([chr(rng.randint(0, 0x1F)), chr(rng.randint(0x20, 0x7E)), "\x7f"]) for _ in range(rng.randint(1, 60)))
        elif shape == 6:  # combining marks stacked on letters, RTL, ZWJ
            base = rng.choice("aeioun")
            s = base + "".join(chr(rng.randint(0x300, 0x36F)) for _ in range(rng.randint(1, 8)))
            s += rng.choice(["\u05d0\u05d1\u05d2", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629", "\u200d", "\u202b"]) * rng.randint(1, 4)
        else:  # everything mixed
            s = "".join(rng.choice([_random_char(rng), rng.choice(PIECES), rng.choice(SPECIAL_TEXT)]) for _ in range(rng.randint(1, 30)))
        out.append(s)
    return out[:n]


def random_id_sequences(seed: int, vocab: int, special_ids: list[int], n: int = N_ID_SEQUENCES) -> list[list[int]]:
    """n seeded id sequences over the whole vocabulary, with special ids mixed in."""
    rng = random.Random(seed)
    seqs = []
    for _ in range(n):
        seq = []
        for _ in range(rng.randint(0, 40)):
            r = rng.random()
            if r < 0.2 and special_ids:
                seq.append(rng.choice(special_ids))
            elif r < 0.4:
                seq.append(rng.randrange(min(vocab, 512)))  # byte tokens, often partial UTF-8
            else:
                seq.append(rng.randrange(vocab))
        seqs.append(seq)
    return seqs


def _family_dir(family: str) -> Path:
    d = TESTDATA / family
    if not (d / "tokenizer.json").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{family} tokenizer missing in {d}: CI must run make testdata")
        pytest.skip(f"{family} tokenizer missing in {d}: run make testdata")
    return d


def mismatches(family: str) -> tuple[int, int, list[str]]:
    """How many of the family's strings, and how many of its id sequences, differ from the
    oracle in any of the checks, and a description of the first few."""
    tokenizers = pytest.importorskip("tokenizers")
    d = _family_dir(family)
    oracle = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    texts = adversarial_strings(seed=FAMILIES.index(family))
    want_plain = [e.ids for e in oracle.encode_batch(texts, add_special_tokens=False)]
    want_special = [e.ids for e in oracle.encode_batch(texts, add_special_tokens=True)]
    want_text = oracle.decode_batch(want_plain, skip_special_tokens=False)
    want_text_skip = oracle.decode_batch(want_special, skip_special_tokens=True)
    vocab = oracle.get_vocab_size(with_added_tokens=True)
    specials = sorted(t.content for t in oracle.get_added_tokens_decoder().values() if t.special)
    special_ids = [oracle.token_to_id(s) for s in specials]
    seqs = random_id_sequences(seed=100 + FAMILIES.index(family), vocab=vocab, special_ids=special_ids)
    want_seq = oracle.decode_batch(seqs, skip_special_tokens=False)
    want_seq_skip = oracle.decode_batch(seqs, skip_special_tokens=True)

    bad, bad_seqs, notes = 0, 0, []
    tok = HFTokenizer(d)
    try:
        assert tok.vocab_size == vocab
        for i, text in enumerate(texts):
            checks = [
                ("encode", tok.encode(text), want_plain[i]),
                ("encode add_special", tok.encode(text, add_special_tokens=True), want_special[i]),
                ("decode", tok.decode(want_plain[i]), want_text[i]),
                ("decode skip_special", tok.decode(want_special[i], skip_special_tokens=True), want_text_skip[i]),
            ]
            failed = [(what, got, want) for what, got, want in checks if got != want]
            if failed:
                bad += 1
                if len(notes) < 3:
                    what, got, want = failed[0]
                    notes.append(f"{what} of {text[:60]!r}: got {str(got)[:80]}, want {str(want)[:80]}")
        for i, seq in enumerate(seqs):
            got, got_skip = tok.decode(seq), tok.decode(seq, skip_special_tokens=True)
            if got != want_seq[i] or got_skip != want_seq_skip[i]:
                bad_seqs += 1
                if len(notes) < 6:
                    notes.append(f"decode of ids {seq[:10]}: got {got[:60]!r}, want {want_seq[i][:60]!r}")
    finally:
        tok.close()
    return bad, bad_seqs, notes


@pytest.mark.parametrize("family", FAMILIES)
def test_encode_decode_match_pypi_tokenizers(family):
    bad, bad_seqs, notes = mismatches(family)
    assert (bad, bad_seqs) == (0, 0), (
        f"{family}: {bad} of {N_STRINGS} strings and {bad_seqs} of {N_ID_SEQUENCES} id sequences "
        "differ from PyPI tokenizers:\n" + "\n".join(notes)
    )


def test_adversarial_strings_cover_the_hard_cases():
    texts = adversarial_strings(seed=0)
    assert len(texts) == N_STRINGS and len(set(texts)) > 900
    joined = "".join(texts)
    for needle in ["\x00", "\x1b", "<|im_end|>", "<|eot_id|>", "<｜end▁of▁sentence｜>", "<start_of_turn>", "<|start|>", "\u200d", "\u0301", "\u05d0", "你"]:
        assert needle in joined, needle
    assert max(len(t) for t in texts) >= 1000


def test_directory_without_chat_template_encodes_but_cannot_render():
    from focus_go.errors import NotFoundError

    d = _family_dir("gptoss")  # gpt-oss ships its template as chat_template.jinja, absent here
    tok = HFTokenizer(d)
    try:
        assert tok.chat_template == ""
        assert tok.decode(tok.encode("hi\x00there")) == "hi\x00there"
        with pytest.raises(NotFoundError, match="no default chat template") as info:
            tok.render([{"role": "user", "content": "hi"}])
        assert str(d) in str(info.value)
    finally:
        tok.close()


def test_chat_template_jinja_beside_the_config_is_the_template(tmp_path):
    src = _family_dir("gptoss")
    (tmp_path / "tokenizer.json").symlink_to((src / "tokenizer.json").resolve())
    (tmp_path / "tokenizer_config.json").write_bytes((src / "tokenizer_config.json").read_bytes())
    template = "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
    (tmp_path / "chat_template.jinja").write_text(template)
    tok = HFTokenizer(tmp_path)
    try:
        assert tok.chat_template == template
        text, tokens = tok.render([{"role": "user", "content": "hi"}], add_generation_prompt=False)
        assert text == "<|start|>user<|message|>hi<|end|>"
        assert list(tokens) == tok.encode(text)
    finally:
        tok.close()
