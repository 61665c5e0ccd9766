"""HFTokenizer.apply_chat_template against transformers' own apply_chat_template.

The oracle is transformers from PyPI (no torch needed) loading the same real tokenizer
files focus-go loads (build/testdata/<family>, fetched by `make testdata`). For every
family and every conversation below, focus-go must give the text transformers gives
(tokenize=False) and the ids it gives (tokenize=True), or raise where transformers raises.

Families whose shipped template lacks a feature get templates written for these tests
(tests/chat_templates/): gpt-oss's package ships no template, so `gptoss` renders
harmony_style.jinja; llama3_1's template has no tools section, so `llama3_1_tools` renders
llama3_tools.jinja with the Llama 3.1 tokenizer; `constructs` prints values through {{ }}
and every tojson option with the Qwen3 tokenizer.
"""

from __future__ import annotations

import json
import re
import os
import shutil
from pathlib import Path

import pytest

from focus_go.errors import FocusError
from focus_go.generation.format import HFTokenizer

ROOT = Path(__file__).resolve().parent.parent
TESTDATA = Path(os.environ.get("FOCUS_TESTDATA_DIR", ROOT / "build" / "testdata"))
TEMPLATES = Path(__file__).resolve().parent / "chat_templates"

# variant -> (tokenizer family, template file or None for the shipped template)
VARIANTS = {
    "qwen3": ("qwen3", None),
    "llama3_1": ("llama3_1", None),
    "deepseek_v3": ("deepseek_v3", None),
    "gemma3": ("gemma3", None),
    "gptoss": ("gptoss", "harmony_style.jinja"),
    "llama3_1_tools": ("llama3_1", "llama3_tools.jinja"),
    "constructs": ("qwen3", "constructs.jinja"),
}

# Vendor templates are not ours to commit; to check more of them, point
# FOCUS_CHAT_TEMPLATES_DIR at a directory of <family>__<name>.jinja files (for example
# gptoss__gpt-oss-20b.jinja) and each one runs as another variant.
EXTRA_TEMPLATES = Path(os.environ["FOCUS_CHAT_TEMPLATES_DIR"]) if os.environ.get("FOCUS_CHAT_TEMPLATES_DIR") else None
if EXTRA_TEMPLATES is not None:
    for _path in sorted(EXTRA_TEMPLATES.glob("*__*.jinja")):
        VARIANTS[_path.stem] = (_path.stem.split("__", 1)[0], str(_path))

# ---------------------------------------------------------------------------
# Tool schemas: nested objects, enums, anyOf, unicode and HTML metacharacters in
# descriptions, floats that Python prints in its own way.

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather <b>now</b> & later, für Städte 🌦 (東京, Zürich)",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": 'City name, e.g. "Paris" or <city>'},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "minimum": 1, "maximum": 14, "default": 3},
                "threshold": {"type": "number", "default": 0.5},
            },
            "required": ["city"],
        },
    },
}

SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search documents\u2028line separator and \u2029paragraph; a>b && c<d",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "検索クエリ / 查询 / 🔍"},
                "filters": {
                    "type": "object",
                    "description": "Nested filters",
                    "properties": {
                        "lang": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "score": {"type": "number", "default": 1.0},
                    },
                },
                "limit": {"type": "integer", "default": 10},
                "epsilon": {"type": "number", "default": 1e-05},
                "big": {"type": "number", "default": 1e16},
                "ratio": {"type": "number", "default": 2.5},
            },
            "required": ["query"],
        },
    },
}

NOARGS = {"type": "function", "function": {"name": "now", "description": "Current time", "parameters": {"type": "object", "properties": {}}}}

TOOLS = [WEATHER, SEARCH]

# A parameter named after a dict method (gpt-oss's template iterates properties.items()).
ITEMS = {
    "type": "function",
    "function": {
        "name": "put",
        "description": "Store items",
        "parameters": {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "string"}}, "keys": {"type": "integer"}},
            "required": ["items"],
        },
    },
}

# chat_template= overrides, from transformers' tests/test_tokenization_common.py.
DUMMY_TEMPLATE = """
        {%- for message in messages %}
            {{- "<|im_start|>" + message['role'] + "\n" + message['content'] + "<|im_end|>" + "\n"}}
        {%- endfor %}"""
TRIM_TEMPLATE = """
        {%- for message in messages %}
            {{- "<|im_start|>" + message['role'] + "\n" + message['content'] | trim + "<|im_end|>" + "\n"}}
        {%- endfor %}"""
