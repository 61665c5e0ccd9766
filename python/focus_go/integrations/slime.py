"""Slime hooks: FOCUS trees as Slime training samples.

Slime (THUDM/slime) loads every hook from a dotted path (``importlib.import_module`` of
everything before the last dot, then ``getattr``), so these names are given to Slime as::

    --custom-generate-function-path  mymodule.generate      # generate = make_generate(...)
    --custom-reward-post-process-path focus.integrations.slime.preserve_advantages
    --custom-advantage-function-path  focus.integrations.slime.advantages
    --custom-pg-loss-reducer-function-path focus.integrations.slime.sum_policy_tokens
    --custom-rollout-log-function-path focus.integrations.slime.log_rollout
    --custom-eval-rollout-log-function-path focus.integrations.slime.log_eval_rollout

The generate hook is called once per Slime sample (``n_samples_per_prompt`` concurrent
calls per prompt). It collects one searched tree from the SGLang router Slime started
(``http://{args.sglang_router_ip}:{args.sglang_router_port}/generate``, through the
Go-native ``SGLangPolicy``) and returns the tree's actor segments as a list of Slime
samples sharing the source sample's ``rollout_id``, each with ``reward`` = its FOCUS
advantage (a ``TreeSamples``, which also answers for the source sample where Slime's
partial and fully-async rollouts read group elements). ``preserve_advantages`` keeps
Slime's group normalisation from changing those rewards, ``advantages`` broadcasts them
over each sample's response tokens, and ``sum_policy_tokens`` sums the masked token
losses so every generated token counts its segment's advantage once
(``normalized_policy_tokens(C)`` divides that sum by C tokens per rollout, for Slime's
loss scale). An evaluation call (Slime passes ``evaluation=True``) gets one unbranched
rollout rewarded by its outcome, as from ``make_evaluate``'s hook. Slime's per-call
``sampling_params`` are mapped onto the tree (``_call_settings``) or refused where they
cannot apply to one. ``log_rollout`` and ``log_eval_rollout`` give pass@k that sees the
trees, which ``--log-passrate`` cannot.

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
import warnings
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from ..collector import Collector
from ..errors import CollectionError, ConfigError, ConfigTypeError, InternalError
from ..generation.types import SamplingParams
from . import CollectorFor, CriticSink, Problem, Workspace, _check_layout, _check_min_abs_advantage, _collect


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
    but does not override FOCUS's sampling settings: it fills what the agent leaves unset
    (an Agent's own ``sampling=`` wins). ``make_generate``'s hook also takes
    ``evaluation`` (Slime passes it to hooks whose signature has it)."""

    async def __call__(self, args: Any, sample: Any, sampling_params: Any = None) -> Any:
        """Generate the training samples for one Slime sample.

        Args:
            args: Slime's parsed arguments.
            sample: The Slime sample to collect a tree for.
            sampling_params: Slime's per-call sampling parameters; they fill what the agent
                leaves unset.

        Returns:
            The Slime samples to train on.
        """
        ...


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
    """The policy's default sampling settings from Slime's rollout (or eval) flags: what
    ``_call_settings`` makes of the sampling_params Slime would build from them."""
    return _call_settings(args, None, evaluation).sampling


# The sampling_params keys Slime sends a generate hook: GenerateState's dict in training
# (slime/rollout/sglang_rollout.py, the same for every call, ``sampling_seed`` added per
# group member under --sglang-enable-deterministic-inference) and each eval dataset's dict
# (eval_rollout_single_dataset). ``_call_settings`` maps or refuses every one.
_SLIME_SAMPLING_KEYS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "max_new_tokens",
        "stop",
        "stop_token_ids",
        "skip_special_tokens",
        "no_stop_trim",
        "spaces_between_special_tokens",
        "repetition_penalty",
        "min_new_tokens",
        "sampling_seed",
        "custom_params",
    }
)


@dataclasses.dataclass(frozen=True)
class _CallSettings:
    """One Slime call's sampling_params mapped onto a tree: the collection's sampling
    parameters, the cap on generated tokens per root-to-leaf path (Slime's
    ``max_new_tokens``), the search seed (Slime's ``sampling_seed``: the engine derives
    each request's seed from it, so branches differ and the tree is reproducible), and
    how the samples' response text is decoded."""

    sampling: SamplingParams
    max_new_tokens: Optional[int]
    seed: Optional[int]
    skip_special_tokens: bool


