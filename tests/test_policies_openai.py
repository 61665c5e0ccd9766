"""OpenAIChatPolicy and OpenAIResponsesPolicy against the simulated server's OpenAI
endpoints over loopback: tool-call round trips through a ToolEnv, context validation,
credentials, 401 and 429, sampling, and the native estimated-token codec."""

from __future__ import annotations

import ast
import asyncio
import json
import operator

import pytest

from focus_go.errors import BackendError, ConfigError
from focus_go.sim import SimServer

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv, ast.USub: operator.neg}


def _eval(node):
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand))
    raise ValueError("unsupported expression")


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: The arithmetic expression to evaluate.
    """
    value = _eval(ast.parse(expression, mode="eval"))
    return str(int(value)) if float(value).is_integer() else str(value)


@pytest.fixture(scope="module")
def server():
    with SimServer(seed=2) as s:
        yield s


@pytest.fixture
def base_url(server):
    return server.url + "/v1"


@pytest.fixture
def api_env(server, monkeypatch):
    """The environment a deployment would set: the endpoint, and no key (loopback)."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield


def _policies():
    from focus.backends import OpenAIChatPolicy, OpenAIResponsesPolicy

    return [OpenAIChatPolicy, OpenAIResponsesPolicy]


def test_spec_examples_run_as_written(server, api_env):
    model_name = server.model_name
    from focus.backends import OpenAIChatPolicy

    policy = OpenAIChatPolicy(model=model_name)
    policy.close()
    from focus.backends import OpenAIResponsesPolicy

    policy = OpenAIResponsesPolicy(model=model_name)
    policy.close()
    from focus.generation._openai_shared import NativePolicy

    assert issubclass(OpenAIChatPolicy, NativePolicy) and issubclass(OpenAIResponsesPolicy, NativePolicy)
    from focus.generation import NativeToolCall

    assert NativeToolCall("f", "{}").call_id == ""


@pytest.mark.parametrize("cls_index", [0, 1], ids=["chat", "responses"])
def test_tool_env_round_trip(server, base_url, cls_index):
    from focus import ToolEnv
    from focus.backends import NativeToolCall, SamplingParams, ToolTurn

    cls = _policies()[cls_index]
    problem = server.problems()[0]
    env = ToolEnv({"calculator": calculator}, answer=lambda text: 1.0 if problem.label in text else 0.0)
    params = SamplingParams(temperature=0.0, max_tokens=400, logprobs=0)

    with cls(model=server.model_name, base_url=base_url) as policy:
        assert not policy.trainable
        messages = [{"role": "user", "content": problem.prompt}]
        tools = env.tool_schemas()
        first = asyncio.run(policy.agenerate(policy.prepare(messages, tools), params))
        assert first.stop_reason == "stop" and first.exact_generation is False and not policy.is_exact(first)
        assert len(first.native_tool_calls) == 1
        call = first.native_tool_calls[0]
        assert isinstance(call, NativeToolCall) and call.name == "calculator" and call.call_id
        assert json.loads(call.arguments)["expression"]
        assert first.native_output, "the raw reply is kept"
        assert policy.decode(first.tokens) == json.dumps({"arguments": call.arguments, "name": "calculator"}, separators=(",", ":"))

        turn = policy.parse(first)
        assert isinstance(turn, ToolTurn) and turn.tool_calls[0].call_id == call.call_id
        policy.record_reply(first, messages)
        step = asyncio.run(env.step(turn))
        assert not step.done and step.info["tool_calls"][0]["error"] is None
        messages.extend(step.observation)
        assert messages[-1]["tool_call_id"] == call.call_id
        policy.validate_context(messages)

        final = policy.generate(policy.prepare(messages, tools), params)  # the blocking twin
        assert final.native_tool_calls == () and problem.label in final.text
        assert final.stop_reason == "stop" and final.logprobs, "logprobs were asked for and offered"
        assert final.entropy == pytest.approx(-sum(final.logprobs) / len(final.logprobs))
        done = asyncio.run(env.step(policy.parse(final)))
        assert done.done and done.reward == 1.0


