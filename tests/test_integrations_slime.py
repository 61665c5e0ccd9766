"""The Slime hooks, called the way Slime calls them (see tests/slime_contract): dotted-path
loading through ``focus.integrations.slime``, async generate per sample against the
simulated server as Slime's SGLang router, list returns, reward post-process over a flat
batch, the advantage hook over per-rank chunks of rollout_data, and the loss reducer.

torch is not installed here: the advantage hook and the reducer are exercised with plain
lists; their tensor paths run only where torch is importable (skipped otherwise)."""

from __future__ import annotations

import asyncio
import json
import math
from urllib.parse import urlparse

import pytest

from focus_go import MathEnv
from focus_go.errors import CollectionError, ConfigError
from focus_go.integrations import JsonlDirectory

from slime_contract import Sample, check_fanout, generate_and_rm, load_function, make_args
from collectors import math_collector

# The generate hook Slime loads by dotted path (set per test).
generate_hook = None


@pytest.fixture
def args(server):
    port = urlparse(server.url).port
    return make_args(sglang_router_port=port, hf_checkpoint=server.model, n_samples_per_prompt=2)


def small_collector_for(policy, problem):
    """A CollectorFor with a small search (fast tests)."""
    return math_collector(policy, problem)


def slime_group(server, prompt_index=0, n=2, group_index=7):
    """What Slime's data source makes for one prompt: n deep copies with distinct index."""
    p = server.problems()[prompt_index]
    return [
        Sample(group_index=group_index, index=group_index * 10 + k, prompt=p.prompt, label=p.label, metadata={"src": "t"})
        for k in range(n)
    ]


def critic_lines(directory):
    files = sorted(directory.glob("*.jsonl"))
    return files, [json.loads(line) for f in files for line in f.read_text().splitlines()]


def test_spec_example_make_generate(server, args, tmp_path, monkeypatch):
    # integrations.txt, make_generate and CollectorFor, as written.
    monkeypatch.chdir(tmp_path)
    from focus.integrations import CollectorFor

    from focus import Agent, Collector, Critic, Segments, Selective

    def collector_for(policy, problem):
        agent = Agent(
            policy=policy,
            env=MathEnv(problem.label, policy.decode),
            system_prompt="Solve the problem.",
            context=Segments(256),
        )
        return Collector(
            agent,
            critic=Critic.constant(0.5),
            search=Selective(budget=32, warmup=16),
        )

    from focus.integrations import JsonlDirectory
    from focus.integrations.slime import make_generate

    generate = make_generate(
        collector_for,
        profile="token_chunk",
        critic_sink=JsonlDirectory("critic-targets"),
    )
    try:
        sample = slime_group(server, n=1)[0]
        out = asyncio.run(generate(args, sample, {"temperature": 1.0}))
    finally:
        generate.close()
    assert isinstance(out, list) and len(out) > 1
    check_fanout(out)
    assert all(s.status == Sample.Status.COMPLETED for s in out)
    assert CollectorFor is not None
    files, lines = critic_lines(tmp_path / "critic-targets")
    assert len(files) == 1 and lines
    assert {"context", "target", "lane", "group_index", "node_id", "problem_id"} <= set(lines[0])
    assert all(line["lane"] == "critic" and line["problem_id"] == "g7-i70" for line in lines)


