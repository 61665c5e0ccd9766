"""The Tinker loop driven through the real tinker SDK client classes (TrainingClient,
SamplingClient) with only the transport replaced by the service stand-in of
tinker_standin.py, so every request is built, encoded and decoded by the SDK's own code."""

from __future__ import annotations

import asyncio
import json

import pytest

tinker = pytest.importorskip("tinker")
np = pytest.importorskip("numpy")

from tinker import types  # noqa: E402
from tinker_standin import StandinTinker  # noqa: E402

from collectors import math_collector  # noqa: E402
from focus_go.integrations.tinker import to_datum, train, update_actor  # noqa: E402


def collector_for(policy, problem):
    return math_collector(policy, problem)


def run_train(standin, server, problems, **kwargs):
    client = standin.training_client()
    args = dict(model=server.model, problems=problems, collector_for=collector_for, steps=3, learning_rate=1e-5, profile="token_chunk")
    args.update(kwargs)
    return asyncio.run(train(client, **args))


RECORD = {
    "tokens": [5, 6, 7, 20, 21, 22],
    "loss_mask": [False, False, False, True, True, True],
    "behavior_logprobs": [0.0, 0.0, 0.0, -0.5, -0.25, -0.125],
    "advantage": 0.5,
    "lane": "actor",
    "response_start": 3,
}


