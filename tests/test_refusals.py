"""Refusals of malformed JSON through the binding: a tree read from its JSON form, a batch of
samples a caller made, the critic rule's state. Each names the value's path, what was wrong
and what is allowed (``tree: nodes[3].reward is NaN; a finite number is required``), and
``ConfigError.field`` holds the path, never the JSON decoder's own words."""

from __future__ import annotations

import asyncio
import json

import pytest

from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
from focus_go.backends import SamplingParams, SGLangPolicy
from focus_go.critic_rule import CriticRule
from focus_go.errors import ConfigError
from focus_go.extend import SchedulerState
from focus_go.preparation import ActorSample, Batch
from focus_go.tree import PackedSequence

from trees import figure61


def _edited(edit) -> str:
    """figure61's tree JSON after edit(tree) changed its parsed form."""
    tree = json.loads(figure61())
    edit(tree)
    return json.dumps(tree)


def _set(node: int, key: str, value):
    def edit(tree):
        tree["nodes"][node][key] = value

    return edit


@pytest.mark.parametrize(
    "text,message,field",
    [
        (_edited(_set(3, "reward", float("nan"))), r"^tree: nodes\[3\]\.reward is NaN; a finite number is required$", "nodes[3].reward"),
        (_edited(_set(1, "critic", float("inf"))), r"^tree: nodes\[1\]\.critic is Infinity; a finite number or null is required$", "nodes[1].critic"),
        (_edited(_set(2, "critic", float("-inf"))), r"^tree: nodes\[2\]\.critic is -Infinity; a finite number or null is required$", "nodes[2].critic"),
        (figure61().replace('"reward": 1.0', '"reward": 1e999', 1),
         r"^tree: nodes\[3\]\.reward is 1e999, beyond the range of a 64-bit float; a finite number is required$", "nodes[3].reward"),
        (_edited(_set(4, "done", "yes")), r'^tree: nodes\[4\]\.done is the string "yes"; true or false is required$', "nodes[4].done"),
        (_edited(_set(3, "spans", [[12]])), r"^tree: nodes\[3\]\.spans\[0\] is a list; an object is required$", "nodes[3].spans[0]"),
        (_edited(lambda t: t["nodes"][5]["spans"][0].update(tokens=[-1])),
         r"^tree: nodes\[5\]\.spans\[0\]\.tokens\[0\] is -1; an integer in \[0, 4294967295\] is required$", "nodes[5].spans[0].tokens[0]"),
        (figure61()[:200], r"^tree: bad JSON at byte 200 \(in nodes\[0\][^)]*\): the input ends before the value is complete", None),
    ],
    ids=["nan", "infinity", "-infinity", "1e999", "wrong type", "wrong nesting", "negative token", "cut off"],
)
def test_tree_refusals_name_the_path(text, message, field):
    with pytest.raises(ConfigError, match=message) as info:
        SchedulerState.from_json(text)
    assert info.value.field == field
    assert "readNumber" not in str(info.value) and "treeWire" not in str(info.value)


def test_tree_keys_match_exactly():
    """A key differing only in case was read as the key ("Reward": 0 beside "reward": 1
    loaded as 0); it is an unknown key, and the key meant is named."""
    text = figure61().replace('"reward": 1.0', '"reward": 1.0, "Reward": 0.0', 1)
    with pytest.raises(ConfigError, match=r'^tree: unknown key "Reward" in nodes\[3\] \(keys are case-sensitive\), did you mean "reward"\? \(allowed: '):
        SchedulerState.from_json(text)
    twice = figure61().replace('"reward": 1.0', '"reward": 1.0, "reward": 0.0', 1)
    with pytest.raises(ConfigError, match=r"^tree: nodes\[3\]\.reward is given twice; one value per key is required$"):
        SchedulerState.from_json(twice)
    with SchedulerState.from_json(figure61()) as state:
        assert len(state) == 7


def test_batch_refusal_names_the_sample():
    span = PackedSequence((1, 2), (False, True), (0.0, -0.5))
    batch = Batch(actor=(ActorSample(node_id=1, spans=(span,), group_id=0, estimator="Custom", weight=0.5),
                         ActorSample(node_id=2, spans=(span,), group_id=0, estimator="Custom", weight=float("nan"))))
    with pytest.raises(ConfigError, match=r"^batch: actor\[1\]\.weight is NaN; a finite number is required$") as info:
        batch.to_records(2)
    assert info.value.field == "actor[1].weight"


def test_critic_rule_state_refusals():
    """A NaN in the saved state is named where it is (it was blamed on the valid key
    "variance"); a pooled fit no trees could give is refused, not trusted."""
    fit = {"nodes": 8.0, "variance": float("nan"), "squared_error": 1.0, "inverse_count": 4.0}
    with pytest.raises(ConfigError, match=r"^critic rule request: state\.fit\.variance is NaN; a finite number is required$") as info:
        CriticRule(state={"fit": fit, "batches": 1})
    assert info.value.field == "state.fit.variance"
    with pytest.raises(ConfigError, match=r"^critic rule: state\.fit\.variance is 5 with nodes 8, an impossible pooled fit; "
                                          r"at most nodes/4 = 2 is required") as info:
        CriticRule(state={"fit": {**fit, "variance": 5.0}, "batches": 1})
    assert info.value.field == "state.fit.variance"
    with pytest.raises(ConfigError, match=r'unknown key "Nodes" in state\.fit \(keys are case-sensitive\), did you mean "nodes"\?'):
        CriticRule(state={"fit": {"Nodes": 8.0}, "batches": 1})
    assert CriticRule(state={"fit": {**fit, "variance": 2.0}, "batches": 1}).choose().measured


def test_resume_text_refusals(server):
    """A collection state given as JSON text to resume from is read as strictly as a tree."""
    policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SamplingParams(temperature=1.0))
    try:
        problem = server.problems()[0]
        agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(16))
        collector = Collector(agent, critic=Critic.constant(0.5), search=Selective(4, 2))
        cased = figure61().replace('"reward": 1.0', '"reward": 1.0, "Reward": 0.0', 1)
        with pytest.raises(ConfigError, match=r'^collection spec: resume: tree: unknown key "Reward" in nodes\[3\] \(keys are case-sensitive\), '
                                              r'did you mean "reward"\?'):
            asyncio.run(collector.collect(problem, resume=cased))
        with pytest.raises(ConfigError, match=r"^collection spec: resume\.nodes\[3\]\.reward is NaN; a finite number is required$") as info:
            asyncio.run(collector.collect(problem, resume=_edited(_set(3, "reward", float("nan")))))
        assert info.value.field == "resume.nodes[3].reward"
    finally:
        policy.close()