def test_generate_through_dotted_path_per_sample(server, args, tmp_path):
    global generate_hook
    from focus.integrations.slime import make_generate

    sink = JsonlDirectory(tmp_path / "critic")
    generate_hook = make_generate(small_collector_for, profile="token_chunk", critic_sink=sink)
    args.custom_generate_function_path = f"{__name__}.generate_hook"
    group = slime_group(server, n=2)
    for s in group:
        s.rollout_id = s.index  # what the data source leaves as None is filled by index anyway
    try:

        async def run():
            # Slime: one task per sample of the group, each with its own params copy.
            return await asyncio.gather(*(generate_and_rm(args, s, {"temperature": 1.0}.copy()) for s in group))

        results = asyncio.run(run())
    finally:
        generate_hook.close()
    assert len(results) == 2
    problem_ids = set()
    for source, samples in zip(group, results):
        assert isinstance(samples, list) and samples
        check_fanout(samples)
        for s in samples:
            assert s.rollout_id == source.index
            assert s.group_index == source.group_index and s.index == source.index
            assert s.label == source.label and s.prompt == source.prompt
            assert s.metadata["src"] == "t"
            focus = s.metadata["focus"]
            problem_ids.add(focus["problem_id"])
            prompt_len = len(s.tokens) - s.response_length
            # The response starts at the first generated token.
            assert s.loss_mask[0] == 1 and prompt_len > 0
            assert all(lp <= 0.0 for lp in s.rollout_log_probs)
            assert all(lp == 0.0 for lp, m in zip(s.rollout_log_probs, s.loss_mask) if not m)
            assert isinstance(s.reward, float) and math.isfinite(s.reward)
            assert s.response  # decoded text of the response
    # Two samples of one prompt are two trees (distinct problem ids, separate files).
    assert problem_ids == {"g7-i70", "g7-i71"}
    files, lines = critic_lines(tmp_path / "critic")
    assert len(files) == 2 and {line["problem_id"] for line in lines} == problem_ids

    # Downstream hooks over the flat batch, loaded by dotted path like Slime does.
    flat = [s for samples in results for s in samples]
    post = load_function("focus.integrations.slime.preserve_advantages")
    raw, rewards = post(args, flat)
    assert raw == rewards == [s.reward for s in flat]
    args.advantage_estimator = "grpo"  # overridden by the custom advantage hook
    adv_hook = load_function("focus.integrations.slime.advantages")
    half = len(flat) // 2
    for chunk in (flat[:half], flat[half:]):  # one DP rank's shard each
        rollout_data = {
            "rewards": [s.reward for s in chunk],
            "response_lengths": [s.response_length for s in chunk],
            "total_lengths": [len(s.tokens) for s in chunk],
            "loss_masks": [s.loss_mask for s in chunk],
            "kl": [[0.0] * s.response_length for s in chunk],
        }
        assert adv_hook(args, rollout_data) is None
        for s, adv, ret in zip(chunk, rollout_data["advantages"], rollout_data["returns"]):
            assert adv == [s.reward] * s.response_length
            assert ret == [0.0] * s.response_length
    reducer_factory = load_function("focus.integrations.slime.sum_policy_tokens")
    lengths = [s.response_length for s in flat]
    reducer = reducer_factory([len(s.tokens) for s in flat], lengths, [s.loss_mask for s in flat], False)
    ones = [1.0] * sum(lengths)
    assert reducer(ones) == sum(sum(s.loss_mask) for s in flat)


def test_generate_aborted_generation_is_aborted_sample(server, args):
    from focus.integrations.slime import make_generate

    generate = make_generate(small_collector_for, profile="token_chunk")
    sample = slime_group(server, n=1)[0]
    server.set_faults([{"kind": "abort"}])
    try:
        out = asyncio.run(generate(args, sample, {}))
    finally:
        server.set_faults([])
        generate.close()
    assert out == [sample]
    assert sample.status == Sample.Status.ABORTED
    assert sample.reward is None and sample.tokens == [] and sample.response_length == 0


def test_generate_collection_failing_entirely(server, args, tmp_path):
    from focus.integrations.slime import make_generate

    sink_dir = tmp_path / "critic"
    for allow_partial in (False, True):
        generate = make_generate(
            small_collector_for, profile="token_chunk", critic_sink=JsonlDirectory(sink_dir), allow_partial=allow_partial
        )
        sample = slime_group(server, n=1)[0]
        server.set_faults([{"kind": "missing_logprobs"}])
        try:
            with pytest.raises(CollectionError) as err:
                asyncio.run(generate(args, sample, {}))
        finally:
            server.set_faults([])
            generate.close()
        if getattr(err.value, "state", None) is not None:
            err.value.state.close()
        assert "logprob" in str(err.value) or "every rollout" in str(err.value)
        if allow_partial:
            assert "every rollout" in str(err.value)
    assert list(sink_dir.iterdir()) == []  # no partial file


