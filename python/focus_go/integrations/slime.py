"""Slime hooks: FOCUS trees as Slime training samples.

Slime (THUDM/slime) loads every hook from a dotted path (``importlib.import_module`` of
everything before the last dot, then ``getattr``), so these names are given to Slime as::

    --custom-generate-function-path  mymodule.generate      # generate = make_generate(...)
    --custom-reward-post-process-path focus.integrations.slime.preserve_advantages
    --custom-advantage-function-path  focus.integrations.slime.advantages
    --custom-pg-loss-reducer-function-path focus.integrations.slime.sum_policy_tokens

The generate hook is called once per Slime sample (``n_samples_per_prompt`` concurrent
calls per prompt). It collects one searched tree from the SGLang router Slime started
(``http://{args.sglang_router_ip}:{args.sglang_router_port}/generate``, through the
Go-native ``SGLangPolicy``) and returns the tree's actor segments as a list of Slime
samples sharing the source sample's ``rollout_id``, each with ``reward`` = its FOCUS
advantage (a ``TreeSamples``, which also answers for the source sample where Slime's
partial and fully-async rollouts read group elements). ``preserve_advantages`` keeps
Slime's group normalisation from changing those rewards, ``advantages`` broadcasts them
over each sample's response tokens, and ``sum_policy_tokens`` sums the masked token
losses so every generated token counts its segment's advantage once.

Nothing here imports torch or Slime: tensors are made lazily inside the hooks that
receive them, and Slime's ``Sample`` class is taken from the sample Slime passes in.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import math
import sys
import threading
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from ..errors import CollectionError, ConfigError, ConfigTypeError, InternalError
from ..generation.types import SamplingParams
from . import CollectorFor, CriticSink, Problem, Workspace, _check_min_abs_advantage, _collect


# Sample fields a segment fills itself; every other field is copied from the source sample.
_RESPONSE_FIELDS = frozenset(
    {
        "tokens",
        "response",
        "response_length",
        "reward",
        "loss_mask",
        "rollout_log_probs",
        "rollout_top_p_token_ids",
        "rollout_top_p_token_offsets",
        "rollout_routed_experts",
        "teacher_log_probs",
        "remove_sample",
        "status",
        "rollout_id",
        "metadata",
        "spec_info",
        "prefix_cache_info",
        "non_generation_time",
    }
)
# The source fields copied when the sample type is not a dataclass.
_SOURCE_FIELDS = (
    "group_index",
    "index",
    "prompt",
    "multimodal_inputs",
    "multimodal_train_inputs",
    "multimodal_train_input_id",
    "apply_chat_template_kwargs",
    "label",
    "weight_versions",
    "generate_function_path",
    "custom_rm_path",
    "train_metadata",
    "session_id",
)


class GenerateHook(Protocol):
    """The signature Slime calls a custom generate function with: ``(args, sample,
    sampling_params)``, returning the samples to train on. ``sampling_params`` is accepted
    but does not override FOCUS's sampling settings."""

    async def __call__(self, args: Any, sample: Any, sampling_params: Any = None) -> Any: ...


def _router_url(args: Any) -> str:
    ip = getattr(args, "sglang_router_ip", None)
    port = getattr(args, "sglang_router_port", None)
    if not ip or not port:
        raise ConfigError(
            "Slime args have no sglang_router_ip / sglang_router_port; the FOCUS generate hook "
            "needs the router Slime starts (run it inside Slime's rollout manager)"
        )
    host = str(ip)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # IPv6, as Slime writes router URLs
    return f"http://{host}:{port}"


def _sampling_from_args(args: Any, evaluation: bool) -> Any:
    """The policy's default sampling settings from Slime's rollout (or eval) flags."""
    def pick(name: str, default: Any) -> Any:
        if evaluation:
            value = getattr(args, f"eval_{name}", None)
            if value is not None:
                return value
        value = getattr(args, f"rollout_{name}", None)
        return default if value is None else value

    top_k = pick("top_k", -1)
    stop = getattr(args, "rollout_stop", None)
    return SamplingParams(
        temperature=float(pick("temperature", 1.0)),
        top_p=float(pick("top_p", 1.0)),
        top_k=None if top_k is None or int(top_k) <= 0 else int(top_k),
        max_tokens=int(pick("max_response_len", 0)) or None,
        stop=list(stop) if stop else None,
    )


def _check_args(args: Any) -> None:
    if getattr(args, "apply_chat_template", False):
        raise ConfigError(
            "Slime's --apply-chat-template turns the prompt into a rendered string; FOCUS renders the "
            "conversation with the model's chat template itself, so drop --apply-chat-template"
        )
    top_p = getattr(args, "rollout_top_p", 1.0)
    if top_p is not None and float(top_p) != 1.0:
        raise ConfigError(
            f"--rollout-top-p is {top_p}: Slime then requires top-p replay data on every sample, which "
            "FOCUS samples do not carry; use --rollout-top-p 1.0"
        )