def _slime_sampling_params(args: Any, evaluation: bool) -> Dict[str, Any]:
    """The sampling_params Slime builds from ``args`` (GenerateState's dict; for evaluation
    the ``--eval-*`` flags over ``--rollout-*``, as Slime's eval config resolves them), for
    a call that passes none."""

    def pick(name: str) -> Any:
        if evaluation:
            value = getattr(args, f"eval_{name}", None)
            if value is not None:
                return value
        return getattr(args, f"rollout_{name}", None)

    params: Dict[str, Any] = {
        "temperature": pick("temperature"),
        "top_p": pick("top_p"),
        "top_k": pick("top_k"),
        "max_new_tokens": pick("max_response_len"),
        "stop": getattr(args, "rollout_stop", None),
        "stop_token_ids": getattr(args, "rollout_stop_token_ids", None),
        "skip_special_tokens": bool(getattr(args, "rollout_skip_special_tokens", False)),
        "no_stop_trim": True,
        "spaces_between_special_tokens": False,
    }
    if evaluation:
        params["min_new_tokens"] = getattr(args, "eval_min_new_tokens", None)
    return {k: v for k, v in params.items() if v is not None}


def _call_settings(args: Any, sampling_params: Optional[Mapping[str, Any]], evaluation: bool) -> _CallSettings:
    """Map the sampling_params of one Slime call (or, if None or empty, what Slime builds
    from ``args``) onto a tree, refusing with ConfigError what cannot apply to one."""
    given = dict(sampling_params) if sampling_params else _slime_sampling_params(args, evaluation)
    source = "an eval dataset's sampling settings" if evaluation else "Slime's rollout sampling_params"
    unknown = sorted(set(given) - _SLIME_SAMPLING_KEYS)
    if unknown:
        raise ConfigError(
            f"{source} have keys FOCUS does not know how to apply to a tree: {unknown} "
            f"(known: {sorted(_SLIME_SAMPLING_KEYS)})"
        )
    top_p = given.get("top_p")
    if top_p is not None and float(top_p) != 1.0 and not evaluation:
        raise ConfigError(
            f"top_p is {top_p} in {source}: Slime then requires top-p replay data on every training sample, "
            "which FOCUS samples do not carry; use --rollout-top-p 1.0 (an eval dataset may set its own top_p)"
        )
    if given.get("custom_params"):
        raise ConfigError(
            f"custom_params {given['custom_params']!r} in {source}: FOCUS builds its own SGLang requests and "
            "cannot forward custom_params"
        )
    stop_ids = given.get("stop_token_ids")
    min_new = given.get("min_new_tokens")
    if min_new:
        raise ConfigError(
            f"min_new_tokens {min_new} in {source} (--eval-min-new-tokens or an eval dataset's min_new_tokens): "
            "SGLang would apply it to every segment request of the tree, not once per response; drop it"
        )
    if given.get("no_stop_trim") is False:
        raise ConfigError(
            f"no_stop_trim false in {source}: FOCUS keeps the exact generated tokens, the matched stop "
            "included (SGLang's no_stop_trim true); drop no_stop_trim from the eval dataset"
        )
    if given.get("spaces_between_special_tokens"):
        raise ConfigError(
            f"spaces_between_special_tokens true in {source}: FOCUS decodes response text itself, without "
            "spaces between special tokens"
        )
    max_new = given.get("max_new_tokens")
    if max_new is not None and int(max_new) < 1:
        raise ConfigError(f"max_new_tokens is {max_new} in {source}; a tree needs at least one token per path")
    top_k = given.get("top_k")
    stop = given.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    temperature = given.get("temperature")
    penalty = given.get("repetition_penalty")
    seed = given.get("sampling_seed")
    sampling = SamplingParams(
        temperature=1.0 if temperature is None else float(temperature),
        top_p=1.0 if top_p is None else float(top_p),
        top_k=None if top_k is None or int(top_k) <= 0 else int(top_k),
        max_tokens=None if max_new is None else int(max_new),
        stop=list(stop) if stop else None,
        repetition_penalty=None if penalty is None else float(penalty),
        stop_token_ids=[int(i) for i in stop_ids] if stop_ids else None,
    )
    return _CallSettings(
        sampling=sampling,
        max_new_tokens=None if max_new is None else int(max_new),
        seed=None if seed is None else int(seed),
        skip_special_tokens=bool(given.get("skip_special_tokens", False)),
    )


_COMPARED_SAMPLING = ("temperature", "top_p", "top_k", "repetition_penalty", "stop", "stop_token_ids")


_KEEP: Any = object()


