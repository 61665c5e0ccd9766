"""The ``train`` loop: collect from a frozen sampler, update, publish, one step behind at
most; its per-step reports (``StepReport``) and metrics log.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from .. import CollectorFor, CriticSink, Problem, Workspace, _check_min_abs_advantage, _collect
from ...critic_rule import CriticRule, _fit_into
from ...errors import CollectionError, ConfigError
from .checkpoint import (
    TrainCheckpoint,
    _append_line,
    _check_client,
    _check_settings,
    _client_identity,
    _load_state,
    _problem_ids,
    _save_sampler,
    _save_state,
    _truncate_log,
    _truncate_sink,
    load_checkpoint,
)
from .datum import _add_sequence_ids, _types
from .metrics_log import _MetricsLog, _check_wandb
from .steps import _Order, _cancel_and_join, _epoch_seed, _gather_all, _has_checkpoint, _mean, _publish, _warmup
from .transcripts import _Transcripts
from .config import _check_arguments, _loss_config
from .update import PPO_CLIP, _post_kl, _update

# Names a kill point of the loop (``"updated"``, ``"logged"``, ``"critic"``,
# ``"checkpointed"``) and a learner step, ``"logged:2"``: the process kills itself with
# SIGKILL there. The kill tests use it to land on the moments between the loop's writes.
KILL_AT_ENV = "FOCUS_GO_TINKER_KILL_AT"


def _fault(point: str, learner_step: int) -> None:
    if os.environ.get(KILL_AT_ENV) == f"{point}:{learner_step}":
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class StepReport:
    """What one actor update trained on, as ``train`` reports it after each update.

    Attributes:
        batch: The batch index.
        behavior_step: The number of updates in the weights the batch was sampled from.
        learner_step: The number of updates in the weights this update started from.
        policy_lag: ``learner_step - behavior_step``.
        metrics: Tinker's metrics: the forward-backward metrics, such as ``loss:sum``, then
            the optimizer's.
    """

    batch: int
    behavior_step: int
    learner_step: int
    policy_lag: int
    metrics: Mapping[str, Any] = field(default_factory=dict)
    trees: int = 0
    """How many trees (problems) the update trained on."""
    tokens_sampled: int = 0
    """Tokens the policy generated while collecting them."""
    tokens_trained: int = 0
    """Generated tokens in the datums sent (loss mask 1)."""
    failures: int = 0
    """Failed rollouts left out of the trees (``allow_partial=True``)."""
    stats: Mapping[str, float] = field(default_factory=dict)
    """The step's metrics as ``train`` logs them (see ``train``)."""


@dataclass
class _Collected:
    batch: int
    behavior_step: int
    actor: List[Dict[str, Any]]
    critic: List[List[Dict[str, Any]]]  # one list per tree: the sink gets each collection's
    trees: int = 0
    failures: int = 0
    tokens_sampled: int = 0
    outcomes: List[float] = field(default_factory=list)
    seconds: float = 0.0
    prefill_cached: int = 0
    prefill_uncached: int = 0


