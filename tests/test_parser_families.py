"""Every model family's tool-call dialect through PolicyFormat.resolve, the malformed flag
crossing the C ABI, and ToolEnv refusing to run a malformed call (issue #15 items 2 and 3).

The family recognition by chat template reads the real tokenizers of build/testdata (see
tests/test_tokenizer.py): under CI=true a missing one fails the test instead of skipping."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from focus_go.backends import (
    DeepSeekV3ToolCallParser,
    GenerateResult,
    HarmonyToolCallParser,
    HermesToolCallParser,
    HFTokenizer,
    Llama3JSONToolCallParser,
    PolicyFormat,
    PythonicToolCallParser,
    QwenXMLToolCallParser,
    ToolCall,
    ToolTurn,
)
from focus_go.errors import ConfigError
from focus_go.generation.format import PROFILES, model_profile
from focus_go.tools import ToolEnv

TESTDATA = Path(__file__).resolve().parents[1] / "build" / "testdata"


def tokenizer(family: str) -> HFTokenizer:
    path = TESTDATA / family
    if not (path / "tokenizer.json").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"real tokenizer {path} missing: run `make testdata`")
        pytest.skip(f"real tokenizer {path} missing: run `make testdata`")
    return HFTokenizer(path)


# One reply per family, written in that family's own tool-call syntax.
REPLIES = {
    Llama3JSONToolCallParser: '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
    DeepSeekV3ToolCallParser: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
    '```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    PythonicToolCallParser: "[get_weather(city='Paris')]",
    HarmonyToolCallParser: "<|channel|>analysis<|message|>Weather lookup.<|end|><|start|>assistant<|channel|>commentary "
    'to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
    HermesToolCallParser: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    QwenXMLToolCallParser: "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
}


@pytest.mark.parametrize(
    "model, family, parser",
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3_1", Llama3JSONToolCallParser),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama3_1", Llama3JSONToolCallParser),
        ("deepseek-ai/DeepSeek-V3", "deepseek_v3", DeepSeekV3ToolCallParser),
        ("google/gemma-3-12b-it", "gemma3", PythonicToolCallParser),
        # gptoss ships no chat template: the name alone picks the dialect.
        ("openai/gpt-oss-20b", "gptoss", HarmonyToolCallParser),
        ("Qwen/Qwen3-8B", "qwen3", HermesToolCallParser),
        # A Qwen3.5-named model shipping a Qwen3 template gets the template's parser.
        ("Qwen/Qwen3.5-4B", "qwen3", HermesToolCallParser),
    ],
)
def test_resolve_binds_each_family_its_own_dialect(model, family, parser):
    fmt = PolicyFormat.resolve(model, tokenizer=tokenizer(family))
    assert type(fmt.parser) is parser
    turn = fmt.parser.parse(GenerateResult(text=REPLIES[parser]))
    assert [(c.name, json.loads(c.arguments), c.malformed) for c in turn.tool_calls] == [("get_weather", {"city": "Paris"}, False)]
    if parser is HarmonyToolCallParser:
        assert turn.reasoning == "Weather lookup."


@pytest.mark.parametrize(
    "family, profile", [("llama3_1", "llama3_json"), ("deepseek_v3", "deepseek_v3"), ("gemma3", "pythonic"), ("qwen3", "hermes")]
)
def test_resolve_reads_the_family_from_the_chat_template(family, profile):
    tok = tokenizer(family)
    assert model_profile("/models/my-finetune", tok.chat_template)[1] == profile
    assert PolicyFormat.resolve("/models/my-finetune", tokenizer=tok).name == f"/models/my-finetune:{profile}"


def test_the_template_beats_the_name_and_the_disagreement_is_logged_once(tmp_path, caplog):
    """A local folder named after one family holding another family's template gets the
    template's parser (issue #46); an explicit profile still wins."""
    source = TESTDATA / "qwen3"
    tokenizer("qwen3")  # skips (or fails under CI) without the real files
    folder = tmp_path / "llama3-distill-of-qwen"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((source / name).read_bytes())
    with caplog.at_level("WARNING", logger="focus_go"):
        fmt = PolicyFormat.resolve(str(folder))
        again = PolicyFormat.resolve(str(folder))
    assert type(fmt.parser) is HermesToolCallParser and type(again.parser) is HermesToolCallParser
    logged = [r.getMessage() for r in caplog.records if "llama3-distill-of-qwen" in r.getMessage()]
    assert len(logged) == 1, logged
    assert "Llama 3" in logged[0] and "Qwen2.5 / Qwen3 / Hermes" in logged[0] and "hermes" in logged[0]
    assert model_profile(str(folder), fmt.codec.tokenizer.chat_template) == ("Qwen2.5 / Qwen3 / Hermes", "hermes")
    explicit = PolicyFormat.resolve(str(folder), tokenizer=fmt.codec.tokenizer, profile="llama3_json")
    assert type(explicit.parser) is Llama3JSONToolCallParser


