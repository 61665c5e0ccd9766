"""Slime's reward flags on trees: ``--custom-rm-path`` and ``--rm-type`` score each
finished rollout of the tree.

The environment of every call is wrapped (``_with_reward_model``); when either flag is set,
the step that ends a rollout (``done``) gets the reward model's score of that rollout as its
reward, in place of the environment's (kept in the step's ``info["env_reward"]``); the
environment still decides when a rollout ends, and rewards on earlier steps stay. The
search and the advantages then see the reward model's rewards.

Slime puts no range on rewards, so neither do the hooks: a tree is collected over the
collector's ``[reward_min, reward_max]`` widened to every reward the hook has seen
(``_RewardScale``). Every step's reward, the reward model's or the environment's, is
watched on its way to Go (``_RewardWatch``): a reward outside the range the tree runs
with is recorded, and the hook collects that tree again over the widened range, so each
answer trains as given and none is counted as a failed rollout; a reward that is not
finite, or a reward model's answer that cannot be read (a dict without ``--reward-key``),
is refused with a ConfigError naming the reward model.

The reward model is called as Slime calls it: ``--custom-rm-path`` with Slime's
single-sample signature ``async def rm(args, sample) -> float`` or its batched one
``async def rm(args, samples: list[Sample]) -> list[float]`` (recognised by its second
parameter, named ``samples`` or annotated as a list), given one sample per rollout; with
``--rm-type`` (and no ``--custom-rm-path``), Slime's own ``async_rm`` (its built-in rule
RMs and ``remote_rm`` with ``--rm-url``). A dict reward is read with ``--reward-key``.

Slime calls ``--custom-rm-path`` once more itself, after the hook returns a tree, with the
samples that still lack a reward, which for a tree is an empty list: a single-sample RM
fails on it. So at the first call the hook points ``args.custom_rm_path`` at
``_slime_rm`` (it keeps the user's path in ``args.focus_custom_rm_path``), which answers an
empty list with an empty list and calls the user's RM for everything else, in the
signature it has.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ...env import Env
from ...errors import ConfigError
from ...types import Step, TokenChunk, ToolTurn

# Where args.custom_rm_path points once the hook has taken the user's RM over.
_PROXY_PATH = "focus_go.integrations.slime.rewards._slime_rm"


def _load(path: str) -> Callable[..., Any]:
    """Slime's load_function: import everything before the last dot, then getattr."""
    import importlib

    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"--custom-rm-path {path}: cannot load it ({type(exc).__name__}: {exc})") from exc


def _is_batched(fn: Callable[..., Any]) -> bool:
    """Whether a reward function takes Slime's batched signature ``(args, samples:
    list[Sample])``: its second parameter is named ``samples`` or annotated as a list."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if len(params) < 2:
        return False
    second = params[1]
    note = second.annotation
    text = (note if isinstance(note, str) else str(note)).strip("'\" ").lower()
    return second.name == "samples" or text.startswith(("list", "<class 'list'>", "typing.list", "sequence", "typing.sequence"))


def _user_rm_path(args: Any) -> Optional[str]:
    path = getattr(args, "focus_custom_rm_path", None) or getattr(args, "custom_rm_path", None)
    return None if path == _PROXY_PATH else path


def _take_over_custom_rm(args: Any) -> None:
    """Point ``args.custom_rm_path`` at ``_slime_rm``, keeping the user's path (checked
    to load) in ``args.focus_custom_rm_path``. Idempotent."""
    path = getattr(args, "custom_rm_path", None)
    if not path or path == _PROXY_PATH:
        return
    _load(path)
    args.focus_custom_rm_path = path
    args.custom_rm_path = _PROXY_PATH


async def _call_user_rm(args: Any, fn: Callable[..., Any], samples: List[Any], **kwargs: Any) -> List[Any]:
    if _is_batched(fn):
        out = list(await fn(args, samples, **kwargs))
        if len(out) != len(samples):
            raise ConfigError(f"the batched --custom-rm-path returned {len(out)} rewards for {len(samples)} samples")
        return out
    import asyncio

    return list(await asyncio.gather(*(fn(args, s, **kwargs) for s in samples)))


async def _slime_rm(args: Any, sample_or_samples: Any, **kwargs: Any) -> Any:
    """What Slime's ``args.custom_rm_path`` names once the hook has taken it over: the
    user's RM (``args.focus_custom_rm_path``) in the signature it has; an empty list (what
    Slime asks for a tree, whose samples all carry rewards) gets an empty list."""
    path = _user_rm_path(args)
    if path is None:
        raise ConfigError("focus's reward proxy was called but args.focus_custom_rm_path names no reward model")
    fn = _load(path)
    if isinstance(sample_or_samples, list):
        if not sample_or_samples:
            return []
        return await _call_user_rm(args, fn, list(sample_or_samples), **kwargs)
    [reward] = await _call_user_rm(args, fn, [sample_or_samples], **kwargs)
    return reward


def _reward_model_set(args: Any) -> bool:
    return bool(_user_rm_path(args) or getattr(args, "rm_type", None))


def _rm_name(args: Any, sample: Any = None) -> str:
    """The reward model that scores ``sample``, as its flag names it (for messages)."""
    path = getattr(sample, "custom_rm_path", None) or _user_rm_path(args)
    if path:
        return f"--custom-rm-path {path}"
    return f"--rm-type {getattr(args, 'rm_type', None)}"


def _reward_value(args: Any, value: Any, source: str = "the reward model") -> float:
    if isinstance(value, Mapping):
        key = getattr(args, "reward_key", None)
        if not key:
            raise ConfigError(
                f"{source} returned a dict with keys {sorted(value)} but --reward-key is not set; name the key "
                "that holds the reward (e.g. --reward-key score for --rm-type dapo)"
            )
        if key not in value:
            raise ConfigError(f"{source} returned a dict with keys {sorted(value)}, without --reward-key {key!r}")
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{source} returned {value!r} ({type(value).__name__}); a reward is a number")
    return float(value)


async def _score(args: Any, sample: Any) -> float:
    """The reward model's score of one finished rollout's sample."""
    path = getattr(sample, "custom_rm_path", None) or _user_rm_path(args)
    if path:
        [value] = await _call_user_rm(args, _load(path), [sample])
    else:
        from slime.rollout.rm_hub import async_rm  # type: ignore[import-not-found]

        value = await async_rm(args, sample)
    return _reward_value(args, value, _rm_name(args, sample))


class _RewardScale:
    """The reward range a hook's trees are collected over: each collector's declared
    ``[reward_min, reward_max]`` widened to every reward the hook's trees have seen
    (Slime puts no range on rewards). It only grows, so a run settles on its reward
    model's scale after the first tree that reaches each end of it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._low: Optional[float] = None
        self._high: Optional[float] = None

    def widen(self, values: List[float]) -> None:
        with self._lock:
            for v in values:
                self._low = v if self._low is None else min(self._low, v)
                self._high = v if self._high is None else max(self._high, v)

    def reward_config(self, declared: Any) -> Any:
        """``declared`` (a RewardConfig) with its range widened to the rewards seen."""
        with self._lock:
            low, high = self._low, self._high
        if low is None or high is None or (declared.reward_min <= low and high <= declared.reward_max):
            return declared
        return dataclasses.replace(
            declared, reward_min=min(declared.reward_min, low), reward_max=max(declared.reward_max, high)
        )


