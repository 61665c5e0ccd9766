"""The Python-Go contract, held to the library's schema (``focus_go._schema``; Go's
capi/binding, pinned by capi/binding/testdata/schema.json).

Four checks: the library decodes every JSON input strictly (a misspelt key is a
ConfigError naming it and the keys allowed); every key Python sends is one the schema
lists (the payloads of real calls, recorded, and each builder with every option set);
every default Python exposes is the schema's; and the record keys Python fills are the
schema's, in its order."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import dataclasses
import inspect
import json
from contextlib import closing

import pytest

from focus_go import (
    Agent,
    Collector,
    Critic,
    Env,
    Independent,
    MathEnv,
    RewardConfig,
    Segments,
    Selective,
    Step,
    ToolEnv,
    _lib,
    _records,
    _rules,
    _schema,
)
from focus_go import types as focus_types
from focus_go.preparation import ActorSample, Batch, CriticSample
from focus_go.tree import PackedSequence
from focus_go.backends import Policy, SamplingParams, SGLangPolicy
from focus_go.cli import collect as collect_command
from focus_go.env import grade_math
from focus_go.errors import ConfigError
from focus_go.generation.format import model_profile
from focus_go.generation.parsing import NativeToolCallParser, QwenXMLToolCallParser
from focus_go.generation.types import GenerateResult, NativeToolCall
from focus_go.generation.servers import params_json
from focus_go.sim import SimServer

SAMPLING = SamplingParams(temperature=1.0)


# --- strict decoding ---------------------------------------------------------------------


def _spec(**extra):
    base = {
        "prompt_tokens": [1, 2],
        "search": Independent(1)._config(),
        "policy": {"kind": "remote", "object": 1},
        "env": {"kind": "remote", "object": 2},
    }
    return json.dumps({**base, **extra}).encode()


@pytest.mark.parametrize(
    "spec, message",
    [
        (_spec(max_retriez=3), r'collection spec: unknown key "max_retriez", did you mean "max_retries"\? \(allowed: .*\bmax_retries\b'),
        (_spec(policy={"kind": "remote", "objekt": 1}), r'collection spec: unknown key "objekt" in policy, did you mean "object"\?'),
        (_spec(sampling={"temprature": 1.0}), r'unknown key "temprature" in sampling, did you mean "temperature"\?'),
        (_spec(reward={"gama": 1.0}), r'unknown key "gama" in reward, did you mean "gamma"\?'),
        (_spec(search={**Independent(1)._config(), "budgett": 1}), r'unknown key "budgett" in search'),
    ],
    ids=["top level", "policy part", "sampling", "reward", "search"],
)
def test_a_misspelt_spec_key_is_a_config_error_naming_it(spec, message):
    with pytest.raises(ConfigError, match=message):
        _lib.call_handle("focus_collect_start", spec, len(spec))


def test_a_misspelt_engine_option_fails_the_collection(server):
    """Collector.timeouts is a public dict that goes into the spec as it is: a misspelt
    timeout is refused by name, not ignored."""
    problem = server.problems()[0]
    with closing(SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SAMPLING)) as policy:
        agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(16))
        collector = Collector(agent, search=Independent(1))
        collector.timeouts["policy_timeot"] = 5.0
        with pytest.raises(ConfigError, match=r'unknown key "policy_timeot", did you mean "policy_timeout"\?'):
            asyncio.run(collector.collect(problem))


@pytest.mark.parametrize(
    "function, request_, message",
    [
        ("focus_math_grade", {"text": "x", "lable": "1"}, r'math grade request: unknown key "lable", did you mean "label"\? \(allowed: label, text\)'),
        ("focus_rules_root_messages", {"system_prompt": "", "prompt": "x", "observaton": None}, r'root messages request: unknown key "observaton"'),
        ("focus_profile_resolve", {"model": "qwen3", "chat_templat": ""}, r'profile request: unknown key "chat_templat"'),
        ("focus_policy_open", {"backend": "sglang", "base_url": "http://127.0.0.1:9", "retries": 2}, r'policy config: unknown key "retries"'),
        ("focus_openai_open", {"api": "chat", "model": "m", "timeut": 1}, r'openai config: unknown key "timeut", did you mean "timeout"\?'),
    ],
)
def test_every_input_refuses_an_unknown_key(function, request_, message):
    data = json.dumps(request_).encode()
    out = _lib.Bytes() if function not in ("focus_policy_open", "focus_openai_open") else _lib.c_handle()
    with pytest.raises(ConfigError, match=message):
        _lib.call(function, data, len(data), ctypes.byref(out))


def test_a_hand_built_batch_refuses_an_unknown_key():
    """focus_batch_from_json (a Batch of samples made in Python) reads its keys strictly, at
    any depth, like every other input."""
    data = json.dumps({"problem_id": "p", "actor": [{"node_id": 1, "group_id": 0, "estimator": "x", "weight": 1.0,
                                                      "diagnostics": {}, "spans": [{"tokens": [1], "trainable": [True],
                                                                                    "logprbs": [0.0]}]}]}).encode()
    with pytest.raises(ConfigError, match=r'batch: unknown key "logprbs" in actor\[0\]\.spans\[0\], did you mean "logprobs"\?'):
        _lib.call_handle("focus_batch_from_json", data, len(data))
    data = b'{"actors": []}'
    with pytest.raises(ConfigError, match=r'batch: unknown key "actors", did you mean "actor"\?'):
        _lib.call_handle("focus_batch_from_json", data, len(data))


def test_sampling_params_refuse_an_unknown_key():
    ids, count = _lib.ids_arg([1, 2, 3])
    data = b'{"max_token": 8}'
    with pytest.raises(ConfigError, match=r'sampling params: unknown key "max_token", did you mean "max_tokens"\?'):
        _lib.call_string("focus_sglang_request", ids, count, data, len(data))


def test_simulated_server_options_are_strict():
    with pytest.raises(ConfigError, match=r'simulated server config: unknown key "verbosty", did you mean "verbosity"\?'):
        SimServer(verbosty=3)
    with SimServer() as server:
        with pytest.raises(ConfigError, match=r'faults: unknown key "cout" in \[0\], did you mean "count"\?'):
            server.set_faults([{"kind": "hang", "cout": 1}])


# --- the schema --------------------------------------------------------------------------

PUBLISHED = {
    "collection spec", "policy config", "sampling params", "reward config", "openai config", "openai request",
    "messages", "estimate request", "result", "parse request", "profile request", "render request",
    "math grade request", "root messages request", "batch", "critic rule request",
}


def test_the_schema_names_every_input_and_its_functions():
    inputs = _schema.inputs()
    assert set(inputs) == PUBLISHED
    for name, spec in inputs.items():
        for fn in spec["functions"]:
            assert fn in _lib._SIGNATURES, f"{name}: {fn} is not a function of the library"
    assert _schema.rule_kinds() == ["Selective", "Independent", "Segments", "Agent", "Critic.constant",
                                    "min_abs_advantage", "record_layout", "sampling", "reward"]


def _keys_outside(value, type_name, path="", types=None):
    """The keys of ``value`` (a JSON value of schema type ``type_name``) that the schema
    does not list, at any depth, as dotted paths."""
    types = types if types is not None else _schema.schema()["types"]
    if value is None:
        return []
    if type_name.endswith(" or null"):
        return _keys_outside(value, type_name[: -len(" or null")], path, types)
    if type_name.startswith("list of "):
        return [k for i, item in enumerate(value) for k in _keys_outside(item, type_name[len("list of "):], f"{path}[{i}]", types)]
    if type_name.startswith("map of "):
        return [k for key, item in value.items() for k in _keys_outside(item, type_name[len("map of "):], f"{path}[{key!r}]", types)]
    if type_name not in types:
        return []  # a scalar, raw JSON or a chat message
    fields = {f["name"]: f["type"] for f in types[type_name]["fields"]}
    out = []
    for key, item in value.items():
        at = f"{path}.{key}" if path else key
        if key not in fields:
            out.append(at)
        else:
            out += _keys_outside(item, fields[key], at, types)
    return out


def test_the_key_check_finds_keys_at_any_depth():
    spec = {"max_retriez": 1, "search": {"budget": 1, "budgett": 2}, "critic": None,
            "turn": {"template_kwargs": {"anything": 1}, "messages": [{"role": "user", "free": 1}]},
            "policy": {"kind": "remote", "objekt": 1}}
    assert _keys_outside(spec, "session.Spec") == ["max_retriez", "search.budgett", "policy.objekt"]
    assert _keys_outside({"result": {"native_tool_calls": [{"name": "f", "args": "{}"}]}}, "binding.ParseRequest") == [
        "result.native_tool_calls[0].args"]


class _Recording:
    """The library, recording the first JSON argument (an object or a list) of each call."""

    def __init__(self, real, calls):
        self._real, self._calls = real, calls

    def __getattr__(self, name):
        fn = getattr(self._real, name)
        calls = self._calls

        def recorded(*args):
            for a in args:
                if isinstance(a, bytes) and a[:1] in (b"{", b"["):
                    try:
                        calls.append((name, json.loads(a)))
                    except ValueError:
                        continue
                    break
            return fn(*args)

        return recorded


@pytest.fixture
def sent(monkeypatch):
    """Every JSON payload Python hands the library during the test, as (function, value)."""
    calls = []
    real_lib, real_held = _lib.lib(), _lib.held()
    monkeypatch.setattr(_lib, "lib", lambda: _Recording(real_lib, calls))
    monkeypatch.setattr(_lib, "held", lambda: _Recording(real_held, calls))
    return calls


class _BridgedMathEnv(Env):
    action = "tokens"

    def __init__(self, label, decode):
        self.label, self.decode, self.tokens = label, decode, []

    def step(self, action):
        self.tokens.extend(action.tokens)
        if not action.finished:
            return Step()
        return Step(reward=1.0 if grade_math(self.decode(self.tokens), self.label) else 0.0, done=True)

    def fork(self):
        twin = type(self)(self.label, self.decode)
        twin.tokens = list(self.tokens)
        return twin


def _calc(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: The expression, e.g. "2*(3+4)".
    """
    return str(eval(expression, {"__builtins__": {}}))  # the simulator's arithmetic only