def test_unknown_family_with_tools_is_an_error_naming_the_profiles():
    tok = tokenizer("qwen3")
    tok.chat_template = "{% for m in messages %}[INST]{{ m.content }}[/INST]{% endfor %}"
    with pytest.raises(ConfigError) as err:
        PolicyFormat.resolve("mistralai/Mistral-7B-Instruct-v0.3", tokenizer=tok)
    message = str(err.value)
    assert "cannot tell the tool-call dialect" in message and "Mistral-7B" in message
    for profile in ("qwen_xml", "hermes", "llama3_json", "deepseek_v3", "pythonic", "harmony", "native", "text", "token_chunk"):
        assert profile in message
    # Without tools any model works with an explicit profile.
    for profile in ("text", "token_chunk"):
        assert PolicyFormat.resolve("mistralai/Mistral-7B-Instruct-v0.3", tokenizer=tok, profile=profile).parser.action
    assert set(PROFILES) >= {"qwen_xml", "hermes", "native", "text", "token_chunk", "llama3_json", "deepseek_v3", "pythonic", "harmony"}


def test_malformed_flag_and_reason_cross_the_abi():
    turn = HermesToolCallParser().parse(GenerateResult(text='<tool_call>\n{"name": "do_thing", "arguments": "hello"}\n</tool_call>'))
    (call,) = turn.tool_calls
    assert call.name == "do_thing" and call.malformed
    assert call.error == "arguments string is not a JSON object"
    ok = HermesToolCallParser().parse(GenerateResult(text='<tool_call>{"name": "f", "arguments": {}}</tool_call>')).tool_calls[0]
    assert ok.error == "" and not ok.malformed


def test_tool_env_answers_a_malformed_call_and_never_runs_it():
    ran = []

    def do_thing(arguments: str = "", name: str = "") -> str:
        """Records its arguments."""
        ran.append((arguments, name))
        return "done"

    env = ToolEnv({"do_thing": do_thing})
    # The issue's case: the raw block is a JSON object whose keys fit the signature.
    turn = HermesToolCallParser().parse(GenerateResult(text='<tool_call>\n{"name": "do_thing", "arguments": "hello"}\n</tool_call>'))
    step = asyncio.run(env.step(turn))
    assert ran == [], "a malformed call must not run the tool"
    (message,) = step.observation
    assert message["role"] == "tool" and message["name"] == "do_thing"
    assert message["content"] == "Error: could not parse the tool call to do_thing: arguments string is not a JSON object"
    assert step.info["tool_calls"] == [
        {"name": "do_thing", "error": "could not parse the tool call to do_thing: arguments string is not a JSON object", "malformed": True}
    ]
    assert not step.done and step.reward == 0.0
    # A well-formed sibling still runs.
    mixed = ToolTurn(text="", tool_calls=(ToolCall("do_thing", '{"arguments": "x"}'), ToolCall("", "{oops", error="tool call is not a JSON object")))
    step = asyncio.run(env.step(mixed))
    assert ran == [("x", "")]
    assert [m["content"] for m in step.observation] == ["done", "Error: could not parse the tool call: tool call is not a JSON object"]
    assert [c["malformed"] for c in step.info["tool_calls"]] == [False, True]


def test_optional_str_value_stays_a_string():
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {
        "code": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "alt": {"type": ["string", "null"]}, "n": {"type": "integer"}}}}}]
    text = "<tool_call>\n<function=lookup>\n<parameter=code>\n42\n</parameter>\n<parameter=alt>\nNone\n</parameter>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>"
    call = QwenXMLToolCallParser(tools).parse(GenerateResult(text=text)).tool_calls[0]
    assert json.loads(call.arguments) == {"code": "42", "alt": None, "n": 3}


def test_calls_rendered_by_the_real_templates_parse_back():
    """An assistant turn with parallel tool calls, as the family's own chat template
    renders it, parses back to the same calls (DeepSeek V3 and Qwen3 ship tool sections).

    DeepSeek's template writes tool calls only for `content is none`; transformers 5 drops
    null-valued keys, so there (and in focus-go, which renders as transformers does) that
    branch raises. Servers such as vLLM pass the null through, so the DeepSeek turn is
    rendered here with plain Jinja2 as they do."""
    import jinja2.sandbox

    calls = [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Tokyo", "unit": "celsius"}'}},
        {"id": "c2", "type": "function", "function": {"name": "search_hotels", "arguments": '{"location": "Tokyo", "note": "a </tool_call> b"}'}},
    ]

    def server_render(family, messages):
        tok = tokenizer(family)
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        return env.from_string(tok.chat_template).render(messages=messages, bos_token="", add_generation_prompt=False)

    def transformers_render(family, messages):
        return tokenizer(family).apply_chat_template(messages, tokenize=False)

    cases = [
        ("deepseek_v3", None, server_render, DeepSeekV3ToolCallParser(), "<｜Assistant｜>", "<｜end▁of▁sentence｜>"),
        ("qwen3", "", transformers_render, HermesToolCallParser(), "<|im_start|>assistant\n", "<|im_end|>"),
    ]
    for family, content, render, parser, start, end in cases:
        messages = [{"role": "user", "content": "Weather and hotels in Tokyo?"}, {"role": "assistant", "content": content, "tool_calls": calls}]
        text = render(family, messages)
        reply = text.split(start, 1)[1].split(end, 1)[0]
        turn = parser.parse(GenerateResult(text=reply))
        got = [(c.name, json.loads(c.arguments), c.error) for c in turn.tool_calls]
        assert got == [(c["function"]["name"], json.loads(c["function"]["arguments"]), "") for c in calls], (family, reply)
        assert turn.text == ""
