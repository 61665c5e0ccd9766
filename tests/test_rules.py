"""One source for every rule and default: the Go rules (capi/binding) decide, Python declares.

The Python signatures keep the spec's literal defaults; these tests check that they, and
the command line's flags, equal the library's (Go's) defaults, that each configuration
object is checked by the Go rules at construction with an error naming the field, and
that the tree's outcome counts come from the engine."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import inspect
import json

import pytest

from focus_go import Agent, Collector, Critic, Independent, MathEnv, RewardConfig, Segments, Selective, _rules
from focus_go.backends import SamplingParams, SGLangPolicy
from focus_go.cli import collect as collect_command
from focus_go.cli.settings import settings
from focus_go.errors import ConfigError
from focus_go.extend import SchedulerView
from focus_go import types as focus_types


def _field_defaults(cls):
    return {f.name: f.default for f in dataclasses.fields(cls)}


def test_python_literal_defaults_equal_the_librarys():
    lib = _rules.defaults()
    selective = dict(lib["selective"])
    assert _field_defaults(Selective) == selective
    assert _field_defaults(Independent) == lib["independent"]
    assert _field_defaults(Segments) == lib["segments"]
    agent = inspect.signature(Agent.__init__).parameters
    assert {k: agent[k].default for k in lib["agent"]} == lib["agent"]
    assert dataclasses.asdict(RewardConfig()) == lib["reward"]
    assert (focus_types.DEFAULT_TEMPERATURE, focus_types.DEFAULT_MAX_TOKENS, focus_types.DEFAULT_TOP_P) == (
        lib["sampling"]["temperature"], lib["sampling"]["max_tokens"], lib["sampling"]["top_p"])


def _record_option_defaults():
    """{where it is defined (module.qualname): {parameter: default}} of every function and
    method of the record pipeline that takes ``visitation_weights`` or ``layout``: those of
    the modules below and of every module of the integrations' packages."""
    import pkgutil

    import focus_go._records
    import focus_go.export
    import focus_go.integrations
    import focus_go.preparation

    modules = [focus_go._records, focus_go.export, focus_go.preparation, focus_go.integrations]
    for info in pkgutil.walk_packages(focus_go.integrations.__path__, "focus_go.integrations."):
        modules.append(importlib.import_module(info.name))
    found = {}
    for module in modules:
        members = [f for f in vars(module).values() if inspect.isfunction(f) and f.__module__ == module.__name__]
        for cls in vars(module).values():
            if inspect.isclass(cls) and cls.__module__ == module.__name__:
                members += [f for f in vars(cls).values() if inspect.isfunction(f)]
        for fn in members:
            params = inspect.signature(fn).parameters
            options = {k: params[k].default for k in ("visitation_weights", "layout")
                       if k in params and params[k].default is not inspect.Parameter.empty}
            if options:
                found[f"{fn.__module__}.{fn.__qualname__}"] = options
    return found


def _defined_at(public: str) -> str:
    """Where the function a public dotted path names is defined (module.qualname)."""
    module, _, rest = public.partition(".")
    obj = importlib.import_module(module)
    for part in rest.split("."):
        obj = getattr(obj, part)
    return f"{obj.__module__}.{obj.__qualname__}"


def test_record_option_defaults_equal_the_librarys():
    # Visitation weights are on by default everywhere records are exported (docs/learning-signal.md,
    # "The defaults and the old behaviour"); the per-span layout stays the default.
    lib = _rules.defaults()["records"]
    assert lib == {"layout": "spans", "visitation_weights": False}
    found = _record_option_defaults()
    for public in ("focus_go.preparation.Batch.to_records", "focus_go.export.to_samples",
                   "focus_go.integrations.collect_records", "focus_go.integrations.slime.make_generate",
                   "focus_go.integrations.tinker.train", "focus_go._records.tree_records"):
        assert set(found[_defined_at(public)]) == {"visitation_weights", "layout"}, public
    assert "focus_go.integrations.slime.hooks._Generate.__init__" in found  # the packages' modules are read
    for name, options in found.items():
        assert options == {k: lib[k] for k in options}, name


def _collect_args(*extra):
    parser = argparse.ArgumentParser()
    collect_command.add_parser(parser.add_subparsers())
    return parser.parse_args(["collect", "problems.jsonl", "--out", "out", *extra])


