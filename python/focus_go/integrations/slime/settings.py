"""Slime's flags and per-call sampling_params, mapped onto a tree or refused.

A generate call arrives with Slime's parsed ``args`` and the call's ``sampling_params``.
Here they become what a collection takes: the router URL, the request limit
(``router_concurrency``), the sampling defaults, and one call's ``_CallSettings``
(sampling, the per-path token cap, the search seed, the response text's decoding), applied
to the collector ``collector_for`` built (``_call_collector``). Slime settings a tree
cannot honour are refused here with a ConfigError naming the flag.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from typing import Any, Dict, Mapping, Optional

from ...collector import Collector
from ...errors import ConfigError
from ...generation.types import SamplingParams


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
    base: Collector,
    settings: _CallSettings,
    *,
    search: Any = None,
    critic: Any = _KEEP,
    workspace: Any = _KEEP,
    stop_on_abort: Optional[bool] = None,
    wrap_env: Any = None,
) -> Collector:
    """``base`` (from collector_for) with one Slime call's settings applied: the agent's
    sampling, where the agent sets none, is the call's (an agent's own sampling wins, as
    FOCUS's setting, with a warning naming what Slime asked for instead); each
    root-to-leaf path generates at most ``max_new_tokens``; the search seed is the call's
    ``sampling_seed`` when Slime sends one. ``search`` / ``critic`` / ``workspace``
    replace the base's (the evaluation rollout), ``stop_on_abort`` its option of that name
    (the generate hook's); its other options (timeouts, retries) are the base's.
    ``wrap_env``, when given, replaces the agent's env with ``wrap_env(env)`` (Slime's
    reward model, ``rewards._with_reward_model``)."""
    agent = copy.copy(base.agent)
    if wrap_env is not None:
        agent.env = wrap_env(agent.env)
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
    return Collector(
        agent,
        critic=base.critic if critic is _KEEP else critic,
        search=search,
        reward=base.reward,
        estimator=base.estimator,
        workspace=base.workspace if workspace is _KEEP else workspace,
        close_services=base.close_services,
        # Collector.timeouts holds each timeout in seconds as the engine takes it, 0.0 for none.
        policy_timeout=base.timeouts["policy_timeout"] or None,
        env_timeout=base.timeouts["env_timeout"] or None,
        critic_timeout=base.timeouts["critic_timeout"] or None,
        max_retries=base.max_retries,
        stop_on_abort=base.stop_on_abort if stop_on_abort is None else stop_on_abort,
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
    n = getattr(args, "n_samples_per_prompt", 1) or 1
    if getattr(args, "log_passrate", False) and int(n) > 1:
        raise ConfigError(
            f"--log-passrate with --n-samples-per-prompt {n}: Slime's train-side pass rate reshapes raw_reward "
            f"into rollout_batch_size x {n}, but a FOCUS tree returns one sample per segment, so it fails after "
            "the rollout; drop --log-passrate and pass --custom-rollout-log-function-path "
            "focus.integrations.slime.log_rollout (pass@k over each tree's finished rollouts) and "
            "--custom-eval-rollout-log-function-path focus.integrations.slime.log_eval_rollout (eval pass@k)"
        )


# The Slime estimators whose advantages are the tree's: --custom-advantage-function-path
# replaces their advantage; gspo and cispo change only the policy-loss form (a
# sequence-level ratio, CISPO's clipped importance weight).
_TREE_ESTIMATORS = ("grpo", "gspo", "cispo")
_UNSET: Any = object()


def _load_reducer(path: str) -> Any:
    import importlib

    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return None


def _check_loss_terms(args: Any) -> None:
    """Slime's --use-kl-loss and --entropy-coef terms next to focus's token-sum reducer:
    Slime reduces them with its own reducer, a mean per rollout unless
    --calculate-per-token-loss makes it a token sum, so next to a policy loss summed over
    tokens they must be token sums too, or their weight falls by each tree's trained
    tokens."""
    path = getattr(args, "custom_pg_loss_reducer_function_path", None)
    if not path:
        return
    terms = []
    if getattr(args, "use_kl_loss", False) and float(getattr(args, "kl_loss_coef", 0.0) or 0.0) != 0.0:
        terms.append(f"--use-kl-loss (--kl-loss-coef {args.kl_loss_coef})")
    entropy = float(getattr(args, "entropy_coef", 0.0) or 0.0)
    if entropy != 0.0:
        terms.append(f"--entropy-coef {getattr(args, 'entropy_coef')}")
    if not terms:
        return
    reducer = _load_reducer(path)
    named = " and ".join(terms)
    if hasattr(reducer, "tokens_per_rollout"):
        raise ConfigError(
            f"{named} with --custom-pg-loss-reducer-function-path {path} (normalized_policy_tokens): Slime averages "
            "those terms per rollout while the reducer sums the policy loss over tokens, so their weight falls by "
            "each tree's trained tokens over tokens_per_rollout; use focus.integrations.slime.sum_policy_tokens "
            "with --calculate-per-token-loss (Slime then sums every term over tokens and divides the step by its "
            "token count)"
        )
    is_sum = getattr(reducer, "__qualname__", None) == "sum_policy_tokens" and getattr(reducer, "__module__", "").endswith(
        "integrations.slime.loss"
    )
    if is_sum and not getattr(args, "calculate_per_token_loss", False):
        raise ConfigError(
            f"{named} with --custom-pg-loss-reducer-function-path {path}: Slime averages those terms per rollout while "
            "sum_policy_tokens sums the policy loss over tokens, so their weight next to it falls by each tree's "
            "trained tokens; add --calculate-per-token-loss: Slime then sums them over tokens too, "
            "each token keeps the weights Slime's default gives it, and the step is divided by its token count"
        )


def _check_training(args: Any) -> None:
    """Refuse, naming the flag, every Slime training setting that would train something
    other than the tree's advantages (the table in docs/slime.md, "Training settings").
    Called by the generate hook before it builds anything, and by the train-side hooks."""
    loss_type = getattr(args, "loss_type", "policy_loss") or "policy_loss"
    if loss_type == "sft_loss":
        raise ConfigError(
            "--loss-type sft_loss trains the log-likelihood of every segment and ignores its advantage; FOCUS "
            "trees train with --loss-type policy_loss (the default)"
        )
    estimator = getattr(args, "advantage_estimator", "grpo") or "grpo"
    if estimator == "ppo":
        raise ConfigError(
            "--advantage-estimator ppo trains Slime's critic on the advantages hook's returns, which are all zero "
            "(FOCUS's critic targets go to make_generate's critic_sink); use --advantage-estimator grpo"
        )
    if estimator not in _TREE_ESTIMATORS:
        raise ConfigError(
            f"--advantage-estimator {estimator}: Slime requires --normalize-advantages with it, which whitens the "
            f"tree's advantages; use one of {', '.join(_TREE_ESTIMATORS)}"
        )
    kl_coef = float(getattr(args, "kl_coef", 0.0) or 0.0)
    if kl_coef != 0.0:
        raise ConfigError(
            f"--kl-coef {getattr(args, 'kl_coef')} with --advantage-estimator {estimator}: Slime's {estimator} does not "
            "fold the reward KL into the advantages (only its REINFORCE++ estimators do, and they need "
            "--normalize-advantages), so FOCUS would change advantages Slime would not; drop --kl-coef, or use "
            "--use-kl-loss --kl-loss-coef for a KL term in the loss"
        )
    if getattr(args, "normalize_advantages", False):
        raise ConfigError(
            "--normalize-advantages whitens advantages after the advantages hook and would change FOCUS's "
            "advantages; run without it"
        )
    if getattr(args, "compute_advantages_and_returns", True) is False:
        raise ConfigError(
            "--disable-compute-advantages-and-returns skips the advantages hook, so the tree's advantages never "
            "reach the loss; run without it"
        )
    if getattr(args, "use_opd", False):
        raise ConfigError(
            "--use-opd adds the teacher's KL to every token's advantage after the advantages hook, so the loss no "
            "longer trains the tree's advantages; run without on-policy distillation"
        )
    post = getattr(args, "custom_reward_post_process_path", _UNSET)
    if (
        post is None
        and getattr(args, "rewards_normalization", True)
        and not getattr(args, "custom_convert_samples_to_train_data_path", None)
    ):
        raise ConfigError(
            "--custom-reward-post-process-path is not set: Slime's default reward post-processing centres (and, "
            f"for {estimator}, scales) each group's rewards, which for FOCUS samples are the tree's advantages; pass "
            "--custom-reward-post-process-path focus.integrations.slime.preserve_advantages"
        )
    _check_loss_terms(args)


# Slime's stock dynamic sampling filters: they read one reward per group element, which
# for a tree is its success rate (tree_has_signal reads the tree's outcomes instead).
_ZERO_STD_FILTERS = frozenset(
    {
        "slime.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std",
        "slime.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std_with_fallback",
    }
)


def _check_rollout_mode(args: Any) -> None:
    """Refuse Slime modes a tree's samples cannot take part in."""
    dynamic = getattr(args, "dynamic_sampling_filter_path", None)
    if dynamic in _ZERO_STD_FILTERS:
        raise ConfigError(
            f"--dynamic-sampling-filter-path {dynamic} compares one reward per group element, which for a FOCUS "
            "tree is its success rate: with --n-samples-per-prompt 1 it drops every tree and the rollout never "
            "finishes, with more it drops groups whose trees still carry advantages; use "
            "--dynamic-sampling-filter-path focus.integrations.slime.tree_has_signal (keeps a group with a tree "
            "whose rollouts did not all end alike)"
        )
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