def test_update_lands_on_one_clock_cycle(standin):
    # Measured with the clock-cycle model: forward_backward and optim_step submitted back
    # to back share a cycle; awaiting the gradients first (the old order) costs two.
    client = standin.training_client()
    metrics = asyncio.run(update_actor(client, [RECORD], learning_rate=1e-5))
    assert standin.update_cycles() == [["fb", "optim"]]
    assert standin.version == 1 and metrics["optim/lr"] == 1e-5 and "loss:sum" in metrics

    async def awaited_in_turn():
        datum = to_datum(RECORD)
        datum = types.Datum(model_input=datum.model_input, loss_fn_inputs={k: v for k, v in datum.loss_fn_inputs.items() if k != "mask"})
        await client.forward_backward([datum], "ppo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2})
        await client.optim_step(types.AdamParams(learning_rate=1e-5))

    asyncio.run(awaited_in_turn())
    assert standin.update_cycles() == [["fb", "optim"], ["fb"], ["optim"]]


def test_train_one_cycle_per_update_and_fresh_samplers(server, standin, problems):
    reports = run_train(standin, server, problems, steps=4)
    assert [(r.batch, r.behavior_step, r.learner_step, r.policy_lag) for r in reports] == [
        (0, 0, 0, 0),
        (1, 0, 1, 1),
        (2, 1, 2, 1),
        (3, 2, 3, 1),
    ]
    # One cycle per update (it was two: gradients were awaited before the step went out).
    assert standin.update_cycles() == [["fb", "optim"]] * 4
    assert len(standin.trained) == 4 and standin.version == 4
    # A sampler published after an update holds its weights: the published versions are
    # 0, 1, 2 and each tree sampled only from the sampler of its behavior step.
    assert [standin.samplers[s] for s in standin.sampler_order] == [0, 1, 2]
    versions = {call.version for call in standin.sample_calls}
    assert versions == {0, 1, 2}
    # Every datum the service trained on matches what the SDK built from the records.
    for datums in standin.trained:
        for d in datums:
            assert set(d.inputs) == {"target_tokens", "logprobs", "advantages"}
            assert len(d.tokens) == len(d.inputs["target_tokens"])
    assert all(call == ("ppo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}, False) for call in standin.fb_calls)


def test_num_substeps_splits_each_batch_into_optimizer_steps_on_one_cycle(server, standin, problems):
    reports = run_train(standin, server, problems, steps=2, num_substeps=2)
    # Each update: two forward_backward + optim_step pairs, submitted back to back.
    assert standin.update_cycles() == [["fb", "optim", "fb", "optim"]] * 2
    assert standin.version == 4 and len(standin.trained) == 4
    for r, (first, second) in zip(reports, zip(standin.trained[0::2], standin.trained[1::2])):
        assert abs(len(first) - len(second)) <= 1
        assert "kl_sample_train_v1" in r.stats and r.stats["loss"] == pytest.approx(r.metrics["loss:sum"])
    with pytest.raises(ValueError, match="num_substeps"):
        run_train(standin, server, problems, steps=1, num_substeps=0)


def sampled_targets(d):
    """Which targets of a datum the service received are sampled tokens (its provenance)."""
    out = []
    for kind, _, _, length in d.loss_fn_input_spans:
        out += [kind == "sampled_tokens"] * length
    return np.asarray(out)


def test_kl_penalty_against_a_reference_sampler(server, sim_policy, problems):
    from tinker_standin import DRIFT, REF_JITTER

    coef = 0.5
    runs = []
    for kl in (0.0, coef):
        standin = StandinTinker(sim_policy)
        try:
            client = standin.training_client()
            reference = client.save_weights_and_get_sampling_client().result()  # the starting weights
            args = dict(model=server.model, problems=problems, collector_for=collector_for, steps=2, learning_rate=1e-5,
                        profile="token_chunk", async_depth=0, kl_penalty_coef=kl, kl_reference_client=reference if kl else None)
            reports = asyncio.run(train(client, **args))
            runs.append((reports, standin.trained, list(standin.score_calls), standin.sampler_order[0]))
        finally:
            standin.close()
    (_, plain, no_calls, _), (reports, penalised, calls, ref_session) = runs
    assert no_calls == [] and "kl_policy_base" not in runs[0][0][0].stats
    # One compute_logprobs per datum, on the reference sampler, of the datum's whole sequence.
    assert len(calls) == sum(len(b) for b in penalised) and {c[0] for c in calls} == {ref_session}
    assert {c[1] for c in calls} == {tuple(d.tokens) + (int(d.inputs["target_tokens"][-1]),) for b in penalised for d in b}
    for b, (before, after) in enumerate(zip(plain, penalised)):
        assert [d.tokens for d in before] == [d.tokens for d in after]
        masks = [sampled_targets(d) for d in before]
        jitter = [REF_JITTER * ((np.arange(len(d.tokens)) + 1) % 2) for d in before]
        mean_j = sum(float(j[m].sum()) for j, m in zip(jitter, masks)) / sum(int(m.sum()) for m in masks)
        # Sampler and reference differ by DRIFT * version + the jitter: the penalty is
        # coef * (mean d - d) = coef * (jitter - mean jitter) on generated tokens.
        for d0, d1, m, j in zip(before, after, masks, jitter):
            added = d1.inputs["advantages"].astype(np.float64) - d0.inputs["advantages"].astype(np.float64)
            np.testing.assert_allclose(added, np.where(m, coef * (j - mean_j), 0.0), atol=1e-5)
        assert reports[b].stats["kl_policy_base"] == pytest.approx(-DRIFT * reports[b].behavior_step - mean_j, abs=1e-5)
    refused = StandinTinker(sim_policy)
    try:
        with pytest.raises(ValueError, match="kl_reference_client"):
            run_train(refused, server, problems, steps=1, kl_penalty_coef=0.1)
        assert refused.paths == []
    finally:
        refused.close()


def test_allow_partial_leaves_a_wholly_failed_tree_out_of_its_batch(server, standin, problems):
    from focus_go import Collector
    from focus_go.errors import CollectionError

    def failing_for_first(policy, problem):
        c = math_collector(policy, problem)
        if problem.id != problems[0].id:
            return c
        # Every policy call of this tree times out: every rollout fails.
        return Collector(c.agent, critic=c.critic, search=c.search, policy_timeout=1e-6)

    reports = run_train(standin, server, problems, steps=2, problems_per_step=2, shuffle=False, allow_partial=True,
                        collector_for=failing_for_first)
    # Batch 0 (problems 0 and 1) trains on problem 1's tree alone; batch 1 on both of its.
    assert [r.trees for r in reports] == [1, 2]
    assert reports[0].failures > 0 and reports[1].failures == 0
    assert len(standin.trained) == 2
    # Without allow_partial the failed tree stops the run.
    strict = StandinTinker(standin.sim_policy)
    try:
        with pytest.raises(CollectionError) as err:
            run_train(strict, server, problems, steps=1, problems_per_step=2, shuffle=False, collector_for=failing_for_first)
        if err.value.state is not None:
            err.value.state.close()
    finally:
        strict.close()


def test_failed_gradients_fail_the_update_after_both_requests_finish(sim_policy, server, problems):
    standin = StandinTinker(sim_policy, fail_on_fb=1)
    try:
        with pytest.raises(Exception, match="forward_backward 1 failed"):
            run_train(standin, server, problems, steps=3)
        # The step submitted with the failed gradients was still answered before train
        # raised: nothing of the update is left running.
        assert len(standin.trained) == 2
        assert all(op.done for op in standin._ops.values())
    finally:
        standin.close()



# -- cookbook interoperability ----------------------------------------------------------


def cookbook_function(module: str, name: str, **names):
    """A function of the installed tinker-cookbook, compiled from its own source file
    without importing the module (its rl modules import torch and chz, which the tests do
    not need for these helpers). Skips when tinker-cookbook is not installed."""
    import __future__
    import ast
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("tinker_cookbook")
    if spec is None or spec.origin is None:
        pytest.skip("tinker-cookbook is not installed (pip install --no-deps tinker-cookbook)")
    path = Path(spec.origin).parent / module
    tree = ast.parse(path.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    namespace = {"tinker": tinker, "LossFnType": types.LossFnType, "dataclasses": __import__("dataclasses"), **names}
    code = compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, namespace)
    return namespace[name]


def test_datum_mask_and_provenance_as_the_cookbook_reads_them():
    check_provenance = cookbook_function("rl/train.py", "_check_provenance")
    remove_mask = cookbook_function("rl/train.py", "_remove_mask")
    plain = to_datum(RECORD)
    # The cookbook's stable_reinforce check refuses a datum without provenance ...
    with pytest.raises(ValueError, match="needs provenance"):
        check_provenance([plain], "stable_reinforce")
    datum = to_datum({**RECORD, "tinker_sequence_id": "seq-7"})
    check_provenance([datum], "stable_reinforce")  # ... and accepts one with it.
    # Spans tile the input (tokens 5 6 7 20 21) and the targets (6 7 20 21 22) as the
    # cookbook's trajectory_to_data builds them: prompt positions, then sampled positions.
    assert datum.model_input_spans == [
        types.PromptProvenanceSpan(sequence_id="seq-7", offset=0, length=3),
        types.SampledProvenanceSpan(sequence_id="seq-7", offset=0, length=2),
    ]
    assert datum.loss_fn_input_spans == [
        types.PromptProvenanceSpan(sequence_id="seq-7", offset=1, length=2),
        types.SampledProvenanceSpan(sequence_id="seq-7", offset=0, length=3),
    ]
    assert datum.loss_fn_inputs["mask"].tolist() == [0.0, 0.0, 1.0, 1.0, 1.0]
    # The cookbook drops mask before sending, keeping the spans; so does update_actor.
    sent = remove_mask(datum)
    assert set(sent.loss_fn_inputs) == {"target_tokens", "logprobs", "advantages"}
    assert sent.loss_fn_input_spans == datum.loss_fn_input_spans
    # A record whose sampled part is not all generated tokens gets no provenance.
    mixed = {**RECORD, "loss_mask": [False, False, False, True, False, True], "tinker_sequence_id": "seq-7"}
    assert to_datum(mixed).loss_fn_input_spans is None


def test_kl_metrics_of_the_cookbook_read_focus_datums():
    torch = pytest.importorskip("torch")
    try:
        from tinker_cookbook.rl.metrics import compute_kl_sample_train
    except ImportError as exc:
        pytest.skip(f"tinker_cookbook.rl.metrics does not import here: {exc}")
    datum = to_datum(RECORD)
    training = [torch.tensor([0.0, 0.0, -0.6, -0.35, -0.225])]
    metrics = compute_kl_sample_train([datum], training)
    assert metrics["optim/kl_sample_train_v1"] == pytest.approx(0.1, abs=1e-6)


def test_stable_reinforce_trains_on_focus_trees_with_provenance(server, standin, problems):
    # The stand-in checks every span against the prompts and sampled tokens of the
    # requests the SDK sent, as the service does for stable_reinforce.
    reports = run_train(standin, server, problems, steps=2, loss_fn="stable_reinforce", loss_fn_config=None)
    assert len(reports) == 2 and len(standin.trained) == 2
    spans = [d.loss_fn_input_spans for datums in standin.trained for d in datums]
    assert spans and all(spans)
    assert {s[1] for sp in spans for s in sp} <= set(standin.sequences)
    # Every sample request asked the service to record stability information, as the
    # SDK documents for stable_reinforce and the cookbook sets for it.
    assert standin.sample_calls and all(c.record_stability_info for c in standin.sample_calls)


def test_stable_reinforce_trains_path_datums_with_provenance(server, standin, problems):
    # A path datum spans several sample requests: its spans name each request's prompt
    # positions (the observations since the previous request) and its sampled tokens, as the
    # cookbook's trajectory_to_data tiles a multi-turn trajectory. The stand-in checks each.
    reports = run_train(standin, server, problems, steps=2, loss_fn="stable_reinforce", loss_fn_config=None, layout="paths")
    assert len(reports) == 2 and len(standin.trained) == 2
    datums = [d for batch in standin.trained for d in batch]
    assert datums and all(d.loss_fn_input_spans for d in datums)
    # At least one path tiles more than one sampled sequence.
    assert max(len({s[1] for s in d.loss_fn_input_spans}) for d in datums) > 1
    assert standin.sample_calls and all(c.record_stability_info for c in standin.sample_calls)


def test_other_losses_do_not_record_stability_info(server, standin, problems):
    run_train(standin, server, problems, steps=1)
    assert standin.sample_calls and not any(c.record_stability_info for c in standin.sample_calls)


def test_stable_reinforce_without_provenance_is_refused_before_sending(standin):
    client = standin.training_client()
    with pytest.raises(ValueError, match="stable_reinforce.*provenance"):
        asyncio.run(update_actor(client, [RECORD], learning_rate=1e-5, loss_fn="stable_reinforce", loss_fn_config=None))
    assert standin.trained == [] and "/api/v1/forward_backward" not in standin.paths


# -- sampling temperature, problem order and seeds -------------------------------------


def no_sampling_collector_for(policy, problem):
    return math_collector(policy, problem, sampling=None)  # the policy's defaults


def test_loop_samples_at_temperature_one_unless_told(server, sim_policy, problems):
    for kwargs, expected in [({}, 1.0), ({"temperature": 0.5}, 0.5)]:
        standin = StandinTinker(sim_policy)
        try:
            run_train(standin, server, problems, steps=1, collector_for=no_sampling_collector_for, **kwargs)
            assert standin.sample_calls and {c.temperature for c in standin.sample_calls} == {expected}
        finally:
            standin.close()


def batches_roots(server, standin, problems):
    """Per sampler (one per batch with async_depth=0): the (problem id, seed) of each
    request from a problem's root prompt."""
    roots = {root_prompt(server, p): p.id for p in problems}
    return [
        sorted((roots[c.prompt], c.seed) for c in standin.sample_calls if c.session == session and c.prompt in roots)
        for session in standin.sampler_order
    ]


def test_each_epoch_shuffled_from_the_seed_with_fresh_sampling_seeds(server, sim_policy, problems):
    import random

    def run(**kwargs):
        standin = StandinTinker(sim_policy)
        try:
            run_train(standin, server, problems, steps=8, async_depth=0, collector_for=value_refinement_collector_for, **kwargs)
            return batches_roots(server, standin, problems)
        finally:
            standin.close()

    batches = run()
    trained = [b[0][0] for b in batches]  # one tree per batch; warmup shares one root request
    for epoch in range(2):
        perm = list(range(len(problems)))
        random.Random(f"0:{epoch}").shuffle(perm)
        assert trained[4 * epoch : 4 * epoch + 4] == [problems[i].id for i in perm]
    assert trained[:4] != trained[4:]  # each epoch its own order
    # A problem seen again is sampled with other seeds.
    seeds = {}
    for b in batches:
        seeds.setdefault(b[0][0], []).append(b[0][1])
    assert all(len(set(v)) == 2 for v in seeds.values())
    # The order follows the run's seed; shuffle=False keeps the list's order.
    assert [b[0][0] for b in run(seed=1)][:4] != trained[:4]
    assert [b[0][0] for b in run(shuffle=False)] == [p.id for p in problems] * 2


def test_a_batch_larger_than_the_problem_list_has_no_identical_trees(server, standin, problems):
    run_train(standin, server, problems[:2], steps=1, problems_per_step=3, collector_for=value_refinement_collector_for)
    (batch,) = batches_roots(server, standin, problems[:2])
    # Three trees of two problems: the problem seen twice starts from two different seeds.
    assert len(batch) == 3 and len(set(batch)) == 3
    roots = {root_prompt(server, p): p.id for p in problems[:2]}
    twice = [pid for pid in roots.values() if sum(1 for b in batch if b[0] == pid) == 2]
    samples = [
        tuple(standin.sequences[sid][1] for sid in c.sequence_ids)
        for c in standin.sample_calls
        if roots.get(c.prompt) == twice[0]
    ]
    assert len(samples) == 2 and samples[0] != samples[1]  # two different trees


# -- many problems per update, metrics, evaluation -------------------------------------


def root_prompt(server, problem):
    from focus_go.backends import PolicyFormat

    fmt = PolicyFormat.resolve(server.model, profile="token_chunk")
    try:
        msgs = [{"role": "system", "content": "Solve the problem."}, {"role": "user", "content": problem.prompt}]
        return tuple(fmt.prepare(msgs).tokens)
    finally:
        fmt.codec.tokenizer.close()


def test_problems_per_step_trains_a_batch_of_trees_from_one_sampler(server, standin, problems):
    reports = run_train(standin, server, problems, steps=2, problems_per_step=3, async_depth=0, shuffle=False)
    assert [r.trees for r in reports] == [3, 3]
    assert [r.stats["rollouts"] for r in reports] == [12.0, 12.0]  # Selective(budget=4) per tree
    roots = {root_prompt(server, p): p.id for p in problems}
    for b, report in enumerate(reports):
        session = standin.sampler_order[b]
        calls = [c for c in standin.sample_calls if c.session == session]
        # The batch's trees are problems b*3 .. b*3+2 (cycling), all from this one sampler.
        started = sorted(roots[c.prompt] for c in calls if c.prompt in roots)
        expected = [problems[(b * 3 + i) % len(problems)].id for i in range(3)]
        assert sorted(set(started)) == sorted(set(expected))
        # Tokens sampled: every token this batch's sampler produced.
        sampled = sum(len(standin.sequences[sid][1]) for c in calls for sid in c.sequence_ids)
        assert report.tokens_sampled == sampled > 0
        # Tokens trained: the generated targets of the datums the service received (their
        # sampled provenance runs).
        trained = sum(s[3] for d in standin.trained[b] for s in d.loss_fn_input_spans if s[0] == "sampled_tokens")
        assert report.tokens_trained == trained > 0
        assert report.failures == 0 and report.stats["failures"] == 0.0
    # One update per step, each on all three trees' datums.
    assert standin.update_cycles() == [["fb", "optim"]] * 2
    datum_roots = [{roots[tuple(d.tokens[: len(r)])] for d in datums for r in roots if tuple(d.tokens[: len(r)]) == r} for datums in standin.trained]
    assert datum_roots == [{problems[0].id, problems[1].id, problems[2].id}, {problems[3].id, problems[0].id, problems[1].id}]


def test_metrics_jsonl_with_kl_from_training_logprobs(server, standin, problems, tmp_path):
    from tinker_standin import DRIFT

    log = tmp_path / "metrics.jsonl"
    reports = run_train(standin, server, problems, steps=3, log_path=log)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2, 3]
    keys = {
        "trees", "rollouts", "failures", "reward_mean", "success_rate", "abs_advantage_mean", "tokens_sampled",
        "tokens_trained", "policy_lag", "loss", "kl_sample_train_v1", "kl_sample_train_v2", "time_collect_s",
        "time_update_s", "time_step_s",
    }
    assert all(keys <= set(line) for line in lines)
    for line, report in zip(lines, reports):
        assert line["policy_lag"] == report.policy_lag and line["tokens_trained"] == report.tokens_trained
        assert line["loss"] == pytest.approx(report.metrics["loss:sum"])
        # The stand-in's learner drifts DRIFT per update from the sampler that sampled.
        assert line["kl_sample_train_v1"] == pytest.approx(DRIFT * report.policy_lag, abs=1e-5)
        assert 0.0 <= line["success_rate"] <= 1.0 and line["abs_advantage_mean"] >= 0.0
    assert [r.policy_lag for r in reports] == [0, 1, 1]
    # Billed tokens by kind (the cookbook's TokenUsage): every prompt sent to a batch's sampler
    # once per request (the stand-in reports no cache hits), every token sampled, and every
    # input token of the datums trained.
    assert sum(r.stats["tokens/prefill_uncached"] for r in reports) == sum(len(c.prompt) for c in standin.sample_calls) > 0
    for r, datums in zip(reports, standin.trained):
        assert r.stats["tokens/prefill_uncached"] > 0 and r.stats["tokens/prefill_cached"] == 0
        assert r.stats["tokens/sampled"] == r.tokens_sampled
        assert r.stats["tokens/trained"] == sum(len(d.tokens) for d in datums)
    # Appending: a second run adds its own lines.
    run_train(StandinTinker(standin.sim_policy), server, problems, steps=1, log_path=log)
    assert len(log.read_text().splitlines()) == 4


def test_rollout_transcripts_beside_the_metrics_as_the_cookbook_writes_them(server, standin, problems, tmp_path):
    log = tmp_path / "metrics.jsonl"
    reports = run_train(standin, server, problems, steps=2, problems_per_step=2, log_path=log, num_groups_to_log=1,
                        shuffle=False)
    for batch, report in enumerate(reports):
        folder = tmp_path / f"iteration_{batch:06d}"
        assert sorted(p.name for p in folder.iterdir()) == ["rollouts.jsonl", "train_tree_0.html"]
        assert (folder / "train_tree_0.html").read_text().lstrip().lower().startswith("<!doctype html")
        rows = [json.loads(line) for line in (folder / "rollouts.jsonl").read_text().splitlines()]
        assert len(rows) == report.stats["rollouts"] and {r["iteration"] for r in rows} == {batch}
        assert [r["group_index"] for r in rows] == sorted(r["group_index"] for r in rows)
        assert {r["group_index"] for r in rows} == {2 * batch, 2 * batch + 1}
        assert {r["problem_id"] for r in rows} == {problems[2 * batch].id, problems[2 * batch + 1].id}
        assert sum(r["return"] for r in rows) / len(rows) == pytest.approx(report.stats["reward_mean"])
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    run_train(StandinTinker(standin.sim_policy), server, problems, steps=1, log_path=quiet / "m.jsonl",
              num_groups_to_log=0, rollout_json_export=False)
    assert sorted(p.name for p in quiet.iterdir()) == ["m.jsonl"]


def test_wandb_asked_but_missing_is_a_clear_error(server, standin, problems):
    try:
        import wandb  # noqa: F401

        pytest.skip("wandb is installed")
    except ImportError:
        pass
    with pytest.raises(ValueError, match="wandb"):
        run_train(standin, server, problems, steps=1, wandb_project="focus")
    assert standin.paths == []


def test_evaluation_every_n_steps_one_unbranched_rollout_per_problem(server, standin, problems):
    held_out = server.problems()[4:6]
    reports = run_train(standin, server, problems, steps=4, eval_problems=held_out, eval_every=2)
    assert ["eval/reward_mean" in r.stats for r in reports] == [False, True, False, True]
    roots = {root_prompt(server, p) for p in held_out}
    eval_sessions = [s for s in standin.sampler_order if any(c.session == s and c.prompt in roots for c in standin.sample_calls)]
    # Evaluated with the starting weights (as the cookbook, at step 0) and after updates 2 and 4.
    assert [standin.samplers[s] for s in eval_sessions] == [0, 2, 4]
    for session in eval_sessions:
        starts = [c.prompt for c in standin.sample_calls if c.session == session and c.prompt in roots]
        assert sorted(starts) == sorted(roots)  # one rollout per held-out problem, no branching
    for r in (reports[1], reports[3]):
        assert r.stats["eval/problems"] == 2.0
        assert 0.0 <= r.stats["eval/success_rate"] <= 1.0
    # Evaluation trains nothing.
    assert len(standin.trained) == 4


def test_evaluation_at_step_zero_and_after_the_last_update(server, standin, problems, tmp_path):
    held_out = server.problems()[4:6]
    log = tmp_path / "metrics.jsonl"
    reports = run_train(standin, server, problems, steps=3, eval_problems=held_out, eval_every=2, log_path=log)
    # Update 3 is off the cadence, but the final weights are evaluated.
    assert ["eval/reward_mean" in r.stats for r in reports] == [False, True, True]
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert rows[0]["eval/problems"] == 2.0 and "loss" not in rows[0]


def test_train_rejects_bad_new_arguments(server, standin, problems):
    for kwargs, message in [
        ({"problems_per_step": 0}, "problems_per_step"),
        ({"eval_every": -1}, "eval_every"),
        ({"eval_every": 2}, "eval_problems is empty"),
        ({"eval_problems": ["text"]}, "expected a Problem"),
        ({"num_groups_to_log": -1}, "num_groups_to_log"),
    ]:
        with pytest.raises(ValueError, match=message):
            run_train(standin, server, problems, steps=1, **kwargs)
    assert standin.paths == []


# -- checkpoints and resume ------------------------------------------------------------


def trained_roots(server, standin, problems):
    roots = {root_prompt(server, p): p.id for p in problems}
    return [sorted({pid for d in datums for r, pid in roots.items() if tuple(d.tokens[: len(r)]) == r}) for datums in standin.trained]


def test_checkpoint_and_resume_continue_where_the_loop_stopped(server, sim_policy, standin, problems, tmp_path):
    from focus_go.integrations.tinker import TrainCheckpoint, load_checkpoint

    checkpoints = tmp_path / "checkpoints.jsonl"

    class Crash(Exception):
        pass

    def crash_at_batch_2(report):
        if report.batch == 2:
            raise Crash

    with pytest.raises(Crash):
        run_train(standin, server, problems, steps=4, checkpoint_every=2, checkpoint_path=checkpoints, on_step=crash_at_batch_2)
    ckpt = load_checkpoint(checkpoints)
    assert isinstance(ckpt, TrainCheckpoint)
    assert (ckpt.learner_step, ckpt.next_batch) == (2, 2)
    assert standin.states == {ckpt.state_path: 2}  # the state saved holds the weights after update 2

    # Resume: a training client holding that state, the same problems, the same steps.
    resumed = StandinTinker(sim_policy, start_version=standin.states[ckpt.state_path], states=standin.states)
    try:
        reports = run_train(resumed, server, problems, steps=4, checkpoint_every=2, checkpoint_path=checkpoints, resume_from=checkpoints)
        assert [(r.batch, r.learner_step) for r in reports] == [(2, 2), (3, 3)]
        assert resumed.samplers[resumed.sampler_order[0]] == 2  # collected from the resumed weights
        assert load_checkpoint(checkpoints).learner_step == 4 and resumed.version == 4
        # The checkpoint's weights and optimizer were loaded into the client.
        assert resumed.loads == [(ckpt.state_path, True)]
        # The resumed run trains the problems the uninterrupted run would have.
        full = StandinTinker(sim_policy)
        try:
            run_train(full, server, problems, steps=4)
            assert trained_roots(server, resumed, problems) == trained_roots(server, full, problems)[2:]
        finally:
            full.close()
        # Another problem list or batch size than the checkpoint's is refused.
        with pytest.raises(ValueError, match="another problem list"):
            run_train(resumed, server, list(reversed(problems)), steps=6, resume_from=ckpt)
        with pytest.raises(ValueError, match="problems_per_step"):
            run_train(resumed, server, problems, steps=6, resume_from=ckpt, problems_per_step=2)
        with pytest.raises(ValueError, match="checkpoint_path"):
            run_train(resumed, server, problems, steps=6, checkpoint_every=1)
    finally:
        resumed.close()


class Crash(Exception):
    pass


def crash_at(batch):
    def on_step(report):
        if report.batch == batch:
            raise Crash

    return on_step


def test_plain_restart_resumes_from_the_run_folder_without_duplicates(server, sim_policy, standin, problems, tmp_path):
    from focus_go.integrations import JsonlDirectory
    from focus_go.integrations.tinker import load_checkpoint

    run = tmp_path / "run"

    def command(client, **extra):
        # The same command each time: a fresh LoRA client, the run's folder.
        return run_train(
            client, server, problems, steps=5, checkpoint_every=2, checkpoint_path=run / "checkpoints.jsonl",
            log_path=run / "metrics.jsonl", critic_sink=JsonlDirectory(run / "critic"), **extra,
        )

    run.mkdir()
    with pytest.raises(Crash):  # killed after update 3 was logged; the checkpoint is at 2
        command(standin, on_step=crash_at(2))
    first = load_checkpoint(run / "checkpoints.jsonl")
    assert first.learner_step == 2 and first.base_model == "standin/base-model" and first.lora_rank == 32
    restarted = StandinTinker(sim_policy, states=standin.states)  # a fresh client at version 0
    try:
        reports = command(restarted)
        assert [(r.batch, r.learner_step) for r in reports] == [(2, 2), (3, 3), (4, 4)]
        # The checkpoint's weights and optimizer were loaded before the first sampler.
        assert restarted.loads == [(first.state_path, True)]
        assert restarted.samplers[restarted.sampler_order[0]] == 2
        # Metric rows and critic files once per update, though update 3 ran twice.
        steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert steps == [1, 2, 3, 4, 5]
        critic_steps = sorted(json.loads(f.read_text().splitlines()[0])["learner_step"] for f in (run / "critic").glob("*.jsonl"))
        assert critic_steps == [0, 1, 2, 3, 4]
        # Checkpoints at 2 and 4, and the final one at 5 (not a multiple of 2).
        lines = [json.loads(line) for line in (run / "checkpoints.jsonl").read_text().splitlines()]
        assert [line["learner_step"] for line in lines] == [2, 4, 5]
        assert restarted.states[lines[-1]["state_path"]] == 5 == restarted.version
        # Once finished, the same command does nothing.
        again = StandinTinker(sim_policy, states=restarted.states)
        try:
            assert command(again) == [] and again.paths == []
        finally:
            again.close()
    finally:
        restarted.close()


def test_resume_refuses_a_client_of_another_base_model_or_lora_rank(server, sim_policy, standin, problems, tmp_path):
    checkpoints = tmp_path / "checkpoints.jsonl"
    run_train(standin, server, problems, steps=2, checkpoint_every=2, checkpoint_path=checkpoints)
    for kwargs, message in [({"base_model": "other/base-model"}, "base model is 'other/base-model'"), ({"lora_rank": 8}, "LoRA rank 8")]:
        client = StandinTinker(sim_policy, states=standin.states, **kwargs)
        try:
            with pytest.raises(ValueError, match=message):
                run_train(client, server, problems, steps=4, checkpoint_path=checkpoints)
            assert client.paths == []  # refused before any request
        finally:
            client.close()


def test_periodic_rolling_and_final_checkpoints_with_expiry_and_sampler_weights(server, sim_policy, standin, problems, tmp_path):
    from focus_go.integrations.tinker import load_checkpoint

    checkpoints = tmp_path / "checkpoints.jsonl"
    run_train(standin, server, problems, steps=5, checkpoint_every=2, rolling_save_every=1, ttl_seconds=86400,
              checkpoint_path=checkpoints)
    lines = [json.loads(line) for line in checkpoints.read_text().splitlines()]
    assert [(line["learner_step"], line["kind"]) for line in lines] == [
        (1, "rolling"), (2, "periodic"), (3, "rolling"), (4, "periodic"), (5, "final"),
    ]
    # Periodic states expire after ttl_seconds, rolling ones after rolling_ttl_seconds, the
    # final one never; periodic and final ones export sampler weights, rolling ones do not.
    assert [standin.state_ttls[line["state_path"]] for line in lines] == [7200, 86400, 7200, 86400, None]
    assert [line["sampler_path"] is not None for line in lines] == [False, True, False, True, True]
    assert standin.sampler_exports[lines[-1]["sampler_path"]] == (5, None)
    assert standin.sampler_exports[lines[1]["sampler_path"]] == (2, 86400)
    # A rolling checkpoint resumes like any other.
    ckpt = load_checkpoint(checkpoints)
    assert ckpt.kind == "final" and ckpt.sampler_path == lines[-1]["sampler_path"]


def test_final_checkpoint_when_steps_is_not_a_multiple(server, standin, problems, tmp_path):
    checkpoints = tmp_path / "checkpoints.jsonl"
    run_train(standin, server, problems, steps=3, checkpoint_every=2, checkpoint_path=checkpoints)
    lines = [json.loads(line) for line in checkpoints.read_text().splitlines()]
    assert [(line["learner_step"], line["next_batch"]) for line in lines] == [(2, 2), (3, 3)]


# -- one request for a tree's warmup rollouts ------------------------------------------


def requests_per_tree(server, standin, problems):
    roots = {root_prompt(server, p) for p in problems}
    per_session = {}
    for c in standin.sample_calls:
        per_session.setdefault(c.session, []).append(c)
    return {s: ([c for c in calls if c.prompt in roots], len(calls)) for s, calls in per_session.items()}


def value_refinement_collector_for(policy, problem):
    # value_refinement never branches from the root after warmup, so every request from the
    # root prompt is a warmup rollout (the default critic_adaptive may branch there too).
    return math_collector(policy, problem, score="value_refinement")


def test_warmup_rollouts_share_one_sample_request(server, sim_policy, problems):
    counts = {}
    for share in (False, True):
        standin = StandinTinker(sim_policy)
        try:
            run_train(standin, server, problems, steps=2, async_depth=0, share_warmup_prompt=share,
                      collector_for=value_refinement_collector_for)
            counts[share] = requests_per_tree(server, standin, problems)
        finally:
            standin.close()
    for share, sessions in counts.items():
        for root_calls, _ in sessions.values():
            # Selective(budget=4, warmup=2): two warmup rollouts start from the root prompt.
            if share:
                assert [c.num_samples for c in root_calls] == [2]
            else:
                assert [c.num_samples for c in root_calls] == [1, 1]


def test_shared_warmup_request_is_deterministic(server, sim_policy, problems):
    # The grouped request hands its sequences out by seed order, not by arrival order, so
    # the same tree seeds give the same trees.
    trained = []
    for _ in range(2):
        standin = StandinTinker(sim_policy)
        try:
            run_train(standin, server, problems, steps=2)
            trained.append([[d.tokens for d in datums] for datums in standin.trained])
        finally:
            standin.close()
    assert trained[0] == trained[1]


def test_share_first_prompt_rejects_a_bad_size(server, standin):
    from focus_go.generation.tinker import TinkerPolicy

    client = standin.training_client()
    sampler = client.save_weights_and_get_sampling_client().result()
    with TinkerPolicy(sampler, model=server.model, profile="token_chunk") as policy:
        with pytest.raises(ValueError, match="share_first_prompt"):
            policy.share_first_prompt(0)