def test_cli_defaults_equal_the_librarys():
    args = _collect_args()
    lib = _rules.defaults()
    sel = lib["selective"]
    assert (args.budget, args.warmup, args.per_pass, args.max_children, args.score, args.seed) == (
        sel["budget"], sel["warmup"], sel["per_pass"], sel["max_children"], sel["score"], sel["seed"])
    assert args.segment_tokens == lib["segments"]["tokens"]
    assert args.visitation_weights is lib["records"]["visitation_weights"] is False
    assert _collect_args("--no-visitation-weights").visitation_weights is False
    assert _collect_args("--visitation-weights").visitation_weights is True
    assert (args.max_segments, args.max_total_tokens) == (lib["agent"]["max_segments"], lib["agent"]["max_total_tokens"])
    run = settings(args)
    # The flags' defaults describe exactly the library's default objects.
    assert run.search == Selective()
    assert run.reward == RewardConfig()
    assert Segments(args.segment_tokens) == Segments()
    assert _collect_args("--search", "independent").budget == Selective().budget


def test_cli_warmup_defaults_to_the_librarys_not_half_the_budget():
    # --warmup defaults to Selective()'s warmup whatever --budget is (docs/signal.md §D).
    w = Selective().warmup
    assert settings(_collect_args("--budget", "64")).search == Selective(64, w)
    with pytest.raises(ConfigError, match=rf"warmup \({w}\) must not exceed budget \({w - 1}\)"):
        settings(_collect_args("--budget", str(w - 1)))
    assert settings(_collect_args("--budget", "64", "--warmup", "16")).search == Selective(64, 16)


def test_independent_runs_as_gos_independent():
    # Python used to send per_pass=1, max_children=1 while Go's search.Independent(n) keeps
    # Selective's round fields: now the engine's config comes from Go.
    sel = _rules.defaults()["selective"]
    config = Independent(8, seed=3)._config()
    assert config == {"budget": 8, "warmup": 8, "per_pass": sel["per_pass"], "max_children": sel["max_children"],
                      "min_remaining": 0, "score": sel["score"], "seed": 3, "stop_alike": False, "independent": True}
    assert Selective(8, 4, min_remaining=None)._config()["min_remaining"] == 0


@pytest.mark.parametrize("score", ["gradient_variance", "shallow_first", "critic_adaptive", "value_refinement_per_token"])
def test_gradient_aimed_scores_are_selectable(score):
    # docs/signal.md §S and §F: the Go rules accept them, and so does the command line.
    assert score in _rules.defaults()["scores"]
    assert Selective(score=score)._config()["score"] == score
    assert settings(_collect_args("--score", score)).search == Selective(score=score)