@pytest.mark.parametrize(
    "messages, error",
    [
        ([{"role": "user", "content": "u"}, {"role": "tool", "tool_call_id": "c9", "content": "x"}], "message 1 is a tool reply to \"c9\""),
        (
            [
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "user", "content": "hurry"},
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
            ],
            "message 2 (user) comes before the tool call(s) \"c1\" of message 1 are answered",
        ),
        (
            [
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
                {"role": "tool", "tool_call_id": "c1", "content": "y"},
            ],
            "message 3 answers tool call \"c1\" of message 1 a second time",
        ),
        ([{"role": "user", "content": "u"}, {"role": "wizard", "content": "x"}], "message 1 has role 'wizard'"),
        ([{"role": "user", "content": 3}], "message 0 content is a int"),
    ],
    ids=["orphan reply", "reply after another turn", "second reply", "unknown role", "bad content"],
)
def test_validate_context_errors(base_url, server, messages, error):
    from focus.backends import OpenAIChatPolicy

    with OpenAIChatPolicy(model=server.model_name, base_url=base_url) as policy:
        with pytest.raises(ConfigError, match="message") as info:
            policy.validate_context(messages)
        assert error in str(info.value)


def test_out_of_order_conversation_fails_before_any_request(server, base_url):
    from focus.backends import OpenAIResponsesPolicy

    messages = [
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    ]
    before = server.stats()["requests"].get("/v1/responses", 0)
    with OpenAIResponsesPolicy(model=server.model_name, base_url=base_url) as policy:
        policy.validate_context(messages)  # the tool has not answered yet: a valid state
        with pytest.raises(ConfigError, match="unanswered"):
            policy.generate(policy.prepare(messages))
        messages.append({"role": "user", "content": "and?"})
        with pytest.raises(ConfigError, match="message 2 \\(user\\) comes before"):
            asyncio.run(policy.agenerate(policy.prepare(messages)))
    assert server.stats()["requests"].get("/v1/responses", 0) == before


def test_401_is_a_clear_auth_error_without_the_key(server, base_url):
    from focus.backends import OpenAIChatPolicy

    server.set_faults([{"kind": "http_error", "status": 401, "count": 1, "endpoints": ["/v1/chat/completions"]}])
    try:
        with OpenAIChatPolicy(model=server.model_name, base_url=base_url, api_key="sk-test-do-not-print") as policy:
            with pytest.raises(ConfigError) as info:
                policy.generate(policy.prepare([{"role": "user", "content": "hi"}]))
    finally:
        server.set_faults([])
    message = str(info.value)
    assert "authentication failed (HTTP 401)" in message and "OPENAI_API_KEY" in message
    assert "sk-test-do-not-print" not in message and "retr" not in message


@pytest.mark.parametrize("cls_index", [0, 1], ids=["chat", "responses"])
def test_429_is_retried(server, base_url, cls_index):
    from focus.backends import SamplingParams

    cls = _policies()[cls_index]
    faults = server.stats()["faults"]
    server.set_faults([{"kind": "http_error", "status": 429, "count": 1}])
    try:
        with cls(model=server.model_name, base_url=base_url) as policy:
            result = policy.generate(policy.prepare([{"role": "user", "content": "hi"}]), SamplingParams(max_tokens=16))
    finally:
        server.set_faults([])
    assert result.text and server.stats()["faults"] == faults + 1


def test_persistent_5xx_is_a_backend_error(server, base_url):
    from focus.backends import OpenAIChatPolicy

    server.set_faults([{"kind": "http_error", "status": 503, "retry_after": 120}])
    try:
        with OpenAIChatPolicy(model=server.model_name, base_url=base_url) as policy:
            with pytest.raises(BackendError, match="HTTP 503"):
                policy.generate(policy.prepare([{"role": "user", "content": "hi"}]))
    finally:
        server.set_faults([])