def _problem_from(args: Any, sample: Any) -> Problem:
    """The Problem a Slime sample asks for: prompt and label filled by --input-key and
    --label-key, id from the sample's group and index."""
    label = getattr(sample, "label", None)
    if label is None:
        raise ConfigError(
            f"Slime sample (group_index={getattr(sample, 'group_index', None)}, index={getattr(sample, 'index', None)}) "
            f"has no label: set --label-key to the dataset field holding the reference answer "
            f"(label_key is {getattr(args, 'label_key', None)!r})"
        )
    prompt = getattr(sample, "prompt", None)
    if not prompt:
        raise ConfigError(
            f"Slime sample (index={getattr(sample, 'index', None)}) has an empty prompt; check --input-key "
            f"(input_key is {getattr(args, 'input_key', None)!r})"
        )
    group, index = getattr(sample, "group_index", None), getattr(sample, "index", None)
    return Problem(
        prompt=prompt,
        label=label,
        id=f"g{group}-i{index}",
        metadata=dict(getattr(sample, "metadata", None) or {}),
    )


def _rollout_id(source: Any) -> int:
    rid = getattr(source, "rollout_id", None)
    if rid is None:
        rid = getattr(source, "index", None)
    if rid is None:
        raise ConfigError("Slime sample has neither rollout_id nor index; Slime's data source sets index on every sample")
    return rid


def _decode(tokenizer: Any, tokens: Sequence[int]) -> str:
    if tokenizer is None or not tokens:
        return ""
    decode = getattr(tokenizer, "decode", None)
    if decode is not None:
        return decode(list(tokens), skip_special_tokens=False)
    return tokenizer(list(tokens))


def _build_sample(
    source: Any,
    sample_type: Any,
    *,
    tokens: Sequence[int],
    prompt_len: int,
    loss_mask: Sequence[Any],
    logprobs: Sequence[float],
    reward: float,
    status: str,
    tokenizer: Any,
    focus: Mapping[str, Any],
) -> Any:
    """A response-aligned Slime sample: tokens = prompt + response, and loss_mask and
    rollout_log_probs over the response only (0.0 log probability where not trained)."""
    response = list(tokens[prompt_len:])
    mask = [1 if m else 0 for m in loss_mask[prompt_len:]]
    lps = [float(lp) if m else 0.0 for lp, m in zip(logprobs[prompt_len:], mask)]
    if dataclasses.is_dataclass(sample_type):
        names = [f.name for f in dataclasses.fields(sample_type) if f.name not in _RESPONSE_FIELDS]
    else:
        names = list(_SOURCE_FIELDS)
    kwargs: Dict[str, Any] = {n: copy.deepcopy(getattr(source, n)) for n in names if hasattr(source, n)}
    metadata = dict(getattr(source, "metadata", None) or {})
    metadata["focus"] = dict(focus)
    return sample_type(
        **kwargs,
        rollout_id=_rollout_id(source),
        tokens=list(tokens),
        response=_decode(tokenizer, response),
        response_length=len(response),
        reward=float(reward),
        loss_mask=mask,
        rollout_log_probs=lps,
        metadata=metadata,
        status=getattr(sample_type.Status, status),
    )


def to_sample(record: Mapping[str, Any], source: Any, tokenizer: Any, sample_type: Any) -> Any:
    """Turn one actor record into a response-aligned Slime sample.

    The response starts at the record's first generated token: ``tokens`` is the full
    exact context, ``response_length`` counts from that token to the end, and
    ``loss_mask`` / ``rollout_log_probs`` cover the response only (conditioning tokens
    inside it, such as tool results, keep loss mask zero and log probability 0.0).
    ``reward`` carries the FOCUS advantage, ``status`` is COMPLETED, and ``rollout_id`` is
    the source's (its ``index`` if unset), so every segment of one tree shares it. The
    other fields (prompt, label, group_index, index, session_id, ...) are copied from
    ``source``; ``metadata`` gains a ``"focus"`` entry with the record's node_id,
    search_pass, estimator and problem_id. ``tokenizer`` decodes the response text (any
    object with ``decode(ids, skip_special_tokens=False)``, a callable, or None for no
    text); ``sample_type`` is Slime's ``Sample`` class (``type(source)``)."""
    tokens = list(record["tokens"])
    mask = list(record["loss_mask"])
    logprobs = list(record["behavior_logprobs"])
    if not (len(tokens) == len(mask) == len(logprobs)):
        raise ConfigError(
            f"to_sample: record has {len(tokens)} tokens, {len(mask)} loss_mask entries and "
            f"{len(logprobs)} behavior_logprobs; they must be equal"
        )
    start = next((i for i, m in enumerate(mask) if m), None)
    if start is None:
        raise ConfigError(f"to_sample: record for node {record.get('node_id')} has no generated (loss_mask) token")
    focus = {k: record.get(k) for k in ("node_id", "search_pass", "estimator", "problem_id", "group_index")}
    return _build_sample(
        source,
        sample_type,
        tokens=tokens,
        prompt_len=start,
        loss_mask=mask,
        logprobs=logprobs,
        reward=float(record["advantage"]),
        status="COMPLETED",
        tokenizer=tokenizer,
        focus=focus,
    )