def _call_collector(
    base: Collector, settings: _CallSettings, *, search: Any = None, critic: Any = _KEEP, workspace: Any = _KEEP
) -> Collector:
    """``base`` (from collector_for) with one Slime call's settings applied: the agent's
    sampling, where the agent sets none, is the call's (an agent's own sampling wins, as
    FOCUS's setting, with a warning naming what Slime asked for instead); each
    root-to-leaf path generates at most ``max_new_tokens``; the search seed is the call's
    ``sampling_seed`` when Slime sends one. ``search`` / ``critic`` / ``workspace``
    replace the base's (the evaluation rollout)."""
    agent = copy.copy(base.agent)
    if agent.sampling is None:
        agent.sampling = settings.sampling
    else:
        differs = [
            f"{name} {getattr(settings.sampling, name)!r} (agent: {getattr(agent.sampling, name)!r})"
            for name in _COMPARED_SAMPLING
            if getattr(settings.sampling, name) != getattr(agent.sampling, name)
        ]
        if differs:
            warnings.warn(
                "the agent's own sampling settings are used, not Slime's: Slime asked for "
                + ", ".join(differs)
                + "; build the Agent without sampling= to let Slime's flags and eval datasets decide",
                stacklevel=3,
            )
    if settings.max_new_tokens is not None and settings.max_new_tokens < agent.max_total_tokens:
        agent.max_total_tokens = settings.max_new_tokens
    search = base.search if search is None else search
    if settings.seed is not None:
        search = dataclasses.replace(search, seed=settings.seed)
    collector = Collector(
        agent,
        critic=base.critic if critic is _KEEP else critic,
        search=search,
        reward=base.reward,
        estimator=base.estimator,
        workspace=base.workspace if workspace is _KEEP else workspace,
        close_services=base.close_services,
    )
    collector.timeouts = dict(base.timeouts)
    collector._engine_options = dict(base._engine_options)
    return collector


def _response_text(policy: Any, settings: _CallSettings) -> Callable[[Sequence[int]], str]:
    """How samples' response text is decoded: Slime's skip_special_tokens
    (--rollout-skip-special-tokens) applies to the text only; tokens stay exact."""
    return lambda ids: policy.decode(list(ids), skip_special_tokens=settings.skip_special_tokens)


def _with_tree_outcomes(samples: List[Any], stats: Mapping[str, Any]) -> List[Any]:
    """Add the tree's outcome counts (its stats) to every sample's ``metadata["focus"]``
    (``finished_rollouts``, ``successes``): what ``log_rollout`` turns into pass@k."""
    for s in samples:
        focus = s.metadata.setdefault("focus", {})
        focus["finished_rollouts"] = int(stats.get("finished_rollouts", 0))
        focus["successes"] = int(stats.get("successes", 0))
    return samples


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
    n = getattr(args, "n_samples_per_prompt", 1) or 1
    if getattr(args, "log_passrate", False) and int(n) > 1:
        raise ConfigError(
            f"--log-passrate with --n-samples-per-prompt {n}: Slime's train-side pass rate reshapes raw_reward "
            f"into rollout_batch_size x {n}, but a FOCUS tree returns one sample per segment, so it fails after "
            "the rollout; drop --log-passrate and pass --custom-rollout-log-function-path "
            "focus.integrations.slime.log_rollout (pass@k over each tree's finished rollouts) and "
            "--custom-eval-rollout-log-function-path focus.integrations.slime.log_eval_rollout (eval pass@k)"
        )