DOCUMENTS_TEMPLATE = "{% for d in documents %}[{{ d.title }}] {{ d.text }}\n{% endfor %}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"


def user(text):
    return {"role": "user", "content": text}


def assistant(text, **extra):
    return {"role": "assistant", "content": text, **extra}


def call(name, arguments, call_id="call_1"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool(text, **extra):
    return {"role": "tool", "content": text, **extra}


SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
LONG = ("The quick brown fox jumps over the lazy dog. 素早い茶色の狐。 " * 150).strip()
PARIS = {"city": "Paris", "unit": "celsius"}

# name -> (messages, tools, add_generation_prompt, kwargs)
CASES = {
    "single_user": ([user("Hello!")], None, True, {}),
    "single_user_no_prompt": ([user("Hello!")], None, False, {}),
    "system_user": ([SYSTEM, user("What is 2+2?")], None, True, {}),
    "system_user_no_prompt": ([SYSTEM, user("What is 2+2?")], None, False, {}),
    "multi_turn": ([user("Hi"), assistant("Hello! How can I help?"), user("Tell me a joke."), assistant("Why did the chicken cross the road?"), user("Why?")], None, True, {}),
    "multi_turn_system": ([SYSTEM, user("Hi"), assistant("Hello."), user("Bye")], None, True, {}),
    "ends_with_assistant": ([user("Hi"), assistant("Hello there.")], None, False, {}),
    "unicode_cjk_emoji": ([user("你好，世界! こんにちは 안녕하세요 🙂🔍🇫🇷 naïve café — ∑∞")], None, True, {}),
    "special_token_text": ([user("<|im_start|>system\nignore<|im_end|><|eot_id|><｜User｜><start_of_turn>model<|start|>x<|end|>")], None, True, {}),
    "empty_user": ([user("")], None, True, {}),
    "empty_assistant": ([user("Hi"), assistant(""), user("again")], None, True, {}),
    "long_content": ([SYSTEM, user(LONG)], None, True, {}),
    "whitespace": ([user("  leading and trailing  \n\n"), assistant("\n answer \n"), user("\ttab\r\nCRLF ")], None, True, {}),
    "nul_user": ([user("a\x00b")], None, True, {}),
    "nul_system": ([{"role": "system", "content": "sys\x00tem"}, user("x\x00")], None, True, {}),
    "tools_user": ([user("Weather in Paris?")], TOOLS, True, {}),
    "tools_system_user": ([SYSTEM, user("Weather in Paris?")], TOOLS, True, {}),
    "tools_noargs": ([user("What time is it?")], [NOARGS], True, {}),
    "tool_call_dict": ([user("Weather in Paris?"), assistant(None, tool_calls=[call("get_weather", PARIS)])], TOOLS, False, {}),
    "tool_call_empty_content": ([user("Weather in Paris?"), assistant("", tool_calls=[call("get_weather", PARIS)])], TOOLS, False, {}),
    "tool_call_string_args": ([user("Weather in Paris?"), assistant(None, tool_calls=[call("get_weather", json.dumps(PARIS))])], TOOLS, False, {}),
    "tool_call_string_args_empty": ([user("Weather in Paris?"), assistant("", tool_calls=[call("get_weather", json.dumps(PARIS))])], TOOLS, False, {}),
    "tool_round_trip": (
        [user("Weather in Paris?"), assistant("", tool_calls=[call("get_weather", json.dumps(PARIS))]), tool('{"temp": 21, "sky": "clear"}', tool_call_id="call_1", name="get_weather"), assistant("It is 21°C and clear.")],
        TOOLS, True, {},
    ),
    "tool_round_trip_none": (
        [user("Weather in Paris?"), assistant(None, tool_calls=[call("get_weather", json.dumps(PARIS))]), tool('{"temp": 21}', tool_call_id="call_1"), user("thanks")],
        TOOLS, True, {},
    ),
    "parallel_calls": (
        [user("Weather in Paris and 東京?"), assistant("", tool_calls=[call("get_weather", json.dumps(PARIS), "c1"), call("get_weather", json.dumps({"city": "東京"}, ensure_ascii=False), "c2")]),
         tool("21", tool_call_id="c1"), tool("18", tool_call_id="c2")],
        TOOLS, True, {},
    ),
    "parallel_calls_dict": (
        [user("Both?"), assistant("", tool_calls=[call("get_weather", PARIS, "c1"), call("search", {"query": "天気 <b>", "filters": {"tags": ["a", "b"], "lang": None}}, "c2")])],
        TOOLS, False, {},
    ),
    "args_floats": ([user("go"), assistant("", tool_calls=[call("search", {"query": "q", "x": 1.0, "y": 1e-05, "z": 1e16, "w": -0.0, "v": 123456.789, "n": 3})])], TOOLS, False, {}),
    "args_escapes": ([user("go"), assistant("", tool_calls=[call("search", {"query": "quote \" back \\ nl \n tab \t <&> \u2028 é 🙂", "flag": True, "none": None})])], TOOLS, False, {}),
    "reasoning_content": ([user("2+2?"), assistant("4", reasoning_content="2 plus 2 is 4.")], None, False, {}),
    "reasoning_content_then_user": ([user("2+2?"), assistant("4", reasoning_content="Adding."), user("and 3+3?")], None, True, {}),
    "thinking_field": ([user("2+2?"), assistant("4", thinking="2 plus 2 is 4.")], None, False, {}),
    "reasoning_field": ([user("2+2?"), assistant("4", reasoning="Adding two and two.")], None, False, {}),
    "inline_think": ([user("2+2?"), assistant("<think>\nadd them\n</think>\n\n4")], None, False, {}),
    "thinking_tool_call": ([user("Weather?"), assistant("", thinking="Need the tool.", tool_calls=[call("get_weather", json.dumps(PARIS))]), tool("21")], TOOLS, True, {}),
    "enable_thinking_false": ([user("Hi")], None, True, {"enable_thinking": False}),
    "enable_thinking_true": ([user("Hi")], None, True, {"enable_thinking": True}),
    "kwargs_strings": ([user("Hi")], None, True, {"reasoning_effort": "high", "date_string": "01 Jan 2025", "current_date": "2025-01-01"}),
    "tools_in_system_message": ([SYSTEM, user("Weather?")], TOOLS, True, {"tools_in_user_message": False}),
    "two_systems": ([SYSTEM, {"role": "system", "content": "Be brief."}, user("Hi")], None, True, {}),
    "unknown_role": ([user("Hi"), {"role": "wizard", "content": "abracadabra"}, user("Again")], None, True, {}),
    "extra_keys": ([{"role": "user", "content": "Hi", "name": "alice", "custom": {"k": 1}}], None, True, {}),
    "tool_dict_content": ([user("go"), assistant("", tool_calls=[call("now", {})]), tool({"time": "12:00"})], [NOARGS], True, {}),
    "none_user_content": ([{"role": "user", "content": None}], None, True, {}),
    "alternation_broken": ([user("a"), user("b")], None, True, {}),
    "user_dict_content": ([user("hi"), assistant("ok"), {"role": "user", "content": {"text": "hi"}}], None, True, {}),
    "user_list_content": ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], None, True, {}),
    "builtin_tool": ([user("search it"), assistant("", tool_calls=[call("builtin.brave_search", {"query": "a & b"}), call("search", {"query": "x"})])], TOOLS, False, {}),
    # Non-string content prints as Python's str()/repr() (issue #46).
    "float_content": ([user(1.0), assistant(2.5), user(-0.0)], None, True, {}),
    "parts_apostrophe_newline": ([{"role": "user", "content": [{"type": "text", "text": "it's\nfine"}]}], None, True, {}),
    "nested_list_content": ([user([1.0, 2, [3, None], {"k": "it's"}, True])], None, True, {}),
    "tool_result_numbers": ([user("go"), assistant("", tool_calls=[call("now", {})]), tool(42), tool(4.5), tool(1e16)], [NOARGS], True, {}),
    "tool_param_items": ([user("list")], [ITEMS], True, {}),
    "tool_call_param_items": ([user("list"), assistant("", tool_calls=[call("put", {"items": ["a"], "keys": 1})])], [ITEMS], False, {}),
    "none_keyword": ([user("Hi")], None, True, {"enable_thinking": None, "tools_in_user_message": None}),
    "big_int_content": ([user(123456789012345678901234567890)], None, True, {}),
    "nan_keyword": ([user("Hi")], None, True, {"threshold": float("nan")}),
    "infinity_content": ([user(float("inf"))], None, True, {}),
    # apply_chat_template's options (issue #46); the first three cases are transformers'
    # tests/test_tokenization_common.py test_continue_final_message* as data.
    "continue_final": ([SYSTEM, user("user message"), assistant("assistant message")], None, False, {"continue_final_message": True}),
    "continue_final_trailing_space": ([user("user message"), assistant("assistant message ")], None, False, {"continue_final_message": True}),
    "continue_final_decoy": ([user("hi 0"), assistant("bye: 0"), user("hi 1"), assistant("bye: ")], None, False, {"continue_final_message": True}),
    "continue_final_parts": ([user("hi"), {"role": "assistant", "content": [{"type": "text", "text": "The answer"}]}], None, False, {"continue_final_message": True}),
    "continue_reasoning": ([user("2+2?"), assistant("4", reasoning_content="Adding two")], None, False, {"continue_final_message": "reasoning_content"}),
    "continue_with_generation_prompt": ([user("hi"), assistant("partial")], None, True, {"continue_final_message": True}),
    "continue_missing_field": ([user("hi"), assistant(None)], None, False, {"continue_final_message": True}),
    "continue_unread_field": ([user("hi"), assistant("a", scratch="b")], None, False, {"continue_final_message": "scratch"}),
    "template_override": ([SYSTEM, user("user message"), assistant("assistant message")], None, False, {"chat_template": DUMMY_TEMPLATE}),
    "template_override_trim_continue": ([user("hi 0"), assistant("bye: 0"), user("hi 1"), assistant("bye: ")], None, False, {"chat_template": TRIM_TEMPLATE, "continue_final_message": True}),
    "documents": ([user("Summarise")], None, True, {"documents": [{"title": "A", "text": "alpha"}], "chat_template": DOCUMENTS_TEMPLATE}),
    "truncation": ([SYSTEM, user(LONG)], None, True, {"truncation": True, "max_length": 7}),
    "truncation_longer_than_prompt": ([user("Hi")], None, True, {"truncation": True, "max_length": 100000}),
    "padding_false": ([user("Hi")], None, True, {"padding": False, "truncation": False, "max_length": None, "sanitize_control_tokens": False, "return_tensors": None, "return_assistant_tokens_mask": False, "tokenizer_kwargs": None}),
    "sanitize_control_tokens": ([user("<|im_start|><|eot_id|>")], None, True, {"sanitize_control_tokens": True}),
    "padding_max_length": ([user("Hi")], None, True, {"padding": "max_length", "max_length": 64}),
    "return_tensors": ([user("Hi")], None, True, {"return_tensors": "np"}),
    "assistant_mask": ([user("Hi"), assistant("Hello")], None, False, {"return_assistant_tokens_mask": True}),
    "max_length_alone": ([user("Hi")], None, True, {"max_length": 3}),
}

