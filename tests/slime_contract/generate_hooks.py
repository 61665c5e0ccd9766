"""FOCUS's generate hook set up for Slime's own generate contract test
(``tests/plugin_contracts/test_plugin_generate_contracts.py`` in THUDM/slime).

That test calls the hook with an ``Args`` class holding only rollout flags and a sample
with a prompt and no label: its reference hook needs neither a router nor a label. The
FOCUS hook needs the SGLang router Slime's rollout manager starts, so ``generate`` here
starts the simulated server once (as that router) and fills ``sglang_router_ip``,
``sglang_router_port`` and ``hf_checkpoint`` where the args lack them, as Slime does
before any rollout; every other argument reaches ``make_generate``'s hook unchanged. The
environment needs no label (a format reward: 1 for a finished response with a
``\\boxed{...}`` answer), so the label-less sample is collected as ``Problem(label=None)``.

    python tests/plugin_contracts/test_plugin_generate_contracts.py \\
        --custom-generate-function-path slime_contract.generate_hooks.generate
"""

from __future__ import annotations

import atexit
import threading
from typing import Any, Optional
from urllib.parse import urlparse

from focus_go import Agent, Collector, Critic, Segments, Selective
from focus_go.env import Env
from focus_go.types import Step
from focus.integrations.slime import make_generate

_lock = threading.Lock()
_server: Optional[Any] = None


class BoxedFormatEnv(Env):
    """Reward 1.0 when the finished response contains a ``\\boxed{`` answer, else 0.0."""

    action = "tokens"

    def __init__(self, decode: Any) -> None:
        self.decode = decode
        self.tokens: list = []

    def step(self, action: Any) -> Step:
        self.tokens.extend(action.tokens)
        if not action.finished:
            return Step()
        return Step(reward=1.0 if "\\boxed{" in self.decode(self.tokens) else 0.0, done=True)

    def fork(self) -> "BoxedFormatEnv":
        twin = BoxedFormatEnv(self.decode)  # shares the decoder (a deep copy would copy its handle)
        twin.tokens = list(self.tokens)
        return twin


def collector_for(policy: Any, problem: Any) -> Collector:
    agent = Agent(policy=policy, env=BoxedFormatEnv(policy.decode), context=Segments(64))
    return Collector(agent, critic=Critic.constant(0.5), search=Selective(budget=4, warmup=2))


_hook = make_generate(collector_for, profile="token_chunk")


def _router() -> Any:
    global _server
    with _lock:
        if _server is None:
            from focus_go.sim import SimServer

            _server = SimServer(seed=0)
            atexit.register(_server.close)
            atexit.register(_hook.close)
        return _server


async def generate(args: Any, sample: Any, sampling_params: Any, evaluation: bool = False) -> Any:
    server = _router()
    for name, value in (
        ("sglang_router_ip", "127.0.0.1"),
        ("sglang_router_port", urlparse(server.url).port),
        ("hf_checkpoint", server.model),
    ):
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    return await _hook(args, sample, sampling_params, evaluation=evaluation)