def _problem_from(args: Any, sample: Any) -> Problem:
    """The Problem a Slime sample asks for: prompt and label filled by --input-key and
    --label-key (a sample without a label gives ``label=None``: the environment decides
    whether it needs one), id from the sample's group and index."""
    prompt = getattr(sample, "prompt", None)
    if not prompt:
        raise ConfigError(
            f"Slime sample (index={getattr(sample, 'index', None)}) has an empty prompt; check --input-key "
            f"(input_key is {getattr(args, 'input_key', None)!r})"
        )
    group, index = getattr(sample, "group_index", None), getattr(sample, "index", None)
    return Problem(
        prompt=prompt,
        label=getattr(sample, "label", None),
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


# The train_metadata key holding a path sample's per-token response advantages.
TOKEN_ADVANTAGES_KEY = "focus_advantages"


def _token_advantages(sample: Any) -> Optional[List[float]]:
    """A path sample's per-token response advantages (to_sample of a path record), else None."""
    meta = getattr(sample, "train_metadata", None)
    if isinstance(meta, Mapping):
        return meta.get(TOKEN_ADVANTAGES_KEY)
    return None


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
    text); ``sample_type`` is Slime's ``Sample`` class (``type(source)``).

    A path record (``layout="paths"``: it has per-token ``advantages``) becomes one sample
    whose response starts at its first trained token and whose ``train_metadata`` gains
    ``"focus_advantages"``, one advantage per response token (0.0 where the loss mask is
    0); ``reward`` is the path's last edge's advantage. ``preserve_advantages`` and
    ``advantages`` then train every token on its own advantage."""
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
    sample = _build_sample(
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
    per_token = record.get("advantages")
    if per_token is not None:
        if len(per_token) != len(tokens):
            raise ConfigError(f"to_sample: record has {len(tokens)} tokens but {len(per_token)} advantages; they must be equal")
        # A path record: each response token's own advantage rides in train_metadata
        # (0.0 where the loss mask is 0); preserve_advantages hands it to the advantages hook.
        meta = dict(getattr(sample, "train_metadata", None) or {})
        meta[TOKEN_ADVANTAGES_KEY] = [float(a) if m else 0.0 for a, m in zip(per_token[start:], sample.loss_mask)]
        sample.train_metadata = meta
    return sample


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
    rollout_num_gpus_per_engine``, at least 1 when there are rollout GPUs). None when the
    args do not say: the policy then schedules to the router's capacity (its
    ``max_running_requests`` when it reports one, else 256). Trees are admitted as the
    requests in flight drop below this limit (``Policy.admit``, in ``collect_records``)."""
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

    def collector(self, policy: Any, problem: Problem, args: Any = None) -> Any:
        try:
            collector = self.collector_for(policy, problem)
        except ConfigError as exc:
            if problem.label is None:
                raise type(exc)(
                    f"{exc} (the Slime sample has no label: set --label-key to the dataset field holding "
                    f"the reference answer; label_key is {getattr(args, 'label_key', None)!r})"
                ) from exc
            raise
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
        layout: str = "spans",
        visitation_weights: bool = True,
    ) -> None:
        super().__init__(collector_for, profile, workspace_for)
        _check_min_abs_advantage(min_abs_advantage)  # validate the threshold now, not per sample
        _check_layout(layout)
        self.critic_sink = critic_sink
        self.min_abs_advantage = min_abs_advantage
        self.allow_partial = allow_partial
        self.layout = layout
        self.visitation_weights = bool(visitation_weights)

    async def __call__(self, args: Any, sample: Any, sampling_params: Any = None, evaluation: bool = False) -> Any:
        """Collect one tree for ``sample`` and return its actor segments as a TreeSamples
        list of Slime samples (an ABORTED TreeSamples holding the source sample if Slime
        aborted the generation). An evaluation call (``evaluation=True``, which Slime
        passes because this signature has it) is answered as ``make_evaluate``'s hook
        would: one sample, reward = outcome."""
        if evaluation:
            return await _evaluate_sample(self, args, sample, sampling_params)
        sample = _source_sample(sample)
        _check_args(args)
        _check_rollout_mode(args)
        settings = _call_settings(args, sampling_params, evaluation=False)
        problem = _problem_from(args, sample)
        return await self._collect_tree(args, sample, problem, settings)

    async def _collect_tree(self, args: Any, sample: Any, problem: Problem, settings: "_CallSettings") -> TreeSamples:
        """One tree for ``sample``, stopped at once if Slime aborts the rollout."""
        if _slime_aborted():
            return _aborted_tree(sample)
        policy = self.policy(args)
        collector = _call_collector(self.collector(policy, problem, args), settings)
        text = _response_text(policy, settings)
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
                    layout=self.layout,
                    visitation_weights=self.visitation_weights,
                    keep_dropped=True,
                    on_state=lambda state: stats.update(state.stats),
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
            return TreeSamples(
                _with_tree_outcomes([to_sample(r, sample, text, sample_type) for r in kept], stats),
                sample,
                status=done,
                reward=reward,
            )
        # Every edge fell under min_abs_advantage: one sample that trains nothing keeps
        # Slime's group shape (a list per sample) intact.
        if dropped is None:
            raise ConfigError(f"make_generate: problem {problem.id!r} has no actor records to train on")
        empty = to_sample(dropped, sample, text, sample_type)
        empty.reward = 0.0
        empty.remove_sample = True
        return TreeSamples(_with_tree_outcomes([empty], stats), sample, status=done, reward=reward)


async def _evaluate_sample(hook: _SlimeHook, args: Any, sample: Any, sampling_params: Any) -> Any:
    """One unbranched rollout of the hook's collector's agent as one Slime sample whose
    reward is the outcome (the path's summed rewards); ABORTED if Slime aborted it. The
    body of ``make_evaluate``'s hook and of ``make_generate``'s evaluation calls."""
    from ..tree import SchedulerView
    from ._outcomes import unbranched_rollout

    _check_args(args)
    settings = _call_settings(args, sampling_params, evaluation=True)
    problem = _problem_from(args, sample)
    policy = hook.policy(args)
    base = hook.collector(policy, problem, args)
    try:
        state = await unbranched_rollout(
            base,
            problem,
            workspace_for=hook.workspace_for,
            build=lambda b, **parts: _call_collector(b, settings, **parts),
        )
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
        tokenizer=_response_text(policy, settings),
        focus={"problem_id": problem.id, "outcome": outcome, "segments": len(path)},
    )


class _Evaluate(_SlimeHook):
    """Slime's evaluation generate function built by ``make_evaluate``."""

    _evaluation = True

    async def __call__(self, args: Any, sample: Any, sampling_params: Any = None) -> Any:
        """One unbranched rollout of the collector's agent as one Slime sample whose reward
        is the outcome (the path's summed rewards); ABORTED if Slime aborted it."""
        return await _evaluate_sample(self, args, sample, sampling_params)