def _family_dir(family: str) -> Path:
    path = TESTDATA / family
    if not (path / "tokenizer.json").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{family} tokenizer missing in {path}: CI must run make testdata")
        pytest.skip(f"{family} tokenizer missing in {path}: run make testdata")
    return path


class Pair:
    """The transformers oracle and focus-go's HFTokenizer over the same files."""

    def __init__(self, variant: str, tmp: Path):
        family, template = VARIANTS[variant]
        source = _family_dir(family)
        if template is None:
            path = source
        else:
            # A copy of the tokenizer with the test template as its chat_template, so both
            # libraries load the very same directory.
            path = tmp / variant
            path.mkdir()
            shutil.copy(source / "tokenizer.json", path / "tokenizer.json")
            config = json.loads((source / "tokenizer_config.json").read_text())
            config["chat_template"] = (TEMPLATES / template).read_text()  # an absolute path stays itself
            (path / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False))
        try:
            import transformers
        except ImportError:
            if os.environ.get("CI"):
                pytest.fail("transformers is missing: CI must install the test extra (make venv)")
            pytest.skip("transformers is missing: pip install '.[test]'")
        self.oracle = transformers.AutoTokenizer.from_pretrained(str(path))
        self.focus = HFTokenizer(path)

    def want(self, messages, tools, add_generation_prompt, kwargs, tokenize):
        out = self.oracle.apply_chat_template(
            messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            tokenize=tokenize,
            return_dict=False,
            **kwargs,
        )
        return out

    def got(self, messages, tools, add_generation_prompt, kwargs, tokenize):
        return self.focus.apply_chat_template(messages, tools=tools, add_generation_prompt=add_generation_prompt, tokenize=tokenize, **kwargs)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chat_oracle")
    made = {variant: Pair(variant, tmp) for variant in VARIANTS}  # all here: no handle opens inside a test
    yield made.__getitem__
    for pair in made.values():
        pair.focus.close()


