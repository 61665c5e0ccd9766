"""Non-finite logprobs from the servers reach GenerateResult as the values they stand for
(issue #15 item 11): SGLang sends null for -inf and NaN alike (read as nan), vLLM writes -inf
as -9999.0 (read as -inf); nothing becomes 0 or a stand-in number, and nothing fails."""

from __future__ import annotations

import math

import pytest

from focus_go.backends import SamplingParams, SGLangPolicy, VLLMPolicy


def _policies(server):
    return [
        SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk"),
        VLLMPolicy(model=server.model, base_url=server.url + "/v1", api_key="EMPTY", profile="token_chunk"),
    ]


def test_top_alternatives_without_probability(server):
    # top_k=1 leaves every other candidate with probability 0 (-inf) in the processed
    # distribution the logprobs are reported under.
    for policy in _policies(server):
        try:
            prompt = policy.prepare([{"role": "user", "content": server.problems()[0].prompt}])
            r = policy.generate_tokens(prompt.tokens, SamplingParams(max_tokens=12, logprobs=3, top_k=1, temperature=0.7))
            assert all(math.isfinite(lp) and lp <= 0 for lp in r.logprobs)
            values = [v for m in r.top_logprobs for v in m.values()]
            zero = [v for v in values if not math.isfinite(v)]
            assert zero, "some alternatives have probability 0"
            if isinstance(policy, SGLangPolicy):
                assert all(math.isnan(v) for v in zero)  # SGLang's null
            else:
                assert all(v == -math.inf for v in zero)  # vLLM's -9999.0 floor
            assert -9999.0 not in values
            assert math.isfinite(r.entropy)
        finally:
            policy.close()


def test_prompt_logprobs(server):
    for policy in _policies(server):
        try:
            prompt = policy.prepare([{"role": "user", "content": server.problems()[1].prompt}])
            r = policy.generate_tokens(prompt.tokens, SamplingParams(max_tokens=4, prompt_logprobs=0, temperature=0))
            assert len(r.prompt_logprobs) == len(prompt.tokens)
            assert r.prompt_logprobs[0] is None, "the first prompt token has no logprob"
            rest = r.prompt_logprobs[1:]
            assert all(v is None or v <= 0 for v in rest)
            assert -9999.0 not in rest, "vLLM's floor is read back as -inf"
        finally:
            policy.close()
