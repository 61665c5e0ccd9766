"""The Collector: collect one searched tree per problem, then prepare it.

``Collector(agent, critic=..., search=Selective(...))`` runs the Go engine
(``core/collect``): every independent rollout in flight at once, branching rounds chosen
by the search rule, critic predictions recorded on nodes. Parts with a Go implementation
(SGLangPolicy / VLLMPolicy, MathEnv with a focus-go tokenizer's decode, Critic.constant /
Critic.http) run entirely in Go; any other part (a custom Completion policy, a Python Env
subclass, Critic.from_function) is served from Python through the remote bridge: the
engine queues a request, the collection's poll (a Go call awaited on your event loop,
``_async``) takes it, and your event loop serves it (``focus_go._bridge``, private). Go
never calls into Python.

    async with Collector(agent, critic=Critic.constant(0.5), search=Selective(32, 16)) as collector:
        state = await collector.collect(problem)
        batch = collector.prepare(state)

A collection with failed rollouts or critic calls raises CollectionError (its ``state``
attribute keeps everything collected) unless ``allow_partial=True``; the failures are then
listed in ``Batch.failures``. Cancelling the awaiting task cancels the Go collection.
"""

from __future__ import annotations

import array
import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

from . import _lib, _rules
from ._bridge import _Remote, _resolve, _Run
from .agent import Agent
from .critic import Critic
from .env import MathEnv
from .errors import ConfigError
from .generation.parsing import (
    DeepSeekV3ToolCallParser,
    HarmonyToolCallParser,
    HermesToolCallParser,
    Llama3JSONToolCallParser,
    NativeToolCallParser,
    PythonicToolCallParser,
    QwenXMLToolCallParser,
    TextActionParser,
)
from .generation.format import HFTokenizer, model_profile
from .generation.policy import Policy
from .generation.servers import _TokenServerPolicy, params_json
from .generation.types import SamplingParams
from .preparation import Batch, DirectBranchTd, Estimator, RewardConfig, prepare_samples
from .search import Independent, Selective
from .tools import ToolEnv
from .tree import SchedulerState
from .types import DEFAULT_MAX_TOKENS, Problem
from .workspace import Workspace