def _aborted(failures: Sequence[Tuple[int, str]]) -> bool:
    return any(getattr(f, "aborted", False) for f in failures)


class TreeSamples(list):
    """What the generate hook returns for one Slime sample: the tree's Slime samples as a
    list (Slime flattens it into the rollout's training samples), which also answers, as
    one element of Slime's group, for the source sample it was collected for.

    Slime's rollout code reads group elements as samples: fully-async orders groups by
    ``index`` and requeues those with an ABORTED ``status``; ``abort()`` reads
    ``response`` and ``metadata``; a group handed back by ``--partial-rollout`` is
    resubmitted, and ``generate_and_rm`` returns COMPLETED elements as they are after
    checking ``response`` and ``reward``, masks ``loss_mask`` over ``response_length``
    under ``--mask-offpolicy-in-partial-rollout``, and passes the other elements back to
    the hook (which collects their source sample again). So:

    - ``source``: the Slime sample the tree was collected for (a resubmitted TreeSamples
      is collected again from it);
    - ``status``: COMPLETED for a collected tree, ABORTED for one Slime aborted (the list
      then holds just the source sample, status ABORTED, nothing generated);
    - ``reward``: the tree's success rate (successes / finished rollouts; what Slime's
      group filters and logs see), None when aborted; ``get_reward_value(args)`` returns it;
    - ``response``: the first sample's text ("" when aborted); ``response_length`` and
      ``loss_mask``: the samples' response lengths summed and their loss masks
      concatenated; assigning ``loss_mask`` (as long as ``response_length``) splits it
      over the samples;
    - every other attribute (``index``, ``group_index``, ``rollout_id``, ``prompt``,
      ``label``, ``metadata``, ``session_id``, ...) is the source's, read and written
      through. ``index`` is the sample's index, so ``list.index`` is not available.
    """

    _OWN = ("source", "status", "reward")

    def __init__(self, samples: Sequence[Any], source: Any, *, status: Any, reward: Optional[float]) -> None:
        super().__init__(samples)
        self.__dict__.update(source=source, status=status, reward=reward)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the list and this class lack.
        source = self.__dict__.get("source")
        if source is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(source, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._OWN:
            self.__dict__[name] = value
        elif name == "loss_mask":
            self._set_loss_mask(value)
        else:
            setattr(self.source, name, value)

    def __reduce__(self) -> Any:
        return (_rebuild_tree_samples, (list(self), self.source, self.status, self.reward))

    def __deepcopy__(self, memo: Dict[int, Any]) -> "TreeSamples":
        source = copy.deepcopy(self.source, memo)
        samples = [source if s is self.source else copy.deepcopy(s, memo) for s in self]
        return TreeSamples(samples, source, status=self.status, reward=self.reward)

    @property
    def index(self) -> Any:  # type: ignore[override]
        """The source's ``index`` (Slime's sample index), not ``list.index``."""
        return self.source.index

    @index.setter
    def index(self, value: Any) -> None:
        self.source.index = value

    @property
    def response(self) -> str:
        return self[0].response if self else ""

    @property
    def response_length(self) -> int:
        return sum(int(s.response_length) for s in self)

    @property
    def loss_mask(self) -> Optional[List[int]]:
        masks = [s.loss_mask for s in self]
        if any(m is None for m in masks):
            return None
        return [m for mask in masks for m in mask]

    def _set_loss_mask(self, value: Sequence[int]) -> None:
        value = list(value)
        if len(value) != self.response_length:
            raise ConfigError(
                f"TreeSamples loss_mask: got {len(value)} entries for a tree of {len(self)} samples with "
                f"{self.response_length} response tokens in all"
            )
        start = 0
        for s in self:
            s.loss_mask = value[start : start + s.response_length]
            start += s.response_length

    def get_reward_value(self, args: Any) -> Optional[float]:
        """The tree's reward (its success rate), whatever ``--reward-key`` says: FOCUS
        rewards are plain floats."""
        return self.reward


def _rebuild_tree_samples(samples: List[Any], source: Any, status: Any, reward: Optional[float]) -> TreeSamples:
    return TreeSamples(samples, source, status=status, reward=reward)


def _source_sample(sample: Any) -> Any:
    """The Slime sample to collect for: a TreeSamples Slime hands back (an aborted
    tree resubmitted by the buffer or the fully-async worker) is collected again from
    its source, reset to PENDING."""
    if isinstance(sample, TreeSamples):
        source = sample.source
        source.status = type(source).Status.PENDING
        return source
    return sample


def _aborted_tree(source: Any) -> TreeSamples:
    """An aborted tree: the source sample alone, status ABORTED, nothing generated, so
    Slime keeps it out of training (and fully-async / partial rollout requeue it)."""
    source.status = type(source).Status.ABORTED
    return TreeSamples([source], source, status=source.status, reward=None)


def _success_rate(stats: Optional[Mapping[str, Any]]) -> float:
    stats = stats or {}
    finished = int(stats.get("finished_rollouts") or 0)
    return float(stats.get("successes") or 0) / finished if finished else 0.0


def _check_rollout_mode(args: Any) -> None:
    """Refuse Slime modes a tree's samples cannot take part in."""
    if getattr(args, "group_rm", False):
        raise ConfigError(
            "Slime's --group-rm scores each group element with a reward model; FOCUS samples carry their "
            "advantages as rewards already (the tree's env grades its rollouts): run without --group-rm"
        )
    hooks = getattr(args, "rollout_sample_hook_path", None)
    fully_async = "fully_async" in str(getattr(args, "rollout_function_path", None) or "")
    if hooks and (getattr(args, "partial_rollout", False) or fully_async):
        raise ConfigError(
            "Slime's --rollout-sample-hook-path rebuilds each generate result as a plain list, which loses the "
            "tree's status and index that --partial-rollout and fully-async rollout requeue aborted trees by; "
            "drop the sample hooks or run the default rollout"
        )


def router_concurrency(args: Any) -> Optional[int]:
    """The router policy's request limit from Slime's args: ``--sglang-server-concurrency``
    times the rollout engines behind the router, as Slime's GenerateState sizes its
    semaphore (``rollout_num_engines`` if set, else ``rollout_num_gpus //
    rollout_num_gpus_per_engine``, at least 1 when there are rollout GPUs). None (the
    policy's default, 64) when the args do not say."""
    per_engine = getattr(args, "sglang_server_concurrency", None)
    if per_engine is None:
        return None
    engines = getattr(args, "rollout_num_engines", None)
    if engines is None:
        gpus = int(getattr(args, "rollout_num_gpus", None) or 0)
        per = int(getattr(args, "rollout_num_gpus_per_engine", None) or 1)
        engines = max(1, gpus // per) if gpus > 0 else 0
    limit = int(per_engine) * int(engines)
    return limit if limit > 0 else None


# Slime's rollout module, where GenerateState (a SingletonMeta singleton) holds `aborted`.
_SLIME_ROLLOUT = "slime.rollout.sglang_rollout"
# How often a running tree checks Slime's abort flag (one poller per event loop).
_ABORT_POLL_SECONDS = 0.005


def _slime_aborted() -> bool:
    """Whether Slime's GenerateState says the rollout was aborted. Reads only what is
    already there: Slime is never imported, nor its state created."""
    module = sys.modules.get(_SLIME_ROLLOUT)
    cls = getattr(module, "GenerateState", None) if module is not None else None
    if cls is None:
        return False
    state = (getattr(cls, "_instances", None) or {}).get(cls)
    return bool(getattr(state, "aborted", False))


class _AbortWatch:
    """One event loop's poller of Slime's abort flag: the trees running on the loop
    register a future, which it resolves when the flag is set; it stops when none is
    left."""

    def __init__(self) -> None:
        self.waiters: "set[asyncio.Future[None]]" = set()
        self.task: Optional["asyncio.Future[None]"] = None

    def register(self) -> "asyncio.Future[None]":
        fut: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self.waiters.add(fut)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._poll())
        return fut

    def unregister(self, fut: "asyncio.Future[None]") -> None:
        self.waiters.discard(fut)
        if not fut.done():
            fut.cancel()

    async def _poll(self) -> None:
        while self.waiters:
            if _slime_aborted():
                for fut in list(self.waiters):
                    if not fut.done():
                        fut.set_result(None)
                self.waiters.clear()
                return
            await asyncio.sleep(_ABORT_POLL_SECONDS)


_WATCHES: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _AbortWatch]" = weakref.WeakKeyDictionary()
_WATCHES_LOCK = threading.Lock()


