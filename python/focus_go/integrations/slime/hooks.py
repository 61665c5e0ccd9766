"""The generate and evaluate hooks Slime calls: ``make_generate`` and ``make_evaluate``.

Each call builds (once per router) the Go-native policy for Slime's router, turns the
sample into a ``Problem``, collects a tree (or, for evaluation, one unbranched rollout)
under the call's settings, watching Slime's abort, and returns Slime samples.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple

from .. import CollectorFor, CriticSink, Problem, Workspace, _check_layout, _check_min_abs_advantage, _collect
from ..._bridge import _cancelled_trees
from ...collector import Collector, _native_tokenizer
from ...critic_rule import CriticRule, _fit_into
from ...errors import CollectionError, ConfigError, ConfigTypeError, InternalError
from .abort import _aborted, _slime_aborted, _unless_aborted
from .rewards import MAX_RESCALES, _RewardRefused, _RewardScaleGrew, _RewardScale, _RewardWatch, _with_reward_model
from .samples import (
    TreeSamples,
    _aborted_tree,
    _build_sample,
    _mark_off_policy,
    _partial_from_json,
    _partial_tree,
    _problem_from,
    _rollout_id,
    _source_sample,
    _success_rate,
    _take_partial_tree,
    _with_tree_outcomes,
    to_sample,
)
from .settings import (
    _CallSettings,
    _call_collector,
    _call_settings,
    _check_args,
    _check_rollout_mode,
    _check_training,
    _router_url,
    _sampling_from_args,
    router_concurrency,
)

logger = logging.getLogger(__name__)


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
        self.reward_scale = _RewardScale()

    def policy(self, args: Any) -> Any:
        """The Go-native SGLangPolicy for Slime's router, with ``args.hf_checkpoint``'s
        tokenizer and chat template, Slime's rollout sampling flags as defaults, and
        ``router_concurrency(args)`` requests in flight at most."""
        from ...generation.servers import SGLangPolicy

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
                    # Slime updates the servers' weights between rollout steps, under this
                    # one policy: each tree edge records the weight version that generated it.
                    allow_weight_change=True,
                )
                self._policies[key] = policy
        return policy

    @staticmethod
    def tokenizer(policy: Any) -> Any:
        """The router policy's focus-go tokenizer: Go decodes each sample's response text
        with it, once, when it exports the records."""
        tokenizer = _native_tokenizer(policy)
        if tokenizer is None:
            raise InternalError(f"the Slime router policy {policy!r} has no focus-go tokenizer to decode response text")
        return tokenizer

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

    def watched(self, base: Collector, args: Any, sample: Any, tokenizer: Any, settings: "_CallSettings") -> Tuple[Any, _RewardWatch]:
        """Set ``base``'s reward range to the hook's (``_RewardScale``: the declared range
        widened to the rewards seen) and return the env wrapper of the call (Slime's
        reward model, every reward watched) with the call's ``_RewardWatch``."""
        base.reward = self.reward_scale.reward_config(base.reward)
        watch = _RewardWatch(base.reward)
        return _reward_model_env(args, sample, tokenizer, settings, watch), watch

    async def rescaling(self, collect: Callable[[], Any], problem: Problem) -> Any:
        """``await collect()``, again while it raises ``_RewardScaleGrew`` (a reward
        outside the range the tree ran with: the range is wider next time), at most
        ``MAX_RESCALES`` times more."""
        for _ in range(MAX_RESCALES):
            try:
                return await collect()
            except _RewardScaleGrew as grew:
                logger.warning(
                    "focus %s: %s; collecting it again over the widened range (declare the reward scale with "
                    "RewardConfig(reward_min=..., reward_max=...) in collector_for to save this)",
                    type(self).__name__.lstrip("_").lower(),
                    grew,
                )
        try:
            return await collect()
        except _RewardScaleGrew as grew:
            raise _RewardRefused(
                f"{grew}, after {MAX_RESCALES} collections over wider ranges; declare the reward model's scale with "
                "RewardConfig(reward_min=..., reward_max=...) in collector_for"
            ) from None

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
        visitation_weights: bool = False,
        critic_rule: Optional[CriticRule] = None,
    ) -> None:
        super().__init__(collector_for, profile, workspace_for)
        if critic_rule is not None and not isinstance(critic_rule, CriticRule):
            raise ConfigError(f"make_generate: critic_rule must be a CriticRule, got {type(critic_rule).__name__}")
        self.critic_rule = critic_rule
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
        _check_training(args)
        if self.layout == "paths" and getattr(args, "custom_reward_post_process_path", "") is None:
            raise ConfigError(
                "make_generate(layout=\"paths\") without --custom-reward-post-process-path: Slime would send each path "
                "sample's last advantage as its reward and lose its per-token advantages; pass "
                "--custom-reward-post-process-path focus.integrations.slime.preserve_advantages"
            )
        # Under --partial-rollout an aborted tree left its partial tree on the sample.
        resume = _take_partial_tree(sample)
        settings = _call_settings(args, sampling_params, evaluation=False)
        problem = _problem_from(args, sample)
        return await self._collect_tree(args, sample, problem, settings, resume)

    async def _collect_tree(
        self, args: Any, sample: Any, problem: Problem, settings: "_CallSettings", resume: Optional[str] = None
    ) -> TreeSamples:
        """One tree for ``sample``, stopped at once if Slime aborts the rollout. With
        ``--partial-rollout`` an aborted tree's work is kept on the sample and ``resume``
        (the partial tree an earlier call kept) is continued."""
        partial_rollout = bool(getattr(args, "partial_rollout", False))
        if _slime_aborted():
            if partial_rollout and resume is not None:
                return _aborted_tree(sample, _partial_from_json(resume))
            return _aborted_tree(sample)
        cancelled: List[Any] = []
        token = _cancelled_trees.set(cancelled) if partial_rollout else None
        try:
            return await self._collect_or_restart(args, sample, problem, settings, resume, partial_rollout, cancelled)
        finally:
            if token is not None:
                _cancelled_trees.reset(token)
            for state in cancelled:
                state.close()

    async def _collect_or_restart(
        self, args: Any, sample: Any, problem: Problem, settings: "_CallSettings", resume: Optional[str],
        partial_rollout: bool, cancelled: List[Any],
    ) -> TreeSamples:
        """Collect (resuming ``resume``); a partial tree that cannot be resumed (another
        root context, an env that does not replay it) is collected again from scratch,
        with a warning and ``metadata["focus"]["resume_restarted"]``."""
        try:
            return await self.rescaling(
                lambda: self._collect_once(args, sample, problem, settings, resume, False, partial_rollout, cancelled), problem
            )
        except ConfigError as exc:
            if resume is None or isinstance(exc, _RewardRefused):
                raise
            if getattr(exc, "state", None) is not None:
                exc.state.close()
            logger.warning(
                "focus make_generate: problem %r: the partial tree kept from an aborted rollout cannot be resumed "
                "(%s); collecting the tree again from scratch",
                problem.id,
                exc,
            )
        return await self.rescaling(
            lambda: self._collect_once(args, sample, problem, settings, None, True, partial_rollout, cancelled), problem
        )

    async def _collect_once(
        self, args: Any, sample: Any, problem: Problem, settings: "_CallSettings", resume: Optional[str],
        restarted: bool, partial_rollout: bool, cancelled: List[Any],
    ) -> TreeSamples:
        policy = self.policy(args)
        base = self.collector(policy, problem, args)
        wrap_env, watch = self.watched(base, args, sample, self.tokenizer(policy), settings)
        # An abort finish (Slime's /abort_request) ends the whole tree in Go at once.
        collector = _call_collector(base, settings, stop_on_abort=True, wrap_env=wrap_env)
        group = getattr(sample, "group_index", None)
        stats: Dict[str, Any] = {}
        on_state: Callable[[Any], None] = lambda state: stats.update(state.stats)
        fits: List[Any] = []
        if self.critic_rule is not None:  # from the trees finished before this one started
            self.critic_rule.apply(collector)
            on_state = _fit_into(fits, collector.reward, on_state)
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
                    on_state=on_state,
                    # Slime's skip_special_tokens (--rollout-skip-special-tokens) applies to
                    # the text only; tokens stay exact.
                    tokenizer=self.tokenizer(policy),
                    skip_special_tokens=settings.skip_special_tokens,
                    resume=resume,
                )
            )
        except CollectionError as exc:
            state = getattr(exc, "state", None)
            if _aborted(getattr(exc, "failures", ()) or ()):
                try:
                    partial = _partial_tree(state) if partial_rollout else None
                finally:
                    if state is not None:
                        state.close()
                return _aborted_tree(sample, partial)
            if watch.error is not None or watch.outside:  # the rewards failed the rollouts
                if state is not None:
                    state.close()
                watch.settle(self.reward_scale, problem.id)
            raise
        if aborted:
            # Slime's abort was seen in Python: the tree so far came back through the sink.
            partial = _partial_tree(cancelled[-1]) if partial_rollout and cancelled else None
            return _aborted_tree(sample, partial)
        if _aborted(collected.failures):
            return _aborted_tree(sample)
        watch.settle(self.reward_scale, problem.id)
        if self.critic_rule is not None:
            self.critic_rule.observe(fits)
        kept, critic, dropped = collected.actor, collected.critic, collected.dropped
        if self.critic_sink is not None:
            self.critic_sink(critic)
        sample_type = type(sample)
        done = sample_type.Status.COMPLETED
        reward = _success_rate(stats)
        mask = partial_rollout and bool(getattr(args, "mask_offpolicy_in_partial_rollout", False))
        if kept:
            samples = [to_sample(r, sample, None, sample_type) for r in kept]
            if stats.get("resumes"):
                _mark_off_policy(samples, kept, mask)
            return TreeSamples(_with_resume(_with_tree_outcomes(samples, stats), restarted), sample, status=done, reward=reward)
        # Every edge fell under min_abs_advantage: one sample that trains nothing keeps
        # Slime's group shape (a list per sample) intact.
        if dropped is None:
            raise ConfigError(f"make_generate: problem {problem.id!r} has no actor records to train on")
        empty = to_sample(dropped, sample, None, sample_type)
        empty.reward = 0.0
        empty.remove_sample = True
        return TreeSamples(_with_resume(_with_tree_outcomes([empty], stats), restarted), sample, status=done, reward=reward)


