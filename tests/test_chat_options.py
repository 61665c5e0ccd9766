"""transformers' apply_chat_template options through every entry of focus-go's rendering
(HFTokenizer.render, HFTokenizer.apply_chat_template, ChatCodec(template_kwargs=...)):
each is honoured with transformers' result or refused naming the option (issue #46).

test_chat_oracle.py compares each option case on every template folder; this file checks
that the three entries agree and the cases that need their own tokenizer directory (named
templates, truncation_side)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from focus_go.errors import ConfigError
from focus_go.generation.format import ChatCodec, HFTokenizer

from test_chat_oracle import DUMMY_TEMPLATE, LONG, SYSTEM, Pair, _family_dir, assistant, user

CONVERSATION = [SYSTEM, user("user message"), assistant("assistant message")]

# option -> value, what the refusal must say
REFUSED = {
    "sanitize_control_tokens": (True, "option sanitize_control_tokens=True: not supported"),
    "padding": ("max_length", "option padding='max_length': focus-go renders one conversation to unpadded ids"),
    "return_tensors": ("pt", "option return_tensors='pt': not supported"),
    "return_assistant_tokens_mask": (True, "option return_assistant_tokens_mask=True: not supported"),
    "tokenizer_kwargs": ({"add_special_tokens": True}, "option tokenizer_kwargs={'add_special_tokens': True}"),
    "truncation": (True, "option truncation=True needs max_length=N"),
    "max_length": (8, "option max_length=8 has no effect without truncation=True"),
    "chat_template": (3, "option chat_template=3: expected a Jinja template source"),
    "continue_final_message": (1, "option continue_final_message=1: expected True"),
}


@pytest.fixture(scope="module")
def qwen3():
    tok = HFTokenizer(_family_dir("qwen3"))
    yield tok
    tok.close()


def entries(tok, messages, add_generation_prompt=False, **options):
    """The prompt text and ids each entry renders with these options."""
    return {
        "render": tok.render(messages, add_generation_prompt=add_generation_prompt, **options),
        "apply_chat_template": (
            tok.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=False, **options),
            tuple(tok.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, **options)),
        ),
        "ChatCodec": ChatCodec(tok, template_kwargs=options).encode(messages, add_generation_prompt=add_generation_prompt),
    }


@pytest.mark.parametrize("option", sorted(REFUSED))
def test_every_entry_refuses_an_option_it_cannot_honour_by_name(qwen3, option):
    value, message = REFUSED[option]
    for entry in ("render", "apply_chat_template", "ChatCodec"):
        with pytest.raises(ConfigError, match=re.escape(message)):
            entries_one(qwen3, entry, **{option: value})


def entries_one(tok, entry, **options):
    messages = [user("Hi")]
    if entry == "render":
        return tok.render(messages, **options)
    if entry == "apply_chat_template":
        return tok.apply_chat_template(messages, **options)
    return ChatCodec(tok, template_kwargs=options).encode(messages)


@pytest.mark.parametrize(
    "options",
    [
        {"continue_final_message": True},
        {"chat_template": DUMMY_TEMPLATE},
        {"chat_template": DUMMY_TEMPLATE, "continue_final_message": True},
        {"truncation": True, "max_length": 9},
        {"documents": [{"title": "A", "text": "alpha"}], "padding": False, "return_tensors": None},
    ],
    ids=["continue", "template", "template_continue", "truncation", "defaults"],
)
def test_every_entry_honours_an_option_as_transformers_does(tmp_path, options):
    pair = Pair("qwen3", tmp_path)
    want_text = pair.want(CONVERSATION, None, False, options, False)
    want_ids = pair.want(CONVERSATION, None, False, options, True)
    for entry, (text, ids) in entries(pair.focus, CONVERSATION, **options).items():
        assert (text, list(ids)) == (want_text, want_ids), entry
    pair.focus.close()


def _copy(tmp_path, family, **config_changes):
    source = _family_dir(family)
    path = tmp_path / family
    path.mkdir()
    shutil.copy(source / "tokenizer.json", path / "tokenizer.json")
    config = json.loads((source / "tokenizer_config.json").read_text())
    config.update(config_changes)
    (path / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False))
    return path


def _oracle(path):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(path))


def test_named_templates_as_transformers_picks_them(tmp_path):
    # transformers' tests/test_tokenization_common.py test_chat_template_dict, as data.
    path = _copy(tmp_path, "qwen3", chat_template=[
        {"name": "default", "template": "{{ 'a' }}{{ messages[0].content }}"},
        {"name": "template2", "template": "{{ 'b' }}{{ messages[0].content }}"},
    ])
    oracle, tok = _oracle(path), HFTokenizer(path)
    messages = [user("user message")]
    for chosen in (None, "template2", "default", "{{ 'c' }}"):
        want = oracle.apply_chat_template(messages, chat_template=chosen, tokenize=False)
        assert tok.apply_chat_template(messages, chat_template=chosen, tokenize=False) == want, chosen
    tok.close()


def test_truncation_cuts_at_the_side_the_config_names(tmp_path):
    path = _copy(tmp_path, "qwen3", truncation_side="left")
    oracle, tok = _oracle(path), HFTokenizer(path)
    messages = [SYSTEM, user(LONG)]
    want = oracle.apply_chat_template(messages, truncation=True, max_length=11, return_dict=False)
    assert tok.apply_chat_template(messages, truncation=True, max_length=11) == want
    assert len(want) == 11
    # The text is never cut: transformers ignores truncation without tokenize.
    assert tok.apply_chat_template(messages, truncation=True, max_length=11, tokenize=False) == oracle.apply_chat_template(
        messages, truncation=True, max_length=11, tokenize=False
    )
    tok.close()


def test_return_dict_and_batches_as_transformers(tmp_path):
    pair = Pair("llama3_1", tmp_path)
    one, two = [user("Hi")], [SYSTEM, user("Bye")]
    assert pair.focus.apply_chat_template(one, return_dict=True) == dict(pair.oracle.apply_chat_template(one))
    assert pair.focus.apply_chat_template([one, two], tokenize=False) == pair.oracle.apply_chat_template([one, two], tokenize=False)
    assert pair.focus.apply_chat_template([one, two]) == pair.oracle.apply_chat_template([one, two], return_dict=False)
    pair.focus.close()


def test_continue_final_message_errors_say_what_to_do(qwen3):
    with pytest.raises(ConfigError, match="continue_final_message and add_generation_prompt cannot both be set"):
        qwen3.render(CONVERSATION, add_generation_prompt=True, continue_final_message=True)
    with pytest.raises(ConfigError, match=re.escape('continue_final_message="scratch": the chat template never reads that field')):
        qwen3.render([user("hi"), assistant("a", scratch="b")], add_generation_prompt=False, continue_final_message="scratch")
    with pytest.raises(ConfigError, match=re.escape("the final message's content is int, not text")):
        qwen3.render([user("hi"), assistant(3)], add_generation_prompt=False, continue_final_message=True)
