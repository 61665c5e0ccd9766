"""The Collector: collect one searched tree per problem, then prepare it.

``Collector(agent, critic=..., search=Selective(...))`` runs the Go engine
(``core/collect``): every independent rollout in flight at once, branching rounds chosen
by the search rule, critic predictions recorded on nodes. Parts with a Go implementation
(SGLangPolicy / VLLMPolicy, MathEnv with a focus-go tokenizer's decode, Critic.constant /
Critic.http) run entirely in Go; any other part (a custom Completion policy, a Python Env
subclass, Critic.from_function) is served from Python through the remote bridge: the
engine queues a request, the collection's poll (a Go call awaited on your event loop,
``_async``) takes it, and your event loop serves it. Go never calls into Python.

    async with Collector(agent, critic=Critic.constant(0.5), search=Selective(32, 16)) as collector:
        state = await collector.collect(problem)
        batch = collector.prepare(state)

A collection with failed rollouts or critic calls raises CollectionError (its ``state``
attribute keeps everything collected) unless ``allow_partial=True``; the failures are then
listed in ``Batch.failures``. Cancelling the awaiting task cancels the Go collection.
"""

from __future__ import annotations

import array
import asyncio
import ctypes
import inspect
import itertools
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from . import _async, _lib, _rules
from ._handle import GoObject
from .agent import Agent, Segments
from .critic import Critic
from .env import Env, MathEnv
from .generation.parsing import (
    ActionParser,
    DeepSeekV3ToolCallParser,
    HarmonyToolCallParser,
    HermesToolCallParser,
    Llama3JSONToolCallParser,
    NativeToolCallParser,
    PythonicToolCallParser,
    QwenXMLToolCallParser,
    TextActionParser,
)
from .generation.format import model_profile
from .tools import ToolEnv
from .workspace import Workspace
from .errors import (
    BackendError,
    ConfigError,
    FocusError,
    FocusTimeoutError,
    InternalError,
    InvalidHandleError,
    OperationCancelled,
    error_for,
)
from .generation.format import HFTokenizer
from .generation.policy import Policy
from .generation.servers import _TokenServerPolicy, go_arrays, params_json
from .preparation import Batch, DirectBranchTd, Estimator, RewardConfig, prepare_samples
from .search import Independent, Selective
from .tree import SchedulerState
from .generation.types import SamplingParams
from .types import DEFAULT_MAX_TOKENS, Failure, GenerateResult, Problem, Step, TokenChunk, ToolCall, ToolTurn



# The values a bridge method gives most often, none of them awaitable: checked by type
# first, because inspect.isawaitable's Awaitable check costs about 0.6 µs per call.
_PLAIN = frozenset({dict, Step, str, tuple, list, type(None)})


def _awaitable(value: Any) -> bool:
    return type(value) not in _PLAIN and inspect.isawaitable(value)


async def _resolve(value: Any) -> Any:
    return await value if _awaitable(value) else value


def _then(value: Any, fn: Callable[[Any], Any]) -> Any:
    """fn(value), or a coroutine giving fn(await value) when value is awaitable (fn may
    itself return an awaitable, which is then awaited too)."""
    if not _awaitable(value):
        return fn(value)

    async def later() -> Any:
        out = fn(await value)
        return await out if _awaitable(out) else out

    return later()


# json.dumps(allow_nan=False)'s C encoder, made once (json.dumps makes one per call). No
# circular-reference check: a cyclic reply fails its request with RecursionError
# (json.dumps: ValueError); NaN and infinities are refused as json.dumps refuses them.
_REPLY_ENCODER = json.encoder.c_make_encoder and json.encoder.c_make_encoder(
    None, json.JSONEncoder().default, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, False
)


def _plain_json(obj: Any) -> bytes:
    """json.dumps(obj, allow_nan=False), encoded: the reply payloads."""
    if _REPLY_ENCODER is None:  # a Python without the _json accelerator
        return json.dumps(obj, allow_nan=False).encode()
    return "".join(_REPLY_ENCODER(obj, 0)).encode()


def _native_tokenizer(obj: Any) -> Optional[HFTokenizer]:
    """The focus-go tokenizer behind a policy, a tokenizer or a bound decode method."""
    owner = getattr(obj, "__self__", obj)
    if isinstance(owner, HFTokenizer):
        return owner
    if isinstance(owner, Policy):
        tokenizer = getattr(owner.format.codec, "tokenizer", None)
        return tokenizer if isinstance(tokenizer, HFTokenizer) else None
    return None