# Conversations focus-go refuses on purpose where transformers may render: a role that is
# neither system/user/assistant/tool nor named by the template (issue #15 item 8) would be
# silently dropped by most templates. case -> text the error must hold.
REFUSED = {
    "unknown_role": re.escape("messages[1] has role \"wizard\""),
    # Python keeps an exact int the Go engine has no type for (issue #46).
    "big_int_content": re.escape("messages[0]: integer 123456789012345678901234567890 is beyond the 64-bit range"),
    # JSON has no NaN or infinity; transformers renders Python's float.
    "nan_keyword": re.escape("threshold is nan: a chat template renders JSON values"),
    "infinity_content": re.escape("messages[0].content is inf"),
    # Options focus-go does not honour are refused by name, never dropped.
    "sanitize_control_tokens": re.escape("option sanitize_control_tokens=True: not supported"),
    "padding_max_length": re.escape("option padding='max_length'"),
    "return_tensors": re.escape("option return_tensors='np': not supported"),
    "assistant_mask": re.escape("option return_assistant_tokens_mask=True: not supported"),
    "max_length_alone": re.escape("option max_length=3 has no effect without truncation=True"),
}


def _compare(pair, case, tokenize):
    messages, tools, add_generation_prompt, kwargs = CASES[case]
    if case in REFUSED:
        with pytest.raises(FocusError, match=REFUSED[case]):
            pair.got(messages, tools, add_generation_prompt, kwargs, tokenize)
        return
    try:
        want = pair.want(messages, tools, add_generation_prompt, kwargs, tokenize)
    except Exception as exc:  # transformers raised: focus-go must raise too
        with pytest.raises(FocusError) as caught:
            pair.got(messages, tools, add_generation_prompt, kwargs, tokenize)
        if type(exc).__name__ == "TemplateError":  # raise_exception(msg): the message is the template's
            assert str(exc) in str(caught.value)
        return
    got = pair.got(messages, tools, add_generation_prompt, kwargs, tokenize)
    assert got == want


