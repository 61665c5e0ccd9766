"""The simulator's OpenAI-compatible endpoints against the openai SDK's own types, strictly.

The SDK builds its objects without validation (``construct``), so a missing required field
would go unnoticed; here every reply body and every stream chunk is validated with
``Model.model_validate(..., strict=True)`` against the SDK's types (ChatCompletion,
ChatCompletionChunk, Completion, Response), which fails on a missing or mistyped field. The
requests go through the SDK client, as a user's code would send them.
"""

from __future__ import annotations

import json

import openai  # the test extra installs it: a missing SDK fails, never skips
import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response



@pytest.fixture(scope="module")
def client(server):
    c = openai.OpenAI(base_url=server.url + "/v1", api_key="EMPTY", max_retries=0)
    yield c
    c.close()


def _question(server):
    return server.problems()[0].prompt


def _strict(model, body):
    return model.model_validate(body, strict=True)


def test_chat_completion(server, client):
    raw = client.chat.completions.with_raw_response.create(
        model=server.model_name,
        messages=[{"role": "user", "content": _question(server)}],
        max_tokens=24,
        temperature=0,
        logprobs=True,
        top_logprobs=2,
    )
    reply = _strict(ChatCompletion, raw.http_response.json())
    assert reply.object == "chat.completion"
    choice = reply.choices[0]
    assert choice.finish_reason in ("stop", "length")
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.logprobs is not None and choice.logprobs.content
    assert all(1 <= len(t.top_logprobs) <= 2 for t in choice.logprobs.content)
    assert reply.usage is not None and reply.usage.completion_tokens == len(choice.logprobs.content)
    # The SDK's own parse gives the same object.
    assert raw.parse().choices[0].message.content == choice.message.content


def test_completion(server, client):
    raw = client.completions.with_raw_response.create(
        model=server.model_name, prompt=_question(server), max_tokens=16, temperature=0, logprobs=1
    )
    reply = _strict(Completion, raw.http_response.json())
    assert reply.object == "text_completion"
    choice = reply.choices[0]
    assert choice.finish_reason in ("stop", "length")
    assert choice.logprobs is not None and len(choice.logprobs.token_logprobs) == reply.usage.completion_tokens


def test_responses(server, client):
    raw = client.responses.with_raw_response.create(
        model=server.model_name, input=_question(server), max_output_tokens=24, temperature=0
    )
    reply = _strict(Response, raw.http_response.json())
    assert reply.object == "response"
    assert reply.usage is not None
    assert reply.usage.input_tokens_details.cache_write_tokens >= 0
    assert reply.output_text


def _stream_chunks(stream):
    """The data payloads of a raw SSE stream, up to [DONE] (which must come last)."""
    chunks, done = [], False
    for line in stream.http_response.iter_lines():
        if not line:
            continue
        assert line.startswith("data: "), line
        data = line[len("data: ") :]
        assert not done, "nothing may follow [DONE]"
        if data == "[DONE]":
            done = True
            continue
        chunks.append(json.loads(data))
    assert done, "the stream ends with data: [DONE]"
    return chunks


def test_chat_completion_stream(server, client):
    kwargs = dict(
        model=server.model_name,
        messages=[{"role": "user", "content": _question(server)}],
        max_tokens=24,
        temperature=0,
        logprobs=True,
    )
    whole = client.chat.completions.create(**kwargs)
    with client.chat.completions.with_streaming_response.create(
        stream=True, stream_options={"include_usage": True}, **kwargs
    ) as raw:
        chunks = [_strict(ChatCompletionChunk, c) for c in _stream_chunks(raw)]
    assert chunks and all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]
    usage = [c.usage for c in chunks if c.usage is not None]
    assert len(usage) == 1 and chunks[-1].usage is not None and chunks[-1].choices == []
    assert usage[0].completion_tokens == whole.usage.completion_tokens
    lps = [t.logprob for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content]
    assert lps == [t.logprob for t in whole.choices[0].logprobs.content]
    # The SDK's stream reader accepts it too.
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **kwargs) if c.choices)
    assert streamed == text


def _filled_finish(chunk):
    """The SDK's CompletionChoice requires finish_reason, which a completions stream (the
    OpenAI API's and vLLM's, CompletionResponseStreamChoice.finish_reason: str | None) leaves
    null before a choice's last chunk; such a chunk is validated with that one field filled,
    after checking it is null and not missing."""
    for choice in chunk["choices"]:
        assert "finish_reason" in choice
        if choice["finish_reason"] is None:
            choice = dict(choice, finish_reason="length")
            chunk = dict(chunk, choices=[choice if c["index"] == choice["index"] else c for c in chunk["choices"]])
    return chunk


def test_completion_stream(server, client):
    kwargs = dict(model=server.model_name, prompt=_question(server), max_tokens=16, temperature=0, logprobs=0)
    whole = client.completions.create(**kwargs)
    with client.completions.with_streaming_response.create(stream=True, stream_options={"include_usage": True}, **kwargs) as raw:
        events = _stream_chunks(raw)
    chunks = [_strict(Completion, _filled_finish(c)) for c in events]
    assert chunks and all(c.object == "text_completion" for c in chunks)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole.choices[0].text
    finishes = [e["choices"][0]["finish_reason"] for e in events if e["choices"] and e["choices"][0]["finish_reason"]]
    assert finishes == [whole.choices[0].finish_reason]
    lps = [lp for c in chunks if c.choices and c.choices[0].logprobs for lp in c.choices[0].logprobs.token_logprobs]
    assert lps == whole.choices[0].logprobs.token_logprobs
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    },
}


def test_chat_tool_call_and_its_stream(server, client):
    kwargs = dict(
        model=server.model_name,
        messages=[{"role": "user", "content": _question(server)}],
        tools=[CALCULATOR],
        max_tokens=64,
        temperature=0,
    )
    raw = client.chat.completions.with_raw_response.create(**kwargs)
    reply = _strict(ChatCompletion, raw.http_response.json())
    call = reply.choices[0].message.tool_calls[0]
    assert reply.choices[0].finish_reason == "tool_calls"
    assert call.type == "function" and call.function.name == "calculator"
    assert "expression" in json.loads(call.function.arguments)
    with client.chat.completions.with_streaming_response.create(stream=True, **kwargs) as stream:
        chunks = [_strict(ChatCompletionChunk, c) for c in _stream_chunks(stream)]
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert len(calls) == 1
    assert calls[0].id and calls[0].type == "function"  # ids are per request
    assert (calls[0].function.name, calls[0].function.arguments) == (call.function.name, call.function.arguments)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_responses_function_call(server, client):
    tool = {"type": "function", "name": "calculator", "parameters": CALCULATOR["function"]["parameters"]}
    raw = client.responses.with_raw_response.create(
        model=server.model_name, input=[{"role": "user", "content": _question(server)}], tools=[tool], temperature=0
    )
    reply = _strict(Response, raw.http_response.json())
    calls = [item for item in reply.output if item.type == "function_call"]
    assert calls and calls[0].name == "calculator" and "expression" in json.loads(calls[0].arguments)
