"""The whole-turn chat context with ToolEnv and Workspace, end to end against the
simulated server: tool messages rendered after the exact prefix, rewards from the answer
grader, loss masks that exclude tool tokens, the Workspace's parallelism limit shared by
collectors, tools that raise, malformed and unknown tool calls."""

from __future__ import annotations

import ast
import asyncio
import operator
import os
from pathlib import Path

import pytest

from focus_go import Agent, Collector, Critic, Env, MathEnv, Selective, Independent, Step, ToolEnv, Workspace
from focus_go.backends import SamplingParams, SGLangPolicy
from focus_go.env import grade_math
from focus_go.errors import CollectionError, ConfigError
from focus_go.extend import SchedulerView
from focus_go.generation.types import ToolCall, ToolTurn
from focus_go.sim import SimServer
from focus_go.tools import tool_schema

SAMPLING = SamplingParams(temperature=1.0, max_tokens=256)

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.USub: operator.neg, ast.Pow: operator.pow, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def _eval(node):
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand))
    raise ValueError(f"unsupported expression element {type(node).__name__}")


def calc(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: The expression to evaluate, e.g. "2*(3+4)".
    """
    value = _eval(ast.parse(expression.replace("^", "**").replace("×", "*"), mode="eval"))
    return str(int(value)) if float(value).is_integer() else str(value)


@pytest.fixture
def policy(server):
    p = SGLangPolicy(model=server.model, base_url=server.url, profile="hermes", default_params=SAMPLING)
    yield p
    p.close()


def grader(label):
    return lambda text: 1.0 if grade_math(text, label) else 0.0


def test_tool_env_tree_against_the_sim(server, policy):
    problem = server.problems()[0]
    agent = Agent(policy=policy, env=ToolEnv({"calculator": calc}, answer=grader(problem.label)))

    async def run():
        async with Collector(agent, critic=Critic.constant(0.5), search=Selective(8, 4, stop_alike=False)) as collector:
            state = await collector.collect(problem)
            return state, collector.prepare(state)

    state, batch = asyncio.run(run())
    view = SchedulerView(state)
    assert view.stats["rollouts"] == 8
    assert "<tools>" in view.root.text and '"name": "calculator"' in view.root.text

    tool_turns = finals = 0
    for node in view.nodes[1:]:
        assert node.failed is None
        if node.done:
            finals += 1
            assert "\\boxed{" in node.text
            assert node.reward == (1.0 if grade_math(node.text, problem.label) else 0.0)
            assert "<tool_response>" in policy.decode(view.node(node.parent).context_tokens)
        else:
            tool_turns += 1
            assert node.reward == 0.0
            assert "<tool_call>" in node.text
            # The tool's result, rendered by the chat template, opens the next assistant turn.
            answer = calc(problem.metadata["expression"])
            assert f"<|im_end|>\n<|im_start|>user\n<tool_response>\n{answer}\n</tool_response><|im_end|>\n<|im_start|>assistant\n" in node.text
    assert finals == 8 and tool_turns >= 1

    # Prefix preservation: the exact context of a tool turn is what the chat template renders
    # for the whole conversation (the sim's template writes the reply back unchanged).
    turn = next(n for n in view.nodes[1:] if not n.done)
    reply = turn.text[: turn.text.index("<|im_end|>")]
    tokenizer = policy.format.codec.tokenizer
    messages = [{"role": "user", "content": problem.prompt}, {"role": "assistant", "content": reply},
                {"role": "tool", "content": calc(problem.metadata["expression"])}]
    text, tokens = tokenizer.render(messages, ToolEnv({"calculator": calc}).tool_schemas())
    assert policy.decode(turn.context_tokens) == text
    assert any(len(view.node(n.id).children) > 1 for n in view.nodes[1:] if not n.done), "branched at a turn"
    assert any(n.reward == 1.0 for n in view.nodes if n.done)

    # Tool tokens are never trained on: actor records mask exactly the generated tokens.
    tokenizer = policy.format.codec.tokenizer
    records = [r for r in batch.to_records(0) if r["lane"] == "actor"]
    assert records
    for r in records:
        masked = [t for t, m in zip(r["tokens"], r["loss_mask"]) if m]
        text = tokenizer.decode(masked)
        assert "<tool_response>" not in text
        assert "<|im_start|>" not in text
        for t, m, lp in zip(r["tokens"], r["loss_mask"], r["behavior_logprobs"]):
            if not m:
                assert lp == 0.0


def test_whole_turn_is_the_default_and_deterministic(server, policy):
    problem = server.problems()[1]

    def collect():
        agent = Agent(policy=policy, env=ToolEnv({"calculator": calc}, answer=grader(problem.label)))
        state = asyncio.run(Collector(agent, search=Selective(6, 3, seed=5, stop_alike=False)).collect(problem))
        return [(n.parent, n.tokens, n.reward, n.done) for n in SchedulerView(state).nodes]

    assert collect() == collect()


def test_workspace_limits_concurrent_tools_across_collectors(server, policy, tmp_path):
    problems = server.problems()[:3]
    running = 0
    peak = 0
    seen_dirs = set()

    async def slow_calc(expression: str, workspace: Path) -> str:
        """Evaluate slowly."""
        nonlocal running, peak
        assert workspace.is_dir() and workspace.parent == tmp_path / "ws"
        seen_dirs.add(workspace)
        running += 1
        peak = max(peak, running)
        try:
            await asyncio.sleep(0.03)
            return calc(expression)
        finally:
            running -= 1

    workspace = Workspace(tmp_path / "ws", max_parallel=2)

    async def run():
        async with workspace:
            collectors = [
                Collector(Agent(policy=policy, env=ToolEnv({"calculator": slow_calc}, answer=grader(p.label))),
                          search=Independent(4), workspace=workspace)
                for p in problems
            ]
            for c in collectors:
                await c.__aenter__()
            try:
                return await asyncio.gather(*(c.collect(p) for c, p in zip(collectors, problems)))
            finally:
                for c in collectors:
                    await c.__aexit__(None, None, None)

    states = asyncio.run(run())
    assert all(SchedulerView(s).stats["rollouts"] == 4 for s in states)
    assert peak == 2, f"12 concurrent rollouts, limit 2, peak {peak}"
    assert len(seen_dirs) == 3, "one working directory per collection"
    assert (tmp_path / "ws").is_dir(), "a given path is kept"


def test_workspace_temporary_directory_and_validation():
    async def run():
        ws = Workspace(max_parallel=1)
        with pytest.raises(ConfigError, match="not open"):
            ws.path
        async with ws:
            root = ws.path
            async with ws:  # shared: nested entries keep it open
                d = ws.problem_dir("p/1")
            assert root.is_dir() and d.parent == root and d.name == "0001-p_1"
        assert not root.exists()
        assert not ws.is_open

    asyncio.run(run())
    with pytest.raises(ConfigError, match="max_parallel"):
        Workspace(max_parallel=0)


def test_tool_errors_become_tool_messages():
    def boom(x: int) -> int:
        """Always fails."""
        raise RuntimeError(f"no luck with {x}")

    async def twice(x: int, workspace=None) -> dict:
        return {"x": 2 * x, "workspace": workspace}

    env = ToolEnv({"boom": boom, "twice": twice}, answer=lambda text: float(text == "42"))
    turn = ToolTurn(text="", tool_calls=(
        ToolCall("boom", '{"x": 3}'),
        ToolCall("twice", '{"x": 4, "workspace": "/etc"}', "call-7"),
        ToolCall("nope", "{}"),
        ToolCall("twice", '{"x": 4'),
        ToolCall("twice", "[1, 2]"),
        ToolCall("twice", '{"y": 1}'),
    ))
    step = asyncio.run(env.step(turn))
    assert not step.done and step.reward == 0.0
    contents = [m["content"] for m in step.observation]
    assert contents[0] == "Error: boom raised RuntimeError: no luck with 3"
    assert contents[1] == '{"x": 8, "workspace": null}', "the model cannot set the workspace"
    assert step.observation[1]["tool_call_id"] == "call-7" and step.observation[1]["name"] == "twice"
    assert contents[2].startswith("Error: unknown tool 'nope'; available: boom, twice")
    assert contents[3].startswith("Error: arguments of twice are not valid JSON")
    assert contents[4] == "Error: arguments of twice must be a JSON object, got list"
    assert contents[5].startswith("Error: bad arguments for twice")
    assert [c["error"] is None for c in step.info["tool_calls"]] == [False, True, False, False, False, False]

    final = asyncio.run(env.fork().step(ToolTurn(text="42")))
    assert final.done and final.reward == 1.0 and final.observation is None
    assert asyncio.run(ToolEnv({"boom": boom}).step(ToolTurn(text="x"))).reward == 0.0, "no answer grader: 0.0"


def test_a_raising_tool_in_a_collection(server, policy):
    problem = server.problems()[2]

    def broken(expression: str) -> str:
        """A calculator that is out of order."""
        raise ValueError("calculator is out of order")

    agent = Agent(policy=policy, env=ToolEnv({"calculator": broken}, answer=grader(problem.label)))
    state = asyncio.run(Collector(agent, search=Independent(2)).collect(problem))
    view = SchedulerView(state)
    tool_nodes = [n for n in view.nodes[1:] if not n.done]
    assert tool_nodes and all(n.failed is None for n in view.nodes)
    for n in tool_nodes:
        assert "<tool_response>\nError: calculator raised ValueError: calculator is out of order\n</tool_response>" in n.text


def test_malformed_tool_call_json_from_the_model():
    with SimServer(seed=1, tool_call_error_rate=1.0) as server:
        policy = SGLangPolicy(model=server.model, base_url=server.url, profile="hermes", default_params=SAMPLING)
        try:
            problem = server.problems()[0]
            agent = Agent(policy=policy, env=ToolEnv({"calculator": calc}, answer=grader(problem.label)), max_segments=3)
            state = asyncio.run(Collector(agent, search=Independent(2)).collect(problem))
        finally:
            policy.close()
    view = SchedulerView(state)
    tool_nodes = [n for n in view.nodes[1:] if "<tool_call>" in n.text]
    assert tool_nodes
    for n in tool_nodes:
        # The parser marks the broken call malformed; ToolEnv answers it without running the
        # tool, and the tree's edge text records the answer.
        assert "<tool_response>\nError: could not parse the tool call to calculator: tool call is not a JSON object" in n.text
    assert all(n.failed is None for n in view.nodes)


def test_tool_schemas_from_signatures_and_explicit():
    schema = tool_schema("calculator", calc)
    assert schema == {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string", "description": 'The expression to evaluate, e.g. "2*(3+4)".'}},
                "required": ["expression"],
            },
        },
    }
    explicit = {"name": "calculator", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}
    env = ToolEnv({"calculator": calc}, schemas={"calculator": explicit})
    assert env.tool_schemas() == [{"type": "function", "function": explicit}]
    with pytest.raises(ConfigError, match="unknown tools"):
        ToolEnv({"calculator": calc}, schemas={"other": explicit})
    with pytest.raises(ConfigError, match="not callable"):
        ToolEnv({"calculator": 3})


def test_whole_turn_configuration_errors(server, policy):
    problem = server.problems()[0]
    with pytest.raises(ConfigError, match="context=Segments"):
        asyncio.run(Collector(Agent(policy=policy, env=MathEnv(problem.label, policy.decode))).collect(problem))

    class UserTurns(Env):
        """Answers every turn with a user message, which the sim's template appends."""

        action = "text"

        def __init__(self):
            self.turns = 0

        def step(self, action):
            self.turns += 1
            if self.turns >= 2:
                return Step(reward=1.0, done=True)
            return Step(observation="Are you sure?")

    state = asyncio.run(Collector(Agent(policy=policy, env=UserTurns()), search=Independent(2)).collect(problem))
    view = SchedulerView(state)
    first = view.node(view.root.children[0])
    assert first.text.endswith("<|im_end|>\n<|im_start|>user\nAre you sure?<|im_end|>\n<|im_start|>assistant\n")
    assert all(n.done for n in view.nodes if not n.children and n.id)


def test_bridged_policy_gives_the_native_tree(server, policy):
    # A custom Completion policy (served from Python through the bridge) in the whole-turn
    # context builds the same tree as the Go transport.
    from focus_go.backends import Policy

    async def complete(tokens, params):
        return await policy.agenerate_tokens(tokens, params)

    bridged = Policy(format=policy.format, model=policy.model, complete=complete, default_params=SAMPLING)
    problem = server.problems()[3]

    def collect(p):
        agent = Agent(policy=p, env=ToolEnv({"calculator": calc}, answer=grader(problem.label)))
        state = asyncio.run(Collector(agent, search=Selective(6, 3, seed=2, stop_alike=False)).collect(problem))
        return [(n.parent, n.tokens, n.reward, n.done, n.text) for n in SchedulerView(state).nodes]

    assert collect(bridged) == collect(policy)