def _abort_watch() -> _AbortWatch:
    loop = asyncio.get_running_loop()
    with _WATCHES_LOCK:
        watch = _WATCHES.get(loop)
        if watch is None:
            watch = _WATCHES[loop] = _AbortWatch()
    return watch


async def _unless_aborted(coro: Any) -> Tuple[bool, Any]:
    """Run ``coro`` (a collection) until it ends or Slime aborts the rollout; on an abort,
    cancel it, which cancels the Go collection and its requests in flight at once.
    Returns ``(aborted, result)``. A collection that ended before the abort was seen
    keeps its result."""
    task = asyncio.ensure_future(coro)
    if sys.modules.get(_SLIME_ROLLOUT) is None:
        return False, await task  # not under Slime: no flag to watch
    watch = _abort_watch()
    flag = watch.register()
    try:
        await asyncio.wait({task, flag}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    finally:
        watch.unregister(flag)
    if task.done():
        return False, task.result()
    task.cancel()
    outcome = (await asyncio.gather(task, return_exceptions=True))[0]
    if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
        state = getattr(outcome, "state", None)
        if state is not None:
            state.close()
    return True, None


class _SlimeHook:
    """Shared body of the generate and evaluate hooks: one router policy per router URL
    and checkpoint, built on first use and kept until ``close()``."""

    _evaluation = False

    def __init__(self, collector_for: CollectorFor, profile: Optional[str], workspace_for: Any) -> None:
        if not callable(collector_for):
            raise ConfigTypeError(f"collector_for must be callable, got {type(collector_for).__name__}")
        self.collector_for = collector_for
        self.profile = profile
        self.workspace_for = workspace_for
        self._policies: Dict[Tuple[str, str, Optional[int]], Any] = {}
        self._lock = threading.Lock()

    def policy(self, args: Any) -> Any:
        """The Go-native SGLangPolicy for Slime's router, with ``args.hf_checkpoint``'s
        tokenizer and chat template, Slime's rollout sampling flags as defaults, and
        ``router_concurrency(args)`` requests in flight at most."""
        from ..generation.servers import SGLangPolicy

        model = getattr(args, "hf_checkpoint", None)
        if not model:
            raise ConfigError("Slime args have no hf_checkpoint; FOCUS loads the tokenizer and chat template from it")
        limit = router_concurrency(args)
        key = (_router_url(args), str(model), limit)
        with self._lock:
            policy = self._policies.get(key)
            if policy is None:
                policy = SGLangPolicy(
                    model=str(model),
                    base_url=key[0],
                    profile=self.profile,
                    default_params=_sampling_from_args(args, self._evaluation),
                    max_concurrency=limit,
                )
                self._policies[key] = policy
        return policy

    def collector(self, policy: Any, problem: Problem) -> Any:
        from ..collector import Collector

        collector = self.collector_for(policy, problem)
        if not isinstance(collector, Collector):
            raise ConfigTypeError(f"collector_for returned {type(collector).__name__}, expected a focus Collector")
        return collector

    def close(self) -> None:
        """Close the router policies this hook opened."""
        with self._lock:
            policies, self._policies = list(self._policies.values()), {}
        for policy in policies:
            policy.close()

    async def aclose(self) -> None:
        """Async twin of ``close``."""
        self.close()


class _Generate(_SlimeHook):
    """Slime's custom generate function built by ``make_generate``."""

    def __init__(
        self,
        collector_for: CollectorFor,
        *,
        profile: Optional[str],
        critic_sink: Optional[CriticSink],
        workspace_for: Any,
        min_abs_advantage: Optional[float],
        allow_partial: bool,
    ) -> None:
        super().__init__(collector_for, profile, workspace_for)
        _check_min_abs_advantage(min_abs_advantage)  # validate the threshold now, not per sample
        self.critic_sink = critic_sink
        self.min_abs_advantage = min_abs_advantage
        self.allow_partial = allow_partial

    async def __call__(self, args: Any, sample: Any, sampling_params: Any = None) -> Any:
        """Collect one tree for ``sample`` and return its actor segments as a TreeSamples
        list of Slime samples (an ABORTED TreeSamples holding the source sample if Slime
        aborted the generation)."""

        sample = _source_sample(sample)
        _check_args(args)
        _check_rollout_mode(args)
        problem = _problem_from(args, sample)
        return await self._collect_tree(args, sample, problem)

    async def _collect_tree(self, args: Any, sample: Any, problem: Problem) -> TreeSamples:
        """One tree for ``sample``, stopped at once if Slime aborts the rollout."""
        if _slime_aborted():
            return _aborted_tree(sample)
        policy = self.policy(args)
        collector = self.collector(policy, problem)
        # An abort finish (Slime's /abort_request) ends the whole tree in Go at once.
        collector._engine_options["stop_on_abort"] = True
        group = getattr(sample, "group_index", None)
        stats: Dict[str, Any] = {}
        try:
            aborted, collected = await _unless_aborted(
                _collect(
                    collector,
                    problem,
                    group_index=group if group is not None else _rollout_id(sample),
                    workspace_for=self.workspace_for,
                    allow_partial=self.allow_partial,
                    min_abs_advantage=self.min_abs_advantage,
                    keep_dropped=True,
                    stats_out=stats,
                )
            )
        except CollectionError as exc:
            state = getattr(exc, "state", None)
            if _aborted(getattr(exc, "failures", ()) or ()):
                if state is not None:
                    state.close()
                return _aborted_tree(sample)
            raise
        if aborted or _aborted(collected.failures):
            return _aborted_tree(sample)
        kept, critic, dropped = collected.actor, collected.critic, collected.dropped
        if self.critic_sink is not None:
            self.critic_sink(critic)
        sample_type = type(sample)
        done = sample_type.Status.COMPLETED
        reward = _success_rate(stats)
        if kept:
            return TreeSamples([to_sample(r, sample, policy, sample_type) for r in kept], sample, status=done, reward=reward)
        # Every edge fell under min_abs_advantage: one sample that trains nothing keeps
        # Slime's group shape (a list per sample) intact.
        if dropped is None:
            raise ConfigError(f"make_generate: problem {problem.id!r} has no actor records to train on")
        empty = to_sample(dropped, sample, policy, sample_type)
        empty.reward = 0.0
        empty.remove_sample = True
        return TreeSamples([empty], sample, status=done, reward=reward)


class _Evaluate(_SlimeHook):
    """Slime's evaluation generate function built by ``make_evaluate``."""

    _evaluation = True

    async def __call__(self, args: Any, sample: Any, sampling_params: Any = None) -> Any:
        """One unbranched rollout of the collector's agent as one Slime sample whose reward
        is the outcome (the path's summed rewards); ABORTED if Slime aborted it."""
        import contextlib

        from ..collector import Collector
        from ..search import Independent
        from ..tree import SchedulerView

        _check_args(args)
        problem = _problem_from(args, sample)
        policy = self.policy(args)
        base = self.collector(policy, problem)
        workspace = base.workspace
        if self.workspace_for is not None:
            workspace = self.workspace_for(problem)
            if not isinstance(workspace, Workspace):
                raise ConfigTypeError(f"workspace_for returned {type(workspace).__name__}, expected a Workspace")
            if base.workspace is not None and base.workspace is not workspace:
                raise ConfigError("the collector already has its own workspace; give it none, or drop workspace_for")
        collector = Collector(
            base.agent,
            critic=None,
            search=Independent(1),
            reward=base.reward,
            estimator=base.estimator,
            workspace=workspace,
            close_services=base.close_services,
        )
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.workspace_for is not None:
                    await stack.enter_async_context(workspace)
                async with collector:
                    state = await collector.collect(problem)
        except CollectionError as exc:
            if _aborted(getattr(exc, "failures", ()) or ()):
                if getattr(exc, "state", None) is not None:
                    exc.state.close()
                sample.status = type(sample).Status.ABORTED
                return sample
            raise
        try:
            view = SchedulerView(state)
        finally:
            state.close()
        leaves = [n for n in view.nodes if n.done or n.truncated]
        if len(leaves) != 1:
            raise InternalError(f"make_evaluate: expected one finished rollout, found {len(leaves)}")
        leaf = leaves[0]
        path = []
        node = leaf
        while node.parent is not None:
            path.append(node)
            node = view.node(node.parent)
        path.reverse()
        prompt = list(view.root.context_tokens)
        mask: List[bool] = [False] * len(prompt)
        logprobs: List[float] = [0.0] * len(prompt)
        for n in path:
            for span in n.spans:
                mask.extend(span.trainable)
                logprobs.extend(span.logprobs)
        outcome = sum(n.reward for n in path)
        return _build_sample(
            sample,
            type(sample),
            tokens=list(leaf.context_tokens),
            prompt_len=len(prompt),
            loss_mask=mask,
            logprobs=logprobs,
            reward=outcome,
            status="COMPLETED" if leaf.done else "TRUNCATED",
            tokenizer=policy,
            focus={"problem_id": problem.id, "outcome": outcome, "segments": len(path)},
        )


def make_generate(
    collector_for: CollectorFor,
    *,
    profile: Optional[str] = None,
    critic_sink: Optional[CriticSink] = None,
    workspace_for: Optional[Callable[[Problem], Workspace]] = None,
    min_abs_advantage: Optional[float] = None,
    allow_partial: bool = False,
) -> GenerateHook:
    """Build Slime's custom generate function from your CollectorFor.

    For each sample it builds the router's policy (a Go-native ``SGLangPolicy`` at
    ``http://{args.sglang_router_ip}:{args.sglang_router_port}``, format from
    ``args.hf_checkpoint`` and ``profile``, default sampling from ``--rollout-temperature``,
    ``--rollout-top-p``, ``--rollout-top-k``, ``--rollout-max-response-len`` and
    ``--rollout-stop``; one policy per router, reused across samples), wraps the sample as
    a Problem (prompt and label from ``--input-key`` / ``--label-key``, id
    ``g<group_index>-i<index>``), collects one tree with a fresh collector from
    ``collector_for(policy, problem)``, sends the critic records to ``critic_sink``, and
    returns the actor segments as a ``TreeSamples`` list of Slime samples (``to_sample``)
    sharing the source's rollout id, which also answers for the source sample (``index``,
    ``status``, ``reward`` = the tree's success rate, ...) where Slime reads group elements.
    A generation Slime aborted returns ``[sample]`` (a TreeSamples, status ABORTED, no
    reward), never a zero reward. If ``min_abs_advantage`` drops every edge, one sample
    with ``remove_sample=True`` and reward 0 is returned so Slime's group keeps its shape.

    Slime's rollout modes: the default and over-sampling rollouts, ``--partial-rollout``
    (an aborted tree is handed back and collected again from its source sample; a
    finished one is kept and trained next rollout, its loss masks zeroed under
    ``--mask-offpolicy-in-partial-rollout``) and fully-async rollout (aborted groups are
    requeued) all work. Slime's abort stops a tree at once: the hook watches
    ``GenerateState.aborted`` (without importing Slime) and cancels the collection and its
    requests in flight, and an abort finish from SGLang ends the tree in Go; nothing is
    sent after it. The router policy allows ``router_concurrency(args)`` requests in
    flight (``--sglang-server-concurrency`` times the rollout engines, as Slime's own
    semaphore). ``workspace_for(problem)`` gives each prompt its own Workspace (as in
    ``collect_records``). ``allow_partial=True`` keeps a collection with failures (a
    collection in which every rollout failed still raises).

    Refused Slime settings (ValueError): ``--apply-chat-template`` (FOCUS renders the chat
    itself), ``--rollout-top-p`` other than 1.0 (Slime would require top-p replay
    data), ``--group-rm`` (FOCUS samples carry their rewards) and
    ``--rollout-sample-hook-path`` with partial or fully-async rollout (Slime's sample
    hooks rebuild the list without the tree's status and index). The returned hook has ``close()`` for the router policies it opened."""
    return _Generate(
        collector_for,
        profile=profile,
        critic_sink=critic_sink,
        workspace_for=workspace_for,
        min_abs_advantage=min_abs_advantage,
        allow_partial=allow_partial,
    )


def make_evaluate(
    collector_for: CollectorFor,
    *,
    profile: Optional[str] = None,
    workspace_for: Optional[Callable[[Problem], Workspace]] = None,
) -> GenerateHook:
    """Build Slime's evaluation generate function from the same CollectorFor: one
    unbranched rollout (``Independent(1)``, no critic) of the collector's agent, returned
    as one Slime sample whose ``reward`` is the outcome (the sum of the path's rewards)
    rather than a signed advantage; status COMPLETED or TRUNCATED, ABORTED if Slime aborted
    it. Default sampling comes from ``--eval-*`` flags where set, else ``--rollout-*``;
    ``workspace_for`` works as for ``make_generate``.
    Point an eval dataset's ``custom_generate_function_path`` at it. The returned hook has
    ``close()`` for the router policies it opened."""
    return _Evaluate(collector_for, profile, workspace_for)


def _reward_value(args: Any, sample: Any, i: int) -> float:
    reward = getattr(sample, "reward", None)
    key = getattr(args, "reward_key", None)
    if isinstance(reward, Mapping):
        if not key:
            raise ConfigError(f"sample {i} has a dict reward but --reward-key is not set")
        reward = reward[key]
    if reward is None:
        raise ConfigError(
            f"sample {i} (index={getattr(sample, 'index', None)}, status={getattr(sample, 'status', None)}) "
            "has no reward; FOCUS samples carry their advantage as reward (aborted samples must not reach training)"
        )
    value = float(reward)
    if not math.isfinite(value):
        raise ConfigError(f"sample {i} reward {value} is not finite")
    return value


def preserve_advantages(args: Any, samples: List[Any]) -> Tuple[List[float], ...]:
    """Reward post-process hook: return the FOCUS advantages unchanged, so Slime's group
    centering does not alter them. Slime calls it with the flat list of the rollout's
    samples and expects ``(raw_rewards, rewards)``, both one float per sample; here both
    are the samples' rewards (the advantages ``to_sample`` stored). Name it with
    ``--custom-reward-post-process-path focus.integrations.slime.preserve_advantages``."""
    rewards = [_reward_value(args, s, i) for i, s in enumerate(samples)]
    return rewards, list(rewards)


def _is_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "dtype")


