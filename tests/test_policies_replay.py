"""ReplayPolicy: recorded GenerateResults served in place of a model, so a collection
re-runs offline; exact and inexact recordings mixed."""

from __future__ import annotations

import asyncio
import json

import pytest

from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
from focus_go.errors import ConfigError
from focus_go.sim import SimServer


@pytest.fixture(scope="module")
def server():
    with SimServer(seed=8) as s:
        yield s


@pytest.fixture
def token_policy(server):
    from focus.backends import SamplingParams, SGLangPolicy

    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SamplingParams(temperature=1.0))
    yield p
    p.close()


def nodes(state):
    return json.loads(state.to_json())["nodes"]


def test_collection_reruns_offline(server, token_policy):
    from focus.backends import ReplayPolicy
    from focus.generation.replay import record_calls

    problem = server.problems()[4]
    recording, recorded = record_calls(token_policy)

    def collect(policy):
        agent = Agent(policy=policy, env=MathEnv(problem.label, token_policy.decode), context=Segments(32))
        return asyncio.run(Collector(agent, critic=Critic.constant(0.5), search=Selective(10, 4, seed=5)).collect(problem))

    live = collect(recording)
    served = sum(len(v) for v in recorded.values())
    before = server.stats()["requests"].get("/generate", 0)
    replay = ReplayPolicy(dict(recorded), format=token_policy.format, default_params=token_policy.default_params)
    assert replay.trainable
    offline = collect(replay)
    assert server.stats()["requests"].get("/generate", 0) == before, "the re-run made no request"
    assert replay.served == served and replay.remaining == 0
    assert nodes(offline) == nodes(live)


def test_list_mixes_exact_and_inexact(server, token_policy):
    from focus.backends import GenerateResult, NativeToolCall, OpenAIChatPolicy, PreparedPrompt, ReplayPolicy, SamplingParams

    prompt = token_policy.prepare([{"role": "user", "content": server.problems()[0].prompt}])
    exact = token_policy.generate_tokens(prompt.tokens, SamplingParams(max_tokens=8, seed=1))
    with OpenAIChatPolicy(model=server.model_name, base_url=server.url + "/v1") as api:
        inexact = api.generate(api.prepare([{"role": "user", "content": "hi"}]), SamplingParams(max_tokens=8))
    assert exact.exact_generation and not inexact.exact_generation

    replay = ReplayPolicy([exact, inexact], format=token_policy.format)
    assert not replay.trainable, "one recording is inexact"
    first = replay.generate_tokens(prompt.tokens)
    first.logprobs.append(0.0)
    assert first.tokens == exact.tokens and replay.is_exact(first) and first is not exact
    assert len(exact.logprobs) == len(exact.tokens), "recordings stay intact"
    api_prompt = PreparedPrompt(tokens=inexact.prefix_tokens, format=replay.format, _messages=(), _tools=())
    second = asyncio.run(replay.agenerate(api_prompt))
    assert second.text == inexact.text and not replay.is_exact(second)
    with pytest.raises(ConfigError, match="no recording left for prefix .* all 2 recorded responses were served"):
        replay.generate_tokens(prompt.tokens)

    tool_result = GenerateResult(text="", exact_generation=False, native_tool_calls=(NativeToolCall("f", "{}", "c1"),))
    diverged = ReplayPolicy([GenerateResult(tokens=(1,), prefix_tokens=(5, 6), logprobs=[-0.1]), tool_result], format=token_policy.format)
    with pytest.raises(ConfigError, match=r"request 0 has prefix \[5, 7\] but the recording continues \[5, 6\]"):
        diverged.generate_tokens([5, 7])


def test_mapping_by_prefix(token_policy):
    from focus.backends import GenerateResult, ReplayPolicy, SamplingParams

    a1 = GenerateResult(tokens=(10,), logprobs=[-0.5], stop_reason="length")
    a2 = GenerateResult(tokens=(11,), logprobs=[-0.25])
    b = GenerateResult(tokens=(12,), logprobs=[-1.0])
    replay = ReplayPolicy({(1, 2): [a1, a2], (1, 3): b}, format=token_policy.format)
    assert replay.remaining == 3
    assert replay.generate_tokens([1, 2]).tokens == (10,)
    assert replay.generate_tokens([1, 3]).tokens == (12,)
    assert replay.generate_tokens((1, 2)).tokens == (11,)
    with pytest.raises(ConfigError, match=r"the recordings for prefix \[1, 2\] are used up"):
        replay.generate_tokens([1, 2])
    long = list(range(20))
    with pytest.raises(ConfigError, match=r"no recording for prefix \[0, 1, 2, 3, \.\.\. 12 more \.\.\., 16, 17, 18, 19\] \(20 tokens\)"):
        replay.generate_tokens(long)
    with pytest.raises(ConfigError, match="expected GenerateResult"):
        ReplayPolicy({(1,): ["not a result"]}, format=token_policy.format)
    seeded = ReplayPolicy({((1, 2), 7): a2, (1, 2): a1}, format=token_policy.format)
    assert seeded.generate_tokens([1, 2], SamplingParams(seed=7)).tokens == (11,)
    assert seeded.generate_tokens([1, 2], SamplingParams(seed=8)).tokens == (10,)
    with pytest.raises(ConfigError, match="neither prefix token ids nor"):
        ReplayPolicy({"ab": a1}, format=token_policy.format)
    with pytest.raises(ConfigError, match="expected a list of GenerateResult"):
        ReplayPolicy(42, format=token_policy.format)
    replay.close()
    with pytest.raises(ConfigError, match="closed"):
        replay.generate_tokens([1, 3])
