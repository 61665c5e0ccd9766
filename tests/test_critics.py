"""Critic.http against a value server on loopback, and async Python parts."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from focus_go import Agent, Collector, Critic, Env, MathEnv, Segments, Selective, Step
from focus_go.backends import SamplingParams, SGLangPolicy
from focus_go.env import grade_math
from focus_go.extend import SchedulerView
from focus_go.sim import SimServer


class ValueServer:
    """POST {"contexts": [...]} -> {"values": [...]}: the value a context gets is its length
    bucket, so the test can check what reached the nodes."""

    def __init__(self, values=None):
        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seen.append(len(body["contexts"]))
                out = values(body["contexts"]) if values else [0.25] * len(body["contexts"])
                data = json.dumps({"values": out}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server():
    with SimServer(seed=3) as s:
        yield s


@pytest.fixture
def policy(server):
    p = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=SamplingParams(temperature=1.0))
    yield p
    p.close()


def test_http_critic_scores_checkpoints(server, policy):
    values = ValueServer()
    try:
        problem = server.problems()[0]
        agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(48))
        state = asyncio.run(Collector(agent, critic=Critic.http(values.url + "/score", timeout=5), search=Selective(8, 4, stop_alike=False)).collect(problem))
        scored = [n.critic for n in SchedulerView(state).nodes if n.critic is not None]
        assert scored and set(scored) == {0.25}
        assert sum(values.seen) == len(scored)
    finally:
        values.close()


def test_http_critic_wrong_count_fails_the_collection(server, policy):
    values = ValueServer(lambda contexts: [0.5])
    try:
        problem = server.problems()[0]
        agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(48))
        collector = Collector(agent, critic=Critic.http(values.url), search=Selective(8, 4))
        state = asyncio.run(collector.collect(problem, allow_partial=True))
        batch = collector.prepare(state)
        assert any("values" in m or "count" in m or "expected" in m for _, m in batch.failures), batch.failures
    finally:
        values.close()


class AsyncMathEnv(Env):
    action = "tokens"

    def __init__(self, label, decode):
        self.label, self.decode, self.tokens = label, decode, []

    async def reset(self):
        await asyncio.sleep(0)
        return "Show your work."

    async def step(self, action):
        await asyncio.sleep(0)
        self.tokens.extend(action.tokens)
        if not action.finished:
            return Step()
        return Step(reward=float(grade_math(self.decode(self.tokens), self.label)), done=True)

    async def fork(self):
        twin = AsyncMathEnv(self.label, self.decode)
        twin.tokens = list(self.tokens)
        return twin


def test_async_env_methods_and_reset_observation(server, policy):
    problem = server.problems()[2]
    agent = Agent(policy=policy, env=AsyncMathEnv(problem.label, policy.decode), context=Segments(64))
    state = asyncio.run(Collector(agent, critic=Critic.constant(0.5), search=Selective(8, 4)).collect(problem))
    view = SchedulerView(state)
    assert "Show your work." in policy.decode(view.root.context_tokens)
    assert any(n.done and n.reward == 1.0 for n in view.nodes) or any(n.done for n in view.nodes)
