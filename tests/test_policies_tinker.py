"""TinkerPolicy with a sampling client double that has the tinker SDK's method shapes and
real result types (tinker.md §9), producing real tokens by forwarding to the simulated
server through a Go SGLangPolicy."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect

import pytest

tinker = pytest.importorskip("tinker")
np = pytest.importorskip("numpy")
from tinker.lib.public_interfaces.api_future import AwaitableConcurrentFuture  # noqa: E402

from focus_go.errors import BackendError, ConfigError  # noqa: E402
from focus_go.sim import SimServer  # noqa: E402

_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=4)


class SimSamplingClient:
    """tinker.SamplingClient's sampling surface (0.38): ``sample`` returns an awaitable
    APIFuture of a SampleResponse, ``sample_async`` (deprecated) awaits it."""

    def __init__(self, backend, *, legacy_future=False, drop_logprobs=False, extra_tokens=0):
        self.backend = backend
        self.legacy_future = legacy_future
        self.drop_logprobs = drop_logprobs
        self.extra_tokens = extra_tokens
        self.requests = []

    def sample(
        self,
        prompt,
        num_samples,
        sampling_params,
        include_prompt_logprobs=False,
        topk_prompt_logprobs=0,
        topk_sample_logprobs=0,
        target_prompt_logprobs=None,
        prompt_alt_tokens_k=0,
        prompt_logprobs_last_n=None,
    ):
        self.requests.append((prompt, num_samples, sampling_params, topk_sample_logprobs))
        future = _POOL.submit(self._run, prompt, num_samples, sampling_params, topk_sample_logprobs)
        return future if self.legacy_future else AwaitableConcurrentFuture(future)

    async def sample_async(
        self,
        prompt,
        num_samples,
        sampling_params,
        include_prompt_logprobs=False,
        topk_prompt_logprobs=0,
        topk_sample_logprobs=0,
        target_prompt_logprobs=None,
        prompt_alt_tokens_k=0,
        prompt_logprobs_last_n=None,
    ):
        return await AwaitableConcurrentFuture(_POOL.submit(self._run, prompt, num_samples, sampling_params, topk_sample_logprobs))

    def _run(self, prompt, num_samples, sp, topk):
        from focus.backends import SamplingParams

        params = SamplingParams(
            max_tokens=sp.max_tokens,
            temperature=sp.temperature,
            top_p=sp.top_p,
            top_k=None if sp.top_k == -1 else sp.top_k,
            stop=list(sp.stop) if sp.stop else None,
            seed=sp.seed,
            logprobs=topk or 0,
        )
        sequences = []
        for i in range(num_samples):
            r = self.backend.generate_tokens(prompt.to_ints(), params)
            tokens = list(r.tokens) + [r.tokens[-1]] * self.extra_tokens
            logprobs = list(r.logprobs) + [r.logprobs[-1]] * self.extra_tokens
            top = None
            if topk:
                top = [[(int(t), lp) for t, lp in m.items()] for m in r.top_logprobs]
            sequences.append(
                tinker.SampledSequence(
                    stop_reason=r.stop_reason,
                    sequence_id=f"seq-{i}",
                    tokens_np=np.array(tokens, dtype=np.int32),
                    logprobs_np=None if self.drop_logprobs else np.array(logprobs, dtype=np.float32),
                    _topk_logprobs_list=top,
                )
            )
        return tinker.SampleResponse(sequences=sequences)


class AsyncOnlyClient:
    """A client that has only ``sample_async`` (tinker-cookbook's duck-typed fakes)."""

    def __init__(self, inner):
        self.sample_async = inner.sample_async


@pytest.fixture(scope="module")
def server():
    with SimServer(seed=5) as s:
        yield s


@pytest.fixture
def env(server):
    from focus.backends import HFTokenizer, PolicyFormat, SGLangPolicy

    tokenizer = HFTokenizer(server.model)
    policy_format = PolicyFormat.resolve(server.model, tokenizer=tokenizer, profile="token_chunk")
    backend = SGLangPolicy(model=server.model, base_url=server.url, format=policy_format)
    prompt = policy_format.prepare([{"role": "user", "content": server.problems()[0].prompt}])
    yield {"format": policy_format, "backend": backend, "prompt": prompt, "model_name": server.model}
    backend.close()
    tokenizer.close()


def test_double_has_the_sdk_shapes():
    for name in ("sample", "sample_async"):
        ours = list(inspect.signature(getattr(SimSamplingClient, name)).parameters)
        sdk = list(inspect.signature(getattr(tinker.SamplingClient, name)).parameters)
        assert ours == sdk, name


def test_spec_example_and_exact_tokens(env):
    from focus.backends import SamplingParams

    sampling_client = SimSamplingClient(env["backend"])
    model_name, policy_format = env["model_name"], env["format"]
    from focus.backends import TinkerPolicy

    policy = TinkerPolicy(
        sampling_client, model=model_name, format=policy_format
    )
    with policy:
        params = SamplingParams(temperature=1.0, max_tokens=64, seed=11)
        result = asyncio.run(policy.agenerate_tokens(env["prompt"].tokens, params))
        direct = env["backend"].generate_tokens(env["prompt"].tokens, params)
        assert result.tokens == direct.tokens and result.logprobs == pytest.approx(direct.logprobs, abs=1e-6)
        assert result.exact_generation and policy.is_exact(result) and policy.trainable
        assert result.prefix_tokens == env["prompt"].tokens and result.text == policy.decode(result.tokens)
        assert result.stop_reason in ("stop", "length")
        prompt, num_samples, sp, topk = sampling_client.requests[-1]
        assert isinstance(prompt, tinker.ModelInput) and prompt.to_ints() == list(env["prompt"].tokens)
        assert num_samples == 1 and isinstance(sp, tinker.SamplingParams)
        assert (sp.max_tokens, sp.temperature, sp.top_p, sp.top_k, sp.seed, sp.stop) == (64, 1.0, 1.0, -1, 11, None)
        assert topk == 0

        short = policy.generate_tokens(env["prompt"].tokens, SamplingParams(max_tokens=4, seed=1))
        assert short.stop_reason == "length" and len(short.tokens) == 4
        top = policy.generate_tokens(env["prompt"].tokens, SamplingParams(max_tokens=8, seed=1, logprobs=2))
        assert len(top.top_logprobs) == len(top.tokens) and all(len(m) <= 2 for m in top.top_logprobs)
    with pytest.raises(ConfigError, match="closed"):
        policy.generate_tokens(env["prompt"].tokens)


@pytest.mark.parametrize("kind", ["legacy concurrent future", "sample_async only"])
def test_older_client_shapes(env, kind):
    from focus.backends import SamplingParams, TinkerPolicy

    inner = SimSamplingClient(env["backend"], legacy_future=True)
    client = inner if kind == "legacy concurrent future" else AsyncOnlyClient(SimSamplingClient(env["backend"]))
    with TinkerPolicy(client, model=env["model_name"], format=env["format"]) as policy:
        result = policy.generate_tokens(env["prompt"].tokens, SamplingParams(max_tokens=8, seed=3))
    assert len(result.tokens) <= 8 and len(result.logprobs) == len(result.tokens)


def test_bad_sampler_output_is_a_backend_error(env):
    from focus.backends import SamplingParams, TinkerPolicy

    params = SamplingParams(max_tokens=5, seed=2)
    with TinkerPolicy(SimSamplingClient(env["backend"], extra_tokens=3), model=env["model_name"], format=env["format"]) as policy:
        with pytest.raises(BackendError, match="tinker: response has 8 tokens, max_tokens was 5"):
            policy.generate_tokens(env["prompt"].tokens, params)
    with TinkerPolicy(SimSamplingClient(env["backend"], drop_logprobs=True), model=env["model_name"], format=env["format"]) as policy:
        with pytest.raises(BackendError, match="no logprobs"):
            policy.generate_tokens(env["prompt"].tokens, params)
        with pytest.raises(ConfigError, match="repetition_penalty"):
            policy.generate_tokens(env["prompt"].tokens, SamplingParams(repetition_penalty=1.2))
    with pytest.raises(ConfigError, match="expected a tinker.SamplingClient"):
        TinkerPolicy(object(), model=env["model_name"], format=env["format"])


def test_resolved_format_is_closed_with_the_policy(env, server):
    from focus.backends import SamplingParams, TinkerPolicy

    with TinkerPolicy(SimSamplingClient(env["backend"]), model=server.model, profile="token_chunk") as policy:
        assert policy.generate_tokens(env["prompt"].tokens, SamplingParams(max_tokens=4, seed=1)).tokens
    # conftest fails the test if the policy's own tokenizer handle were left open