def test_every_payload_python_sends_is_in_the_schema(server, sent):
    """Collections (all-Go, bridged, whole-turn), preparation, records, parsing, rendering
    and an API policy, each call's JSON checked against its input's schema type."""
    problem = server.problems()[0]

    async def collect(collector):
        async with collector:
            state = await collector.collect(problem, allow_partial=True)
            batch = collector.prepare(state)
            batch.to_records(0)
            batch.to_records(0, layout="paths")
            state.close()

    with closing(SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SAMPLING)) as native:
        agent = Agent(policy=native, env=MathEnv(problem.label, native.decode), context=Segments(32),
                      sampling=SamplingParams(temperature=1.0, top_p=0.9, top_k=20, seed=1, stop_token_ids=[0]))
        asyncio.run(collect(Collector(agent, critic=Critic.constant(0.5), search=Selective(4, 2), reward=RewardConfig(gamma=0.9),
                                      policy_timeout=30, env_timeout=30, critic_timeout=30)))

        async def complete(tokens, params):
            return await native.agenerate_tokens(tokens, params)

        bridged = Agent(policy=Policy(format=native.format, model="custom", complete=complete, default_params=SAMPLING),
                        env=_BridgedMathEnv(problem.label, native.decode), context=Segments(32))
        asyncio.run(collect(Collector(bridged, critic=Critic.from_function(lambda contexts: [0.5] * len(contexts)), search=Independent(2))))
    with closing(SGLangPolicy(model=server.model, base_url=server.url, profile="hermes", default_params=SamplingParams(temperature=1.0, max_tokens=64))) as chat:
        whole_turn = Agent(policy=chat, env=ToolEnv({"calculator": _calc}, answer=lambda text: 1.0 if grade_math(text, problem.label) else 0.0))
        asyncio.run(collect(Collector(whole_turn, critic=Critic.http("http://127.0.0.1:9/value", timeout=1), search=Independent(1))))
        chat.format.codec.tokenizer.render([{"role": "user", "content": "hi"}], [], add_generation_prompt=True)
    model_profile("Qwen/Qwen3-8B")
    tools = ToolEnv({"calculator": _calc}).tool_schemas()
    QwenXMLToolCallParser(tools).parse(GenerateResult(text="<tool_call>\n<function=calculator>\n<parameter=expression>\n1+1\n</parameter>\n</function>\n</tool_call>"))
    NativeToolCallParser().parse(GenerateResult(text="", stop_reason="tool_calls", native_tool_calls=(NativeToolCall("calculator", "{}", "c1"),)))
    grade_math("\ud800 \\boxed{1}", "1")  # a lone surrogate goes as a JSON request

    from focus.backends import OpenAIChatPolicy

    with OpenAIChatPolicy(model=server.model_name, base_url=server.url + "/v1") as api:
        api.generate(api.prepare([{"role": "user", "content": "What is 1+1?"}]), SamplingParams(max_tokens=16))

    hand_built = Batch(actor=(ActorSample(node_id=1, group_id=0, estimator="x", weight=1.0,
                                          spans=(PackedSequence(tokens=(1, 2), trainable=(False, True), logprobs=(0.0, -0.5)),)),),
                       critic=(CriticSample(node_id=0, context="ctx", target=0.5),))
    hand_built.to_records(0)

    inputs = _schema.inputs()
    reads = {fn: name for name, spec in inputs.items() for fn in spec["functions"]}
    seen = set()
    for function, value in sent:
        if function in reads:
            name = reads[function]
            seen.add(name)
            assert _keys_outside(value, inputs[name]["type"]) == [], f"{function} sent {name} keys the schema does not list"
    assert seen >= {"collection spec", "policy config", "sampling params", "reward config", "root messages request",
                    "parse request", "render request", "profile request", "math grade request", "openai config", "openai request",
                    "batch"}