def make_generate(
    collector_for: CollectorFor,
    *,
    profile: Optional[str] = None,
    critic_sink: Optional[CriticSink] = None,
    workspace_for: Optional[Callable[[Problem], Workspace]] = None,
    min_abs_advantage: Optional[float] = None,
    allow_partial: bool = False,
    layout: str = "spans",
    visitation_weights: bool = True,
) -> GenerateHook:
    """Build Slime's custom generate function from your ``CollectorFor``.

    For each sample, the hook:

    1. builds the router's policy, a ``SGLangPolicy`` at
       ``http://{args.sglang_router_ip}:{args.sglang_router_port}`` (format from
       ``args.hf_checkpoint`` and ``profile``; default sampling from
       ``--rollout-temperature``, ``--rollout-top-p``, ``--rollout-top-k``,
       ``--rollout-max-response-len`` and ``--rollout-stop``; one policy per router,
       reused across samples, allowing ``router_concurrency(args)`` requests in flight);
    2. wraps the sample as a ``Problem`` (prompt and label from ``--input-key`` and
       ``--label-key``, ``label=None`` when the sample has none, id
       ``g<group_index>-i<index>``);
    3. collects one tree with a fresh collector from ``collector_for(policy, problem)``,
       under the call's sampling_params where the agent sets no sampling of its own
       (temperature, top_k, stop, stop_token_ids and repetition_penalty on every request,
       ``max_new_tokens`` as the cap on each root-to-leaf path's generated tokens,
       ``sampling_seed`` as the tree's search seed, ``skip_special_tokens`` for the
       response text);
    4. sends the critic records to ``critic_sink`` and returns the actor segments as a
       ``TreeSamples`` list of Slime samples (``to_sample``) sharing the source's rollout
       id.

    A generation Slime aborted returns ``[sample]`` (status ABORTED, no reward), never a
    zero reward. If ``min_abs_advantage`` drops every edge, one sample with
    ``remove_sample=True`` and reward 0 is returned so Slime's group keeps its shape. Called
    with ``evaluation=True`` (an eval dataset without its own
    ``custom_generate_function_path``), the hook answers as ``make_evaluate``'s does: one
    unbranched rollout, one sample, reward = outcome.

    Slime's rollout modes all work: the default and over-sampling rollouts,
    ``--partial-rollout`` (an aborted tree is collected again from its source sample; a
    finished one is kept and trained next rollout, its loss masks zeroed under
    ``--mask-offpolicy-in-partial-rollout``) and fully-async rollout (aborted groups are
    requeued). Slime's abort stops a tree at once: the hook cancels the collection and its
    requests in flight, and nothing is sent after it.

    Refused Slime settings (``ValueError`` at the first call): ``--apply-chat-template``
    (FOCUS renders the chat itself), ``--rollout-top-p`` other than 1.0 (Slime would require
    top-p replay data), ``--log-passrate`` with ``--n-samples-per-prompt`` > 1 (use
    ``log_rollout``), ``--group-rm`` (FOCUS samples carry their rewards),
    ``--rollout-sample-hook-path`` with partial or fully-async rollout (Slime's sample hooks
    rebuild the list without the tree's status and index), and sampling_params a tree cannot
    honour (``min_new_tokens`` > 0, ``no_stop_trim`` false,
    ``spaces_between_special_tokens`` true, ``custom_params``, unknown keys).

    Example:
        ```python
        from focus.integrations import JsonlDirectory
        from focus.integrations.slime import make_generate

        generate = make_generate(
            collector_for,
            profile="token_chunk",
            critic_sink=JsonlDirectory("critic-targets"),
        )
        ```

        Then pass ``--custom-generate-function-path mymodule.generate`` to Slime.

    Args:
        collector_for: Builds the collector for each sample's problem.
        profile: The parser profile of the router policy's format (see
            ``PolicyFormat.resolve``); inferred from the model when None.
        critic_sink: Receives each tree's critic records; None drops them.
        workspace_for: Gives each problem its own ``Workspace``, as in
            ``collect_records``.
        min_abs_advantage: Drops actor segments whose advantage is smaller in magnitude,
            after search.
        allow_partial: Keep a collection with failures (a collection in which every
            rollout failed still raises).
        layout: ``"spans"`` (one sample per segment) or ``"paths"`` (one sample per
            root-to-leaf path, the same gradient from about half the tokens, with each
            trained token's own advantage carried in ``train_metadata``). ``"paths"`` needs
            the three FOCUS training hooks: ``preserve_advantages`` and ``advantages``
            (per-token advantages) and ``sum_policy_tokens`` (a sum over tokens; a
            per-sample mean would weigh a token by its path's length).
        visitation_weights: Each sample's advantage is its edge's advantage times the
            edge's visitation factor (``ActorSample.visitation``), so a searched tree trains
            as an unbiased on-policy gradient; False gives the unweighted advantage.

    Returns:
        The generate hook. It also has ``close()`` for the router policies it opened.
    """
    return _Generate(
        collector_for,
        profile=profile,
        critic_sink=critic_sink,
        workspace_for=workspace_for,
        min_abs_advantage=min_abs_advantage,
        allow_partial=allow_partial,
        layout=layout,
        visitation_weights=visitation_weights,
    )


