"""HFTokenizer and PolicyFormat against the oracles: the real Qwen3 tokenizer.json and chat
template rendered by PyPI's tokenizers and jinja2 (with transformers' settings)."""

from __future__ import annotations

import importlib.util
import json
import os
import random
from pathlib import Path

import pytest

from focus_go.errors import ConfigError, InvalidHandleError, NotFoundError
from focus_go.generation.format import ChatCodec, HFTokenizer, PolicyFormat
from focus_go.generation.parsing import HermesToolCallParser, TokenChunkParser
from focus_go.generation.types import GenerateResult, NativeToolCall

ROOT = Path(__file__).resolve().parents[1]
QWEN3 = Path(os.environ.get("FOCUS_QWEN3_DIR", ROOT / "build" / "testdata" / "qwen3"))


def _golden_module():
    path = ROOT / "backends" / "chat" / "testdata" / "make_golden.py"
    spec = importlib.util.spec_from_file_location("make_golden", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def qwen3():
    if not (QWEN3 / "tokenizer.json").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"Qwen3 tokenizer missing in {QWEN3}: CI must run make testdata")
        pytest.skip(f"Qwen3 tokenizer missing in {QWEN3}: run make testdata")
    tok = HFTokenizer(QWEN3)
    yield tok
    tok.close()


@pytest.fixture(scope="module")
def oracle():
    tokenizers = pytest.importorskip("tokenizers")
    return tokenizers.Tokenizer.from_file(str(QWEN3 / "tokenizer.json"))


TEXTS = [
    "Solve 3x + 7 = 22. The answer is \\boxed{5}.",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    "naïve café — 你好，世界 🙂🔍  tabs\tand\r\nnewlines",
    "   leading and trailing spaces   ",
    "",
]


def test_encode_decode_match_pypi_tokenizers(qwen3, oracle):
    rng = random.Random(0)
    alphabet = "abcxyz 0123456789+-=\\{}()<>|_\n你好é🙂"
    texts = TEXTS + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))) for _ in range(200)]
    for text in texts:
        want = oracle.encode(text, add_special_tokens=False).ids
        assert qwen3.encode(text) == want, text
        assert qwen3.decode(want) == oracle.decode(want, skip_special_tokens=False)
        assert qwen3.decode(want, skip_special_tokens=True) == oracle.decode(want, skip_special_tokens=True)


def test_tokenizer_metadata(qwen3, oracle):
    assert qwen3.vocab_size == oracle.get_vocab_size(with_added_tokens=True)
    assert qwen3.eos_token == "<|im_end|>"
    assert qwen3.eos_token_id == oracle.token_to_id("<|im_end|>")
    assert oracle.token_to_id("<|im_start|>") in qwen3.all_special_ids
    assert "<|im_start|>" in qwen3.chat_template


def test_chat_template_matches_jinja2_on_golden_conversations(qwen3, oracle):
    golden = _golden_module()
    env = golden.make_env()
    config = json.loads((QWEN3 / "tokenizer_config.json").read_text())
    special = golden.special_tokens_map(config)
    checked = 0
    for name, messages, tools, add_generation_prompt, kwargs in golden.QWEN3_CASES:
        try:
            want = golden.render(env, config["chat_template"], special, json.loads(json.dumps(messages)), tools, add_generation_prompt, kwargs)
        except Exception:
            with pytest.raises(ConfigError):
                qwen3.render(messages, tools, add_generation_prompt=add_generation_prompt, **kwargs)
            continue
        text, tokens = qwen3.render(messages, tools, add_generation_prompt=add_generation_prompt, **kwargs)
        assert text == want, name
        assert list(tokens) == oracle.encode(want, add_special_tokens=False).ids, name
        checked += 1
    assert checked >= 20


def test_apply_chat_template_like_transformers(qwen3):
    messages = [{"role": "user", "content": "2+2?"}]
    text = qwen3.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    assert qwen3.apply_chat_template(messages, add_generation_prompt=True) == qwen3.encode(text)


def test_policy_format_resolve_and_prepare(qwen3):
    # generation.txt, PolicyFormat (with the local Qwen3 tokenizer standing in)
    tokenizer = qwen3
    policy_format = PolicyFormat.resolve("Qwen/Qwen3.5-4B", tokenizer=tokenizer, profile="token_chunk")
    assert isinstance(policy_format.parser, TokenChunkParser)
    # The stand-in ships Qwen3's template, which decides over the Qwen3.5 name (issue #46);
    # test_parser_families.py and the Go tests cover the name's own family.
    assert PolicyFormat.resolve("Qwen/Qwen3.5-4B", tokenizer=tokenizer).parser.__class__ is HermesToolCallParser
    assert PolicyFormat.resolve("Qwen/Qwen2.5-7B-Instruct", tokenizer=tokenizer).parser.__class__ is HermesToolCallParser

    messages = [{"role": "system", "content": "Solve the problem."}, {"role": "user", "content": "3x + 7 = 22"}]
    prompt = policy_format.prepare(messages)
    assert prompt.tokens == tuple(qwen3.apply_chat_template(messages, add_generation_prompt=True))
    assert prompt.messages == messages and prompt.tools == [] and prompt.format is policy_format
    assert not prompt.exact_continuation

    history = list(messages)
    policy_format.record_reply(GenerateResult(text="x = 5", native_tool_calls=(NativeToolCall("f", "{}", "c1"),)), history)
    assert history[-1] == {
        "role": "assistant",
        "content": "x = 5",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }

    with pytest.raises(ConfigError, match="unknown profile"):
        PolicyFormat.resolve("m", tokenizer=tokenizer, profile="nope")


def test_chat_codec_template_kwargs(qwen3):
    codec = ChatCodec(qwen3, {"enable_thinking": False})
    text, _ = codec.encode([{"role": "user", "content": "hi"}])
    assert text.endswith("<think>\n\n</think>\n\n")


def test_missing_model_and_bad_ids():
    with pytest.raises(NotFoundError, match="nonexistent-org"):
        HFTokenizer("nonexistent-org/nonexistent-model")


def test_bad_ids_and_closed_tokenizer():
    tok = HFTokenizer(QWEN3) if (QWEN3 / "tokenizer.json").is_file() else pytest.skip("no Qwen3")
    with pytest.raises(ConfigError, match="outside the vocabulary"):
        tok.decode([10**9])
    with pytest.raises(ConfigError, match="integers"):
        tok.decode([-1])
    tok.close()
    with pytest.raises(InvalidHandleError):
        tok.encode("x")