def test_every_option_python_builds_is_in_the_schema():
    """Each builder with every option set: what a collection, a policy or a request may send."""
    everything = SamplingParams(temperature=0.5, max_tokens=8, top_p=0.9, top_k=5, stop=["x"], logprobs=1, prompt_logprobs=1,
                                repetition_penalty=1.1, seed=3, stop_token_ids=[7])
    assert set(json.loads(params_json(everything))) == set(_schema.fields("generate.SamplingParams"))
    assert _keys_outside(json.loads(RewardConfig()._json()), "prepare.RewardConfig") == []
    for search in (Selective(8, 4, min_remaining=16), Independent(4, seed=2)):
        assert _keys_outside(search._config(), "search.Config") == []
    for critic in (Critic.constant(0.5), Critic.http("http://127.0.0.1:9", timeout=2.0), Critic.from_function(lambda c: [0.0] * len(c))):
        assert _keys_outside(critic._part(lambda obj: 1), "session.Part") == []
    # The engine options an integration sets (the Slime hook's stop_on_abort) are spec keys.
    spec = _schema.fields("session.Spec")
    for key in ("stop_on_abort", "max_retries"):
        assert key in spec


# --- defaults ----------------------------------------------------------------------------


def _field_defaults(cls):
    return {f.name: f.default for f in dataclasses.fields(cls)}