async def train(
    training_client: Any,
    *,
    model: str,
    problems: Sequence[Problem],
    collector_for: CollectorFor,
    steps: int,
    learning_rate: float,
    critic_sink: Optional[CriticSink] = None,
    async_depth: int = 1,
    profile: Optional[str] = None,
    loss_fn: str = "ppo",
    loss_fn_config: Optional[Mapping[str, float]] = PPO_CLIP,
    workspace_for: Optional[Callable[[Problem], Workspace]] = None,
    min_abs_advantage: Optional[float] = None,
    allow_partial: bool = False,
    on_step: Optional[Callable[[StepReport], None]] = None,
    problems_per_step: int = 1,
    log_path: Optional[Union[str, "os.PathLike[str]"]] = None,
    wandb_project: Optional[str] = None,
    wandb_name: Optional[str] = None,
    eval_problems: Sequence[Problem] = (),
    eval_every: int = 0,
    checkpoint_every: int = 0,
    checkpoint_path: Optional[Union[str, "os.PathLike[str]"]] = None,
    checkpoint_name: str = "focus",
    ttl_seconds: Optional[int] = None,
    rolling_save_every: int = 0,
    rolling_ttl_seconds: int = 7200,
    resume_from: Optional[Union[str, "os.PathLike[str]", TrainCheckpoint]] = None,
    share_warmup_prompt: bool = True,
    layout: str = "spans",
    visitation_weights: bool = False,
    temperature: float = 1.0,
    num_substeps: int = 1,
    kl_penalty_coef: float = 0.0,
    kl_discount_factor: float = 0.0,
    kl_reference_client: Any = None,
    compute_post_kl: bool = False,
    state_loaded: bool = False,
    shuffle: bool = True,
    seed: int = 0,
    num_groups_to_log: int = 4,
    rollout_json_export: bool = True,
    critic_rule: Optional[CriticRule] = None,
) -> List[StepReport]:
    """Run the one-step asynchronous Tinker loop and return one ``StepReport`` per update.

    Each update collects trees from a frozen sampler, trains on them, and publishes a new
    sampler, overlapping the next collection with the current update. With
    ``async_depth=1`` (the default) the collection of batch b+1 starts, from the newest
    published sampler, before update b: each batch is at most one update behind the learner
    and every batch trains exactly once. ``async_depth=d`` keeps d collections ahead of the
    learner: the first d batches start at once from the starting weights, and batch b+d
    starts, from the newest sampler, before update b, so each batch is at most d updates
    behind (tinker-cookbook's ``max_steps_off_policy`` bound). ``async_depth=0`` publishes a
    fresh sampler before each collection (no lag, no overlap).

    Each update trains on ``problems_per_step`` trees, collected concurrently from the same
    sampler. Tree i < k = ``problems_per_step`` of batch b is the problem at position
    ``p = b * k + i`` of the run, with ``group_index = p``: epoch ``e = p // len(problems)``
    goes through the whole list once, in an order shuffled from ``seed`` and ``e`` (in list
    order with ``shuffle=False``). Each tree gets its own ``TinkerPolicy`` around the batch's
    sampler (format ``PolicyFormat.resolve(model, profile=profile)``, loaded once; requests
    that bring no sampling parameters sample at ``temperature``) and a fresh collector from
    ``collector_for(policy, problem)``; from the second epoch on, its search's seed is
    mixed with the epoch, so a problem seen again (even in the same batch, when
    ``problems_per_step`` exceeds the list) is sampled with fresh seeds. After each update, each
    collection hands its critic records to ``critic_sink`` with ``behavior_step`` and
    ``learner_step`` added, and ``on_step`` receives the ``StepReport``.

    A tree's warmup rollouts all start from the root prompt, so their first requests go to
    the sampler as one ``sample(num_samples=warmup)`` request
    (``TinkerPolicy.share_first_prompt``).

    Metrics: each ``StepReport.stats`` holds ``trees``, ``rollouts``, ``failures``,
    ``reward_mean`` and ``success_rate`` (outcome reward of the finished rollouts, the sum
    of their environment rewards; success is an outcome > 0), ``abs_advantage_mean``,
    ``tokens_sampled``, ``tokens_trained``, ``policy_lag``, ``loss`` (Tinker's
    ``loss:sum``), ``kl_sample_train_v1`` and ``kl_sample_train_v2`` (sampler-versus-learner
    KL over the trained tokens), ``time_collect_s``, ``time_update_s`` and
    ``time_step_s``, and the billed tokens by kind, as tinker-cookbook's ``TokenUsage``
    counts them: ``tokens/sampled``, ``tokens/prefill_cached`` and
    ``tokens/prefill_uncached`` (each sample request's prompt, split by the service's
    prefix-cache hits) and ``tokens/trained`` (the datums' input tokens). Evaluation adds ``eval/reward_mean``, ``eval/success_rate`` and
    ``eval/problems``: one unbranched rollout per held-out problem (``Independent(1)``, no
    critic), scored by outcome, before the first update (a ``log_path`` row with step 0),
    after every ``eval_every``-th update and after the last.

    If the loop stops early (the awaiting task is cancelled, or a collection, update, sink
    or ``on_step`` raises), an outstanding collection is cancelled and joined before the
    exception propagates. An update in flight when the task is cancelled is finished first,
    so gradients are never left without their optimizer step; nothing is trained twice or
    half.

    Example:
        <!-- not run: needs a Tinker training client (a Tinker API key) -->
        ```python
        from focus.integrations import JsonlDirectory
        from focus.integrations.tinker import train

        reports = await train(
            training_client,
            model=model,
            problems=problems,
            collector_for=collector_for,
            steps=3,
            learning_rate=1e-5,
            profile="token_chunk",
            critic_sink=JsonlDirectory("critic-targets"),
        )
        ```

    Args:
        training_client: A Tinker ``TrainingClient``. On resume ``train`` loads the
            checkpoint's weights and optimizer into it (``load_state_with_optimizer``,
            which the SDK deprecates), whatever it held, unless ``state_loaded``; it
            refuses one of another base model or LoRA rank.
        model: The model directory or Hugging Face id, for the tokenizer and chat template.
        problems: The training problems, one epoch after another (see above).
        collector_for: Builds the collector for each problem.
        steps: The number of updates, counted from the start of the run.
        learning_rate: Adam's learning rate.
        critic_sink: Receives each tree's critic records; None drops them.
        async_depth: How many collections run ahead of the learner (the most updates a
            batch trains behind the weights it was sampled with); 0 none.
        profile: The parser profile of the samplers' format (see
            ``PolicyFormat.resolve``).
        loss_fn: Tinker's loss function: ``importance_sampling``, ``ppo``, ``cispo``,
            ``dro``, ``gspo`` or ``stable_reinforce`` (those the SDK offers); another name,
            or ``cross_entropy``/``custom`` (which train no advantages), is refused before
            any request, and a loss the service rejects ends ``train`` with its message.
        loss_fn_config: The loss's configuration. The default ``PPO_CLIP`` (ratio clip
            1 ± 0.2) is sent with ``ppo`` and ``cispo``; with another loss it, like None,
            means the loss's own default (the service's). ``importance_sampling`` takes none,
            ``ppo`` and ``cispo`` only ``clip_low_threshold`` < ``clip_high_threshold``.
        workspace_for: Gives each problem its own ``Workspace``, as in
            ``collect_records``.
        min_abs_advantage: Drops actor records whose advantage is smaller in magnitude.
        allow_partial: Keep a collection with failures; a tree whose every rollout failed
            is left out of its batch (its failures counted), and only a batch left with no
            actor records stops the run.
        on_step: Called with each ``StepReport``.
        problems_per_step: Trees per update.
        log_path: Appends each step's stats as one JSON line, ``{"step": learner_step + 1,
            ...}``.
        wandb_project: Also logs the stats with ``wandb.log`` (wandb must be installed),
            in a run whose config holds the settings a checkpoint records.
        wandb_name: The wandb run's name (the cookbook's ``wandb_name``); None wandb's.
        eval_problems: Held-out problems for evaluation (needs ``eval_every``).
        eval_every: Evaluate the starting weights (logged as step 0, not reported), after
            every N-th update, and after the last one; 0 never (then ``eval_problems``
            must be empty).
        checkpoint_every: Save the training state after every N-th update; 0 never.
        checkpoint_path: The JSONL file each ``TrainCheckpoint`` line is appended to; the
            final state is saved too when the last update is not a multiple of
            ``checkpoint_every``. When it already holds a checkpoint, ``train`` resumes
            from its last one (a rerun of the same command continues the run). The run's
            files hold one run: a start drops the ``log_path`` rows, ``JsonlDirectory``
            critic files and transcripts of the updates after its checkpoint (all of them
            when there is none yet), which it writes again. Each step writes its row and
            critic files before its checkpoint line, so through a kill at any moment each
            is written exactly once. The checkpoint records the settings a resume must
            keep (``TrainCheckpoint.settings``); a resume with others is refused, naming
            them.
        checkpoint_name: The prefix of the saved states' names
            (``f"{checkpoint_name}-{step:06d}"``).
        ttl_seconds: The periodic checkpoints' expiry in seconds, 3600 (the SDK's
            minimum) to 10 years (the cookbook's ``ttl_seconds``); None never. The final
            checkpoint never expires.
        rolling_save_every: Also save the training state (no sampler export) after every
            N-th update between periodic ones, named ``...-rolling``; 0 never (the
            cookbook's ``rolling_save_every``).
        rolling_ttl_seconds: The rolling checkpoints' expiry (as ``ttl_seconds``).
        resume_from: A checkpoint file or ``TrainCheckpoint`` to continue from instead of
            ``checkpoint_path``'s last: the first batch collected is its ``next_batch``,
            learner steps go on from its ``learner_step`` (its sampler holds the resumed
            weights, lag 0), and the problem list and ``problems_per_step`` must be the
            ones checkpointed.
        share_warmup_prompt: False sends the warmup rollouts' first requests one by one.
        layout: ``"spans"`` or ``"paths"`` (one datum per root-to-leaf path with per-token
            advantages: the same gradient from fewer tokens, since Tinker's losses sum over
            tokens).
        visitation_weights: Multiply each advantage by its edge's visitation factor
            (``ActorSample.visitation``); False (the default) trains on the unweighted
            advantage.
        temperature: The sampling temperature of requests that bring no sampling
            parameters (an agent without ``sampling``): 1.0, the policy's own
            distribution, as tinker-cookbook samples; the library's ``SamplingParams``
            default (0.7) stays for other uses.
        num_substeps: Optimizer steps per update, as tinker-cookbook's: the batch's datums
            in that many consecutive chunks, one forward_backward and optim_step each, all
            submitted back to back.
        kl_penalty_coef: The KL penalty against a reference model (tinker-cookbook's
            ``kl_penalty_coef``; 0 none): each generated token's advantage gains
            ``kl_penalty_coef * (mean d - d)``, d its sampled logprob minus the reference's,
            the mean over the batch's generated tokens; the step logs ``kl_policy_base``
            (mean d).
        kl_discount_factor: With the penalty, turn each token's term into the discounted
            sum of its own and the later tokens' terms (0: none).
        kl_reference_client: The reference model's ``tinker.SamplingClient`` (which
            scores each datum's sequence with ``compute_logprobs``), needed with a
            penalty: for the base model, ``service_client.create_sampling_client(
            base_model=...)``, in place of the cookbook's ``kl_reference_config``.
        compute_post_kl: After each update, score the datums with a sampler of the new
            weights and log ``kl_pre_post_v1`` and ``kl_pre_post_v2`` (the cookbook's
            ``compute_post_kl``); the next collection from those weights samples from it.
        state_loaded: The training client was created from the checkpoint's state, the
            SDK's supported way to resume:
            ``service_client.create_training_client_from_state_with_optimizer(
            load_checkpoint(checkpoint_path).state_path)``; ``train`` then loads nothing
            into it. Needs a checkpoint to resume.
        shuffle: Shuffle the problem order of each epoch (from ``seed``); False takes the
            list in order every epoch.
        seed: The run's seed for the shuffled order.
        num_groups_to_log: With ``log_path``, write the HTML page of each batch's first N
            trees (refined values and each segment's text, as ``focus-go view`` shows a
            tree) to ``iteration_NNNNNN/train_tree_<i>.html`` beside it, as the cookbook's
            ``num_groups_to_log``; 0 never.
        rollout_json_export: With ``log_path``, write one JSON line per finished rollout of
            each batch (``iteration``, ``group_index``, ``problem_id``, ``node_id``,
            ``return``, ``done``, ``segments``, ``tree_tokens_sampled``) to
            ``iteration_NNNNNN/rollouts.jsonl`` beside it, as the cookbook's
            ``rollout_json_export``.
        critic_rule: Sets each tree's ``critic_weight`` and estimator (``DirectBranchTd`` or
            ``TreeGroupBaseline``) from the critic's reliability measured on the batches
            finished before its batch started (``focus_go.critic_rule.CriticRule``,
            docs/signal.md §R), over the collector's own ``reward``; it observes every
            batch's trees. None (the default) keeps the collectors' settings.

    Returns:
        One report per update.
    """
    from ...generation.format import PolicyFormat
    from .._outcomes import TreeOutcomes, evaluate_outcome

    problems, eval_problems = list(problems), list(eval_problems)
    _check_arguments(
        steps=steps, critic_rule=critic_rule, async_depth=async_depth, problems_per_step=problems_per_step,
        problems=problems, eval_problems=eval_problems, eval_every=eval_every, checkpoint_every=checkpoint_every,
        checkpoint_path=checkpoint_path, rolling_save_every=rolling_save_every, ttl_seconds=ttl_seconds,
        rolling_ttl_seconds=rolling_ttl_seconds, temperature=temperature, num_substeps=num_substeps,
        kl_penalty_coef=kl_penalty_coef, kl_discount_factor=kl_discount_factor,
        kl_reference_client=kl_reference_client, seed=seed, learning_rate=learning_rate, loss_fn=loss_fn, layout=layout,
    )
    config = _loss_config(loss_fn, loss_fn_config)
    transcripts = _Transcripts(log_path, num_groups_to_log, rollout_json_export)
    # What a resume must train with too; the checkpoint records it.
    settings = {
        "profile": profile, "loss_fn": loss_fn, "loss_fn_config": config, "learning_rate": float(learning_rate),
        "layout": layout, "visitation_weights": bool(visitation_weights), "num_substeps": num_substeps,
        "kl_penalty_coef": float(kl_penalty_coef), "kl_discount_factor": float(kl_discount_factor),
    }
    order_name = f"shuffled, seed {seed}" if shuffle else "in order"
    first_batch, learner_step = 0, 0  # learner_step: updates applied so far
    resume: Optional[TrainCheckpoint] = None
    if resume_from is not None:
        resume = resume_from if isinstance(resume_from, TrainCheckpoint) else load_checkpoint(resume_from)
    elif checkpoint_path is not None and _has_checkpoint(checkpoint_path):
        # A restart of the same command: go on from the run's last checkpoint.
        resume = load_checkpoint(checkpoint_path)
    if resume is not None:
        if resume.problems_per_step != problems_per_step:
            raise ConfigError(
                f"train: resume_from was saved with problems_per_step={resume.problems_per_step}, got {problems_per_step}"
            )
        if resume.problems != len(problems) or resume.problem_ids != _problem_ids(problems):
            raise ConfigError("train: resume_from was saved with another problem list (ids or order differ)")
        if resume.order is not None and resume.order != order_name:
            raise ConfigError(f"train: resume_from was saved with the problem order {resume.order!r}, got {order_name!r} (shuffle, seed)")
        _check_client(training_client, resume)
        _check_settings(resume, settings)
        first_batch, learner_step = resume.next_batch, resume.learner_step
    _check_min_abs_advantage(min_abs_advantage)  # validate the threshold before any work
    _types()  # fail before any collection when the SDK is missing
    if steps <= first_batch:
        return []
    if state_loaded and resume is None:
        raise ConfigError("train: state_loaded is set but there is no checkpoint to resume (resume_from, checkpoint_path)")
    _check_wandb(wandb_project)
    from ...generation.tinker import TinkerPolicy
    from ...generation.types import SamplingParams

    fmt = PolicyFormat.resolve(model, profile=profile)  # a bad profile fails before any request
    try:
        if resume is not None and not state_loaded:
            # Whatever the client held, train from the checkpoint's weights and optimizer.
            await _load_state(training_client, resume)
        if resume is not None or checkpoint_path is not None:
            # The run's folder holds one run: the rows, critic files and transcripts of the
            # steps after the checkpoint (all of them, before the first) are written again,
            # so drop those an earlier attempt left.
            if log_path is not None:
                # A fresh start evaluates step 0 again (when it evaluates): its row goes too.
                _truncate_log(log_path, learner_step if learner_step or not eval_every else -1)
            if critic_sink is not None:
                _truncate_sink(critic_sink, learner_step)
            transcripts.drop_from(first_batch)
    except BaseException:
        fmt.codec.tokenizer.close()
        raise
    base_model, lora_rank = _client_identity(training_client)
    k = problems_per_step
    # Samplers record stability information when the loss trains on it, as the SDK
    # documents for stable_reinforce and tinker-cookbook sets (records_stability_info).
    stability = loss_fn == "stable_reinforce"

    sampling = SamplingParams(temperature=float(temperature))
    order = _Order(len(problems), seed if shuffle else None)
    rule_fits: Dict[int, List[Any]] = {}  # batch -> its trees' CriticFit, for critic_rule

    async def collect_tree(index: int, sampler: Any) -> Any:
        problem = problems[order.index(index)]
        policy = TinkerPolicy(sampler, model=model, format=fmt, default_params=sampling)
        try:
            collector = collector_for(policy, problem)
            epoch = index // len(problems)
            if epoch:
                # Fresh sampling seeds for a problem seen again.
                collector.search = dataclasses.replace(collector.search, seed=_epoch_seed(collector.search.seed, epoch))
            on_state = transcripts.on_state(*divmod(index, k))
            if critic_rule is not None:  # kappa and estimator from the batches finished so far
                critic_rule.apply(collector)
                on_state = _fit_into(rule_fits.setdefault(index // k, []), collector.reward, on_state)
            warmup = _warmup(collector)
            if warmup > 1 and share_warmup_prompt:
                policy.share_first_prompt(warmup)
            # Datums need no response text: no tokenizer, no decoding.
            try:
                collected = await _collect(
                    collector, problem, group_index=index, workspace_for=workspace_for, allow_partial=allow_partial,
                    min_abs_advantage=min_abs_advantage, layout=layout, visitation_weights=visitation_weights,
                    on_state=on_state,
                )
            except CollectionError as exc:
                if not allow_partial:
                    raise
                # Every rollout of the tree failed: with allow_partial the batch trains on
                # its other trees (as the cookbook drops a failed group); collect decides.
                prefill = (policy.prompt_tokens, policy.prompt_cache_hit_tokens)
                return [], [], exc, TreeOutcomes([], 0), prefill
            _add_sequence_ids(collected.actor, policy.sequence_ids)
            transcripts.add(*divmod(index, k), problem_id=problem.id, group_index=index, rollouts=collected.rollouts,
                            tokens_sampled=collected.sampled_tokens)
        finally:
            policy.close()
        prefill = (policy.prompt_tokens, policy.prompt_cache_hit_tokens)
        return collected.actor, collected.critic, collected.failures, TreeOutcomes.of(collected), prefill

    async def collect(batch: int, sampler: Any, behavior_step: int) -> _Collected:
        start = time.monotonic()
        trees = await _gather_all([collect_tree(batch * k + i, sampler) for i in range(k)])
        transcripts.flush(batch)
        if critic_rule is not None:
            critic_rule.observe(rule_fits.pop(batch, []))
        failed = [t[2] for t in trees if isinstance(t[2], CollectionError)]
        if len(failed) == len(trees):
            for exc in failed[1:]:
                if getattr(exc, "state", None) is not None:
                    exc.state.close()
            raise failed[0]  # no tree to train on: the first failure stops the run
        for exc in failed:
            if getattr(exc, "state", None) is not None:
                exc.state.close()
        trees = [t if not isinstance(t[2], CollectionError) else (*t[:2], tuple(getattr(t[2], "failures", ()) or ()), *t[3:]) for t in trees]
        out = _Collected(batch, behavior_step, [], [], trees=len(trees) - len(failed))
        for actor, critic, failures, tree, (prompt_tokens, cached) in trees:
            out.prefill_cached += cached
            out.prefill_uncached += prompt_tokens - cached
            out.actor.extend(actor)
            out.critic.append(list(critic))
            out.failures += len(failures)
            out.tokens_sampled += tree.tokens_sampled
            out.outcomes.extend(tree.outcomes)
        out.seconds = time.monotonic() - start
        return out

    async def evaluate() -> Dict[str, float]:
        sampler = await _publish(training_client, stability)

        async def one(problem: Problem) -> float:
            policy = TinkerPolicy(sampler, model=model, format=fmt, default_params=sampling)
            try:
                result = await evaluate_outcome(collector_for(policy, problem), problem, workspace_for=workspace_for)
            finally:
                policy.close()
            return result.outcomes[0]

        values = await _gather_all([one(p) for p in eval_problems])
        return {
            "eval/problems": float(len(values)),
            "eval/reward_mean": _mean(values),
            "eval/success_rate": _mean([1.0 if v > 0 else 0.0 for v in values]),
        }

    saved_step = learner_step if resume is not None else -1

    async def checkpoint(next_batch: int, kind: str) -> None:
        nonlocal saved_step
        assert checkpoint_path is not None
        name = f"{checkpoint_name}-{learner_step:06d}" + ("-rolling" if kind == "rolling" else "")
        ttl = {"periodic": ttl_seconds, "rolling": rolling_ttl_seconds, "final": None}[kind]
        state_path = await _save_state(training_client, name, ttl)
        sampler_path = None if kind == "rolling" else await _save_sampler(training_client, name, ttl)
        record = TrainCheckpoint(
            state_path, learner_step, next_batch, k, len(problems), fingerprint, base_model, lora_rank, order_name,
            sampler_path, kind, settings=settings, totals=dict(totals),
        )
        _append_line(checkpoint_path, record.to_json())
        _fault("checkpointed", learner_step)
        saved_step = learner_step

    post, post_step = None, -1  # the compute_post_kl sampler and its weights' step

    async def _current_sampler() -> Any:
        """A sampler of the current weights: the post-update one when it holds them."""
        return post if post is not None and post_step == learner_step else await _publish(training_client, stability)

    log = _MetricsLog(log_path, wandb_project, wandb_name=wandb_name, config=settings)
    # The run's cumulative counts, from the checkpoint on a resume.
    totals: Dict[str, float] = dict(resume.totals) if resume is not None else {}
    reports: List[StepReport] = []
    fingerprint = _problem_ids(problems)
    # The collections started and not yet trained on, oldest first (batch b at the front).
    ahead: "collections.deque[asyncio.Future[_Collected]]" = collections.deque()
    try:
        if eval_every and learner_step == 0:
            # The starting weights, as the cookbook evaluates at step 0: logged as step 0.
            log.write(0, await evaluate())
        if async_depth:
            sampler, sampler_step = await _publish(training_client, stability), learner_step
            for a in range(first_batch, min(first_batch + async_depth, steps)):
                ahead.append(asyncio.ensure_future(collect(a, sampler, sampler_step)))
        for b in range(first_batch, steps):
            step_start = time.monotonic()
            if async_depth == 0:
                sampler, sampler_step = await _current_sampler(), learner_step
                ahead.append(asyncio.ensure_future(collect(b, sampler, sampler_step)))
            collected = await ahead[0]
            ahead.popleft()
            if not collected.actor:
                ids = [problems[order.index(b * k + i)].id for i in range(k)]
                which = f"problem {ids[0]!r}" if k == 1 else f"problems {ids!r}"
                raise ConfigError(
                    f"train: batch {b} ({which}) has no actor records to train on"
                    + ("" if min_abs_advantage is None else f" with min_abs_advantage={min_abs_advantage}")
                )
            if async_depth and b + async_depth < steps:
                # The next collection overlaps this update, from the newest sampler.
                ahead.append(asyncio.ensure_future(collect(b + async_depth, sampler, sampler_step)))
            update_start = time.monotonic()
            update = asyncio.ensure_future(
                _update(
                    training_client,
                    collected.actor,
                    learning_rate=learning_rate,
                    loss_fn=loss_fn,
                    loss_fn_config=config,
                    num_substeps=num_substeps,
                    kl_reference_client=kl_reference_client,
                    kl_penalty_coef=kl_penalty_coef,
                    kl_discount_factor=kl_discount_factor,
                )
            )
            try:
                result = await asyncio.shield(update)
            except asyncio.CancelledError:
                # Submitted gradients without their optimizer step would leak into the next
                # update: finish the step, then stop.
                await asyncio.gather(update, return_exceptions=True)
                raise
            update_seconds = time.monotonic() - update_start
            metrics = dict(result.metrics or {})
            lag = learner_step - collected.behavior_step
            stats: Dict[str, float] = {
                "trees": float(collected.trees),
                "rollouts": float(len(collected.outcomes)),
                "failures": float(collected.failures),
                "reward_mean": _mean(collected.outcomes),
                "success_rate": _mean([1.0 if v > 0 else 0.0 for v in collected.outcomes]),
                "abs_advantage_mean": _mean([abs(float(r["advantage"])) for r in collected.actor]),
                "tokens_sampled": float(collected.tokens_sampled),
                "tokens_trained": float(result.tokens_trained),
                "policy_lag": float(lag),
                "time_collect_s": collected.seconds,
                "time_update_s": update_seconds,
            }
            if "loss:sum" in metrics:
                stats["loss"] = float(metrics["loss:sum"])
            # Billed tokens by kind, as tinker-cookbook's TokenUsage counts them; the KL
            # reference's scoring requests are prefill too.
            stats["tokens/sampled"] = float(collected.tokens_sampled)
            stats["tokens/prefill_cached"] = float(collected.prefill_cached)
            stats["tokens/prefill_uncached"] = float(collected.prefill_uncached + result.reference_tokens)
            stats["tokens/kl_reference"] = float(result.reference_tokens)
            stats["tokens/trained"] = float(result.input_tokens)
            stats.update(result.kl)
            learner_step += 1
            if compute_post_kl:
                # The post-update sampler scores the datums (the cookbook's compute_post_kl);
                # the next collection that starts from these weights samples from it.
                post, post_step = await _publish(training_client, stability), learner_step
                post_kl, scored = await _post_kl(result.datums, post)
                stats.update(post_kl)
                stats["tokens/prefill_uncached"] += scored
            for key in ("tokens/sampled", "tokens/prefill_cached", "tokens/prefill_uncached", "tokens/trained", "rollouts", "trees"):
                totals[key] = totals.get(key, 0.0) + stats[key]
            stats.update({f"total/{key}": value for key, value in totals.items()})
            if eval_every and (learner_step % eval_every == 0 or b + 1 == steps):
                stats.update(await evaluate())  # on the cadence, and the final weights
            stats["time_step_s"] = time.monotonic() - step_start
            report = StepReport(
                batch=b,
                behavior_step=collected.behavior_step,
                learner_step=learner_step - 1,
                policy_lag=lag,
                metrics=MappingProxyType(metrics),
                trees=collected.trees,
                tokens_sampled=collected.tokens_sampled,
                tokens_trained=result.tokens_trained,
                failures=collected.failures,
                stats=MappingProxyType(stats),
            )
            reports.append(report)
            # The step's row and critic files before its checkpoint: a kill before the
            # checkpoint line redoes the step from the previous one (which drops them), a
            # kill after it finds them written.
            _fault("updated", learner_step)
            log.write(learner_step, stats)
            _fault("logged", learner_step)
            if critic_sink is not None:
                for tree_critic in collected.critic:
                    critic_sink(
                        [dict(r, behavior_step=report.behavior_step, learner_step=report.learner_step) for r in tree_critic]
                    )
            _fault("critic", learner_step)
            if b + 1 == steps:
                pass  # the final checkpoint follows the loop
            elif checkpoint_every and learner_step % checkpoint_every == 0:
                await checkpoint(b + 1, "periodic")
            elif rolling_save_every and learner_step % rolling_save_every == 0:
                await checkpoint(b + 1, "rolling")
            if on_step is not None:
                on_step(report)
            if async_depth and b + async_depth + 1 < steps:
                # The sampler for the collection the next iteration starts (batch b+depth+1).
                sampler, sampler_step = await _current_sampler(), learner_step
        if checkpoint_path is not None and saved_step != learner_step:
            await checkpoint(steps, "final")  # kept indefinitely, whatever checkpoint_every is
        return reports
    finally:
        await _cancel_and_join(ahead)  # no collection outlives the loop
        log.close()
        fmt.codec.tokenizer.close()
