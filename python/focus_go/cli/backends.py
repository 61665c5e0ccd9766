"""The backend ``focus-go collect`` collects with: the policy for ``--sglang URL`` or
``--vllm URL`` (with ``--model`` / ``--tokenizer``), or the embedded simulated server when
no URL is given. ``--openai`` is refused with the reason (chat APIs return no token ids)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Optional, TextIO

from ..env import Env
from ..errors import BackendError, ConfigError, FocusError
from ..generation.format import HFTokenizer, PolicyFormat
from ..generation.servers import SGLangPolicy, VLLMPolicy
from ..sim import SimServer
from ..generation.types import SamplingParams


@dataclass
class Backend:
    """The policy and, for the simulator, the server behind it."""

    name: str
    url: str
    policy: Any
    server: Any = None
    tokenizer: Any = None
    description: str = ""

    def close(self) -> None:
        self.policy.close()
        if self.tokenizer is not None:
            self.tokenizer.close()
        if self.server is not None:
            self.server.close()


OPENAI_REFUSAL = (
    "--openai: an OpenAI-compatible chat endpoint cannot collect FOCUS trees. A tree branches by "
    "continuing the exact token ids of a checkpoint, and Chat Completions / Responses take "
    "messages and return text, not token ids (their token counts are estimates), so neither "
    "Segments(n) nor whole-turn branching can be replayed exactly, and the records would have "
    "no behaviour log probabilities to train on. Point --sglang at the server's native "
    "/generate or --vllm at its /v1 (vLLM's /v1/completions with token prompts), which both "
    "return exact tokens."
)


def check_backend_args(args: argparse.Namespace) -> None:
    """Refuse ``--openai``, a server URL without a model or tokenizer, and model flags
    without a server URL, before anything starts."""
    if args.openai:
        raise ConfigError(OPENAI_REFUSAL)
    if args.sglang or args.vllm:
        if not (args.model or args.tokenizer):
            flag = "--sglang" if args.sglang else "--vllm"
            raise ConfigError(f"{flag} needs --model (a local model directory or a model in the Hugging Face cache) "
                              "or --tokenizer DIR (a local tokenizer directory)")
    elif args.model or args.tokenizer or args.served_model:
        raise ConfigError("--model / --tokenizer / --served-model need --sglang URL or --vllm URL; the embedded "
                          "simulator serves its own model")


def check_critic(url: str, timeout: float) -> None:
    """Ask the value server at ``url`` to score one context, as a collection will; raises
    BackendError naming what is wrong (not listening, an HTTP error, not ``{"values": [x]}``)."""
    body = json.dumps({"contexts": ["focus-go start-up check"]}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            data = resp.read()
    except urllib.error.HTTPError as exc:
        raise BackendError(f"critic {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise BackendError(f"critic {url}: {getattr(exc, 'reason', exc)}") from None
    try:
        values = json.loads(data)["values"]
        ok = isinstance(values, list) and len(values) == 1 and math.isfinite(float(values[0]))
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise BackendError(f'critic {url}: answered {data[:120]!r}, expected {{"values": [one finite number]}}')


def wait_until_ready(check: Callable[[], Any], what: str, seconds: float, stderr: Optional[TextIO] = None) -> None:
    """Run ``check`` until it succeeds; a server that is not ready (FocusError) is checked
    again every 2 s for up to ``seconds`` (``--wait-for-server``), then its last error is
    raised."""
    deadline = time.monotonic() + seconds
    said = False
    while True:
        try:
            check()
            return
        except FocusError as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            if not said:
                print(f"focus-go collect: waiting up to {seconds:g} s for {what} ({str(exc)[:160]})", file=stderr or sys.stderr)
                said = True
            time.sleep(min(2.0, left))


def load_env_factory(spec: str) -> Callable[[Any], Any]:
    """``--env MODULE:FACTORY``: the callable FACTORY of MODULE (an importable module name, or
    the path of a ``.py`` file); raises ConfigError naming what is missing."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"--env {spec!r}: expected MODULE:FACTORY (e.g. my_envs:make_env or path/to/envs.py:make_env)")
    try:
        if module_name.endswith(".py"):
            path = os.path.abspath(module_name)
            if not os.path.isfile(path):
                raise ConfigError(f"--env {spec!r}: no such file {module_name}")
            loader_spec = importlib.util.spec_from_file_location(f"focus_go_cli_env_{abs(hash(path))}", path)
            assert loader_spec is not None and loader_spec.loader is not None
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ConfigError:
        raise
    except Exception as exc:  # the user's module failed to import: say which and why
        raise ConfigError(f"--env {spec!r}: cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(f"--env {spec!r}: {module_name} has no callable {attr!r}")
    return factory


def make_env(factory: Callable[[Any], Any], spec: str, problem: Any) -> Any:
    """The Env ``factory`` builds for ``problem``; raises ConfigError when it is no Env."""
    try:
        env = factory(problem)
    except Exception as exc:  # the user's factory: name it and the problem
        raise ConfigError(f"--env {spec}: raised for problem {problem.id!r}: {type(exc).__name__}: {exc}") from None
    if not isinstance(env, Env):
        raise ConfigError(f"--env {spec}: returned {type(env).__name__} for problem {problem.id!r}, expected a focus_go.Env "
                          "(a ToolEnv, a MathEnv or your Env subclass)")
    return env


def server_urls(value: Any) -> list:
    """``--sglang`` / ``--vllm`` as a list of URLs (the flag repeats; one string also works)."""
    return [value] if isinstance(value, str) else list(value)


def open_backend(args: argparse.Namespace, profile: Optional[str] = "token_chunk") -> Backend:
    """The policy the command collects with (and the simulated server when no URL is given).
    ``profile`` is its parser: ``token_chunk`` for exact-token segments, a tool-call dialect
    (or None: the model's own) for the whole-turn chat context of tool and text envs."""
    params = SamplingParams(temperature=args.temperature, top_p=args.top_p)
    if not (args.sglang or args.vllm):
        latency = {"per_token": args.sim_latency} if args.sim_latency else None
        # verbosity=3: worked solutions of ~750-1100 tokens, so Segments(256) makes deep trees.
        server = SimServer(seed=args.sim_seed, verbosity=3, latency=latency)
        try:
            # The simulated model writes Hermes-style tool calls.
            policy = SGLangPolicy(model=server.model, base_url=server.url, profile=profile or "hermes",
                                  default_params=params, timeout=args.timeout,
                                  max_concurrency=getattr(args, "max_in_flight", None), capacity=getattr(args, "capacity", None))
        except BaseException:
            server.close()
            raise
        return Backend("simulator", server.url, policy, server=server, description="the embedded simulated server")
    model = args.model or args.tokenizer
    tokenizer = HFTokenizer(args.tokenizer) if args.tokenizer else None
    urls = server_urls(args.sglang or args.vllm)
    url = urls[0] if len(urls) == 1 else ", ".join(urls)
    fleet = {"max_concurrency": getattr(args, "max_in_flight", None), "capacity": getattr(args, "capacity", None),
             "routing": getattr(args, "routing", None) or "affinity",
             "allow_weight_change": bool(getattr(args, "allow_weight_change", False))}
    try:
        fmt = PolicyFormat.resolve(model, tokenizer=tokenizer, profile=profile) if tokenizer else None
        if args.sglang:
            policy: Any = SGLangPolicy(model=model, base_url=urls, format=fmt, profile=profile,
                                       default_params=params, api_key=args.api_key, timeout=args.timeout, **fleet)
            return Backend("sglang", url, policy, tokenizer=tokenizer, description=f"SGLang at {url}")
        api_key = args.api_key or os.environ.get("VLLM_API_KEY") or "EMPTY"
        policy = VLLMPolicy(model=model, base_url=urls, format=fmt, profile=profile, served_model=args.served_model,
                            api_key=api_key, default_params=params, timeout=args.timeout, **fleet)
        return Backend("vllm", url, policy, tokenizer=tokenizer, description=f"vLLM at {url}")
    except BaseException:
        if tokenizer is not None:
            tokenizer.close()
        raise