def test_every_default_python_exposes_is_the_schemas():
    rules = _schema.rules_defaults()
    assert _rules.defaults() == rules
    assert _field_defaults(Selective) == rules["selective"]
    assert _field_defaults(Independent) == rules["independent"]
    assert _field_defaults(Segments) == rules["segments"]
    agent = inspect.signature(Agent.__init__).parameters
    assert {k: agent[k].default for k in rules["agent"]} == rules["agent"]
    assert dataclasses.asdict(RewardConfig()) == rules["reward"] == _schema.field_defaults("prepare.RewardConfig")
    sampling = _schema.field_defaults("generate.SamplingParams")
    assert sampling == rules["sampling"]
    assert {k: getattr(SamplingParams(), k) for k in sampling} == sampling
    assert (focus_types.DEFAULT_TEMPERATURE, focus_types.DEFAULT_MAX_TOKENS, focus_types.DEFAULT_TOP_P) == (
        sampling["temperature"], sampling["max_tokens"], sampling["top_p"])
    # What Selective() runs as is the search type's defaults.
    assert Selective()._config() == _schema.field_defaults("search.Config")
    # A collection's limits and switches default to the spec's.
    spec = _schema.field_defaults("session.Spec")
    assert Segments().tokens == spec["segments"]
    assert (agent["max_segments"].default, agent["max_total_tokens"].default) == (spec["max_segments"], spec["max_total_tokens"])
    assert inspect.signature(Collector.collect).parameters["allow_partial"].default is spec["allow_partial"]
    assert spec["reward"] == dataclasses.asdict(RewardConfig())
    collector = inspect.signature(Collector.__init__).parameters
    for name in ("policy_timeout", "env_timeout", "critic_timeout"):
        assert collector[name].default is None and spec[name] == 0  # None is sent as 0: no timeout