def _with_resume(samples: List[Any], restarted: bool) -> List[Any]:
    """Record on each sample whether its tree was collected again from scratch because
    the partial tree kept for it could not be resumed (``log_rollout``'s
    ``rollout/focus/resume_restarted``)."""
    if restarted:
        for s in samples:
            s.metadata.setdefault("focus", {})["resume_restarted"] = True
    return samples


async def _evaluate_sample(hook: _SlimeHook, args: Any, sample: Any, sampling_params: Any) -> Any:
    """One unbranched rollout of the hook's collector's agent as one Slime sample whose
    reward is the outcome (the path's summed rewards); ABORTED if Slime aborted it. The
    body of ``make_evaluate``'s hook and of ``make_generate``'s evaluation calls. The
    sample is the rollout's path record, as Go exported it (``rollout_record``). A reward
    outside the collector's range is collected again over the widened range, as for
    ``make_generate``."""
    _check_args(args)
    settings = _call_settings(args, sampling_params, evaluation=True)
    problem = _problem_from(args, sample)
    return await hook.rescaling(lambda: _evaluate_once(hook, args, sample, settings, problem), problem)


async def _evaluate_once(hook: _SlimeHook, args: Any, sample: Any, settings: "_CallSettings", problem: Problem) -> Any:
    from .._outcomes import rollout_record, unbranched_rollout

    policy = hook.policy(args)
    base = hook.collector(policy, problem, args)
    wrap_env, watch = hook.watched(base, args, sample, hook.tokenizer(policy), settings)
    try:
        state = await unbranched_rollout(
            base,
            problem,
            workspace_for=hook.workspace_for,
            build=lambda b, **parts: _call_collector(b, settings, wrap_env=wrap_env, **parts),
        )
    except CollectionError as exc:
        if getattr(exc, "state", None) is not None:
            exc.state.close()
        if _aborted(getattr(exc, "failures", ()) or ()):
            sample.status = type(sample).Status.ABORTED
            return sample
        watch.settle(hook.reward_scale, problem.id)
        raise
    try:
        watch.settle(hook.reward_scale, problem.id)
        rollout, record, _ = rollout_record(
            state, base, tokenizer=hook.tokenizer(policy), skip_special_tokens=settings.skip_special_tokens, caller="make_evaluate"
        )
    finally:
        state.close()
    if record is None:
        raise InternalError(f"make_evaluate: the finished rollout (node {rollout.node_id}) generated no token")
    return _build_sample(
        sample,
        type(sample),
        record,
        reward=record["return"],
        status="COMPLETED" if rollout.done else "TRUNCATED",
        response=record["response_text"],
        focus={"problem_id": problem.id, "outcome": record["return"], "segments": rollout.segments},
    )