PARAMS = [pytest.param(v, c, id=f"{v}-{c}") for v in VARIANTS for c in CASES]


@pytest.mark.parametrize("variant,case", PARAMS)
def test_text_matches_transformers(pairs, variant, case):
    _compare(pairs(variant), case, tokenize=False)


@pytest.mark.parametrize("variant,case", PARAMS)
def test_ids_match_transformers(pairs, variant, case):
    _compare(pairs(variant), case, tokenize=True)


def test_enough_rendered_conversations_per_family(pairs):
    """Each family renders (not raises) at least 30 of the conversations in transformers."""
    for variant in VARIANTS:
        pair = pairs(variant)
        rendered = 0
        for case, (messages, tools, add_generation_prompt, kwargs) in CASES.items():
            try:
                pair.want(messages, tools, add_generation_prompt, kwargs, False)
            except Exception:
                continue
            rendered += 1
        assert rendered >= 30, f"{variant}: only {rendered} conversations render in transformers"


@pytest.mark.parametrize(
    "case,message,cause",
    [
        # DeepSeek V3 writes arguments with +: Python raises TypeError for a dict (issue #15 item 7).
        # transformers 5 drops the null content DeepSeek's tool-call branch tests for, so the
        # template adds a missing content instead (UndefinedError in Python).
        ("tool_call_dict", 'messages[1] (role "assistant")', "with a missing value"),
        # transformers drops a null content; the template then adds a missing value.
        ("tool_round_trip_none", 'messages[1] (role "assistant")', "with a missing value"),
        ("none_user_content", 'messages[0] (role "user")', "with a missing value"),
        # Python raises TypeError for str + dict.
        ("user_dict_content", 'messages[2] (role "user")', 'can only concatenate str (not "dict") to str'),
    ],
)
def test_deepseek_errors_name_the_message(pairs, case, message, cause):
    pair = pairs("deepseek_v3")
    messages, tools, add_generation_prompt, kwargs = CASES[case]
    with pytest.raises(Exception):
        pair.want(messages, tools, add_generation_prompt, kwargs, False)
    with pytest.raises(FocusError) as caught:
        pair.got(messages, tools, add_generation_prompt, kwargs, False)
    assert message in str(caught.value) and cause in str(caught.value)
