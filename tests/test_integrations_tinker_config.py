"""The Tinker loop's settings, driven through the real tinker SDK client classes over the
service stand-in (tinker_standin.py): tool environments under ``stable_reinforce`` in both
layouts, every setting the loop, the SDK or tinker-cookbook refuses refused before the
first request, a rejection from the service ending ``train``, and resumes that must keep
the checkpoint's settings."""

from __future__ import annotations

import asyncio
import json

import pytest

tinker = pytest.importorskip("tinker")
np = pytest.importorskip("numpy")

from tinker_standin import StandinTinker  # noqa: E402
from test_tools import calc, grader  # noqa: E402

from collectors import math_collector  # noqa: E402
from focus_go import Agent, Collector, Critic, Selective, ToolEnv  # noqa: E402
from focus_go.backends import SamplingParams  # noqa: E402
from focus_go.integrations.tinker import load_checkpoint, train, update_actor  # noqa: E402

TOOL_SAMPLING = SamplingParams(temperature=1.0, max_tokens=256)


def run_train(standin, server, problems, **kwargs):
    args = dict(model=server.model, problems=problems, collector_for=math_collector, steps=2, learning_rate=1e-5,
                profile="token_chunk")
    args.update(kwargs)
    return asyncio.run(train(standin.training_client(), **args))


# -- tool environments under stable_reinforce ----------------------------------------------


def tool_collector(policy, problem):
    agent = Agent(policy=policy, env=ToolEnv({"calculator": calc}, answer=grader(problem.label)), sampling=TOOL_SAMPLING)
    return Collector(agent, critic=Critic.constant(0.5), search=Selective(4, 2, stop_alike=False))


@pytest.mark.parametrize("layout", ["spans", "paths"])
def test_stable_reinforce_trains_a_multi_turn_tool_env(server, standin, problems, layout):
    # Each tool turn's record ends with the tool's response (conditioning, not sampled);
    # the service checks every span against the requests the SDK sent.
    reports = run_train(standin, server, problems, collector_for=tool_collector, profile="hermes",
                        loss_fn="stable_reinforce", layout=layout)
    assert len(reports) == 2
    datums = [d for batch in standin.trained for d in batch]
    assert datums and all(d.loss_fn_input_spans and d.model_input_spans for d in datums)
    # Some datum trained a tool call: a sampled sequence that a later request's prompt
    # goes on from (with the tool's response).
    sampled = {s[1] for d in datums for s in d.loss_fn_input_spans if s[0] == "sampled_tokens"}
    prompts = [standin.sequences[sid][0] for sid in standin.sequences]
    tool_turns = [sid for sid in sampled if any(
        len(p) > len(standin.sequences[sid][0]) + len(standin.sequences[sid][1])
        and p[: len(standin.sequences[sid][0]) + len(standin.sequences[sid][1])] == standin.sequences[sid][0] + standin.sequences[sid][1]
        for p in prompts)]
    assert tool_turns
    # Nothing trained on a position the policy did not sample.
    for d in datums:
        sampled_positions = sum(s[3] for s in d.loss_fn_input_spans if s[0] == "sampled_tokens")
        assert np.count_nonzero(d.inputs["advantages"]) <= sampled_positions


def test_trailing_conditioning_tokens_are_left_out_of_the_datum():
    from focus_go.integrations.tinker import to_datum

    record = {"tokens": [5, 6, 7, 20, 21, 30, 31], "loss_mask": [False, False, False, True, True, False, False],
              "behavior_logprobs": [0.0, 0.0, 0.0, -0.5, -0.25, 0.0, 0.0], "advantage": 0.5, "lane": "actor",
              "response_start": 3, "tinker_sequence_id": "seq-1"}
    datum = to_datum(record)
    assert datum.model_input.to_ints() == [5, 6, 7, 20]
    assert datum.loss_fn_inputs["target_tokens"].tolist() == [6, 7, 20, 21]
    assert datum.loss_fn_inputs["advantages"].tolist() == [0.0, 0.0, 0.5, 0.5]
    assert [type(s).__name__ for s in datum.loss_fn_input_spans] == ["PromptProvenanceSpan", "SampledProvenanceSpan"]


