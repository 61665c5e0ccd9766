"""Issue 18: what Slime asks of a generate hook beyond the default rollout: evaluation calls,
the per-call sampling_params (training's GenerateState dict, each eval dataset's own),
pass-rate metrics that see the trees, a loss reducer on Slime's scale, and label-less
samples. Slime is stood in by tests/slime_contract; the SGLang router by a recording
proxy in front of the simulated server, so each test reads the /generate bodies the Go
policy sent."""

from __future__ import annotations

import asyncio
import http.server
import inspect
import json
import math
import statistics
import threading
import urllib.request

import pytest

from focus_go.backends import SamplingParams

from slime_contract import Sample, check_fanout, compute_pass_rate, generate_and_rm, make_args
from collectors import math_collector

# The hook Slime loads by dotted path (set per test).
generate_hook = None


class RecordingRouter:
    """A loopback HTTP proxy in front of the simulated server that keeps every request
    body, standing in for the sglang-router Slime starts."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.bodies = []
        self._lock = threading.Lock()
        router = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _forward(self, method):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                if body and self.path.startswith("/generate"):
                    with router._lock:
                        router.bodies.append(json.loads(body))
                req = urllib.request.Request(router.upstream + self.path, data=body, method=method)
                req.add_header("Content-Type", "application/json")
                try:
                    with urllib.request.urlopen(req, timeout=60) as resp:
                        data, status = resp.read(), resp.status
                except urllib.error.HTTPError as err:
                    data, status = err.read(), err.code
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                self._forward("POST")

            def do_GET(self):
                self._forward("GET")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def take(self):
        with self._lock:
            bodies, self.bodies = self.bodies, []
        return bodies

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def router(server):
    r = RecordingRouter(server.url)
    yield r
    r.close()


@pytest.fixture
def args(server, router):
    router.take()
    return make_args(sglang_router_port=router.port, hf_checkpoint=server.model, n_samples_per_prompt=1)


def collector_for(policy, problem):
    """The example's collector (no sampling of its own: Slime's settings decide)."""
    return math_collector(policy, problem, sampling=None)


def a_sample(server, index=70, group_index=7, prompt_index=0, **fields):
    p = server.problems()[prompt_index]
    return Sample(group_index=group_index, index=index, prompt=p.prompt, label=p.label, **fields)


def run(hook, *calls):
    async def go():
        return await asyncio.gather(*(generate_and_rm(*c[:3], evaluation=c[3]) for c in calls))

    global generate_hook
    generate_hook = hook
    try:
        return asyncio.run(go())
    finally:
        hook.close()


TRAINING = dict(  # GenerateState.sampling_params for make_args' defaults
    temperature=1.0, top_p=1.0, top_k=-1, max_new_tokens=1024, stop=None, stop_token_ids=None,
    skip_special_tokens=False, no_stop_trim=True, spaces_between_special_tokens=False,
)


# ---- item 3: evaluation -------------------------------------------------------------------


def test_generate_answers_an_evaluation_call_as_make_evaluate(server, args, router):
    from focus.integrations.slime import make_evaluate, make_generate

    args.custom_generate_function_path = f"{__name__}.generate_hook"
    eval_params = dict(TRAINING, temperature=0.6, max_new_tokens=512)
    train_hook = make_generate(collector_for, profile="token_chunk")
    assert "evaluation" in inspect.signature(train_hook).parameters  # so Slime passes it
    (via_generate,) = run(train_hook, (args, Sample(index=3, prompt=server.problems()[0].prompt, label=server.problems()[0].label), eval_params, True))
    generate_requests = router.take()
    (via_evaluate,) = run(make_evaluate(collector_for, profile="token_chunk"), (args, Sample(index=3, prompt=server.problems()[0].prompt, label=server.problems()[0].label), eval_params, True))
    evaluate_requests = router.take()

    # One sample (not a tree's list), rewarded by the outcome, exactly what make_evaluate gives.
    assert isinstance(via_generate, Sample)
    assert via_generate.reward in (0.0, 1.0) and via_generate.reward == via_generate.metadata["focus"]["outcome"]
    assert via_generate.tokens == via_evaluate.tokens and via_generate.reward == via_evaluate.reward
    assert via_generate.metadata == via_evaluate.metadata
    # One unbranched rollout: as many requests as segments, all at the dataset's temperature.
    assert len(generate_requests) == len(evaluate_requests) == via_generate.metadata["focus"]["segments"]
    assert {b["sampling_params"]["temperature"] for b in generate_requests} == {0.6}


def test_evaluation_pass_rate_uses_outcome_rewards(server, args):
    # Slime's eval side: n_samples_per_eval_prompt calls per prompt (index counts up), the
    # rewards sorted by index, compute_pass_rate over groups of n (reward == 1 passes).
    from focus.integrations.slime import log_eval_rollout, make_generate

    n = 4
    args.custom_generate_function_path = f"{__name__}.generate_hook"
    args.n_samples_per_eval_prompt = n
    problems = server.problems()[:2]
    calls = [
        (args, Sample(index=i * n + j, prompt=p.prompt, label=p.label), dict(TRAINING, temperature=1.0), True)
        for i, p in enumerate(problems)
        for j in range(n)
    ]
    out = sorted(run(make_generate(collector_for, profile="token_chunk"), *calls), key=lambda s: s.index)
    rewards = [s.reward for s in out]
    assert set(rewards) <= {0.0, 1.0}
    expected = compute_pass_rate(rewards, n)
    assert set(expected) == {"pass@1", "pass@2", "pass@4"}
    assert expected["pass@1"] == pytest.approx(sum(rewards) / len(rewards))
    # The eval log hook reports the same, under Slime's eval keys, when --log-passrate is off.
    metrics = {}
    data = {"aime": {"rewards": rewards, "truncated": [False] * len(rewards), "samples": out}}
    assert log_eval_rollout(0, args, data, metrics) is False
    assert metrics == {f"eval/aime-{k}": pytest.approx(v) for k, v in expected.items()}
    args.log_passrate = True  # Slime computes it itself then
    metrics = {}
    assert log_eval_rollout(0, args, data, metrics) is False and metrics == {}


# ---- item 7: per-call sampling_params ------------------------------------------------------


def test_per_call_sampling_params_reach_every_request(server, args, router):
    from focus.integrations.slime import make_generate

    args.custom_generate_function_path = f"{__name__}.generate_hook"
    params = dict(TRAINING, temperature=0.7, top_k=20, stop=["\n\n\n"], repetition_penalty=1.05, max_new_tokens=48)
    sent = json.loads(json.dumps(params))
    (out,) = run(make_generate(collector_for, profile="token_chunk"), (args, a_sample(server), params, False))
    assert params == sent  # Slime shares one dict across eval calls: the hook must not change it
    check_fanout(out)
    bodies = router.take()
    assert bodies
    for b in bodies:
        sp = b["sampling_params"]
        assert (sp["temperature"], sp["top_k"], sp["stop"], sp["repetition_penalty"]) == (0.7, 20, ["\n\n\n"], 1.05)
        assert sp["top_p"] == 1.0 and sp["no_stop_trim"] is True and sp["skip_special_tokens"] is False
        assert sp["max_new_tokens"] <= 32  # a segment
    # max_new_tokens bounds each root-to-leaf path (Agent.max_total_tokens 8192 -> 48): a
    # segment is 32 tokens unless it stops, so a path's second request may ask 16 at most.
    assert {b["sampling_params"]["max_new_tokens"] for b in bodies} == {32, 16}
    assert all(s.status == Sample.Status.COMPLETED for s in out)


def test_eval_dataset_settings_and_training_defaults(server, args, router):
    from focus.integrations.slime import make_evaluate

    args.custom_generate_function_path = f"{__name__}.generate_hook"
    # An eval dataset may use top_p < 1 (nothing is trained on it); None falls back to args.
    (out,) = run(make_evaluate(collector_for, profile="token_chunk"), (args, a_sample(server), dict(TRAINING, top_p=0.9, temperature=0.3), True))
    assert {(b["sampling_params"]["top_p"], b["sampling_params"]["temperature"]) for b in router.take()} == {(0.9, 0.3)}
    args.eval_temperature = 0.2
    for none in (None, {}):
        hook = make_evaluate(collector_for, profile="token_chunk")
        try:
            asyncio.run(hook(args, a_sample(server), none))
        finally:
            hook.close()
        assert {b["sampling_params"]["temperature"] for b in router.take()} == {0.2}


def test_sampling_seed_seeds_the_tree_not_every_request(server, args, router):
    # --sglang-enable-deterministic-inference: Slime gives group member i sampling_seed
    # rollout_seed + i. One seed for every request would make every branch identical;
    # it seeds the tree instead (each request's seed derived from it).
    from focus.integrations.slime import make_generate

    args.custom_generate_function_path = f"{__name__}.generate_hook"

    def tree(seed):
        (out,) = run(make_generate(collector_for, profile="token_chunk"), (args, a_sample(server), dict(TRAINING, sampling_seed=seed), False))
        # Requests run concurrently: compare as sorted multisets.
        return sorted((s.tokens, s.reward) for s in out), sorted(b["sampling_params"]["sampling_seed"] for b in router.take())

    first, seeds = tree(42)
    again, seeds_again = tree(42)
    other, other_seeds = tree(43)
    assert first == again and seeds == seeds_again
    assert len(set(seeds)) > 1  # branches are sampled with different seeds
    assert other_seeds != seeds


def test_skip_special_tokens_applies_to_the_response_text(server, args):
    from focus.integrations.slime import make_generate

    args.custom_generate_function_path = f"{__name__}.generate_hook"
    (kept,) = run(make_generate(collector_for, profile="token_chunk"), (args, a_sample(server), TRAINING, False))
    (skipped,) = run(make_generate(collector_for, profile="token_chunk"), (args, a_sample(server), dict(TRAINING, skip_special_tokens=True), False))
    eos = server.eos_token_id
    ended = [(a, b) for a, b in zip(kept, skipped) if a.tokens[-1] == eos]
    assert ended and all(a.tokens == b.tokens for a, b in zip(kept, skipped))
    for a, b in ended:
        assert a.response != b.response and a.response.startswith(b.response)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(min_new_tokens=8), "min_new_tokens"),
        (dict(no_stop_trim=False), "no_stop_trim"),
        (dict(spaces_between_special_tokens=True), "spaces_between_special_tokens"),
        (dict(top_p=0.9), "top-p replay"),
        (dict(custom_params={"return_top_p_token_ids": True}), "custom_params"),
        (dict(n=2), "does not know"),
        (dict(max_new_tokens=0), "max_new_tokens"),
    ],
)
def test_settings_that_cannot_apply_to_a_tree_are_refused(server, args, change, match):
    from focus.integrations.slime import make_generate

    hook = make_generate(collector_for, profile="token_chunk")
    try:
        with pytest.raises(ValueError, match=match):
            asyncio.run(hook(args, a_sample(server), dict(TRAINING, **change)))
    finally:
        hook.close()


def test_stop_token_ids_reach_every_request(server, args, router):
    # --rollout-stop-token-ids (no params passed: read from args) and a call's own
    # stop_token_ids (Slime's dict) both end every request of the tree at those ids.
    from focus.integrations.slime import make_generate

    args.custom_generate_function_path = f"{__name__}.generate_hook"
    eos = server.eos_token_id
    flagged = make_args(**{**vars(args), "rollout_stop_token_ids": [eos, 7]})
    for call_args, params in ((flagged, None), (args, dict(TRAINING, stop_token_ids=[eos, 7]))):
        (out,) = run(make_generate(collector_for, profile="token_chunk"), (call_args, a_sample(server), params, False))
        check_fanout(out)
        bodies = router.take()
        assert bodies and all(b["sampling_params"]["stop_token_ids"] == [eos, 7] for b in bodies)


def test_agent_sampling_wins_with_a_warning(server, args, router):
    from focus.integrations.slime import make_generate

    def own_sampling(policy, problem):
        c = collector_for(policy, problem)
        c.agent.sampling = SamplingParams(temperature=0.9)
        return c

    args.custom_generate_function_path = f"{__name__}.generate_hook"
    with pytest.warns(UserWarning, match="temperature 0.5 .agent: 0.9"):
        run(make_generate(own_sampling, profile="token_chunk"), (args, a_sample(server), dict(TRAINING, temperature=0.5), False))
    assert {b["sampling_params"]["temperature"] for b in router.take()} == {0.9}


# ---- item 4: pass rates ----------------------------------------------------------------------


def test_log_passrate_with_several_trees_per_prompt_is_refused_first(server, args, router):
    from focus.integrations.slime import make_generate

    hook = make_generate(collector_for, profile="token_chunk")
    try:
        with pytest.raises(ValueError, match="--log-passrate.*log_rollout"):
            asyncio.run(hook(make_args(**{**vars(args), "log_passrate": True, "n_samples_per_prompt": 2}), a_sample(server), TRAINING))
    finally:
        hook.close()
    assert router.take() == []  # refused before any request
    # One tree per prompt: Slime's train-side pass rate is empty (group size 1) and eval works.
    args.custom_generate_function_path = f"{__name__}.generate_hook"
    args.log_passrate = True
    (out,) = run(make_generate(collector_for, profile="token_chunk"), (args, a_sample(server), TRAINING, False))
    assert out


def test_log_rollout_reports_pass_at_k_over_the_trees(server, args):
    from focus.integrations.slime import log_rollout, make_generate

    args.custom_generate_function_path = f"{__name__}.generate_hook"
    trees = run(
        make_generate(collector_for, profile="token_chunk"),
        *[(args, a_sample(server, index=10 * k, group_index=k, prompt_index=k), TRAINING, False) for k in range(3)],
    )
    flat = [s for t in trees for s in t]
    counts = []
    for t in trees:
        focus = [s.metadata["focus"] for s in t]
        assert len({(f["finished_rollouts"], f["successes"]) for f in focus}) == 1  # siblings agree
        counts.append((focus[0]["finished_rollouts"], focus[0]["successes"]))
    assert all(n == 4 for n, _ in counts)  # budget 4, no failures
    metrics = {"rollout/dynamic_filter/drop_x": 1}
    assert tuple(inspect.signature(log_rollout).parameters) == ("rollout_id", "args", "samples", "rollout_extra_metrics", "rollout_time")
    assert log_rollout(5, args, flat, metrics, 1.5) is False  # Slime's default logging still runs
    # Each tree is one problem with n attempts and c passes: Slime's estimator per tree.
    expected = {}
    for k in (1, 2, 4):
        expected[f"passrate/pass@{k}"] = sum(1 - math.comb(n - c, k) / math.comb(n, k) if n - c >= k else 1.0 for n, c in counts) / 3
    trained = sum(sum(s.loss_mask) for s in flat) / 3  # each tree's loss-mask tokens, averaged
    expected["rollout/focus/trained_tokens_per_tree"] = trained
    # Per finished rollout, from the counts Go recorded on each tree's samples.
    firsts = [t[0].metadata["focus"] for t in trees]
    lengths = [n for f in firsts for n in f["rollout_tokens"]]
    assert len(lengths) == sum(n for n, _ in counts) and all(n > 0 for n in lengths)
    expected["rollout/focus/truncated_ratio"] = sum(f["truncated_rollouts"] for f in firsts) / sum(n for n, _ in counts)
    expected |= {"rollout/focus/response_len/mean": statistics.mean(lengths), "rollout/focus/response_len/median": statistics.median(lengths),
                 "rollout/focus/response_len/max": max(lengths), "rollout/focus/response_len/min": min(lengths)}
    assert metrics == {"rollout/dynamic_filter/drop_x": 1, **{k: pytest.approx(v) for k, v in expected.items()}}
    assert metrics["passrate/pass@1"] == pytest.approx(sum(c / n for n, c in counts) / 3)
    # Samples without FOCUS counts (Slime's contract test passes bare ones) add nothing.
    metrics = {}
    assert log_rollout(3, type("Args", (), {})(), [Sample(index=0)], metrics, 0.5) is False and metrics == {}


def test_pass_rates_match_slime_semantics():
    from focus.integrations.slime import pass_rates

    flat = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.5]
    ours = pass_rates([(4, sum(1 for r in flat[i : i + 4] if r == 1)) for i in range(0, 12, 4)])
    assert ours == pytest.approx(compute_pass_rate(flat, 4))


# ---- item 8: loss scale ---------------------------------------------------------------------


def test_normalized_policy_tokens():
    from focus.integrations.slime import normalized_policy_tokens, sum_policy_tokens

    factory = normalized_policy_tokens(4)
    assert tuple(inspect.signature(factory).parameters) == ("total_lengths", "response_lengths", "loss_masks", "calculate_per_token_loss")
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    masks = [[1, 0], [1, 1, 0]]
    assert factory([5, 6], [2, 3], masks, False)(x) == sum_policy_tokens([5, 6], [2, 3], masks)(x) / 4 == 2.0
    with pytest.raises(ValueError, match="calculate-per-token-loss"):
        factory([5, 6], [2, 3], masks, True)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="tokens_per_rollout"):
            normalized_policy_tokens(bad)


# ---- item 9: label-less samples -------------------------------------------------------------


def test_label_less_sample_reaches_the_env(server, args):
    from focus.integrations import Problem
    from focus.integrations.slime import make_generate

    seen = []

    def no_label_env(policy, problem):
        seen.append(problem)
        return collector_for(policy, Problem(problem.prompt, server.problems()[0].label, id=problem.id))

    args.custom_generate_function_path = f"{__name__}.generate_hook"
    (out,) = run(make_generate(no_label_env, profile="token_chunk"), (args, Sample(index=0, prompt=server.problems()[0].prompt), TRAINING, False))
    assert seen[0].label is None and seen[0].id == "gNone-i0"
    check_fanout(out)
    # MathEnv needs a label: the error says so and names --label-key.
    hook = make_generate(collector_for, profile="token_chunk")
    try:
        with pytest.raises(ValueError, match="MathEnv: label is None.*--label-key"):
            asyncio.run(hook(args, Sample(index=0, prompt="Solve 1 + 1."), TRAINING))
    finally:
        hook.close()


# ---- examples/slime ---------------------------------------------------------------------------


def test_example_sets_up_evaluation_pass_rates_and_the_reducer(server, args, monkeypatch, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    from slime_contract import load_function

    here = Path(__file__).resolve().parents[1] / "examples" / "slime"
    launch = (here / "launch.sh").read_text()
    for flag, path in (
        ("--custom-rollout-log-function-path", "focus.integrations.slime.log_rollout"),
        ("--custom-eval-rollout-log-function-path", "focus.integrations.slime.log_eval_rollout"),
    ):
        assert f"{flag} {path}" in launch and callable(load_function(path))
    assert '--eval-config "$HERE/eval.yaml"' in launch and "--custom-pg-loss-reducer-function-path focus_math.reducer" in launch
    config = yaml.safe_load((here / "eval.yaml").read_text())["eval"]
    (dataset,) = config["datasets"]
    assert dataset["custom_generate_function_path"] == "focus_math.evaluate"
    assert config["defaults"]["n_samples_per_eval_prompt"] >= 2
    # A stub `python` first on PATH prints the arguments launch.sh passes it.
    fake = tmp_path / "train.py"
    fake.write_text("")
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "PROMPT_DATA": "p.jsonl", "HF_CHECKPOINT": "m", "SLIME_DIR": str(tmp_path),
           "EVAL_PROMPT_DATA": "e.jsonl", "FOCUS_TOKENS_PER_TREE": "2048"}
    (tmp_path / "python").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    (tmp_path / "python").chmod(0o755)
    argv = subprocess.run(["bash", str(here / "launch.sh")], env=env, capture_output=True, text=True, check=True).stdout.split("\n")
    reducers = [argv[i + 1] for i, a in enumerate(argv) if a == "--custom-pg-loss-reducer-function-path"]
    assert reducers[-1] == "focus_math.reducer"  # the last one wins in argparse
    assert argv[argv.index("--eval-config") + 1] == str(here / "eval.yaml")

    monkeypatch.syspath_prepend(str(here))
    monkeypatch.setenv("FOCUS_TOKENS_PER_TREE", "2048")
    for key, value in {"FOCUS_BUDGET": "4", "FOCUS_WARMUP": "2", "FOCUS_SEGMENT_TOKENS": "32", "FOCUS_CRITIC_DIR": str(tmp_path / "c")}.items():
        monkeypatch.setenv(key, value)
    sys.modules.pop("focus_math", None)
    try:
        focus_math = __import__("focus_math")
        assert focus_math.reducer.tokens_per_rollout == 2048
        # The training hook answers an eval dataset without its own hook (--eval-prompt-data).
        args.custom_generate_function_path = "focus_math.generate"
        p = server.problems()[0]
        out = asyncio.run(generate_and_rm(args, Sample(index=0, prompt=p.prompt, label=p.label), dict(TRAINING, temperature=0.6), evaluation=True))
        assert isinstance(out, Sample) and out.reward in (0.0, 1.0)
    finally:
        if "focus_math" in sys.modules:
            sys.modules["focus_math"].generate.close()
            sys.modules["focus_math"].evaluate.close()
        sys.modules.pop("focus_math", None)


# ---- the collector's own options reach every call's collector ------------------------------


def test_each_call_collects_with_the_collectors_options(server, args):
    # A call's collector is a copy of collector_for's with the call's settings; the options
    # the user gave (timeouts, retries) travel, and the generate hook turns stop_on_abort on.
    from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
    from focus_go.backends import SGLangPolicy
    from focus_go.integrations.slime.settings import _call_collector, _call_settings

    p = server.problems()[0]
    policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
    try:
        agent = Agent(policy=policy, env=MathEnv(p.label, policy.decode), context=Segments(16))
        base = Collector(agent, critic=Critic.constant(0.5), search=Selective(4, 2), policy_timeout=30.0,
                         critic_timeout=5, max_retries=2)
        settings = _call_settings(args, dict(TRAINING), evaluation=False)
        call = _call_collector(base, settings)
        assert (call.timeouts, call.max_retries, call.stop_on_abort) == (base.timeouts, 2, False)
        assert call.timeouts == {"policy_timeout": 30.0, "env_timeout": 0.0, "critic_timeout": 5.0}
        assert _call_collector(base, settings, stop_on_abort=True).stop_on_abort is True
        evaluation = _call_collector(base, settings, search=Selective(2, 1), critic=None, workspace=None)
        assert (evaluation.critic, evaluation.max_retries, evaluation.timeouts) == (None, 2, base.timeouts)
    finally:
        policy.close()


def test_the_generate_hook_asks_for_stop_on_abort_by_its_public_option():
    # No private field of the Collector is written by the integrations.
    import pathlib
    import re

    import focus_go.integrations

    root = pathlib.Path(focus_go.integrations.__file__).parent
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"collector\._[a-z]", text), path
    hooks = (root / "slime" / "hooks.py").read_text(encoding="utf-8")
    assert "stop_on_abort=True" in hooks