class _RewardWatch:
    """What one collection's rewards did on their way to Go: the rewards outside the range
    the tree runs with (``outside``; Go fails those rollouts, and the hook collects the
    tree again over the widened range) and the first reward that cannot train
    (``error``: not finite, or a reward model's answer that cannot be read), which the
    hook raises once the collection is over, whatever ``allow_partial`` says."""

    def __init__(self, reward: Any) -> None:
        self.low, self.high = float(reward.reward_min), float(reward.reward_max)
        self.outside: List[Tuple[float, str]] = []
        self.error: Optional[ConfigError] = None

    def check(self, value: float, source: str) -> None:
        if not math.isfinite(value):
            if self.error is None:
                self.error = ConfigError(f"{source} returned {value}; a reward must be a finite number")
        elif value < self.low or value > self.high:
            self.outside.append((value, source))

    def fail(self, error: ConfigError) -> None:
        if self.error is None:
            self.error = error

    def settle(self, scale: _RewardScale, problem_id: Any) -> None:
        """After the collection: raise the recorded error, if any, as a _RewardRefused;
        widen ``scale`` to the rewards outside the range and raise ``_RewardScaleGrew`` if
        there were any."""
        if self.error is not None:
            raise _RewardRefused(str(self.error)) from self.error
        if self.outside:
            scale.widen([v for v, _ in self.outside])
            value, source = self.outside[0]
            raise _RewardScaleGrew(
                f"problem {problem_id!r}: {source} returned {value:g}, outside the reward range "
                f"[{self.low:g}, {self.high:g}] the tree was collected over"
            )


class _RewardRefused(ConfigError):
    """A reward that cannot train (not finite, or an answer of the reward model that is not
    a number), or a reward scale that kept growing: the collection's error, not the
    partial tree's."""


class _RewardScaleGrew(Exception):
    """A collection met rewards outside the range it ran with (``_RewardWatch.settle``):
    the hook collects the tree again over the widened range."""


# How many times one call collects its tree again over a widened reward range before it
# gives up (a reward model whose every tree sets a new extreme).
MAX_RESCALES = 4