def make_evaluate(
    collector_for: CollectorFor,
    *,
    profile: Optional[str] = None,
    workspace_for: Optional[Callable[[Problem], Workspace]] = None,
) -> GenerateHook:
    """Build Slime's evaluation generate function from the same ``CollectorFor``.

    The hook runs one unbranched rollout (``Independent(1)``, no critic) of the collector's
    agent and returns one Slime sample whose ``reward`` is the outcome (the sum of the
    path's rewards) rather than a signed advantage; its status is COMPLETED or TRUNCATED,
    or ABORTED if Slime aborted it. Sampling comes from the eval dataset's sampling_params
    as for ``make_generate`` (top_p may be below 1 here; without sampling_params, the
    ``--eval-*`` flags where set, else ``--rollout-*``). Point an eval dataset's
    ``custom_generate_function_path`` at it.

    Args:
        collector_for: Builds the collector for each sample's problem.
        profile: The parser profile of the router policy's format; inferred when None.
        workspace_for: Gives each problem its own ``Workspace``, as for ``make_generate``.

    Returns:
        The evaluation hook. It also has ``close()`` for the router policies it opened.
    """
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
    ``--custom-reward-post-process-path focus.integrations.slime.preserve_advantages``.

    For a path sample (``make_generate(..., layout="paths")``) the second list holds its
    per-token response advantages instead of a float: of the sample's fields, Slime sends
    only ``rewards`` per sample to the train actor's ``rollout_data`` (``train_metadata``
    stops in the rollout manager's train data), and ``advantages`` reads them there."""
    raw = [_reward_value(args, s, i) for i, s in enumerate(samples)]
    rewards: List[Any] = []
    for r, s in zip(raw, samples):
        per_token = _token_advantages(s)
        rewards.append(r if per_token is None else list(per_token))
    return raw, rewards


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
    ``--custom-advantage-function-path focus.integrations.slime.advantages``.

    Path samples (``layout="paths"``): a sample whose reward entry is a list (put there by
    ``preserve_advantages``), or whose ``rollout_data["metadata"][i]`` (a Slime that
    forwards ``train_metadata``) holds ``"focus_advantages"``, gets those per-token
    advantages instead of a broadcast; they need context parallel size 1, like
    ``sum_policy_tokens``. Its ``rollout_data["rewards"]`` entry is then replaced by the
    mean advantage of its trained tokens, so Slime's train-side logging sees one float per
    sample."""
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
    metadata = rollout_data.get("metadata")
    masks = rollout_data.get("loss_masks")
    advs: List[Any] = []
    rets: List[Any] = []
    for i, (reward, like) in enumerate(zip(rewards, shapes)):
        per_token = None
        if metadata is not None and isinstance(metadata[i], Mapping):
            per_token = metadata[i].get(TOKEN_ADVANTAGES_KEY)
        if per_token is None and (isinstance(reward, (list, tuple)) or (_is_tensor(reward) and reward.dim() > 0)):
            per_token = reward
        if per_token is not None:
            adv, ret, rewards[i] = _per_token_advantages(i, per_token, like, None if masks is None else masks[i])
            advs.append(adv)
            rets.append(ret)
            continue
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
    rollout_data["rewards"] = rewards


def _per_token_advantages(i: int, per_token: Any, like: Any, mask: Any) -> Tuple[Any, Any, float]:
    """Sample i's advantages and returns from its per-token response advantages, shaped
    like ``like``, and the mean advantage over its trained tokens."""
    values = [float(a) for a in (per_token.tolist() if _is_tensor(per_token) else per_token)]
    n = int(like.numel()) if _is_tensor(like) else (like if isinstance(like, int) else len(like))
    if len(values) != n:
        raise ConfigError(
            f"sample {i}: {len(values)} per-token advantages for {n} response tokens on this rank "
            "(path records need context parallel size 1)"
        )
    flags = [float(m) for m in (mask.tolist() if _is_tensor(mask) else mask)] if mask is not None else [1.0] * n
    trained = [v for v, m in zip(values, flags) if m]
    mean = sum(trained) / len(trained) if trained else 0.0
    if _is_tensor(like):
        import torch

        adv = torch.tensor(values, dtype=torch.float32, device=like.device).reshape(like.shape)
        return adv, torch.zeros_like(like, dtype=torch.float32), mean
    return values, [0.0] * n, mean


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



def normalized_policy_tokens(tokens_per_rollout: int) -> Callable[..., Callable[[Any], Any]]:
    """A policy-loss reducer factory on the scale of Slime's default: ``sum_policy_tokens``
    divided by a fixed token count per rollout (as Dr. GRPO divides by a constant instead
    of each response's length).

    Slime's default reducer averages each rollout's masked token losses (the denominator
    is the rollout's ``rollout_mask_sums`` entry, every sibling sample of a tree counted)
    and ``loss_function`` then scales by ``num_microbatches / step_global_batch_size``, so
    the step loss is the mean over rollouts of each rollout's token mean. With
    ``sum_policy_tokens`` the per-rollout token mean becomes a per-rollout token sum: the
    loss and gradient are larger by the rollout's masked token count M (a tree's trained
    tokens), for example about 1,300x for 32-rollout trees. Dividing the sum by a constant
    C keeps every generated token's weight equal across trees (what summing is for) while
    the loss and gradient norm are M/C times Slime's default: with C near the mean M of
    your trees, ``--lr`` and ``--clip-grad`` of a GRPO recipe carry over.

    Expose it from your module:

    ```python
    reducer = normalized_policy_tokens(1024)
    ```

    and name that attribute: ``--custom-pg-loss-reducer-function-path mymodule.reducer``.

    Slime calls the factory as ``(total_lengths, response_lengths, loss_masks,
    calculate_per_token_loss)``. ``--calculate-per-token-loss`` is refused: Slime then
    divides by the step's token count itself (use ``sum_policy_tokens`` there). Context
    parallel size 1 is required, as for ``sum_policy_tokens``."""
    if isinstance(tokens_per_rollout, bool) or not isinstance(tokens_per_rollout, int) or tokens_per_rollout < 1:
        raise ConfigError(f"normalized_policy_tokens: tokens_per_rollout must be an int >= 1, got {tokens_per_rollout!r}")

    def factory(
        total_lengths: Any,
        response_lengths: Any,
        loss_masks: List[Any],
        calculate_per_token_loss: bool = False,
    ) -> Callable[[Any], Any]:
        if calculate_per_token_loss:
            raise ConfigError(
                "normalized_policy_tokens: --calculate-per-token-loss already divides the loss by the step's "
                "token count; use focus.integrations.slime.sum_policy_tokens with it"
            )
        summed = sum_policy_tokens(total_lengths, response_lengths, loss_masks, calculate_per_token_loss)
        return lambda x: summed(x) / tokens_per_rollout

    factory.tokens_per_rollout = tokens_per_rollout  # type: ignore[attr-defined]
    return factory


def _pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of n attempts with c passes: 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_rates(outcomes: Sequence[Tuple[int, int]]) -> Dict[str, float]:
    """pass@k over problems given as ``(attempts, passes)`` pairs, for k = 1, 2, 4, ... up
    to the most attempts: each ``pass@k`` is the mean unbiased estimate over the problems
    with at least k attempts (the estimator Slime's ``compute_pass_rate`` uses)."""
    most = max((n for n, _ in outcomes), default=0)
    out: Dict[str, float] = {}
    k = 1
    while k <= most:
        values = [_pass_at_k(n, c, k) for n, c in outcomes if n >= k]
        out[f"pass@{k}"] = sum(values) / len(values)
        k *= 2
    return out


def _tree_outcomes(samples: Sequence[Any]) -> List[Tuple[int, int]]:
    """One ``(finished_rollouts, successes)`` per tree among ``samples`` (the siblings of a
    tree carry the same counts in ``metadata["focus"]``; keyed by problem id)."""
    trees: Dict[Any, Tuple[int, int]] = {}
    for s in samples:
        focus = (getattr(s, "metadata", None) or {}).get("focus") or {}
        if "finished_rollouts" in focus and focus["finished_rollouts"] > 0:
            trees[focus.get("problem_id")] = (int(focus["finished_rollouts"]), int(focus["successes"]))
    return list(trees.values())


def _trained_tokens_per_tree(samples: Sequence[Any]) -> List[int]:
    """Each tree's trained (loss-mask) tokens over its samples: Slime's per-rollout
    ``rollout_mask_sums`` entry, the M that ``normalized_policy_tokens`` should be near."""
    trees: Dict[Any, int] = {}
    for s in samples:
        focus = (getattr(s, "metadata", None) or {}).get("focus") or {}
        if "finished_rollouts" in focus and not getattr(s, "remove_sample", False):
            key = focus.get("problem_id")
            trees[key] = trees.get(key, 0) + sum(1 for m in (getattr(s, "loss_mask", None) or ()) if m)
    return list(trees.values())


def _slime_log(args: Any, rollout_id: int, metrics: Dict[str, Any], step_key: str) -> None:
    """Log ``metrics`` through Slime's own logger at the rollout's step (inside Slime only)."""
    from slime.observability import logging_utils  # type: ignore[import-not-found]
    from slime.observability.metric_utils import compute_rollout_step  # type: ignore[import-not-found]

    metrics = {**metrics, step_key: compute_rollout_step(args, rollout_id)}
    logging_utils.log(args, metrics, step_key=step_key)


def log_rollout(rollout_id: int, args: Any, samples: List[Any], rollout_extra_metrics: Any, rollout_time: float) -> bool:
    """Rollout log hook: add pass@k over each tree's finished rollouts to Slime's rollout
    metrics, as ``passrate/pass@k`` (k = 1, 2, 4, ... up to the largest tree; a tree's
    rollout passes when it finishes with the top reward, e.g. a correct MathEnv answer).
    A tree's rollouts share prefixes, so this is the pass rate of the searched tree's
    attempts, not of independent samples.

    Slime's own ``--log-passrate`` cannot see trees (it reshapes one reward per sample into
    prompts x n_samples_per_prompt); the tree counts travel in each sample's
    ``metadata["focus"]`` (``finished_rollouts``, ``successes``). It also reports
    ``rollout/focus/trained_tokens_per_tree``, the mean loss-mask tokens per tree (Slime's
    per-rollout denominator; see ``normalized_policy_tokens``). The metrics go into
    ``rollout_extra_metrics``, which Slime logs with its default rollout metrics (or, if
    Slime passed none, through Slime's logger), and the hook returns False so that
    default logging still runs. Name it with
    ``--custom-rollout-log-function-path focus.integrations.slime.log_rollout``."""
    metrics: Dict[str, Any] = {f"passrate/{k}": v for k, v in pass_rates(_tree_outcomes(samples)).items()}
    trained = _trained_tokens_per_tree(samples)
    if trained:
        metrics["rollout/focus/trained_tokens_per_tree"] = sum(trained) / len(trained)
    if metrics:
        if isinstance(rollout_extra_metrics, dict):
            rollout_extra_metrics.update(metrics)
        else:
            _slime_log(args, rollout_id, metrics, "rollout/step")
    return False


def _eval_group_size(args: Any, name: str) -> int:
    for dataset in getattr(args, "eval_datasets", None) or ():
        if getattr(dataset, "name", None) == name and getattr(dataset, "n_samples_per_eval_prompt", None):
            return int(dataset.n_samples_per_eval_prompt)
    return int(getattr(args, "n_samples_per_eval_prompt", 1) or 1)


def log_eval_rollout(rollout_id: int, args: Any, data: Dict[str, Any], extra_metrics: Any) -> bool:
    """Eval log hook: pass@k per eval dataset as ``eval/<name>-pass@k``, the keys and
    semantics of Slime's ``--log-passrate`` (each eval prompt's
    ``n_samples_per_eval_prompt`` outcome rewards, a reward of 1 a pass), for runs that
    cannot pass ``--log-passrate`` (n_samples_per_prompt > 1 with FOCUS trees). The
    group size is the dataset's own ``n_samples_per_eval_prompt`` where its eval config
    sets one. Nothing is added when ``--log-passrate`` is on (Slime computes the same).
    Returns False, so Slime's default eval logging still runs. Name it with
    ``--custom-eval-rollout-log-function-path focus.integrations.slime.log_eval_rollout``."""
    if getattr(args, "log_passrate", False):
        return False
    metrics: Dict[str, Any] = {}
    for name, result in (data or {}).items():
        rewards = list(result.get("rewards") or ())
        n = _eval_group_size(args, name)
        if n < 2 or not rewards:
            continue
        if len(rewards) % n:
            raise ConfigError(
                f"log_eval_rollout: eval dataset {name!r} has {len(rewards)} rewards, not a multiple of its "
                f"n_samples_per_eval_prompt {n}"
            )
        groups = [rewards[i : i + n] for i in range(0, len(rewards), n)]
        outcomes = [(n, sum(1 for r in g if r == 1)) for g in groups]
        metrics |= {f"eval/{name}-{k}": v for k, v in pass_rates(outcomes).items()}
    if metrics:
        if isinstance(extra_metrics, dict):
            extra_metrics.update(metrics)
        else:
            _slime_log(args, rollout_id, metrics, "eval/step")
    return False


__all__ = [
    "GenerateHook",
    "TreeSamples",
    "advantages",
    "log_eval_rollout",
    "log_rollout",
    "make_evaluate",
    "make_generate",
    "normalized_policy_tokens",
    "pass_rates",
    "preserve_advantages",
    "router_concurrency",
    "sum_policy_tokens",
    "to_sample",
]