# -- settings refused before the first request ----------------------------------------------


class RecordingReference:
    """A reference sampler that records whether it was asked anything."""

    def __init__(self):
        self.calls = 0

    def compute_logprobs(self, sequence):
        self.calls += 1
        raise AssertionError("the reference was asked before the configuration was checked")


@pytest.mark.parametrize("kwargs, message", [
    ({"loss_fn": "pppo"}, "loss_fn must be one of .*'ppo'.*got 'pppo'"),
    ({"loss_fn": "cross_entropy"}, "loss_fn must be one of"),
    ({"loss_fn": "importance_sampling", "loss_fn_config": {"clip_low_threshold": 0.8}}, "importance_sampling.*takes no loss_fn_config"),
    ({"loss_fn": "ppo", "loss_fn_config": {"clip_lo": 0.8}}, "takes loss_fn_config keys.*clip_lo"),
    ({"loss_fn": "ppo", "loss_fn_config": {"clip_low_threshold": 1.2, "clip_high_threshold": 0.8}}, "below clip_high_threshold"),
    ({"loss_fn": "stable_reinforce", "kl_penalty_coef": 0.1, "kl_discount_factor": 0.9, "layout": "paths"},
     "kl_discount_factor > 0 is not supported with loss_fn='stable_reinforce'"),
    ({"kl_penalty_coef": 0.1, "kl_discount_factor": 0.9}, "kl_discount_factor > 0 needs layout='paths'"),
    ({"eval_problems": "EVAL"}, "eval_problems holds 2 problems but eval_every is 0"),
    ({"ttl_seconds": 600, "checkpoint_every": 1, "checkpoint_path": "CKPT"}, "ttl_seconds must be .*3600"),
    ({"rolling_ttl_seconds": 60, "rolling_save_every": 1, "checkpoint_path": "CKPT"}, "rolling_ttl_seconds must be"),
    ({"learning_rate": lambda step: 1e-5}, "learning_rate must be a finite number > 0.*no schedule"),
    ({"learning_rate": "linear"}, "learning_rate must be"),
    ({"layout": "trees"}, "layout"),
])
def test_settings_refused_before_the_first_request(server, standin, problems, tmp_path, kwargs, message):
    kwargs = dict(kwargs)
    if kwargs.get("eval_problems") == "EVAL":
        kwargs["eval_problems"] = server.problems()[4:6]
    if kwargs.get("checkpoint_path") == "CKPT":
        kwargs["checkpoint_path"] = tmp_path / "checkpoints.jsonl"
    reference = RecordingReference()
    if kwargs.get("kl_penalty_coef"):
        kwargs["kl_reference_client"] = reference
    with pytest.raises(ValueError, match=message):
        run_train(standin, server, problems, **kwargs)
    assert standin.paths == [] and reference.calls == 0  # nothing sent, nothing paid for


