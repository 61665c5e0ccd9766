"""The generation API's documented examples (docs/reference/backends.md) that the token
backends cover, run as written (`focus` imports), with `model_name`, `policy_format`,
`tokenizer` and `backend` bound to the simulated server's model and a live policy."""

from __future__ import annotations

import asyncio

import pytest

from focus_go.sim import SimServer


@pytest.fixture(scope="module")
def server():
    with SimServer(seed=1) as s:
        yield s


@pytest.fixture
def env(server):
    from focus.backends import HFTokenizer, PolicyFormat

    tokenizer = HFTokenizer(server.model)
    model_name = server.model
    policy_format = PolicyFormat.resolve(model_name, tokenizer=tokenizer, profile="token_chunk")
    yield {"server": server, "tokenizer": tokenizer, "model_name": model_name, "policy_format": policy_format}
    tokenizer.close()


def test_generate_result_and_sampling_params():
    from focus.backends import GenerateResult
    from focus.backends import SamplingParams

    params = SamplingParams(
        temperature=0.7, max_tokens=512, logprobs=0
    )
    assert params.max_tokens == 512 and params.logprobs == 0
    assert GenerateResult().stop_reason == "stop"

    from focus.generation.types import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, DEFAULT_TOP_P

    assert (DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, DEFAULT_TOP_P) == (512, 0.7, 1.0)
    assert SamplingParams() == SamplingParams(temperature=DEFAULT_TEMPERATURE, max_tokens=DEFAULT_MAX_TOKENS, top_p=DEFAULT_TOP_P)


def test_parsers_examples():
    from focus.backends import HermesToolCallParser

    parser = HermesToolCallParser()
    from focus.backends import NativeToolCallParser

    parser = NativeToolCallParser()
    from focus.backends import QwenXMLToolCallParser

    parser = QwenXMLToolCallParser()
    from focus.backends import TextActionParser
    from focus.backends import GenerateResult

    parser = TextActionParser()
    assert parser.parse(GenerateResult(text=" 4 ")) == "4"
    from focus.backends import TokenChunkParser

    parser = TokenChunkParser()
    from focus.backends import TokenChunk

    chunk = TokenChunk(tokens=(10, 20), finished=False)
    assert chunk.tokens == (10, 20)
    from focus.backends import TokenId, ToolTurn

    assert TokenId is int and ToolTurn("x").tool_calls == ()
    from focus.extend import ActionKind
    from focus.generation import NativeToolCall
    from focus.generation.parsing import ActionParser

    class IntegerAction(ActionParser[int]):
        def parse(self, result):
            return int(result.text.strip())

    parser = IntegerAction()
    assert parser.parse(GenerateResult(text="7")) == 7
    from focus.generation.parsing import ToolCall
    from focus.generation.parsing.base import TOOL_CALL
    from focus.generation.parsing.base import tool_turn

    assert NativeToolCall("f", "{}").call_id == "" and ToolCall("f", "{}").name == "f"
    assert TOOL_CALL.pattern == "<tool_call>(.*?)</tool_call>"
    assert callable(tool_turn) and ActionKind.__args__ == ("text", "tool", "tokens")


def test_policy_format_and_prepared_prompt(env):
    tokenizer = env["tokenizer"]
    from focus.backends import PolicyFormat

    policy_format = PolicyFormat.resolve(
        "Qwen/Qwen3.5-4B", tokenizer=tokenizer, profile="token_chunk"
    )
    from focus.backends import PreparedPrompt

    prompt = policy_format.prepare([{"role": "user", "content": "hi"}])
    assert isinstance(prompt, PreparedPrompt) and prompt.tokens


def test_policy_with_completion(env):
    policy_format = env["policy_format"]
    server = env["server"]
    from focus.backends import SGLangPolicy

    backend = SGLangPolicy(model=env["model_name"], format=policy_format, base_url=server.url)

    # generation.txt, Completion
    from focus.generation.policy import Completion

    async def complete(tokens, params):
        return await backend.agenerate_tokens(tokens, params)

    completion: Completion = complete

    # generation.txt, Policy
    from focus.backends import Policy

    policy = Policy(format=policy_format, complete=complete)
    prompt = policy.prepare([{"role": "user", "content": server.problems()[0].prompt}])
    result = asyncio.run(policy.agenerate(prompt))
    assert result.tokens and len(result.logprobs) == len(result.tokens)
    assert result.prefix_tokens == prompt.tokens
    assert policy.is_exact(result) and policy.trainable
    assert policy.parse(result).tokens == result.tokens
    assert "Solve" in policy.decode(prompt.tokens)
    backend.close()


def test_sglang_and_vllm_policy_examples(env):
    model_name, policy_format, server = env["model_name"], env["policy_format"], env["server"]
    from focus.backends import SGLangPolicy

    policy = SGLangPolicy(
        model=model_name,
        format=policy_format,
        base_url=server.url,  # the example's "http://localhost:30000"
    )
    policy.startup_check()
    from focus.backends import SamplingParams, VLLMPolicy

    vllm = VLLMPolicy(
        model=model_name,
        format=policy_format,
        base_url=server.url + "/v1",  # the example's "http://localhost:8000/v1"
        api_key="EMPTY",
        default_params=SamplingParams(max_tokens=512, logprobs=0),
    )
    vllm.startup_check()
    prompt = vllm.prepare([{"role": "user", "content": server.problems()[1].prompt}])
    a = vllm.generate(prompt)
    b = asyncio.run(policy.agenerate(prompt, SamplingParams(max_tokens=512, logprobs=0, seed=5)))
    assert a.stop_reason == b.stop_reason == "stop"
    assert a.tokens[-1] == b.tokens[-1] == server.eos_token_id
    policy.close()
    vllm.close()