def test_the_command_lines_defaults_are_the_schemas():
    parser = argparse.ArgumentParser()
    collect_command.add_parser(parser.add_subparsers())
    args = parser.parse_args(["collect", "problems.jsonl", "--out", "out"])
    rules = _schema.rules_defaults()
    sel = rules["selective"]
    assert (args.budget, args.warmup, args.per_pass, args.max_children, args.score, args.seed) == (
        sel["budget"], sel["warmup"], sel["per_pass"], sel["max_children"], sel["score"], sel["seed"])
    assert args.segment_tokens == rules["segments"]["tokens"] == _schema.field_defaults("session.Spec")["segments"]
    assert (args.max_segments, args.max_total_tokens) == (rules["agent"]["max_segments"], rules["agent"]["max_total_tokens"])
    assert args.visitation_weights is rules["records"]["visitation_weights"]


# --- record keys -------------------------------------------------------------------------


def test_the_record_keys_python_fills_are_the_schemas():
    assert _records.ACTOR_KEYS == _schema.record_keys("actor")
    assert _records.PATH_EXTRA_KEYS == _schema.record_keys("path_extra")
    assert _records.CRITIC_KEYS == _schema.record_keys("critic")
    assert focus_types.LANE_KEY in _schema.record_keys("actor") and focus_types.LANE_KEY in _schema.record_keys("critic")
    assert focus_types.ESTIMATOR_KEY in _schema.record_keys("actor")


def test_records_carry_the_schemas_keys_in_order(server):
    problem = server.problems()[1]
    with closing(SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SAMPLING)) as policy:
        agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(32))
        collector = Collector(agent, critic=Critic.constant(0.5), search=Selective(4, 2))
        with asyncio.run(collector.collect(problem)) as state:
            batch = collector.prepare(state)
    actor, critic = _schema.record_keys("actor"), _schema.record_keys("critic")
    for layout, actor_keys in (("spans", actor), ("paths", actor + _schema.record_keys("path_extra"))):
        records = batch.to_records(0, layout=layout)
        assert {tuple(r) for r in records if r["lane"] == "actor"} == {actor_keys}
        assert {tuple(r) for r in records if r["lane"] == "critic"} == {critic}


def test_a_library_with_other_record_keys_is_refused(monkeypatch):
    _records._check_record_keys.cache_clear()
    monkeypatch.setattr(_schema, "record_keys", lambda section: ("tokens",) if section == "actor" else _schema._loaded()["records"][section])
    try:
        with pytest.raises(Exception, match="record keys"):
            _records._check_record_keys()
    finally:
        _records._check_record_keys.cache_clear()