def test_importance_sampling_sends_no_ppo_clip(server, sim_policy, standin, problems):
    run_train(standin, server, problems, steps=1, loss_fn="importance_sampling")
    assert [(loss, config) for loss, config, _ in standin.fb_calls] == [("importance_sampling", {})]
    ppo = StandinTinker(sim_policy)
    try:
        run_train(ppo, server, problems, steps=1)  # ppo: the paper's clip by default
        assert [call[:2] for call in ppo.fb_calls] == [("ppo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2})]
    finally:
        ppo.close()


def test_update_actor_checks_the_loss_before_sending(standin):
    record = {"tokens": [5, 6, 7, 20], "loss_mask": [False, False, True, True], "behavior_logprobs": [0, 0, -0.5, -0.5],
              "advantage": 0.5, "lane": "actor", "response_start": 2}
    client = standin.training_client()
    with pytest.raises(ValueError, match="importance_sampling.*takes no loss_fn_config"):
        asyncio.run(update_actor(client, [record], learning_rate=1e-5, loss_fn="importance_sampling",
                                 loss_fn_config={"clip_low_threshold": 0.8}))
    assert standin.paths == []


def test_a_rejected_request_ends_train_with_the_service_message(server, sim_policy, problems, monkeypatch):
    # The service refuses the forward_backward (as it would a loss it does not know); its
    # optimizer step then never runs. train ends with the service's message, promptly.
    from focus_go.integrations.tinker import config as config_module

    monkeypatch.setattr(config_module, "RL_LOSSES", config_module.RL_LOSSES + ("custom",))
    standin = StandinTinker(sim_policy)
    try:
        with pytest.raises(Exception, match="unknown loss_fn 'custom'"):
            asyncio.run(asyncio.wait_for(
                train(standin.training_client(), model=server.model, problems=problems, collector_for=math_collector,
                      steps=2, learning_rate=1e-5, profile="token_chunk", loss_fn="custom"),
                timeout=120,
            ))
    finally:
        standin.close()


# -- resume keeps the checkpoint's settings -------------------------------------------------


@pytest.mark.parametrize("change, name", [
    ({"profile": "hermes"}, "profile"),
    ({"loss_fn": "importance_sampling"}, "loss_fn"),
    ({"loss_fn_config": {"clip_low_threshold": 0.7, "clip_high_threshold": 1.3}}, "loss_fn_config"),
    ({"learning_rate": 3e-5}, "learning_rate"),
    ({"layout": "paths"}, "layout"),
])
def test_resume_with_other_settings_is_refused_naming_them(server, sim_policy, standin, problems, tmp_path, change, name):
    checkpoints = tmp_path / "checkpoints.jsonl"
    run_train(standin, server, problems, steps=2, checkpoint_every=1, checkpoint_path=checkpoints)
    saved = load_checkpoint(checkpoints)
    assert saved.settings["profile"] == "token_chunk" and saved.settings["learning_rate"] == 1e-5
    assert saved.settings["loss_fn"] == "ppo" and saved.settings["layout"] == "spans"
    client = StandinTinker(sim_policy, states=standin.states)
    try:
        with pytest.raises(ValueError, match=f"trained with {name}="):
            run_train(client, server, problems, steps=4, checkpoint_path=checkpoints, **change)
        assert client.paths == []
    finally:
        client.close()


def test_checkpoints_carry_cumulative_totals_a_resume_goes_on_from(server, sim_policy, standin, problems, tmp_path):
    checkpoints, log = tmp_path / "checkpoints.jsonl", tmp_path / "metrics.jsonl"
    run_train(standin, server, problems, steps=2, checkpoint_every=2, checkpoint_path=checkpoints, log_path=log)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert rows[-1]["total/tokens/sampled"] == sum(r["tokens/sampled"] for r in rows)
    assert load_checkpoint(checkpoints).totals["tokens/sampled"] == rows[-1]["total/tokens/sampled"]
    client = StandinTinker(sim_policy, states=standin.states)
    try:
        run_train(client, server, problems, steps=3, checkpoint_path=checkpoints, log_path=log)
    finally:
        client.close()
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[-1]["total/tokens/trained"] == pytest.approx(sum(r["tokens/trained"] for r in rows))


# -- cookbook metrics -----------------------------------------------------------------------


def test_compute_post_kl_scores_the_datums_on_the_post_update_sampler(server, sim_policy, standin, problems, tmp_path):
    from tinker_standin import DRIFT, REF_JITTER

    log = tmp_path / "metrics.jsonl"
    run_train(standin, server, problems, steps=2, async_depth=0, compute_post_kl=True, log_path=log)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    trained = [len(batch) for batch in standin.trained]
    # Each update's datums, scored by a sampler of the weights after it.
    assert [standin.samplers[session] for session, _ in standin.score_calls] == [1] * trained[0] + [2] * trained[1]
    for row in rows:
        # The stand-in's post-update sampler is one DRIFT lower, with REF_JITTER on odd positions.
        assert DRIFT - REF_JITTER - 1e-6 <= row["kl_pre_post_v1"] <= DRIFT + 1e-6
        assert row["kl_pre_post_v2"] > 0 and row["optim/entropy"] > 0
    # The post-update sampler is the one the next batch samples from: one publish more
    # than a run without it (the final weights'), not one per update.
    plain = StandinTinker(sim_policy)
    try:
        run_train(plain, server, problems, steps=2, async_depth=0)
        assert len(standin.sampler_order) == len(plain.sampler_order) + 1
    finally:
        plain.close()


def test_kl_reference_scoring_is_counted_in_the_billed_tokens(server, sim_policy, standin, problems, tmp_path):
    log = tmp_path / "metrics.jsonl"
    reference = StandinTinker(sim_policy)
    try:
        ref_client = reference.training_client().save_weights_and_get_sampling_client()
        ref_client = ref_client.result() if hasattr(ref_client, "result") else ref_client
        run_train(standin, server, problems, steps=2, kl_penalty_coef=0.1, kl_reference_client=ref_client, log_path=log,
                  compute_post_kl=False)
        rows = [json.loads(line) for line in log.read_text().splitlines()]
        scored = [sum(len(seq) for _, seq in reference.score_calls)]
        assert sum(r["tokens/kl_reference"] for r in rows) == scored[0] > 0
        # Billed as uncached prefill, with the samplers' prompts.
        assert all(r["tokens/prefill_uncached"] >= r["tokens/kl_reference"] for r in rows)
    finally:
        reference.close()


def test_resume_with_a_client_created_from_the_state_loads_nothing(server, sim_policy, standin, problems, tmp_path):
    # The SDK's supported resume: a training client created from the checkpoint's state
    # (create_training_client_from_state_with_optimizer), which train uses as it is.
    checkpoints = tmp_path / "checkpoints.jsonl"
    run_train(standin, server, problems, steps=2, checkpoint_every=2, checkpoint_path=checkpoints)
    saved = load_checkpoint(checkpoints)
    created = StandinTinker(sim_policy, start_version=standin.states[saved.state_path], states=standin.states)
    try:
        reports = run_train(created, server, problems, steps=3, checkpoint_path=checkpoints, state_loaded=True)
        assert [r.learner_step for r in reports] == [2] and created.loads == []
        assert created.samplers[created.sampler_order[0]] == 2
    finally:
        created.close()
    fresh = StandinTinker(sim_policy)
    try:
        with pytest.raises(ValueError, match="state_loaded is set but there is no checkpoint"):
            run_train(fresh, server, problems, steps=1, state_loaded=True)
        assert fresh.paths == []
    finally:
        fresh.close()


def test_a_span_record_of_two_sampled_runs_is_named_as_a_chain():
    # Generated, an observation, generated again, then a tool response: each generated run
    # is a request's sampled tokens, the observation the second request's prompt.
    from focus_go.integrations.tinker import to_datum
    from focus_go.integrations.tinker.datum import _add_sequence_ids

    record = {"tokens": [5, 6, 20, 21, 30, 31, 22, 23, 40], "loss_mask": [0, 0, 1, 1, 0, 0, 1, 1, 0],
              "behavior_logprobs": [0, 0, -0.5, -0.5, 0, 0, -0.5, -0.5, 0], "advantage": 0.5, "lane": "actor",
              "response_start": 2}
    _add_sequence_ids([record], {((5, 6), (20, 21)): "seq-a", ((5, 6, 20, 21, 30, 31), (22, 23)): "seq-b"})
    assert record["tinker_sequences"] == [("seq-a", 2, 2), ("seq-b", 6, 2)]
    spans = [(type(s).__name__, s.sequence_id, s.offset, s.length) for s in to_datum(record).loss_fn_input_spans]
    assert spans == [("PromptProvenanceSpan", "seq-a", 1, 1), ("SampledProvenanceSpan", "seq-a", 0, 2),
                     ("PromptProvenanceSpan", "seq-b", 4, 2), ("SampledProvenanceSpan", "seq-b", 0, 2)]