def test_stop_alike_crosses_to_go():
    # docs/signal.md §P: a tree whose warmup outcomes are all alike stops after its warmup.
    assert _rules.defaults()["selective"]["stop_alike"] is Selective().stop_alike
    assert Selective(8, 4, stop_alike=True)._config()["stop_alike"] is True
    with pytest.raises(ConfigError, match="Selective: stop_alike must be true or false"):
        Selective(stop_alike=1)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Selective(4, 8), r"Selective: warmup .*warmup \(8\) must not exceed budget \(4\)"),
        (lambda: Selective(0, 0), "Selective: budget is 0, must be >= 1"),
        (lambda: Selective(per_pass=0), "Selective: per_pass is 0, must be >= 1"),
        (lambda: Selective(max_children=0), "Selective: max_children is 0, must be >= 1"),
        (lambda: Selective(min_remaining=-1), "Selective: min_remaining is -1, must be >= 0"),
        (lambda: Selective(score="entropy"), "Selective: score .*token entropies"),
        (lambda: Selective(score="ucb"), 'Selective: score is "ucb"'),
        (lambda: Selective(budget=2.5), "Selective: budget must be an integer, got 2.5"),
        (lambda: Selective(budget="8"), 'Selective: budget must be an integer, got "8"'),
        (lambda: Independent(0), "Independent: n is 0, must be >= 1"),
        (lambda: Independent(seed=-1), "Independent: seed must be an integer"),
        (lambda: Segments(0), "Segments: tokens is 0, must be >= 1"),
        (lambda: Critic.constant(float("nan")), "Critic.constant: value is NaN, must be a finite number"),
        (lambda: Critic.constant(float("inf")), "Critic.constant: value is \\+Inf, must be a finite number"),
        (lambda: Critic.constant("0.5"), "Critic.constant: value must be a number"),
        (lambda: _rules.check("min_abs_advantage", {"value": -1.0}), "min_abs_advantage is -1, must be >= 0"),
        (lambda: _rules.check("min_abs_advantage", {"value": float("nan")}), "min_abs_advantage is NaN"),
    ],
)
def test_construction_is_checked_by_the_go_rules(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: SamplingParams(temperature=-1), "sampling: temperature -1 must be ≥ 0"),
        (lambda: SamplingParams(temperature=float("nan")), "sampling: temperature NaN must be ≥ 0"),
        (lambda: SamplingParams(top_p=2), r"sampling: top_p 2 must be in \(0, 1\]"),
        (lambda: SamplingParams(top_p=0.0), r"sampling: top_p 0 must be in \(0, 1\]"),
        (lambda: SamplingParams(max_tokens=0), "sampling: max_tokens 0 must be ≥ 1"),
        (lambda: SamplingParams(max_tokens=1.5), "sampling: max_tokens must be an integer, got 1.5"),
        (lambda: SamplingParams(top_k=-2), "sampling: top_k -2 must be"),
        (lambda: SamplingParams(logprobs=-1), "sampling: logprobs -1 must be ≥ 0"),
        (lambda: SamplingParams(prompt_logprobs=-1), "sampling: prompt_logprobs -1 must be ≥ 0"),
        (lambda: SamplingParams(repetition_penalty=3.0), r"sampling: repetition_penalty 3 must be in \(0, 2\]"),
        (lambda: SamplingParams(stop=["</answer>", ""]), r"sampling: stop\[1\] is empty"),
        (lambda: SamplingParams(stop="</answer>"), 'sampling: stop must be a list of strings, got "</answer>"'),
        (lambda: dataclasses.replace(SamplingParams(), temperature=-0.5), "sampling: temperature -0.5 must be ≥ 0"),
        (lambda: RewardConfig(gamma=2), r"reward: gamma is 2, must be in \(0, 1\]"),
        (lambda: RewardConfig(gamma=0), r"reward: gamma is 0, must be in \(0, 1\]"),
        (lambda: RewardConfig(gamma=float("inf")), r"reward: gamma is \+Inf, must be finite"),
        (lambda: RewardConfig(critic_weight=-1), r"reward: critic_weight is -1, must be in \[0, 64\]"),
        (lambda: RewardConfig(reward_min=1, reward_max=0), "reward: reward_min is 1, must be below reward_max 0"),
        (lambda: RewardConfig(truncated_reward=float("nan")), "reward: truncated_reward is NaN, must be finite"),
        (lambda: RewardConfig(truncation="cut"), 'reward: truncation is "cut", must be "terminal" or "bootstrap"'),
        (lambda: RewardConfig(gamma="1"), 'reward: gamma must be a number, got "1"'),
    ],
)
def test_sampling_params_and_reward_config_are_checked_when_built(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_valid_sampling_params_and_reward_configs_build():
    # None is "the default" for every sampling field; the edges of each range are allowed.
    unset = SamplingParams(temperature=None, max_tokens=None, top_p=None)
    assert (unset.temperature, unset.max_tokens, unset.top_p) == (None, None, None)
    SamplingParams(temperature=0, max_tokens=1, top_p=1.0, top_k=-1, stop=["\n"], logprobs=0, prompt_logprobs=0,
                   repetition_penalty=2.0, seed=-7)
    assert RewardConfig(gamma=1.0, critic_weight=64, reward_min=-1, reward_max=-0.5, truncation="bootstrap").critic_weight == 64


def test_agent_limits_are_checked_by_the_go_rules(server):
    policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
    try:
        env = MathEnv("1", policy.decode)
        for name in ("max_segments", "max_total_tokens"):
            with pytest.raises(ConfigError, match=f"Agent: {name} is 0, must be >= 1"):
                Agent(policy=policy, env=env, context=Segments(16), **{name: 0})
        assert Agent(policy=policy, env=env, context=Segments(16), max_segments=1).max_segments == 1
    finally:
        policy.close()


def test_tree_stats_carry_the_engines_outcome_counts(server):
    policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk",
                          default_params=SamplingParams(temperature=1.0))
    problem = server.problems()[0]
    try:
        agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(64), max_total_tokens=512)
        collector = Collector(agent, critic=Critic.constant(0.5), search=Selective(8, 4))
        state = asyncio.run(collector.collect(problem))
        try:
            stats = state.stats
            view = SchedulerView(state)
            finished = [n for n in view.nodes if (n.done or n.truncated) and not n.failed]
            assert stats["finished_rollouts"] == len(finished) > 0
            assert stats["successes"] == sum(1 for n in finished if n.done and n.reward >= 1.0)
            assert stats["all_failed"] is False
            assert view.stats == stats, "the tree file carries the same counts"
        finally:
            state.close()
    finally:
        policy.close()