class _Remote:
    """The Python objects one collection's engine calls through the bridge."""

    def __init__(self) -> None:
        self.objects: Dict[int, Any] = {}
        self._next = 1
        self.root_env: Optional[int] = None
        self.recent = _RecentIds()

    def register(self, obj: Any) -> int:
        oid = self._next
        self._next += 1
        self.objects[oid] = obj
        return oid

    def serve(self, req: Dict[str, Any]) -> Any:
        """The reply to ``req``, or an awaitable of it when the Python object's method is
        asynchronous (synchronous env methods are answered without an asyncio task)."""
        kind, payload = req["kind"], req.get("payload") or {}
        obj = self.objects.get(req["object"])
        if obj is None:
            raise ConfigError(f"{kind}: no Python object {req['object']} (already closed?)")
        if kind == "policy.generate":
            return self._generate(obj, payload)
        if kind == "env.reset":
            if req["object"] == self.root_env:
                # The collector already called reset() to build the first user message.
                return {"observation": None}
            return _then(obj.reset(), lambda obs: {"observation": _observation(obs)})
        if kind == "env.step":
            reply = _then(obj.step(_action(payload["action"])), _step_reply)
            if not payload.get("fork"):
                return reply
            # The engine keeps a snapshot of the node unless the step ends the episode: the
            # fork is taken here, after the step, to save it a round trip of its own.
            return _then(reply, lambda r: r if r["done"] else _then(obj.fork(), lambda env: {**r, "object": self.register(env)}))
        if kind == "env.fork":
            return _then(obj.fork(), lambda env: {"object": self.register(env)})
        if kind == "critic.score":
            return self._score(obj, payload["contexts"])
        raise ConfigError(f"unknown bridge request kind {kind!r}")

    async def _generate(self, policy: Policy[Any], payload: Dict[str, Any]) -> "_Generated":
        params = SamplingParams._from_engine(payload.get("params") or {})
        prefix, ids = payload["tokens"], payload.get("ids")
        if ids is not None and prefix:
            _lib.share_ids(prefix, ids)  # a Go policy it is handed to reuses the array
        try:
            result = await policy.agenerate_tokens(prefix, params)
        finally:
            if ids is not None:
                _lib.unshare_ids(prefix, ids)
        if not isinstance(result, GenerateResult):
            raise ConfigError(f"policy returned {type(result).__name__}, expected GenerateResult")
        arrays = go_arrays(result)
        if arrays is not None:
            # A Go policy's result, handed on unchanged: Go checked it, and its ids are ints.
            tokens, logprobs = arrays
            self.recent.add(prefix, ids, tokens, result.tokens)
        else:
            tokens, logprobs = _checked_arrays(result)
            self.recent.add(prefix, ids, tokens)
        # exact=False (or a result with exact_generation False) makes the edge inexact: its
        # tokens condition later turns but train no actor; critic targets still use it.
        meta = {
            "text": result.text,
            "stop_reason": result.stop_reason,
            "matched_stop": result.matched_stop,
            "exact": bool(policy.is_exact(result)),
        }
        return _Generated(tokens, logprobs, _plain_json(meta))

    async def _score(self, critic: Critic, contexts: List[str]) -> Dict[str, Any]:
        values = [float(v) for v in await _resolve(critic.fn(list(contexts)))]  # type: ignore[misc]
        for i, v in enumerate(values):
            if not math.isfinite(v):
                raise ConfigError(f"critic function returned {v} for context {i}; values must be finite")
        return {"values": values}


# Contexts a collection's _RecentIds keeps (each with its generated ids): a tree has at most
# 16 rollouts in flight, and a rollout's next request comes right after its env step. In
# the benchmark's trees 95% of prefixes and actions are found with 32 (88% with 16), for
# at most about 0.7 MB per bridged collection (1,800-id contexts: a tuple and an array).
_RECENT_CONTEXTS = 32