def _reward_model_env(args: Any, sample: Any, tokenizer: Any, settings: "_CallSettings", watch: _RewardWatch) -> Any:
    """The env wrapper that watches every reward and scores each finished rollout with
    Slime's --custom-rm-path or --rm-type when one is set; token turns decoded as the
    samples' text is."""
    skip = settings.skip_special_tokens
    return _with_reward_model(args, sample, lambda ids: tokenizer.decode(list(ids), skip_special_tokens=skip), watch)


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
    visitation_weights: bool = False,
    critic_rule: Optional[CriticRule] = None,
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
    zero reward (with ``--partial-rollout``, the tree so far kept on the sample). If
    ``min_abs_advantage`` drops every edge, one sample with ``remove_sample=True`` and
    reward 0 is returned so Slime's group keeps its shape. Called
    with ``evaluation=True`` (an eval dataset without its own
    ``custom_generate_function_path``), the hook answers as ``make_evaluate``'s does: one
    unbranched rollout, one sample, reward = outcome.

    Slime's rollout modes all work: the default and over-sampling rollouts,
    ``--partial-rollout`` (an aborted tree keeps its finished rollouts and searched nodes
    with its source sample, in ``metadata["focus_partial_tree"]``, and the next rollout
    resumes its search within the same budget; under
    ``--mask-offpolicy-in-partial-rollout`` only the tokens generated before the resume get
    loss mask 0, counted in each sample's ``metadata["focus"]["off_policy_tokens"]``; a
    partial tree that cannot be resumed, because the environment does not replay it, is
    collected again from scratch with a logged warning and
    ``metadata["focus"]["resume_restarted"]``; a finished tree is kept and trained next
    rollout, its loss masks zeroed under ``--mask-offpolicy-in-partial-rollout``) and
    fully-async rollout (aborted groups are requeued). Slime's abort stops a tree at once: the hook cancels the collection and its
    requests in flight, and nothing is sent after it.

    With ``--custom-rm-path`` or ``--rm-type``, Slime's reward model scores each rollout
    of the tree that the environment ends, in place of the environment's reward on that
    step (see ``docs/slime.md``, "Reward models"). A
    ``--rollout-sample-filter-path`` filter's settings on a tree reach all its samples.

    Refused Slime settings (``ValueError`` at the first call): ``--apply-chat-template``
    (FOCUS renders the chat itself), ``--rollout-top-p`` other than 1.0 (Slime would require
    top-p replay data), ``--log-passrate`` with ``--n-samples-per-prompt`` > 1 (use
    ``log_rollout``), ``--group-rm`` (FOCUS samples carry their rewards),
    ``--rollout-sample-hook-path`` with partial or fully-async rollout (Slime's sample hooks
    rebuild the list without the tree's status and index), Slime's stock
    ``check_reward_nonzero_std`` dynamic sampling filters (use ``tree_has_signal``), a
    ``--custom-rm-path`` that does not load, sampling_params a tree cannot
    honour (``min_new_tokens`` > 0, ``no_stop_trim`` false,
    ``spaces_between_special_tokens`` true, ``custom_params``, unknown keys), and the
    training settings that would train something other than the tree's advantages
    (``--loss-type sft_loss``, the ``ppo`` and REINFORCE++ estimators, ``--kl-coef``,
    ``--normalize-advantages``, ``--use-opd``, no reward post-process, ``--use-kl-loss``
    or ``--entropy-coef`` next to a token-sum reducer without
    ``--calculate-per-token-loss``; docs/slime.md, "Training settings").

    Rewards have no range: any finite reward of the environment or of Slime's reward model
    trains as given. A tree that meets a reward outside the collector's ``[reward_min,
    reward_max]`` is collected again over the range widened to it (the hook remembers the
    widest range seen, so this happens once per new end of the scale), and a reward that
    is not finite is refused naming the reward model.

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
            as an unbiased on-policy gradient; False (the default) gives the unweighted
            advantage.
        critic_rule: Sets each tree's ``critic_weight`` and estimator (``DirectBranchTd`` or
            ``TreeGroupBaseline``) from the critic's reliability measured on the trees that
            finished before it started (``focus_go.critic_rule.CriticRule``, docs/signal.md
            §R), over the collector's own ``reward``; each finished tree is observed as a
            batch of one. None (the default) keeps the collectors' settings.

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
        critic_rule=critic_rule,
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