def test_python_mathenv_ends_its_episode_with_the_go_step(server):
    # A MathEnv whose decode is a Python function runs in Python (through the bridge), but
    # its last step is core/mathenv.GradeEpisode's: the same reward and info as native.
    from focus_go.types import TokenChunk

    env = MathEnv(r"\boxed{5}", lambda ids: "so x = \\boxed{5}.")
    assert env.step(TokenChunk(tokens=(1, 2), finished=False)) == focus_types.Step()
    step = env.step(TokenChunk(tokens=(3,), finished=True))
    assert (step.reward, step.done) == (1.0, True)
    assert step.info == {"answer": "5", "label": r"\boxed{5}", "correct": True}
    wrong = MathEnv("5", lambda ids: "no answer").step(TokenChunk(tokens=(1,), finished=True))
    assert (wrong.reward, wrong.done, wrong.info) == (0.0, True, {"answer": None, "label": "5", "correct": False})


def test_python_mathenv_collects_the_native_tree(server):
    policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk",
                          default_params=SamplingParams(temperature=1.0))
    problem = server.problems()[5]
    try:
        def tree(env):
            agent = Agent(policy=policy, env=env, context=Segments(48))
            state = asyncio.run(Collector(agent, critic=Critic.constant(0.5), search=Selective(8, 4, seed=2)).collect(problem))
            try:
                return [(n.parent, n.tokens, n.reward, n.done, n.truncated) for n in SchedulerView(state).nodes]
            finally:
                state.close()

        native = tree(MathEnv(problem.label, policy.decode))
        bridged = tree(MathEnv(problem.label, lambda ids: policy.decode(ids)))  # not the tokenizer's: Python
        assert native == bridged
        assert any(r == 1.0 for _, _, r, done, _ in native if done)
    finally:
        policy.close()


def test_reset_observation_goes_where_the_go_rule_puts_it():
    # core/collect.RootMessages: text joins the last user message after a blank line (or is
    # a new user message), messages are appended, the system prompt comes first.
    assert _rules.root_messages("Be brief.", "Solve x.", "Show your work.") == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Solve x.\n\nShow your work."}]
    prompt = ({"role": "user", "content": "a"}, {"role": "assistant", "content": "b"})
    assert _rules.root_messages(None, prompt, "c") == [*map(dict, prompt), {"role": "user", "content": "c"}]
    assert _rules.root_messages("", "x", [{"role": "tool", "content": "42"}]) == [
        {"role": "user", "content": "x"}, {"role": "tool", "content": "42"}]
    assert _rules.root_messages("", "x", "") == _rules.root_messages("", "x", None) == [{"role": "user", "content": "x"}]
    with pytest.raises(ConfigError, match="problem prompt must be a string or a list of messages"):
        _rules.root_messages("", 5, None)
    with pytest.raises(ConfigError, match="env.reset"):
        _rules.root_messages("", "x", 5)
    with pytest.raises(ConfigError, match="env.reset"):
        _rules.root_messages("", "x", object())


def test_params_the_engine_sends_are_built_without_a_second_check():
    """A Python policy's per-request params come from the engine, which checked them
    (collect.Config.Validate): they equal the checked constructor's, ignore unknown keys,
    and skip the call into Go."""
    sent = {"temperature": 0.5, "max_tokens": 7, "top_p": 0.9, "seed": 3, "not_a_field": 1}
    built = SamplingParams._from_engine(sent)
    assert built == SamplingParams(temperature=0.5, max_tokens=7, top_p=0.9, seed=3)
    assert not hasattr(built, "not_a_field")
    assert SamplingParams._from_engine({}) == SamplingParams()


def test_stop_token_ids_are_sent_and_checked():
    from focus_go.generation.servers import params_json

    assert json.loads(params_json(SamplingParams(stop_token_ids=[151645, 7])))["stop_token_ids"] == [151645, 7]
    with pytest.raises(ConfigError, match="stop_token_ids"):
        SamplingParams(stop_token_ids=[-1])
