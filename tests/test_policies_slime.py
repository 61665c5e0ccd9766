"""SlimePolicy through a Slime-style async post function (the shape of
slime.utils.http_utils.post: JSON in, decoded JSON out, its own retries) against the
simulated server's SGLang /generate over loopback."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest

from focus_go.errors import BackendError, ConfigError
from focus_go.sim import SimServer


def make_post(calls):
    """A stand-in for slime.utils.http_utils.post: retries failures (1 s apart in Slime,
    here 10 ms), returns response.json(), or the text when the body is not JSON."""

    async def post(url, payload, max_retries=60, headers=None):
        calls.append({"url": url, "payload": payload, "headers": headers})

        def send():
            request = urllib.request.Request(
                url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json", **(headers or {})}
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read().decode()
            try:
                return json.loads(text)
            except ValueError:
                return text

        for attempt in range(max_retries):
            try:
                return await asyncio.to_thread(send)
            except urllib.error.URLError:
                if attempt + 1 >= max_retries:
                    raise
                await asyncio.sleep(0.01)

    return post


@pytest.fixture(scope="module")
def server():
    with SimServer(seed=6) as s:
        yield s


@pytest.fixture
def env(server):
    from focus.backends import HFTokenizer, PolicyFormat

    tokenizer = HFTokenizer(server.model)
    policy_format = PolicyFormat.resolve(server.model, tokenizer=tokenizer, profile="token_chunk")
    prompt = policy_format.prepare([{"role": "user", "content": server.problems()[2].prompt}])
    yield {"format": policy_format, "prompt": prompt, "model_name": server.model, "url": server.url + "/generate"}
    tokenizer.close()


def test_spec_example_and_exact_tokens(env, server):
    from focus.backends import SamplingParams, SGLangPolicy

    calls = []
    post, url, model_name, policy_format = make_post(calls), env["url"], env["model_name"], env["format"]
    from focus.backends import SlimePolicy

    policy = SlimePolicy(
        post, url, model=model_name, format=policy_format
    )
    from focus.generation.slime import PostFn

    assert callable(post) and PostFn is not None
    params = SamplingParams(temperature=1.0, max_tokens=48, seed=9, stop=["</answer>"])
    result = asyncio.run(policy.agenerate_tokens(env["prompt"].tokens, params))
    direct = SGLangPolicy(model=model_name, base_url=server.url, format=policy_format)
    try:
        expected = direct.generate_tokens(env["prompt"].tokens, params)
    finally:
        direct.close()
    assert result.tokens == expected.tokens and result.logprobs == expected.logprobs
    assert result.prefix_tokens == env["prompt"].tokens and result.exact_generation and policy.trainable
    assert len(result.tokens) <= 48 and result.stop_reason in ("stop", "length")

    payload = calls[-1]["payload"]
    assert calls[-1]["url"] == url and calls[-1]["headers"] is None
    assert payload["input_ids"] == list(env["prompt"].tokens) and payload["return_logprob"] is True
    sp = payload["sampling_params"]
    assert (sp["max_new_tokens"], sp["temperature"], sp["top_p"], sp["top_k"], sp["stop"], sp["no_stop_trim"]) == (48, 1.0, 1.0, -1, ["</answer>"], True)
    assert sp["sampling_seed"] == 9 and sp["spaces_between_special_tokens"] is False

    short = policy.generate_tokens(env["prompt"].tokens, SamplingParams(max_tokens=3, seed=1))
    assert short.stop_reason == "length" and len(short.tokens) == 3
    policy.close()
    with pytest.raises(ConfigError, match="closed"):
        policy.generate_tokens(env["prompt"].tokens)


def test_headers_and_retries_belong_to_post(env, server):
    from focus.backends import SamplingParams, SlimePolicy

    calls = []
    server.set_faults([{"kind": "http_error", "status": 503, "count": 2, "endpoints": ["/generate"]}])
    try:
        policy = SlimePolicy(make_post(calls), env["url"], model=env["model_name"], format=env["format"], headers={"X-SMG-Routing-Key": "tree-1"})
        result = policy.generate_tokens(env["prompt"].tokens, SamplingParams(max_tokens=8, seed=2))
    finally:
        server.set_faults([])
    assert len(result.tokens) <= 8 and calls[-1]["headers"] == {"X-SMG-Routing-Key": "tree-1"}


@pytest.mark.parametrize(
    "fault, error",
    [
        ({"kind": "extra_tokens", "tokens": 2, "count": 1}, "sglang: response has 6 tokens, max_tokens was 4"),
        ({"kind": "missing_logprobs", "count": 1}, "no meta_info.output_token_logprobs"),
    ],
    ids=["over max tokens", "no logprobs"],
)
def test_bad_replies_are_backend_errors(env, server, fault, error):
    from focus.backends import SamplingParams, SlimePolicy

    server.set_faults([fault])
    try:
        policy = SlimePolicy(make_post([]), env["url"], model=env["model_name"], format=env["format"])
        with pytest.raises(BackendError) as info:
            policy.generate_tokens(env["prompt"].tokens, SamplingParams(max_tokens=4, seed=2))
    finally:
        server.set_faults([])
    assert error in str(info.value)


def test_post_returning_text_or_junk(env):
    from focus.backends import SlimePolicy

    async def text_post(url, payload):
        return "Internal Server Error"

    async def junk_post(url, payload):
        return 42

    for post, error in ((text_post, "not a JSON object"), (junk_post, "post returned a int")):
        policy = SlimePolicy(post, env["url"], model=env["model_name"], format=env["format"])
        with pytest.raises(BackendError, match=error):
            policy.generate_tokens(env["prompt"].tokens)
    with pytest.raises(ConfigError, match="not an http"):
        SlimePolicy(text_post, "router:3000/generate", model=env["model_name"], format=env["format"])
    with pytest.raises(ConfigError, match="prompt has no tokens"):
        SlimePolicy(text_post, env["url"], model=env["model_name"], format=env["format"]).generate_tokens([])