def test_generate_rejects_bad_input(server, args):
    from focus.integrations.slime import make_generate

    generate = make_generate(small_collector_for, profile="token_chunk")
    try:
        no_label = Sample(group_index=1, index=3, prompt="Solve 1 + 1.")
        with pytest.raises(ValueError, match="no label.*--label-key"):
            asyncio.run(generate(args, no_label, {}))
        sample = slime_group(server, n=1)[0]
        with pytest.raises(ValueError, match="apply-chat-template"):
            asyncio.run(generate(make_args(**{**vars(args), "apply_chat_template": True}), sample, {}))
        with pytest.raises(ValueError, match="rollout-top-p"):
            asyncio.run(generate(make_args(**{**vars(args), "rollout_top_p": 0.9}), sample, {}))
        with pytest.raises(ValueError, match="sglang_router"):
            asyncio.run(generate(make_args(**{**vars(args), "sglang_router_port": None}), sample, {}))
        with pytest.raises(TypeError, match="expected a focus Collector"):
            bad = make_generate(lambda policy, problem: object(), profile="token_chunk")
            try:
                asyncio.run(bad(args, sample, {}))
            finally:
                bad.close()
    finally:
        generate.close()


def test_generate_min_abs_advantage_keeps_group_shape(server, args):
    from focus.integrations.slime import make_generate

    generate = make_generate(small_collector_for, profile="token_chunk", min_abs_advantage=1e9)
    sample = slime_group(server, n=1)[0]
    try:
        out = asyncio.run(generate(args, sample, {}))
    finally:
        generate.close()
    assert len(out) == 1 and out[0].remove_sample and out[0].reward == 0.0
    check_fanout(out)


def test_evaluate_one_unbranched_rollout(server, args):
    from focus.integrations.slime import make_evaluate

    evaluate = make_evaluate(small_collector_for, profile="token_chunk")
    p = server.problems()[0]
    sample = Sample(index=3, prompt=p.prompt, label=p.label)  # eval samples have no group_index
    try:
        out = asyncio.run(evaluate(args, sample, {"temperature": 0.0}))
    finally:
        evaluate.close()
    assert isinstance(out, Sample) and out is not sample
    assert out.reward in (0.0, 1.0)
    assert out.reward == out.metadata["focus"]["outcome"]
    assert out.status in (Sample.Status.COMPLETED, Sample.Status.TRUNCATED)
    assert len(out.loss_mask) == len(out.rollout_log_probs) == out.response_length > 0
    assert out.loss_mask[0] == 1 and out.rollout_id == 3


def test_to_sample_alignment_with_conditioning_tokens():
    from focus.integrations.slime import to_sample

    record = {
        "tokens": [1, 2, 3, 10, 11, 50, 51, 12],
        "loss_mask": [False, False, False, True, True, False, False, True],
        "behavior_logprobs": [0.0, 0.0, 0.0, -0.1, -0.2, 0.0, 0.0, -0.3],
        "advantage": -0.25,
        "lane": "actor",
        "group_index": 4,
        "estimator": "DirectBranchTd",
        "node_id": 9,
        "search_pass": 1,
        "problem_id": "p",
        "response_start": 3,
        "response_text": None,  # as Batch.to_records gives it: the tokenizer decodes
    }
    source = Sample(group_index=4, index=41, prompt="q", label="a", session_id="s", weight_versions=["w1"])
    out = to_sample(record, source, lambda ids: " ".join(map(str, ids)), Sample)
    assert out.tokens == record["tokens"]
    assert out.response_length == 5
    assert out.loss_mask == [1, 1, 0, 0, 1]
    assert out.rollout_log_probs == [-0.1, -0.2, 0.0, 0.0, -0.3]
    assert out.response == "10 11 50 51 12"
    assert out.reward == -0.25 and out.status == Sample.Status.COMPLETED
    assert out.rollout_id == 41 and out.session_id == "s"
    assert out.weight_versions == ["w1"] and out.weight_versions is not source.weight_versions
    assert out.metadata["focus"] == {"node_id": 9, "search_pass": 1, "estimator": "DirectBranchTd", "problem_id": "p", "group_index": 4,
                                     "weight_versions": []}
    # A record naming the weight versions that generated its response: the sample says so.
    versioned = to_sample({**record, "weight_versions": ["v1", "v2"]}, source, None, Sample)
    assert versioned.weight_versions == ["v1", "v2"] and versioned.metadata["focus"]["weight_versions"] == ["v1", "v2"]
    # The response starts at the record's response_start (Go's: its first trained token);
    # tokens, loss_mask and behavior_logprobs are not checked again (issue 35).
    with pytest.raises(ValueError, match="no generated"):
        to_sample({**record, "loss_mask": [False] * 8, "response_start": 8}, source, None, Sample)