class _RecentIds:
    """The id tuples of one collection's recent policy.generate requests, handed back when
    the poll brings the same ids again, instead of building a new int object per id from
    the poll's buffer (about 40 µs for a 1,500-id prefix): a continuing segment's prefix is
    the previous request's prefix plus the ids generated from it, and an env.step token
    action is those generated ids. A tuple is handed back only when its ids equal the
    polled ones (a memcmp of the two arrays); the key (the length, the last and the middle
    id) only finds the candidate. The oldest entries go first."""

    def __init__(self, limit: int = _RECENT_CONTEXTS) -> None:
        self.limit = limit
        self._entries: Dict[Tuple[int, int, int], Tuple[Tuple[int, ...], "array.array[int]"]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    @staticmethod
    def _key(buf: "array.array[int]") -> Tuple[int, int, int]:
        n = len(buf)
        return (n, buf[-1], buf[n // 2]) if n else (0, 0, 0)

    def ids(self, buf: "array.array[int]") -> Tuple[int, ...]:
        """The ids in buf (a uint32 array) as a tuple: a recent one when equal."""
        if not buf:
            return ()
        hit = self._entries.get(self._key(buf))
        if hit is not None and hit[1] == buf:
            return hit[0]
        return _lib.untracked_ids(tuple(buf.tolist()))

    def add(
        self,
        prefix: Tuple[int, ...],
        prefix_buf: Optional["array.array[int]"],
        generated_buf: "array.array[int]",
        generated: Optional[Tuple[int, ...]] = None,
    ) -> None:
        """Record a served request: its prefix (a tuple of ints, as polled) and prefix_buf
        (its array, None when empty), and the generated ids as an array (and as a tuple of
        ints when there is one: a Go policy's result)."""
        if not generated_buf:
            return
        if generated is None:
            # From the array, not the policy's result: exact ints, whatever int-like values
            # (numpy's, bools) the policy returned, as ids built from the poll's buffer are.
            generated = _lib.untracked_ids(tuple(generated_buf.tolist()))
        self.keep(generated, generated_buf)
        # prefix holds only ints too: the polled tuple (the Policy contract hands it on
        # unchanged; a Completion that mutates it cannot, it is a tuple).
        self.keep(_lib.untracked_ids(prefix + generated), generated_buf if prefix_buf is None else prefix_buf + generated_buf)

    def keep(self, ids: Tuple[int, ...], buf: "array.array[int]") -> None:
        """Keep the tuple ids, whose values buf holds (the root prompt, or what add keeps)."""
        key = self._key(buf)
        self._entries.pop(key, None)
        self._entries[key] = (ids, buf)
        if len(self._entries) > 2 * self.limit:
            del self._entries[next(iter(self._entries))]


_NO_LOGPROB_YET = (-math.inf,)


def _checked_arrays(result: GenerateResult) -> "Tuple[array.array[int], array.array[float]]":
    """A Python policy's generated ids and logprobs as a uint32 and a float64 array, once
    checked. NaN (no logprob: what SGLang's null reads as) and -inf are kept: the engine
    makes the edge inexact, so it trains no actor. A positive logprob is a broken policy."""
    if _has_positive(result.logprobs):
        i, lp = next((i, lp) for i, lp in enumerate(result.logprobs) if lp > 0)
        raise ConfigError(f"policy returned logprob {lp} for generated token {i}; logprobs must be <= 0 (NaN for none)")
    if len(result.logprobs) != len(result.tokens):
        raise ConfigError(f"policy returned {len(result.tokens)} tokens but {len(result.logprobs)} logprobs")
    try:
        tokens = array.array("I", result.tokens)
    except (OverflowError, TypeError):
        raise ConfigError("policy returned token ids that are not integers in [0, 2**32)") from None
    return tokens, array.array("d", result.logprobs)


def _has_positive(values: Any) -> bool:
    """Whether some value is > 0, as ``any(v > 0 for v in values)`` but at C speed: max()
    only replaces its running maximum with a value greater than it, so the NaNs (no
    logprob) it meets after the leading -inf never win, and a positive one always does."""
    return max(itertools.chain(_NO_LOGPROB_YET, values)) > 0


def _address(values: "array.array[Any]") -> Optional[int]:
    """The address of an array's buffer for a C pointer argument (NULL when empty); the
    caller keeps the array referenced for the call."""
    return values.buffer_info()[0] if values else None


class _Generated:
    """A policy.generate reply: ids and logprobs cross the C boundary as arrays."""

    __slots__ = ("tokens", "logprobs", "meta")

    def __init__(self, tokens: "array.array[int]", logprobs: "array.array[float]", meta: bytes) -> None:
        self.tokens, self.logprobs, self.meta = tokens, logprobs, meta


def _observation(obs: Any) -> Optional[Dict[str, Any]]:
    if obs is None or obs == "":
        return None
    if isinstance(obs, str):
        return {"text": obs}
    if isinstance(obs, (list, tuple)):
        messages = []
        for i, m in enumerate(obs):
            if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
                raise ConfigError(f"observation message {i} must be a dict with a 'role', got {m!r:.80}")
            messages.append(dict(m))
        return {"messages": messages} if messages else None
    raise ConfigError(
        f"observation is a {type(obs).__name__}; expected text, a list of chat messages "
        "(whole-turn context only) or None"
    )


def _step_reply(step: Any) -> Dict[str, Any]:
    if not isinstance(step, Step):
        raise ConfigError(f"env.step returned {type(step).__name__}, expected Step")
    reward = float(step.reward)
    if not math.isfinite(reward):
        raise ConfigError(f"env.step returned reward {reward}, which is not finite")
    return {"observation": _observation(step.observation), "reward": reward, "done": bool(step.done), "info": step.info}


def _action(action: Dict[str, Any]) -> Any:
    kind = action.get("kind")
    if kind == "tokens":
        return TokenChunk(tokens=tuple(action.get("tokens") or ()), finished=bool(action.get("finished")))
    if kind == "text":
        return action.get("text", "")
    if kind == "tool":
        calls = tuple(
            ToolCall(c["name"], c["arguments"], c.get("call_id", ""), c.get("error") or "")
            for c in action.get("tool_calls") or ()
        )
        return ToolTurn(text=action.get("text", ""), tool_calls=calls, reasoning=action.get("reasoning", ""))
    raise ConfigError(f"unknown action kind {kind!r}")


_TURN_PROFILES = {
    HermesToolCallParser: "hermes",
    QwenXMLToolCallParser: "qwen_xml",
    Llama3JSONToolCallParser: "llama3_json",
    DeepSeekV3ToolCallParser: "deepseek_v3",
    PythonicToolCallParser: "pythonic",
    HarmonyToolCallParser: "harmony",
    TextActionParser: "text",
}


def _turn_profile(agent: Agent) -> str:
    """The Go parser profile that reads a whole assistant turn for ``agent.env``."""
    action = agent.env.action
    if agent.parser is not None:
        profile = _TURN_PROFILES.get(type(agent.parser))
        if profile is None:
            raise ConfigError(
                f"Agent(parser={type(agent.parser).__name__}(...)): the whole-turn context parses in the Go "
                "engine, which reads the built-in dialects and text replies ("
                + ", ".join(sorted(cls.__name__ for cls in _TURN_PROFILES))
                + ")"
            )
        if agent.parser.action != action:
            raise ConfigError(
                f"Agent: {type(agent.env).__name__} consumes {action!r} actions but "
                f"{type(agent.parser).__name__} produces {agent.parser.action!r} actions"
            )
        return profile
    if action == "text":
        return "text"
    parser = agent.policy.format.parser
    if isinstance(parser, NativeToolCallParser):
        raise ConfigError(
            "the whole-turn context needs exact tokens: a native (API) tool-call policy cannot build a "
            "token tree; use a token backend (SGLangPolicy, VLLMPolicy) with the model's tool profile "
            "(hermes, qwen_xml, llama3_json, deepseek_v3, pythonic or harmony)"
        )
    profile = _TURN_PROFILES.get(type(parser))
    if profile is not None and profile != "text":
        return profile
    # A text or token_chunk format: the model's own tool dialect (ConfigError naming the
    # profiles when neither the model name nor its chat template tells).
    tokenizer = getattr(getattr(agent.policy.format, "codec", None), "tokenizer", None)
    return model_profile(agent.policy.model, getattr(tokenizer, "chat_template", "") or "")[1]


def _timeout(name: str, value: Optional[float]) -> float:
    """A call timeout in seconds for the engine (0 = none); Go durations cap it at 1e9 s."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value <= 1e9):
        raise ConfigError(f"Collector: {name} must be a number of seconds in (0, 1e9] or None, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class CollectionProgress:
    """The live counters of a running collection, as ``Collector.progress()`` reports them.

    They are read without waiting for the collection. Counts only grow while it runs; once
    ``done``, ``rollouts_finished`` and ``generated_tokens`` equal the tree's ``rollouts``
    and ``generated_tokens`` statistics. A tree may stop early with budget unspent.

    Attributes:
        budget: The search budget: rollouts per tree.
        rollouts_launched: Budget units spent so far, retries included.
        rollouts_finished: Rollouts the tree keeps, completed or failed.
        rollouts_failed: Rollouts that failed.
        segments: Policy responses accepted.
        generated_tokens: Tokens generated so far.
        elapsed_seconds: Wall time since the collection started.
        tokens_per_second: Generated tokens per second so far.
        eta_seconds: The time the unfinished budget would take at the pace so far; None
            until a rollout has finished, and once done.
        done: Whether the collection has ended.
    """

    budget: int  # the search budget B (rollouts per tree)
    rollouts_launched: int  # budget units spent (retries included)
    rollouts_finished: int  # rollouts the tree keeps (completed or failed)
    rollouts_failed: int
    segments: int  # policy responses accepted
    generated_tokens: int
    elapsed_seconds: float
    tokens_per_second: float
    eta_seconds: Optional[float]
    done: bool

    @classmethod
    def _from_json(cls, data: Dict[str, Any]) -> "CollectionProgress":
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


class Collector:
    """Collects searched trees for one agent and prepares them for training.

    ``collect(problem)`` grows one tree: every warmup rollout in flight at once, then
    branching rounds chosen by the search rule, with the critic's predictions recorded on
    the nodes. ``prepare(tree)`` turns the tree into actor advantages and critic targets.

    Example:
        ```python
        async with Collector(agent, critic=Critic.constant(0.5), search=Selective(32, 16)) as collector:
            tree = await collector.collect(problem)
            batch = collector.prepare(tree)
        ```

    ``progress()`` reads the live counters of the collections running now;
    ``last_progress`` keeps the final counters of the last collection that ended.

    Args:
        agent: The policy, environment and limits to collect with.
        critic: Scores checkpoints; None for no predictions, so that refined values rest
            on branch returns alone.
        search: The search rule; ``Selective()`` when None.
        reward: The reward and value settings ``prepare`` uses and the search plans
            with; ``RewardConfig()`` when None.
        estimator: The recipe ``prepare`` computes actor advantages with; None prepares
            critic targets only.
        workspace: Where tools run. It is opened with the collector (``async with``) or,
            without that, for each ``collect``; each collection gets its own working
            directory in it, and a ``ToolEnv`` runs its tools under the workspace's
            ``max_parallel`` limit. Several collectors may share one workspace.
        close_services: False leaves a workspace the collector opened open when it exits,
            for its owner to close.
        policy_timeout: Seconds each policy call may take; None for no limit of its own.
            A call that times out fails its rollout, not the collection.
        env_timeout: Seconds each environment call may take; None for no limit of its own.
        critic_timeout: Seconds each critic call may take; None for no limit of its own.
            A call that times out leaves its checkpoints unscored.

    Raises:
        ConfigError: An argument is of the wrong type or a timeout is not a positive
            number of seconds.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        critic: Optional[Critic] = None,
        search: Union[Selective, Independent, None] = None,
        reward: Optional[RewardConfig] = None,
        estimator: Optional[Estimator] = DirectBranchTd(),
        workspace: Optional[Workspace] = None,
        close_services: bool = True,
        policy_timeout: Optional[float] = None,
        env_timeout: Optional[float] = None,
        critic_timeout: Optional[float] = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise ConfigError(f"Collector: agent must be an Agent, got {type(agent).__name__}")
        if critic is not None and not isinstance(critic, Critic):
            raise ConfigError(f"Collector: critic must be a Critic, got {type(critic).__name__}")
        if workspace is not None and not isinstance(workspace, Workspace):
            raise ConfigError(f"Collector: workspace must be a Workspace, got {type(workspace).__name__}")
        self.agent = agent
        self.critic = critic
        self.search = search if search is not None else Selective()
        self.reward = reward if reward is not None else RewardConfig()
        self.estimator = estimator
        self.workspace = workspace
        self.close_services = close_services
        self.timeouts = {
            name: _timeout(name, value)
            for name, value in (("policy_timeout", policy_timeout), ("env_timeout", env_timeout), ("critic_timeout", critic_timeout))
        }
        self._entered = 0
        # Engine settings an integration sets for its own collections (core/collect's
        # Config JSON keys, e.g. the Slime hook's "stop_on_abort"); not user API.
        self._engine_options: Dict[str, Any] = {}
        self._running: List[_Run] = []
        self.last_progress: Optional[CollectionProgress] = None

    def progress(self) -> List[CollectionProgress]:
        """The live counters of this collector's collections running now.

        Cheap: it never waits for a collection.

        Returns:
            One ``CollectionProgress`` per running collection, oldest first; empty when
                none runs.
        """
        return [p for p in (run.progress() for run in self._running) if p is not None]

    async def __aenter__(self) -> "Collector":
        if self.workspace is not None:
            await self.workspace.__aenter__()
        self._entered += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._entered == 0:
            return
        self._entered -= 1
        if self.close_services and self.workspace is not None:
            await self.workspace.__aexit__(*exc)

    def prepare(self, state: SchedulerState[Any]) -> Batch:
        """Turn a collected tree into training samples with this collector's settings.

        The same as ``prepare_samples(state, reward_config=self.reward,
        estimator=self.estimator)``.

        Args:
            state: A tree returned by ``collect``.

        Returns:
            The actor samples with their advantages, the critic samples with their
                targets, the statistics and the failures.
        """
        return prepare_samples(state, reward_config=self.reward, estimator=self.estimator)

    def _messages(self, problem: Problem, observation: Any) -> List[Dict[str, Any]]:
        """The root conversation, the reset observation placed by the Go rule."""
        return _rules.root_messages(self.agent.system_prompt, problem.prompt, observation)

    async def collect(self, problem: Union[Problem, str], *, allow_partial: bool = False) -> SchedulerState[Any]:
        """Collect one searched tree for ``problem``.

        Cancelling the awaiting task cancels the collection and its requests in flight.

        Args:
            problem: A ``Problem``, or a prompt string.
            allow_partial: Keep a collection with failed rollouts or critic calls instead
                of raising; the failures are listed in the tree's ``failures`` and, after
                ``prepare``, in ``Batch.failures``.

        Returns:
            The tree, held in native memory until ``close()``, the end of a ``with``
                block, or garbage collection.

        Raises:
            CollectionError: Rollouts or critic calls failed and ``allow_partial`` is
                False. Its ``state`` attribute keeps everything collected.
            ConfigError: The agent's parts do not fit together, for instance a
                ``"tokens"`` environment without ``Segments``.
        """
        if isinstance(problem, str):
            problem = Problem(problem)
        if self.workspace is None:
            return await self._collect(problem, allow_partial, None)
        async with self.workspace:
            return await self._collect(problem, allow_partial, self.workspace)

    async def _collect(self, problem: Problem, allow_partial: bool, workspace: Optional[Workspace]) -> SchedulerState[Any]:
        agent = self.agent
        whole_turn = agent.context is None
        if whole_turn and agent.env.action == "tokens":
            raise ConfigError(
                f"{type(agent.env).__name__} consumes exact token chunks, which need context=Segments(n); "
                "Agent(context=None) is the whole-turn chat context for 'tool' and 'text' environments"
            )
        remote = _Remote()
        env = agent.env
        if isinstance(env, ToolEnv):
            # A per-collection copy bound to this collection's directory and the shared limit.
            directory = workspace.problem_dir(None if problem.id is None else str(problem.id)) if workspace else None
            env = env.bind(directory, workspace.slot if workspace else None)
        native_tokenizer = _native_tokenizer(agent.policy)
        if type(env) is MathEnv and not env.tokens and native_tokenizer is not None and _native_tokenizer(env.decode) is native_tokenizer:
            env_part: Dict[str, Any] = {"kind": "math", "label": str(env.label)}
            observation = None
        else:
            observation = await _resolve(env.reset())
            remote.root_env = remote.register(env)
            env_part = {"kind": "remote", "object": remote.root_env}
        if isinstance(agent.policy, _TokenServerPolicy):
            policy_part: Dict[str, Any] = {"kind": "native", "handle": agent.policy.handle}
        else:
            policy_part = {"kind": "remote", "object": remote.register(agent.policy)}

        tools = list(env.tool_schemas()) if whole_turn else []
        messages = self._messages(problem, observation)
        prompt = agent.policy.prepare(messages, tools)
        if policy_part["kind"] == "remote" and prompt.tokens:
            # Every rollout's first request has the root prompt as its prefix (ids that are
            # not uint32 fail in the engine's config check, below).
            try:
                root = array.array("I", prompt.tokens)
            except (OverflowError, TypeError):
                pass
            else:
                remote.recent.keep(_lib.untracked_ids(tuple(root.tolist())), root)
        sampling = agent.sampling or agent.policy.default_params or SamplingParams()
        sampling_json = json.loads(params_json(sampling))
        sampling_json.setdefault("logprobs", 0)
        if whole_turn:
            if native_tokenizer is None:
                raise ConfigError(
                    "the whole-turn context renders tool messages with the policy's chat template in Go: the "
                    "policy's format needs a focus-go HFTokenizer"
                )
            segments = sampling.max_tokens or DEFAULT_MAX_TOKENS
            turn: Optional[Dict[str, Any]] = {
                "parser": _turn_profile(agent),
                "messages": messages,
                "tools": tools or None,
                "template_kwargs": dict(agent.policy.format.codec.template_kwargs or {}),
            }
        else:
            segments, turn = agent.context.tokens, None  # type: ignore[union-attr]
        config = {
            "problem_id": "" if problem.id is None else str(problem.id),
            "prompt_tokens": list(prompt.tokens),
            "prompt_text": agent.policy.decode(prompt.tokens),
            "segments": segments,
            "max_segments": agent.max_segments,
            "max_total_tokens": agent.max_total_tokens,
            "sampling": sampling_json,
            "search": self.search._config(),
            "reward": json.loads(self.reward._json()),
            "allow_partial": allow_partial,
            "codec": native_tokenizer.handle if native_tokenizer is not None else 0,
            "policy": policy_part,
            "env": env_part,
            "critic": None if self.critic is None else self.critic._part(remote.register),
            **self.timeouts,
            **self._engine_options,
            "turn": turn,
        }
        run = _Run(config, remote)
        self._running.append(run)
        try:
            return await run.run()
        finally:
            self._running.remove(run)
            if run.final is not None:
                self.last_progress = run.final


_POLL_BATCH = 256


def _polled(out: "_lib.Bytes", tokens: ctypes.c_void_p, count: ctypes.c_size_t, recent: _RecentIds) -> List[Dict[str, Any]]:
    """The requests a focus_collection_poll call wrote (and freed). The ids that cross
    beside the JSON go back into the payloads as tuples (recent ones where equal, see
    _RecentIds): a policy.generate prefix as "tokens", with its uint32 array as "ids" (see
    _lib.share_ids); an env.step token action's as the action's "tokens"."""
    try:
        requests = json.loads(_lib.take_string(out))
        if tokens:
            raw = _lib.view(tokens.value, count.value * 4, "B")
            for req in requests:
                span = req.pop("tokens", None)
                if span is None:
                    continue
                if not isinstance(span, list) or len(span) != 2 or not 0 <= span[0] <= span[1] <= count.value:
                    raise InternalError(f"bridge request {req.get('id')} has token range {span!r} outside the {count.value} polled ids")
                buf = array.array("I")
                buf.frombytes(raw[span[0] * 4 : span[1] * 4])  # one copy, no int objects
                ids = recent.ids(buf)
                if req["kind"] == "policy.generate":
                    req["payload"]["tokens"], req["payload"]["ids"] = ids, buf
                elif req["kind"] == "env.step":
                    req["payload"]["action"]["tokens"] = ids
    finally:
        if tokens:
            _lib.lib().focus_buffer_free(tokens)
    for req in requests:
        if req["kind"] == "policy.generate":
            req["payload"].setdefault("tokens", ())
    return requests


async def _poll(handle: Any, recent: _RecentIds) -> List[Dict[str, Any]]:
    """The queued bridge requests (waiting for at least one), then those queued by the time
    this task runs again (see _poll_now)."""
    out, tokens, count = _lib.Bytes(), ctypes.c_void_p(), ctypes.c_size_t()
    requests = await _async.call("focus_collection_poll", handle, -1, _POLL_BATCH, slots=(out, tokens, count),
                                 convert=lambda: _polled(out, tokens, count, recent))
    if len(requests) < _POLL_BATCH:
        try:
            requests += _poll_now(handle, recent, _POLL_BATCH - len(requests))
        except OperationCancelled:
            pass  # the bridge closed after the first ones: serve them; the next poll ends
    return requests


def _poll_now(handle: Any, recent: _RecentIds, limit: int) -> List[Dict[str, Any]]:
    """The requests queued now, without waiting (none: []). A poll completes with the
    requests queued when the first of a burst arrived (the replies of one answer call wake
    several rollouts, whose next requests follow within microseconds), and this task runs
    only a loop turn later: taking the rest of the burst here saves a poll's round trip
    (a wake-up of the loop, a future and a task step) for most of them."""
    out, tokens, count = _lib.Bytes(), ctypes.c_void_p(), ctypes.c_size_t()
    try:  # ticket 0 and timeout 0: returns at once, FOCUS_ERR_TIMEOUT when none is queued
        _lib.call("focus_collection_poll", _lib.c_handle(handle), 0, 0, limit, ctypes.byref(out), ctypes.byref(tokens), ctypes.byref(count))
    except FocusTimeoutError:
        return []
    return _polled(out, tokens, count, recent)


class _Run:
    """One Go collection and the Python side of its bridge."""

    def __init__(self, config: Dict[str, Any], remote: _Remote) -> None:
        self.config = config
        self.remote = remote
        self.tasks: Dict[int, asyncio.Future[Any]] = {}
        self.handle: Optional[int] = None  # the Go collection's, while it is open
        self.final: Optional[CollectionProgress] = None
        # Replies waiting to be sent: (request id, JSON payload, generated ids + logprobs or
        # None). They go to Go in one focus_collection_answer call per event-loop turn.
        self._answers: List[Tuple[int, bytes, Optional[_Generated]]] = []

    def progress(self) -> Optional[CollectionProgress]:
        """The engine's live counters (focus_collection_progress); None unless running."""
        if self.handle is None:
            return None
        return CollectionProgress._from_json(json.loads(_lib.call_string("focus_collection_progress", _lib.c_handle(self.handle))))

    async def run(self) -> SchedulerState[Any]:
        data = json.dumps(self.config).encode()
        collection = GoObject(_lib.call_handle("focus_collect_start", data, len(data)))
        handle = self.handle = collection.handle
        ended = asyncio.ensure_future(self._serve(handle))
        try:
            try:
                await asyncio.shield(ended)
            except asyncio.CancelledError:
                _lib.call("focus_collection_cancel", _lib.c_handle(handle))
                await asyncio.shield(ended)
                raise
            finally:
                for task in list(self.tasks.values()):
                    task.cancel()
            self.final = self.progress()
            return self._result(_lib.c_handle(handle))
        finally:
            self.handle = None
            self.remote.recent.clear()  # now, not when the ending exception's cycle is collected
            collection.close()

    async def _serve(self, handle: int) -> None:
        """Serve the bridge until the collection closes it, then wait for the end (without
        remote parts, only wait). The waits are Go calls awaited through _async: no thread
        per collection."""
        try:
            serving = bool(self.remote.objects)
            while serving:
                try:
                    requests = await _poll(handle, self.remote.recent)
                except OperationCancelled:
                    break  # the collection finished and closed its bridge
                self._dispatch_all(requests, _lib.c_handle(handle))
        except BaseException:
            _lib.call("focus_collection_cancel", _lib.c_handle(handle))  # nobody serves it any more
            raise
        finally:
            done = ctypes.c_int32()
            await _async.call("focus_collection_wait", handle, -1, slots=(done,), convert=lambda: None)

    def _dispatch_all(self, requests: List[Dict[str, Any]], handle: Any) -> None:
        for req in requests:
            self._dispatch(req, handle)

    def _dispatch(self, req: Dict[str, Any], handle: Any) -> None:
        kind = req["kind"]
        if kind == "cancel":
            task = self.tasks.pop(req["id"], None)
            if task is not None:
                task.cancel()
            return
        if kind == "env.close":
            self.remote.objects.pop(req["object"], None)
            return
        rid = req["id"]
        try:
            reply = self.remote.serve(req)
        except Exception as exc:
            self._fail(handle, rid, exc)
            return
        if _awaitable(reply):
            # The awaitable itself becomes the task: cancelled before its first step, it is
            # still closed properly.
            task = asyncio.ensure_future(reply)
            self.tasks[rid] = task
            task.add_done_callback(lambda done: self._finish(handle, rid, done))
        else:
            self._reply(handle, rid, reply)

    def _finish(self, handle: Any, rid: int, task: "asyncio.Future[Any]") -> None:
        self.tasks.pop(rid, None)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            self._reply(handle, rid, task.result())
        elif isinstance(exc, Exception):
            self._fail(handle, rid, exc)

    def _reply(self, handle: Any, rid: int, reply: Any) -> None:
        if isinstance(reply, _Generated):
            answer = (rid, reply.meta, reply)
        else:
            try:
                answer = (rid, _plain_json(reply), None)
            except Exception as exc:
                self._fail(handle, rid, exc)
                return
        if not self._answers:
            # Every reply given until the loop's next turn crosses the C boundary in one call.
            asyncio.get_running_loop().call_soon(self._send_answers, handle)
        self._answers.append(answer)

    def _send_answers(self, handle: Any) -> None:
        """Answer the queued replies in one focus_collection_answer call: the JSON payloads
        concatenated, the generated ids and logprobs of the policy.generate replies in two
        arrays (a resolve or resolve_generate each, in order)."""
        answers, self._answers = self._answers, []
        if not answers:
            return
        ids, ends, generated = array.array("Q"), array.array("Q"), array.array("q")
        tokens, logprobs = array.array("I"), array.array("d")
        payloads, end = [], 0
        for rid, payload, gen in answers:
            ids.append(rid)
            payloads.append(payload)
            end += len(payload)
            ends.append(end)
            if gen is None:
                generated.append(-1)
            else:
                generated.append(len(gen.tokens))
                tokens.extend(gen.tokens)
                logprobs.extend(gen.logprobs)
        payload = b"".join(payloads)
        try:
            _lib.call(
                "focus_collection_answer", handle, len(answers), _address(ids), payload, len(payload),
                _address(ends), _address(generated), _address(tokens), _address(logprobs), len(tokens), None,
            )
        except InvalidHandleError:
            pass  # the collection has ended: nobody waits for these replies
        except BaseException:
            # Answers that cannot be given would leave the engine waiting: stop it.
            _lib.call("focus_collection_cancel", handle)
            raise

    def _fail(self, handle: Any, rid: int, exc: Exception) -> None:
        """The engine records the failure as a failed rollout or critic call."""
        code = exc.code if isinstance(exc, FocusError) and exc.code > 0 else BackendError.code
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
            code = FocusTimeoutError.code
        self._answer("focus_collection_fail", handle, rid, code, *_lib.text_arg(f"{type(exc).__name__}: {exc}"))

    @staticmethod
    def _answer(name: str, handle: Any, rid: int, *args: Any) -> None:
        try:
            _lib.call(name, handle, rid, *args)
        except InvalidHandleError:
            pass  # the engine stopped waiting for this request (cancelled or finished)

    def _result(self, handle: Any) -> SchedulerState[Any]:
        tree = _lib.c_handle()
        outcome = json.loads(_lib.call_string("focus_collection_result", handle, ctypes.byref(tree)))
        state = SchedulerState(tree.value) if tree.value else None
        failures = tuple(Failure(f["node_id"], f["message"], f.get("aborted", False)) for f in outcome["failures"] or ())
        if state is not None:
            state.failures = failures
        if outcome["code"]:
            exc = error_for(outcome["code"], outcome["message"], outcome.get("field"))
            exc.state = state  # type: ignore[attr-defined]
            exc.failures = failures  # type: ignore[attr-defined]
            raise exc
        assert state is not None
        return state