def advantages(args: Any, rollout_data: Dict[str, Any]) -> None:
    """Advantage hook: broadcast each sample's FOCUS advantage (``rollout_data["rewards"]``,
    kept by ``preserve_advantages``) over its response tokens, overriding the estimator
    Slime's argument parser selected. Sets ``rollout_data["advantages"]`` and
    ``rollout_data["returns"]`` (returns are zero: critic targets are exported separately),
    one per sample, shaped like ``rollout_data["kl"][i]`` (Slime's per-sample response
    tensors on this rank, CP-local when context parallel > 1) or, without ``kl``, of
    ``response_lengths[i]`` entries. Tensors when Slime passes tensors (torch is imported
    only then), plain lists otherwise. Refuses ``--normalize-advantages``, which would
    whiten the advantages. Name it with
    ``--custom-advantage-function-path focus.integrations.slime.advantages``."""
    if getattr(args, "normalize_advantages", False):
        raise ConfigError(
            "--normalize-advantages whitens advantages after this hook and would change FOCUS's "
            "advantages; run without it"
        )
    rewards = list(rollout_data["rewards"])
    shapes = rollout_data.get("kl")
    if shapes is None:
        shapes = rollout_data.get("response_lengths")
        if shapes is None:
            raise ConfigError("rollout_data has neither 'kl' nor 'response_lengths' to shape advantages by")
    shapes = list(shapes)
    if len(shapes) != len(rewards):
        raise ConfigError(f"rollout_data has {len(rewards)} rewards but {len(shapes)} samples")
    advs: List[Any] = []
    rets: List[Any] = []
    for reward, like in zip(rewards, shapes):
        value = float(reward)
        if _is_tensor(like):
            import torch

            advs.append(torch.full_like(like, value, dtype=torch.float32))
            rets.append(torch.zeros_like(like, dtype=torch.float32))
        else:
            n = like if isinstance(like, int) else len(like)
            advs.append([value] * n)
            rets.append([0.0] * n)
    rollout_data["advantages"] = advs
    rollout_data["returns"] = rets