def test_preserve_advantages_shape_and_errors():
    from focus.integrations.slime import preserve_advantages

    args = make_args()
    samples = [Sample(index=i, reward=r) for i, r in enumerate([0.5, -0.25, 0.0])]
    raw, rewards = preserve_advantages(args, samples)
    assert raw == rewards == [0.5, -0.25, 0.0] and raw is not rewards
    with pytest.raises(ValueError, match="sample 1 .*no reward"):
        preserve_advantages(args, [Sample(reward=1.0), Sample(index=5, status=Sample.Status.ABORTED)])
    keyed = make_args(reward_key="adv")
    assert preserve_advantages(keyed, [Sample(reward={"adv": 0.3})])[1] == [0.3]


def test_advantages_refuses_normalization_and_shapes_by_lengths():
    from focus.integrations.slime import advantages

    with pytest.raises(ValueError, match="normalize-advantages"):
        advantages(make_args(normalize_advantages=True), {"rewards": [1.0], "kl": [[0.0]]})
    data = {"rewards": [0.5, -1.0], "response_lengths": [2, 3]}
    advantages(make_args(), data)
    assert data["advantages"] == [[0.5, 0.5], [-1.0, -1.0, -1.0]]
    assert data["returns"] == [[0.0, 0.0], [0.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="2 rewards but 1 samples"):
        advantages(make_args(), {"rewards": [0.5, 1.0], "kl": [[0.0]]})


def test_sum_policy_tokens_plain_lists():
    from focus.integrations.slime import sum_policy_tokens

    reducer = sum_policy_tokens([5, 6], [2, 3], [[1, 0], [1, 1, 0]])
    assert reducer([1.0, 2.0, 3.0, 4.0, 5.0]) == 1.0 + 3.0 + 4.0
    with pytest.raises(ValueError, match="context parallel size 1"):
        reducer([1.0, 2.0])  # a CP-local chunk
    with pytest.raises(ValueError, match="2 response lengths but 1 loss masks"):
        sum_policy_tokens([5, 6], [2, 3], [[1, 0]])


def test_tensor_paths_with_torch():
    torch = pytest.importorskip("torch")
    from focus.integrations.slime import advantages, sum_policy_tokens

    data = {"rewards": [0.5], "kl": [torch.zeros(3)]}
    advantages(make_args(), data)
    assert torch.equal(data["advantages"][0], torch.full((3,), 0.5))
    reducer = sum_policy_tokens([4], [3], [torch.tensor([1, 0, 1])], False)
    assert float(reducer(torch.tensor([1.0, 2.0, 3.0]))) == 4.0


def test_hooks_have_the_signatures_slime_inspects():
    import inspect

    from focus.integrations.slime import GenerateHook, make_evaluate, make_generate

    assert GenerateHook.__call__.__name__ == "__call__"

    # Slime's contract: the first three parameters; Slime passes `evaluation=` only to a
    # hook whose signature has it, so the training hook can answer evaluation calls.
    expected = {
        make_generate: ("args", "sample", "sampling_params", "evaluation"),
        make_evaluate: ("args", "sample", "sampling_params"),
    }
    for make, params in expected.items():
        hook = make(small_collector_for)
        try:
            assert tuple(inspect.signature(hook).parameters) == params
            assert inspect.iscoroutinefunction(type(hook).__call__)
        finally:
            hook.close()
    reducer = load_function("focus.integrations.slime.sum_policy_tokens")
    assert tuple(inspect.signature(reducer).parameters) == (
        "total_lengths", "response_lengths", "loss_masks", "calculate_per_token_loss"
    )
    assert tuple(inspect.signature(load_function("focus.integrations.slime.advantages")).parameters) == ("args", "rollout_data")
    assert tuple(inspect.signature(load_function("focus.integrations.slime.preserve_advantages")).parameters) == ("args", "samples")


def test_workspace_for_gives_each_prompt_its_workspace(server, args, tmp_path):
    from focus_go import Workspace
    from focus.integrations.slime import make_evaluate, make_generate

    made = []

    def workspace_for(problem):
        made.append(Workspace(tmp_path / problem.id))
        return made[-1]

    generate = make_generate(small_collector_for, profile="token_chunk", workspace_for=workspace_for)
    evaluate = make_evaluate(small_collector_for, profile="token_chunk", workspace_for=workspace_for)
    try:
        group = slime_group(server, n=2)
        asyncio.run(generate(args, group[0], {}))
        asyncio.run(evaluate(args, group[1], {}))
    finally:
        generate.close()
        evaluate.close()
    assert len(made) == 2 and not any(w.is_open for w in made)
    assert all((tmp_path / n).is_dir() for n in ("g7-i70", "g7-i71"))  # each prompt's own root


def test_to_sample_path_record_carries_token_advantages():
    from focus.integrations.slime import to_sample

    record = {
        "tokens": [1, 2, 3, 10, 11, 50, 12],
        "loss_mask": [False, False, False, True, True, False, True],
        "behavior_logprobs": [0.0, 0.0, 0.0, -0.1, -0.2, 0.0, -0.3],
        "advantage": 0.75,
        "advantages": [0.0, 0.0, 0.0, -0.5, -0.5, 0.0, 0.75],
        "lane": "actor", "group_index": 4, "estimator": "DirectBranchTd", "node_id": 9, "search_pass": 1, "problem_id": "p",
        "response_start": 3,
    }
    source = Sample(group_index=4, index=41, prompt="q", label="a", train_metadata={"user": 1})
    out = to_sample(record, source, None, Sample)
    assert out.response_length == 4 and out.loss_mask == [1, 1, 0, 1]
    assert out.train_metadata == {"user": 1, "focus_advantages": [-0.5, -0.5, 0.0, 0.75]}
    assert source.train_metadata == {"user": 1}, "the source's train_metadata is not changed"
    assert out.reward == 0.75
    with pytest.raises(ValueError, match="7 tokens but 1 advantages"):
        to_sample({**record, "advantages": [0.0]}, source, None, Sample)


def _slime_terms(samples, advantages_per_sample):
    """(full prefix, token, behaviour log-prob, advantage) of every trained response token."""
    from collections import Counter

    out = Counter()
    for s, advs in zip(samples, advantages_per_sample):
        start = len(s.tokens) - s.response_length
        for j, (m, lp, a) in enumerate(zip(s.loss_mask, s.rollout_log_probs, advs)):
            if m:
                out[(tuple(s.tokens[: start + j]), s.tokens[start + j], lp, a)] += 1
    return out


@pytest.mark.parametrize("seed", range(8))
def test_path_samples_same_gradient_through_the_hooks(seed):
    """Both layouts of one tree through to_sample, preserve_advantages, advantages and
    sum_policy_tokens (plain lists): the same trained token terms, and the same summed
    loss for a loss that depends on each token's prefix, token, log-prob and advantage."""
    import random

    from focus.integrations.slime import advantages, preserve_advantages, sum_policy_tokens, to_sample

    from focus_go import DirectBranchTd, RewardConfig
    from focus_go.extend import SchedulerState
    from focus_go.preparation import prepare_samples
    from trees import random_tree

    with SchedulerState.from_json(random_tree(random.Random(seed))) as state:
        batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
        layouts = {name: [r for r in batch.to_records(0, layout=name) if r["lane"] == "actor"] for name in ("spans", "paths")}
    source = Sample(group_index=0, index=3, prompt="q", label="a")
    results = {}
    for name, records in layouts.items():
        samples = [to_sample(r, source, None, Sample) for r in records]
        raw, rewards = preserve_advantages(make_args(), samples)
        assert raw == [s.reward for s in samples]
        data = {"rewards": rewards, "response_lengths": [s.response_length for s in samples],
                "loss_masks": [s.loss_mask for s in samples]}
        advantages(make_args(), data)
        assert all(isinstance(r, float) for r in data["rewards"]), "one float per sample for Slime's train-side log"
        terms = _slime_terms(samples, data["advantages"])

        def token_loss(prefix, token, lp, adv):
            h = hash((prefix, token)) % 1000 / 1000.0
            return -adv * math.exp(min(h - 0.5 - lp, 0.2))

        flat = []
        for s, advs in zip(samples, data["advantages"]):
            start = len(s.tokens) - s.response_length
            flat += [token_loss(tuple(s.tokens[: start + j]), s.tokens[start + j], lp, a)
                     for j, (lp, a) in enumerate(zip(s.rollout_log_probs, advs))]
        reducer = sum_policy_tokens([len(s.tokens) for s in samples], data["response_lengths"], data["loss_masks"])
        results[name] = (terms, reducer(flat), sum(len(s.tokens) for s in samples))
    assert results["paths"][0] == results["spans"][0]
    assert math.isclose(results["paths"][1], results["spans"][1], rel_tol=1e-12, abs_tol=1e-12)
    assert results["paths"][2] <= results["spans"][2]


def test_make_generate_paths(server, args):
    global generate_hook
    from focus.integrations.slime import make_generate

    with pytest.raises(ValueError, match='layout is "leaves"'):
        make_generate(small_collector_for, profile="token_chunk", layout="leaves")
    generate_hook = make_generate(small_collector_for, profile="token_chunk", layout="paths")
    args.custom_generate_function_path = f"{__name__}.generate_hook"
    source = slime_group(server, n=1)[0]
    try:
        samples = asyncio.run(generate_and_rm(args, source, {"temperature": 1.0}))
    finally:
        generate_hook.close()
    assert isinstance(samples, list) and samples
    check_fanout(samples)
    for s in samples:
        advs = s.train_metadata["focus_advantages"]
        assert len(advs) == s.response_length == len(s.loss_mask)
        assert all(a == 0.0 for a, m in zip(advs, s.loss_mask) if not m)
        assert s.loss_mask[0] == 1


def test_generate_visitation_weights(server, args):
    # Each Slime sample's reward (the FOCUS advantage) is the plain edge advantage by default
    # (visitation_weights=False), times its visitation factor with visitation_weights=True.
    from focus.integrations.slime import make_generate

    def node_rewards(**kw):
        generate = make_generate(small_collector_for, profile="token_chunk", **kw)
        try:
            out = asyncio.run(generate(args, slime_group(server, n=1)[0], {}))
        finally:
            generate.close()
        return {s.metadata["focus"]["node_id"]: s.reward for s in out}

    plain, weighted = node_rewards(), node_rewards(visitation_weights=True)
    assert plain == node_rewards(visitation_weights=False)
    assert plain.keys() == weighted.keys()
    ratios = {n: weighted[n] / plain[n] for n in plain if abs(plain[n]) > 1e-12}
    assert ratios and all(r > 0 for r in ratios.values())
    assert any(abs(r - 1.0) > 1e-9 for r in ratios.values()), "a Selective tree has factors other than 1"


def test_generate_critic_rule(server, args):
    # make_generate(critic_rule=...) sets each tree's estimator and kappa from the trees that
    # finished before it (docs/signal.md §R) and observes each finished tree as a batch.
    from focus.critic_rule import CriticRule
    from focus.integrations.slime import make_generate

    rule = CriticRule(min_nodes=1)
    generate = make_generate(small_collector_for, profile="token_chunk", critic_rule=rule)
    try:
        first = asyncio.run(generate(args, slime_group(server, n=1)[0], {}))
        second = asyncio.run(generate(args, slime_group(server, n=1)[0], {}))
    finally:
        generate.close()
    assert {s.metadata["focus"]["estimator"] for s in first} == {"TreeGroupBaseline"}  # no measurement yet
    assert rule.state["batches"] == 2 and second
    with pytest.raises(ConfigError, match="critic_rule"):
        make_generate(small_collector_for, critic_rule="auto")


def test_log_rollout_reports_the_trees_truncation_and_path_lengths():
    from types import SimpleNamespace

    from focus.integrations.slime import log_rollout

    def sample(problem, finished, truncated, lengths):
        focus = {"problem_id": problem, "finished_rollouts": finished, "successes": 0, "truncated_rollouts": truncated,
                 "rollout_tokens": lengths, "outcomes_differ": False}
        return SimpleNamespace(metadata={"focus": focus}, loss_mask=[1, 1], remove_sample=False)

    samples = [sample("a", 2, 1, [10, 20]), sample("a", 2, 1, [10, 20]), sample("b", 2, 2, [30, 40])]
    metrics: dict = {}
    assert log_rollout(0, make_args(), samples, metrics, 1.0) is False
    assert metrics["rollout/focus/truncated_ratio"] == 0.75
    assert metrics["rollout/focus/response_len/mean"] == 25.0
    assert metrics["rollout/focus/response_len/median"] == 25.0
    assert (metrics["rollout/focus/response_len/max"], metrics["rollout/focus/response_len/min"]) == (40.0, 10.0)