def _native_tokenizer(obj: Any) -> Optional[HFTokenizer]:
    """The focus-go tokenizer behind a policy, a tokenizer or a bound decode method."""
    owner = getattr(obj, "__self__", obj)
    if isinstance(owner, HFTokenizer):
        return owner
    if isinstance(owner, Policy):
        tokenizer = getattr(owner.format.codec, "tokenizer", None)
        return tokenizer if isinstance(tokenizer, HFTokenizer) else None
    return None


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
        max_retries: How many times a rollout that fails is launched again from the
            checkpoint it started at, with a new seed. Each retry spends one rollout of
            the search budget, and none is launched once the budget is spent; the failed
            attempt stays in the tree as a failed rollout. 0 (the default) retries none.
        stop_on_abort: End the collection at the first generation the server aborted
            (finish reason ``"abort"``, as when a trainer such as Slime aborts its
            rollout): the calls in flight are cancelled, no rollout is launched after
            it, and ``collect`` raises ``CollectionError`` listing the aborted rollout
            (its ``state`` keeps the tree so far), whatever ``allow_partial`` says. False
            (the default): the aborted generation fails its rollout and the search goes
            on. The Slime generate hook collects with it on.

    Raises:
        ConfigError: An argument is of the wrong type, a timeout is not a positive
            number of seconds, or ``max_retries`` is negative.
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
        max_retries: int = 0,
        stop_on_abort: bool = False,
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
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(f"Collector: max_retries must be an integer >= 0, got {max_retries!r}")
        if not isinstance(stop_on_abort, bool):
            raise ConfigError(f"Collector: stop_on_abort must be True or False, got {stop_on_abort!r}")
        self.max_retries = max_retries
        self.stop_on_abort = stop_on_abort
        self._entered = 0
        self._running: List[_Run] = []
        self.last_progress: Optional[CollectionProgress] = None

    def progress(self) -> List[CollectionProgress]:
        """The live counters of this collector's collections running now.

        Cheap: it never waits for a collection.

        Returns:
            One ``CollectionProgress`` per running collection, oldest first; empty when
                none runs.
        """
        return [CollectionProgress._from_json(p) for p in (run.progress() for run in self._running) if p is not None]

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

    async def collect(
        self, problem: Union[Problem, str], *, allow_partial: bool = False, resume: Union[SchedulerState[Any], str, bytes, None] = None
    ) -> SchedulerState[Any]:
        """Collect one searched tree for ``problem``.

        Cancelling the awaiting task cancels the collection and its requests in flight.

        Args:
            problem: A ``Problem``, or a prompt string.
            allow_partial: Keep a collection with failed rollouts or critic calls instead
                of raising; the failures are listed in the tree's ``failures`` and, after
                ``prepare``, in ``Batch.failures``.
            resume: An earlier partial tree of the same problem (a ``SchedulerState``, or
                its ``to_json()`` text), such as the ``state`` of a ``CollectionError``
                from an aborted or cancelled collection: the search continues from it
                instead of starting again. Its failed rollouts are dropped and their
                budget refunded; its other nodes are kept (``NodeView.off_policy`` marks
                them, generated under an older policy; each actor record counts the
                response tokens they hold in ``off_policy_tokens``) and its finished rollouts count
                against the budget; the missing warmup rollouts run first, then branching
                rounds. Every kept path is first replayed on forks of the freshly reset
                environment (a tool environment runs its tool calls again): each
                replayed checkpoint must give back the reward, done flag and observation
                the tree holds, and each kept finished rollout takes the reward the
                environment gives it now (``stats["rewards_regraded"]`` counts the
                changes), so a reward this environment did not grade is never trained
                on. The tree must have been cut by the same ``Segments(n)`` (its
                ``stats["segment_rule"]``) and keep at least one node that did not
                fail. The tree's ``stats`` count what was kept (``rollouts_resumed``,
                ``tokens_resumed``). None (the default) starts a new tree.

        Returns:
            The tree, held in native memory until ``close()``, the end of a ``with``
                block, or garbage collection.

        Raises:
            CollectionError: Rollouts or critic calls failed and ``allow_partial`` is
                False. Its ``state`` attribute keeps everything collected.
            ConfigError: The agent's parts do not fit together, for instance a
                ``"tokens"`` environment without ``Segments``; or ``resume`` is a tree of
                another problem, root context or segment rule, keeps no node that did not
                fail, or the environment did not replay one of its nodes (the message
                names it).
        """
        if isinstance(problem, str):
            problem = Problem(problem)
        resumed = _resume_json(resume)
        if self.workspace is None:
            return await self._collect(problem, allow_partial, None, resumed)
        async with self.workspace:
            return await self._collect(problem, allow_partial, self.workspace, resumed)

    async def _collect(
        self, problem: Problem, allow_partial: bool, workspace: Optional[Workspace], resume: Optional[Dict[str, Any]] = None
    ) -> SchedulerState[Any]:
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
            "max_retries": self.max_retries,
            "stop_on_abort": self.stop_on_abort,
            "turn": turn,
        }
        if resume is not None:
            config["resume"] = resume
        run = _Run(config, remote)
        self._running.append(run)
        try:
            return await run.run()
        finally:
            self._running.remove(run)
            if run.final is not None:
                self.last_progress = CollectionProgress._from_json(run.final)


def _resume_json(resume: Any) -> Optional[Dict[str, Any]]:
    """The tree ``Collector.collect(resume=...)`` continues, as the JSON object Go reads."""
    if resume is None:
        return None
    if isinstance(resume, SchedulerState):
        resume = resume.to_json()
    if not isinstance(resume, (str, bytes)):
        raise ConfigError(f"collect: resume must be a SchedulerState or its JSON text, got {type(resume).__name__}")
    try:
        data = json.loads(resume)
    except ValueError as exc:
        raise ConfigError(f"collect: resume is not a tree's JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"collect: resume is not a tree's JSON: a JSON {type(data).__name__}")
    return data