def _context_parallel_size() -> int:
    try:
        from megatron.core import mpu  # type: ignore[import-not-found]

        return int(mpu.get_context_parallel_world_size())
    except Exception:  # noqa: BLE001 - no Megatron, or parallel state not initialised
        return 1


def sum_policy_tokens(
    total_lengths: Any,
    response_lengths: Any,
    loss_masks: List[Any],
    calculate_per_token_loss: bool = False,
) -> Callable[[Any], Any]:
    """Policy-loss reducer hook: sum masked token losses instead of averaging them, so
    each generated token contributes its segment's advantage once.

    Slime calls the factory positionally per micro-batch with
    ``(total_lengths, response_lengths, loss_masks, calculate_per_token_loss)`` and applies
    the returned reducer to the concatenated per-token policy loss of the micro-batch's
    samples (``sum(response_lengths)`` entries). The reducer returns
    ``sum_i sum_t loss[i, t] * loss_mask[i, t]`` (a scalar tensor for tensor input, a
    float for plain lists); ``calculate_per_token_loss`` does not change a sum. Requires
    context parallel size 1 (with CP > 1 each rank sees only its chunks of a sequence):
    the factory checks Megatron's parallel state when present and the reducer checks the
    input length. Name it with
    ``--custom-pg-loss-reducer-function-path focus.integrations.slime.sum_policy_tokens``."""
    cp = _context_parallel_size()
    if cp != 1:
        raise ConfigError(f"sum_policy_tokens requires context parallel size 1, got {cp}")
    lengths = [int(n) for n in response_lengths]
    masks = list(loss_masks)
    if len(masks) != len(lengths):
        raise ConfigError(f"sum_policy_tokens: {len(lengths)} response lengths but {len(masks)} loss masks")
    expected = sum(lengths)

    def reducer(x: Any) -> Any:
        n = int(x.numel()) if _is_tensor(x) else len(x)
        if n != expected:
            raise ConfigError(
                f"sum_policy_tokens: the loss has {n} token entries but the response lengths sum to {expected}; "
                "this reducer requires context parallel size 1"
            )
        if _is_tensor(x):
            import torch

            total = x.new_zeros(())
            for part, mask in zip(torch.split(x, lengths, dim=0), masks):
                total = total + (part * torch.as_tensor(mask, dtype=x.dtype, device=x.device)).sum()
            return total
        total_f = 0.0
        start = 0
        for length, mask in zip(lengths, masks):
            total_f += sum(float(v) * float(m) for v, m in zip(x[start : start + length], mask))
            start += length
        return total_f

    return reducer


__all__ = [
    "GenerateHook",
    "TreeSamples",
    "advantages",
    "make_evaluate",
    "make_generate",
    "preserve_advantages",
    "router_concurrency",
    "sum_policy_tokens",
    "to_sample",
]