def test_credentials(server, monkeypatch):
    from focus.backends import OpenAIChatPolicy, OpenAIResponsesPolicy

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="no API key for https://api.openai.com/v1: pass api_key or set OPENAI_API_KEY"):
        OpenAIChatPolicy(model="gpt-4.1")
    with pytest.raises(ConfigError, match="no API key"):
        OpenAIResponsesPolicy(model="o4-mini", base_url="https://api.openai.com/v1")
    OpenAIChatPolicy(model="gpt-4.1", api_key="sk-explicit").close()  # no request is made
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    OpenAIResponsesPolicy(model="o4-mini").close()
    # a loopback server needs no key at all
    monkeypatch.delenv("OPENAI_API_KEY")
    with OpenAIChatPolicy(model=server.model_name, base_url=server.url + "/v1") as policy:
        assert policy.generate(policy.prepare([{"role": "user", "content": "hi"}])).text


def test_sampling(server, base_url):
    from focus.backends import OpenAIChatPolicy, OpenAIResponsesPolicy, SamplingParams

    prompt_messages = [{"role": "user", "content": server.problems()[1].prompt}]
    short = SamplingParams(temperature=0.0, max_tokens=6)
    with OpenAIChatPolicy(model=server.model_name, base_url=base_url, default_params=short, locked_sampling=True) as locked:
        result = locked.generate(locked.prepare(prompt_messages), SamplingParams(max_tokens=300))
        assert result.stop_reason == "length" and result.logprobs == [] and result.top_logprobs is None
    with OpenAIChatPolicy(model=server.model_name, base_url=base_url, default_params=short, system_prompt="Be brief.") as free:
        result = free.generate(free.prepare(prompt_messages), SamplingParams(temperature=0.0, max_tokens=300, logprobs=2))
        assert result.stop_reason == "stop" and server.problems()[1].label in result.text
        assert result.top_logprobs and len(result.top_logprobs) == len(result.logprobs)
        assert all(len(alts) <= 2 for alts in result.top_logprobs)
        with pytest.raises(ConfigError, match="top_k is not supported"):
            free.generate(free.prepare(prompt_messages), SamplingParams(top_k=5))
    with OpenAIResponsesPolicy(model=server.model_name, base_url=base_url, reasoning_effort="low") as responses:
        result = responses.generate(responses.prepare(prompt_messages), short)
        assert result.stop_reason == "length"
        with pytest.raises(ConfigError, match="stop is not supported"):
            responses.generate(responses.prepare(prompt_messages), SamplingParams(stop=["\n"]))


def test_malformed_tool_call_json_passes_through():
    from focus.backends import NativeToolCallParser, OpenAIChatPolicy, SamplingParams

    with SimServer(seed=4, tool_call_error_rate=1.0) as server:
        with OpenAIChatPolicy(model=server.model_name, base_url=server.url + "/v1") as policy:
            tools = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}]
            result = policy.generate(policy.prepare([{"role": "user", "content": server.problems()[0].prompt}], tools), SamplingParams(temperature=0.0))
    call = result.native_tool_calls[0]
    with pytest.raises(ValueError):
        json.loads(call.arguments)
    turn = NativeToolCallParser().parse(result)
    assert turn.tool_calls[0].arguments == call.arguments and turn.tool_calls[0].name == "calculator"


def test_native_codec_and_lifecycle(server, base_url):
    from focus.backends import OpenAIChatPolicy, PolicyFormat
    from focus.generation._openai_shared import NativeCodec

    policy = OpenAIChatPolicy(model=server.model_name, base_url=base_url)
    assert isinstance(policy.format, PolicyFormat) and policy.format.name.endswith(":native")
    assert isinstance(policy.format.codec, NativeCodec) and policy.format.parser.requires_native_channel
    messages = [{"role": "user", "content": "héllo wörld"}]
    prompt = policy.prepare(messages)
    assert policy.decode(prompt.tokens) == "user: héllo wörld\n"
    assert len(prompt.tokens) == (len("user: héllo wörld\n".encode()) + 3) // 4
    with pytest.raises(ConfigError, match="generates from messages"):
        policy.generate_tokens(prompt.tokens)
    asyncio.run(policy.aclose())
    policy.close()  # twice is fine
    with pytest.raises(ConfigError, match="closed"):
        policy.generate(prompt)