class _ScoredByRewardModel:
    """Mixed into an environment's own class (``_with_reward_model``): every step's
    reward is checked by the call's ``_RewardWatch`` and, with a reward model set, the
    step that ends a rollout is scored by Slime's reward model. ``_focus_rm`` is ``(args,
    source sample, decode, watch, scored)``; ``_focus_path`` what the rollout's turns and
    text observations were."""

    _focus_rm: Tuple[Any, Any, Callable[[List[int]], str], _RewardWatch, bool]
    _focus_path: List[Tuple[str, Any]]

    def step(self, action: Any) -> Any:  # type: ignore[override]
        """The env's step, its reward watched; a coroutine when the env's step is async or
        the reward model scores the step (a sync env stays sync otherwise)."""
        if isinstance(action, TokenChunk):
            self._focus_path.append(("tokens", list(action.tokens)))
        elif isinstance(action, ToolTurn):
            self._focus_path.append(("text", action.text))
        elif isinstance(action, str):
            self._focus_path.append(("text", action))
        result = super().step(action)  # type: ignore[misc]
        if inspect.isawaitable(result):
            return self._focus_after_async(result)
        return self._focus_after(result)

    async def _focus_after_async(self, pending: Any) -> Step:
        after = self._focus_after(await pending)
        return await after if inspect.isawaitable(after) else after

    def _focus_after(self, result: Step) -> Any:
        args, source, decode, watch, scored = self._focus_rm
        if not result.done or not scored:
            if not result.done and isinstance(result.observation, str):
                self._focus_path.append(("text", result.observation))
            watch.check(float(result.reward), f"the environment {type(self).__bases__[1].__name__}")
            return result
        return self._focus_scored(result)

    async def _focus_scored(self, result: Step) -> Step:
        """The step that ends a rollout, its reward the reward model's score."""
        args, source, decode, watch, _ = self._focus_rm
        try:
            reward = await _score(args, _rollout_sample(source, self._focus_path, decode))
        except ConfigError as exc:
            watch.fail(exc)
            raise
        watch.check(reward, _rm_name(args, source))
        return Step(observation=result.observation, reward=reward, done=True, info={**(result.info or {}), "env_reward": result.reward})

    def fork(self) -> Any:
        twin = super().fork()  # type: ignore[misc]
        if inspect.isawaitable(twin):
            raise ConfigError(f"{type(self).__name__}.fork is async; an env scored by Slime's reward model needs a sync fork")
        if type(twin) is not type(self):  # a fork that builds its own class's instance (MathEnv)
            twin = _as(type(self), twin)
        twin._focus_rm = self._focus_rm
        twin._focus_path = list(self._focus_path)
        return twin


def _as(cls: type, env: Any) -> Any:
    """An instance of ``cls`` (the env's class with the reward model mixed in) holding
    ``env``'s attributes."""
    if not hasattr(env, "__dict__"):
        raise ConfigError(f"{type(env).__name__} keeps no __dict__; it cannot be scored by Slime's reward model")
    out = object.__new__(cls)
    out.__dict__.update(env.__dict__)
    return out


def _rollout_sample(source: Any, path: List[Tuple[str, Any]], decode: Callable[[List[int]], str]) -> Any:
    """The Slime sample a reward model scores for one finished rollout: the source sample
    (prompt, label, metadata copied) with ``response`` the rollout's text (its turns,
    decoded, and each text observation after its turn), ``response_length`` its generated
    tokens (for token turns), status COMPLETED and no reward."""
    sample = copy.copy(source)
    parts: List[str] = []
    tokens: List[int] = []
    generated = 0
    for kind, value in path:
        if kind == "tokens":
            tokens.extend(value)
            generated += len(value)
            continue
        if tokens:
            parts.append(decode(tokens))
            tokens = []
        parts.append(value)
    if tokens:
        parts.append(decode(tokens))
    sample.metadata = dict(getattr(source, "metadata", None) or {})
    sample.response = "".join(parts)
    sample.response_length = generated
    sample.reward = None
    status = getattr(type(source), "Status", None)
    if status is not None:
        sample.status = status.COMPLETED
    return sample


# One scored class per env class (``_with_reward_model``).
_SCORED: Dict[type, type] = {}


def _with_reward_model(
    args: Any, source: Any, decode: Callable[[List[int]], str], watch: _RewardWatch
) -> Callable[[Env], Env]:
    """The env wrapper of one call: the env's own class with ``_ScoredByRewardModel``
    mixed in, so the Collector still sees it as that class (a ToolEnv is bound to its
    workspace). Every step's reward goes through ``watch``; with ``--custom-rm-path`` or
    ``--rm-type`` set, Slime's reward model scores each rollout the env ends. Without a
    reward model, an env that cannot be wrapped (no ``__dict__``, an async ``fork``) is
    left as it is, unwatched."""
    _take_over_custom_rm(args)
    scored = _reward_model_set(args)

    def wrap(env: Env) -> Env:
        if not scored and (not hasattr(env, "__dict__") or inspect.iscoroutinefunction(getattr(env, "fork", None))):
            return env
        cls = type(env)
        watched = _SCORED.get(cls)
        if watched is None:
            watched = _SCORED[cls] = type(f"{cls.__name__}ScoredBySlimeRM", (_ScoredByRewardModel, cls), {"__module__": cls.__module__})
        twin = env.fork()
        if inspect.isawaitable(twin):
            if not scored:
                getattr(twin, "close", lambda: None)()
                return env
            raise ConfigError(f"{cls.__name__}.fork is async; an env scored by Slime's reward model needs a sync fork")
        twin = _as(watched, twin)
        twin._focus_rm = (args, source, decode, watch, scored)  # type: ignore[attr-defined]
        twin._focus_path = []  # type: ignore[attr-defined]
        return twin

    return wrap
