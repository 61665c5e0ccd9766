"""The ``make slime-check`` modes of the flags a Slime user sets on top of launch.sh's
(issue #37): a rollout sample filter, dynamic sampling, reward models (on any scale), the
refused training settings, the KL-loss weight next to focus's reducer, the rollout metrics,
and the multi-turn guide's tool environment. Each is checked against
Slime's own rollout, conversion and advantage code, through modes.py's harness (one
process per mode, run by run.py)."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional

from modes import (
    Cluster,
    Result,
    WORK,
    _focus_rollout,
    check_samples,
    collect,
    expect_refused,
    init_parallel_state,
    init_ray,
    parse,
    rollout_data_of,
    rollout_manager,
    base_argv,
    set_flag,
    train,
)


def mode_sample_filter(res: Result) -> None:
    """--rollout-sample-filter-path slime_check_hooks.remove_first_group: Slime calls the
    filter with the rollout's groups and it marks the first group's element (one tree)
    remove_sample; every sample of that tree must reach Slime's conversion marked, so its
    loss masks are zero there, and no other tree's."""
    import slime_check_hooks

    argv = set_flag(base_argv(batch=2), "--rollout-sample-filter-path", "slime_check_hooks.remove_first_group")
    args = parse(argv)
    cluster = Cluster(args)
    manager = rollout_manager(args)
    data = collect(manager, 0, res)
    check_samples(args, cluster, data, res, focus=True, sources=args.rollout_batch_size)
    res.expect(len(slime_check_hooks.CALLS["filter"]) == 1, "Slime did not call the sample filter once")
    first = min(s.rollout_id for s in data)
    marked = {s.rollout_id for s in data if s.remove_sample}
    res.numbers["removed_samples"] = sum(1 for s in data if s.remove_sample)
    res.numbers["tree_samples"] = sum(1 for s in data if s.rollout_id == first)
    res.expect(marked == {first}, f"samples marked remove_sample belong to rollouts {sorted(marked)}, expected only the first tree's ({first})")
    rd = rollout_data_of(manager, data)
    zeroed = [int(m.sum()) == 0 for m in rd["loss_masks"]]
    removed = [s.rollout_id == first for s in data]
    res.numbers["zero_loss_mask_samples"] = sum(zeroed)
    res.expect(zeroed == removed, "Slime's conversion did not zero exactly the removed tree's loss masks")


def mode_dynamic_sampling_stock(res: Result) -> None:
    """--dynamic-sampling-filter-path naming Slime's stock check_reward_nonzero_std: it
    reads one reward per tree (its success rate), so with one tree per prompt it drops
    every group and the rollout never finishes. The hook must refuse it at its first call,
    naming focus.integrations.slime.tree_has_signal, before any request is sent."""
    argv = set_flag(base_argv(batch=2), "--dynamic-sampling-filter-path",
                    "slime.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std")
    expect_refused(res, parse(argv), "focus.integrations.slime.tree_has_signal",
                   "the rollout ran with the stock zero-std filter on trees")


def _dynamic_sampling(res: Result, n: int) -> None:
    """--dynamic-sampling-filter-path focus.integrations.slime.tree_has_signal with n trees
    per prompt: Slime's rollout fills its batch (it finishes), every kept prompt has a
    tree whose finished rollouts did not all end alike, and the drops are Slime's
    rollout/dynamic_filter metric."""
    argv = set_flag(base_argv(batch=2, n=n), "--dynamic-sampling-filter-path", "focus.integrations.slime.tree_has_signal")
    args = parse(argv)
    cluster = Cluster(args)
    manager = rollout_manager(args)
    data = collect(manager, 0, res)
    check_samples(args, cluster, data, res, focus=True, sources=args.rollout_batch_size * n)
    groups: Dict[Any, bool] = {}
    for s in data:
        differ = bool(s.metadata["focus"]["outcomes_differ"])
        groups[s.group_index] = groups.get(s.group_index, False) or differ
    res.numbers["kept_prompts"] = len(groups)
    res.numbers["kept_prompts_with_signal"] = sum(groups.values())
    res.expect(len(groups) == args.rollout_batch_size, f"{len(groups)} prompts kept, expected {args.rollout_batch_size}")
    res.expect(all(groups.values()), "a kept prompt has no tree whose rollouts ended differently")
    drops = sum(v for k, v in res.numbers["rollout0_metrics"].items() if k.startswith("rollout/dynamic_filter/"))
    res.numbers["dropped_prompts"] = drops
    train(manager, data, res)


def mode_dynamic_sampling_n1(res: Result) -> None:
    """tree_has_signal with one tree per prompt (launch.sh's setting)."""
    _dynamic_sampling(res, 1)


def mode_dynamic_sampling_n2(res: Result) -> None:
    """tree_has_signal with two trees per prompt."""
    _dynamic_sampling(res, 2)


def _reward_model(res: Result, flags: List[str], calls: Callable[[], int], expect_successes: Optional[str],
                  scale: Optional[tuple] = None) -> None:
    """A Slime reward flag scores each finished rollout of the trees: Slime's rollout runs
    (its own list-branch call of the RM, with the tree's samples, does not fail), the RM
    is called once per rollout that finished done, and the trees' outcomes are its
    rewards (``expect_successes``: "all" or "none"), so its rewards reached the search
    and the advantages; then the train side."""
    argv = base_argv(batch=2)
    for i in range(0, len(flags), 2):
        argv = set_flag(argv, flags[i], flags[i + 1])
    args = parse(argv)
    cluster = Cluster(args)
    manager = rollout_manager(args)
    data = collect(manager, 0, res)
    check_samples(args, cluster, data, res, focus=True, sources=args.rollout_batch_size)
    trees: Dict[Any, Any] = {}
    for s in data:
        trees[s.rollout_id] = s.metadata["focus"]
    done = sum(f["finished_rollouts"] - f["truncated_rollouts"] for f in trees.values())
    res.numbers["done_rollouts"] = done
    res.numbers["rm_calls"] = calls()
    res.numbers["tree_outcomes"] = [(f["finished_rollouts"], f["successes"]) for f in trees.values()]
    res.expect(calls() == done, f"the reward model was called {calls()} times for {done} rollouts that finished done")
    if expect_successes == "all":
        res.expect(all(f["successes"] == f["finished_rollouts"] - f["truncated_rollouts"] for f in trees.values()),
                   "a done rollout did not get the RM's reward 1")
    elif expect_successes == "none":
        res.expect(all(f["successes"] == 0 for f in trees.values()), "a rollout succeeded although the RM gave 0")
    if scale is not None:  # an RM outside [0, 1]: every finished rollout kept, none a failure
        budget = int(os.environ["FOCUS_BUDGET"])
        res.expect(all(f["finished_rollouts"] == budget for f in trees.values()),
                   f"a tree finished fewer rollouts than its budget {budget}: {res.numbers['tree_outcomes']}")
        low = min(float(s.reward) for s in data)
        res.numbers["lowest_advantage"] = low
        res.expect(scale[0] >= 0 or low < 0, "no sample has a negative advantage although the RM gave negative rewards")
    train(manager, data, res)


def mode_custom_rm(res: Result) -> None:
    """--custom-rm-path slime_check_hooks.rm (Slime's single-sample signature, reward 1)."""
    import slime_check_hooks

    _reward_model(res, ["--custom-rm-path", "slime_check_hooks.rm"], lambda: len(slime_check_hooks.CALLS["rm"]), "all")
    calls = slime_check_hooks.CALLS["rm"]
    res.expect(all(r and label is not None for _p, r, label in calls), "the RM got a sample without response or label")


def mode_custom_rm_batched(res: Result) -> None:
    """--custom-rm-path slime_check_hooks.batched_rm (Slime's batched signature, reward 0)."""
    import slime_check_hooks

    _reward_model(res, ["--custom-rm-path", "slime_check_hooks.batched_rm"],
                  lambda: sum(slime_check_hooks.CALLS["batched_rm"]), "none")


def mode_rm_type(res: Result) -> None:
    """--rm-type math: Slime's own rule RM (async_rm's math grader, counted) scores each
    rollout that finished done."""
    from slime.rollout import rm_hub

    graded: List[int] = []
    real = rm_hub.grade_answer_verl

    def counting(*a: Any, **k: Any) -> Any:
        graded.append(1)
        return real(*a, **k)

    rm_hub.grade_answer_verl = counting
    _reward_model(res, ["--rm-type", "math"], lambda: len(graded), None)


def mode_custom_rm_plus_minus_one(res: Result) -> None:
    """--custom-rm-path slime_check_hooks.rm_plus_minus_one (rewards -1 and +1, outside the
    collector's [0, 1]): every finished rollout trains, the -1 answers included."""
    import slime_check_hooks

    _reward_model(res, ["--custom-rm-path", "slime_check_hooks.rm_plus_minus_one"],
                  lambda: len(slime_check_hooks.CALLS["rm_plus_minus_one"]), None, scale=(-1.0, 1.0))


def mode_rm_type_dapo(res: Result) -> None:
    """--rm-type dapo --reward-key score: Slime's own DAPO rule RM (score 1 or -1) scores
    each rollout that finished done, and every finished rollout trains."""
    from slime.rollout import rm_hub

    scored: List[int] = []
    real = rm_hub.compute_score_dapo

    def counting(*a: Any, **k: Any) -> Any:
        scored.append(1)
        return real(*a, **k)

    rm_hub.compute_score_dapo = counting
    _reward_model(res, ["--rm-type", "dapo", "--reward-key", "score"], lambda: len(scored), None, scale=(-1.0, 1.0))


# The Slime settings that would train something other than the tree's advantages: each
# must stop the rollout at the hook's first call, naming the flag (docs/slime.md,
# "Training settings").
_REFUSED_SETTINGS = [
    (["--loss-type", "sft_loss"], "--loss-type sft_loss"),
    (["--advantage-estimator", "ppo"], "--advantage-estimator ppo"),
    (["--kl-coef", "0.1"], "--kl-coef 0.1"),
    (["--use-kl-loss", "--kl-loss-coef", "0.1"], "--calculate-per-token-loss"),
    (["--entropy-coef", "0.01"], "--calculate-per-token-loss"),
]


def mode_training_refusals(res: Result) -> None:
    """Each of _REFUSED_SETTINGS on top of launch.sh's flags, through Slime's own argument
    parser and rollout: refused before any request, naming the flag. A setting Slime's
    parser itself rejects in this harness is noted, not counted."""
    ref = WORK / "ref-checkpoint"  # Slime checks that --ref-load exists with a KL
    ref.mkdir(parents=True, exist_ok=True)
    refused = []
    for flags, names in _REFUSED_SETTINGS:
        argv = set_flag(base_argv(batch=1), "--ref-load", str(ref))
        i = 0
        while i < len(flags):
            if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
                argv, i = set_flag(argv, flags[i], flags[i + 1]), i + 2
            else:
                argv, i = set_flag(argv, flags[i]), i + 1
        try:
            args = parse(argv)
        except (SystemExit, Exception) as exc:  # noqa: BLE001 - Slime's own validation
            res.notes.append(f"{' '.join(flags)}: Slime's parser rejected it: {type(exc).__name__}: {exc}")
            continue
        sub = Result(res.mode)
        expect_refused(sub, args, names, f"the rollout ran with {' '.join(flags)}")
        res.failures.extend(f"{' '.join(flags)}: {f}" for f in sub.failures)
        refused.append(" ".join(flags))
    res.numbers["refused"] = refused


def _loss_terms(args: Any, rd: Dict[str, Any], logits_of: Any) -> Dict[str, float]:
    """Slime's loss_function over every micro-batch of rd: its reported pg_loss, kl_loss
    and entropy_loss, summed over the micro-batches."""
    from slime.backends.megatron_utils.data import get_batch, get_data_iterator
    from slime.backends.megatron_utils.loss import loss_function

    keys = ["tokens", "multimodal_train_inputs", "packed_seq_params", "total_lengths", "response_lengths", "loss_masks",
            "log_probs", "ref_log_probs", "values", "advantages", "returns", "rollout_log_probs", "teacher_log_probs",
            "rollout_mask_sums"]
    out = {"pg_loss": 0.0, "kl_loss": 0.0, "entropy_loss": 0.0}
    iterator = get_data_iterator(rd)[0]
    for mbs, gbs in zip(rd["num_microbatches"], rd["global_batch_sizes"]):
        for _ in range(mbs):
            batch = get_batch(iterator, keys, args.data_pad_size_multiplier, args.allgather_cp)
            _loss, _normalizer, log = loss_function(args, batch, mbs, gbs, logits_of(batch["tokens"]))
            for name in out:
                out[name] += float(log["values"][1 + log["keys"].index(name)])
    return out


def mode_kl_loss_share(res: Result) -> None:
    """--use-kl-loss --kl-loss-coef 0.1 --entropy-coef 0.01 on one tree (one rollout id),
    through Slime's own loss_function on a random-logits model: the KL term's and the
    entropy term's shares of the loss with focus's sum_policy_tokens and
    --calculate-per-token-loss must equal their shares under Slime's default reducer
    (a per-rollout mean) to 1%; with sum_policy_tokens alone (what the hook refuses) the
    KL share falls by the tree's trained tokens."""
    import torch

    from modes import _prefix_model

    ref = WORK / "ref-checkpoint"
    ref.mkdir(parents=True, exist_ok=True)
    argv = set_flag(base_argv(batch=1), "--use-kl-loss")
    for flag, value in (("--kl-loss-coef", "0.1"), ("--entropy-coef", "0.01"), ("--ref-load", str(ref))):
        argv = set_flag(argv, flag, value)
    argv = set_flag(set_flag(argv, "--use-rollout-logprobs"), "--calculate-per-token-loss")
    args = parse(argv)
    cluster = Cluster(args)  # held to the end: its simulated server closes when the Cluster is collected
    manager = rollout_manager(args)
    data = collect(manager, 0, res)
    init_parallel_state()
    init_ray()
    from slime.backends.megatron_utils.loss import compute_advantages_and_returns

    rd = rollout_data_of(manager, data)
    gen = torch.Generator().manual_seed(7)
    rd["ref_log_probs"] = [lp + 0.2 * torch.randn(lp.shape, generator=gen) for lp in rd["rollout_log_probs"]]
    compute_advantages_and_returns(args, rd)
    ids = sorted({int(t) for seq in rd["tokens"] for t in seq.tolist()})
    index = torch.full((max(ids) + 1,), -1, dtype=torch.long)
    index[torch.tensor(ids)] = torch.arange(len(ids))
    rd["tokens"] = [index[t] for t in rd["tokens"]]
    _weight, logits_of = _prefix_model(len(ids))

    def shares(reducer: Optional[str], per_token: bool) -> Dict[str, float]:
        saved = (args.custom_pg_loss_reducer_function_path, args.calculate_per_token_loss)
        args.custom_pg_loss_reducer_function_path, args.calculate_per_token_loss = reducer, per_token
        try:
            t = _loss_terms(args, rd, logits_of)
        finally:
            args.custom_pg_loss_reducer_function_path, args.calculate_per_token_loss = saved
        kl, ent = args.kl_loss_coef * t["kl_loss"], args.entropy_coef * t["entropy_loss"]
        total = abs(t["pg_loss"]) + abs(kl) + abs(ent)
        return {"kl_share": abs(kl) / total, "entropy_share": abs(ent) / total, **t}

    reducer = "focus.integrations.slime.sum_policy_tokens"
    default, ours, alone = shares(None, False), shares(reducer, True), shares(reducer, False)
    res.numbers |= {"slime_default": default, "sum_per_token": ours, "sum_alone": alone}
    res.expect(default["kl_share"] > 0, "the KL term is zero (the check measured nothing)")
    for name in ("kl_share", "entropy_share"):
        res.expect(abs(ours[name] - default[name]) <= 0.01 * default[name],
                   f"{name}: {ours[name]} with sum_policy_tokens and --calculate-per-token-loss, {default[name]} by default")
    res.expect(alone["kl_share"] < default["kl_share"] / 10, "sum_policy_tokens alone kept the KL share (the refusal is moot)")
    res.numbers["generate_requests"] = cluster.generate_requests()


def mode_metrics(res: Result) -> None:
    """Slime's rollout metrics on trees, with --rollout-max-response-len 80 so that some
    rollouts are cut and others finish (a tree whose warmup rollouts all end alike, as all
    cut ones do, stops there under the default stop_alike and reuses no prefix): Slime's own compute_metrics_from_samples gives
    rollout/prefix_cache_hit_rate as the trees' prefix reuse (reused prefix tokens over
    those plus the generated ones, from the trees' stats), and log_rollout adds
    rollout/focus/truncated_ratio and rollout/focus/response_len/* per finished rollout,
    each path within the cap."""
    from slime.observability import logging_utils
    from slime.observability.rollout_metrics import compute_metrics_from_samples

    logged: List[Dict[str, Any]] = []
    real_log = logging_utils.log
    logging_utils.log = lambda a, metrics, step_key=None: (logged.append(dict(metrics)), real_log(a, metrics, step_key=step_key))[1]
    cap = 80
    argv = set_flag(base_argv(batch=2), "--rollout-max-response-len", str(cap))
    os.environ["FOCUS_SEGMENT_TOKENS"] = "32"
    args = parse(argv)
    cluster = Cluster(args)
    manager = rollout_manager(args)
    data = collect(manager, 0, res)
    res.numbers["generate_requests"] = cluster.generate_requests()
    slime_metrics = compute_metrics_from_samples(args, data)
    ours = res.numbers["rollout0_metrics"]
    hit = slime_metrics["prefix_cache_hit_rate"]
    res.numbers["slime_prefix_cache_hit_rate"] = round(hit, 6)
    res.numbers["slime_truncated_ratio_per_segment"] = slime_metrics["truncated_ratio"]
    res.numbers["focus_metrics"] = {k: v for k, v in ours.items() if k.startswith("rollout/focus/")}
    res.expect(hit > 0, "Slime's prefix_cache_hit_rate is 0: the trees' prefix reuse did not reach it")
    res.expect(hit < 1, f"Slime's prefix_cache_hit_rate is {hit}")
    ratio = ours.get("rollout/focus/truncated_ratio")
    res.expect(ratio is not None and 0 < ratio <= 1, f"rollout/focus/truncated_ratio is {ratio} with paths capped at {cap} tokens")
    longest = ours.get("rollout/focus/response_len/max")
    res.expect(longest is not None and 0 < longest <= cap, f"rollout/focus/response_len/max is {longest}, the cap is {cap}")
    # What Slime logged for the rollout: its own truncation ratio and response lengths are
    # the per-path ones, its per-sample ones kept as rollout/focus/segment_*.
    rollout_rows = [m for m in logged if "rollout/truncated_ratio" in m]
    if res.expect(len(rollout_rows) == 1, f"Slime logged {len(rollout_rows)} rollout rows"):
        row = rollout_rows[0]
        res.numbers["logged_truncated_ratio"] = row["rollout/truncated_ratio"]
        res.numbers["logged_response_len_mean"] = row.get("rollout/response_len/mean")
        res.expect(row["rollout/truncated_ratio"] == ratio, f"Slime logged truncated_ratio {row['rollout/truncated_ratio']}, per path {ratio}")
        res.expect(row.get("rollout/response_len/mean") == ours.get("rollout/focus/response_len/mean"),
                   "Slime's logged response_len/mean is not the per-path mean")
        res.expect(row.get("rollout/focus/segment_truncated_ratio") == slime_metrics["truncated_ratio"],
                   "the per-sample truncation ratio was not kept as rollout/focus/segment_truncated_ratio")
    logging_utils.log = real_log
    # Each tree's generated tokens are its trained tokens (spans layout: each segment's
    # tokens trained once), so the reuse Slime sees can be checked from the samples.
    trained = sum(sum(s.loss_mask) for s in data)
    cached = sum(s.prefix_cache_info.cached_tokens for s in data)
    total = sum(s.prefix_cache_info.total_prompt_tokens for s in data)
    res.expect(total - cached == trained, f"prefix_cache_info counts {total - cached} generated tokens, the samples train {trained}")


def mode_tool_env(res: Result) -> None:
    """docs/slime.md's multi-turn guide: --custom-generate-function-path naming
    make_generate over examples/calculator_env.py's ToolEnv (whole turns, the format
    inferred from --hf-checkpoint) through Slime's rollout and train side: the checks, and
    the trees have tool turns (a sample whose response holds conditioning tokens)."""
    argv = set_flag(base_argv(batch=2), "--custom-generate-function-path", "slime_check_hooks.tool_generate")
    data = _focus_rollout(res, argv, prompt_ids=False)
    tool_turns = sum(1 for s in data if 0 in s.loss_mask[: max(0, len(s.loss_mask) - 1)] and 1 in s.loss_mask)
    res.numbers["samples_with_tool_results"] = tool_turns
    res.expect(tool_turns > 0, "no sample holds a tool result (conditioning tokens inside a trained response)")


def _kept_nodes(partial: str) -> Dict[str, Any]:
    """What a partial tree keeps: its finished rollouts, generated tokens and the exact
    contexts of its nodes that generated tokens."""
    import json

    nodes = json.loads(partial)["nodes"]
    contexts: Dict[int, List[int]] = {}
    kept = {"rollouts": 0, "tokens": 0, "contexts": set()}
    for n in nodes:
        tokens = [t for span in n["spans"] for t in span["tokens"]]
        contexts[n["id"]] = (contexts[n["parent"]] if n["parent"] >= 0 else []) + tokens
        if n["id"] == 0 or n["failed"]:
            continue
        generated = sum(1 for span in n["spans"] for m in span["trainable"] if m)
        kept["tokens"] += generated
        kept["rollouts"] += 1 if (n["done"] or n["truncated"]) else 0
        if generated:
            kept["contexts"].add(tuple(contexts[n["id"]]))
    return kept


def mode_partial_rollout_resume(res: Result) -> None:
    """--partial-rollout --mask-offpolicy-in-partial-rollout with over-sampling: the trees
    Slime aborts keep their partial tree with their source sample (Slime's abort records
    start_rollout_id), and the next rollout resumes them: each resumed tree holds every
    node the aborted one kept, its rollouts stay within the budget, exactly the earlier
    segments' loss masks are zero, and the generated tokens saved against a restart are
    reported."""
    os.environ["FOCUS_BUDGET"], os.environ["FOCUS_WARMUP"] = "16", "4"
    argv = set_flag(base_argv(batch=2), "--over-sampling-batch-size", "4")
    argv = set_flag(argv, "--partial-rollout")
    argv = set_flag(argv, "--mask-offpolicy-in-partial-rollout")
    args = parse(argv)
    cluster = Cluster(args)
    manager = rollout_manager(args)
    data = collect(manager, 0, res)
    check_samples(args, cluster, data, res, focus=True, sources=args.rollout_batch_size)

    partials: Dict[int, Dict[str, Any]] = {}
    for group in manager.data_source.buffer:
        for element in group:
            metadata = getattr(element, "metadata", None) or {}
            if "focus_partial_tree" in metadata:
                partials[element.index] = _kept_nodes(metadata["focus_partial_tree"])
                res.expect(metadata.get("start_rollout_id") == 0,
                           f"sample {element.index}: Slime's abort did not record start_rollout_id on the kept tree")
    res.numbers["aborted_groups_in_buffer"] = len(manager.data_source.buffer)
    res.numbers["partial_trees_kept"] = len(partials)
    res.numbers["kept_rollouts"] = {i: p["rollouts"] for i, p in partials.items()}
    if not res.expect(bool(partials), "no aborted tree kept its work: the next rollout collects it again from scratch"):
        return

    before = cluster.generate_requests()
    data = collect(manager, 1, res)
    res.numbers["rollout1_generate_requests"] = cluster.generate_requests() - before
    check_samples(args, cluster, data, res, focus=True, sources=args.rollout_batch_size, prefix="rollout1: ")
    budget = int(os.environ["FOCUS_BUDGET"])
    saved = 0
    for index, kept in partials.items():
        tree = [s for s in data if s.rollout_id == index]
        if not res.expect(bool(tree), f"the tree aborted for sample {index} is not in the next rollout"):
            continue
        focus = tree[0].metadata["focus"]
        res.expect(focus.get("rollouts_resumed") == kept["rollouts"],
                   f"sample {index}: {focus.get('rollouts_resumed')} rollouts resumed, the aborted tree kept {kept['rollouts']}")
        res.expect(focus.get("tokens_resumed") == kept["tokens"],
                   f"sample {index}: {focus.get('tokens_resumed')} tokens resumed, the aborted tree kept {kept['tokens']}")
        res.expect(focus["finished_rollouts"] <= budget, f"sample {index}: {focus['finished_rollouts']} rollouts, over the budget {budget}")
        contexts = {tuple(s.tokens) for s in tree}
        missing = len(kept["contexts"] - contexts)
        res.expect(missing == 0, f"sample {index}: {missing} of the aborted tree's {len(kept['contexts'])} nodes are not in the resumed tree")
        for s in tree:
            cut = s.metadata["focus"]["off_policy_tokens"]
            old_masked = all(m == 0 for m in s.loss_mask[:cut])
            new_trains = cut >= s.response_length or any(s.loss_mask[cut:])
            res.expect(old_masked and new_trains,
                       f"sample {index} node {s.metadata['focus']['node_id']}: the loss mask does not zero exactly the "
                       f"{cut} tokens generated before the resume")
        saved += focus.get("tokens_resumed", 0)
    # Against a restart: the resumed trees' generated tokens that were not generated again.
    res.numbers["tokens_resumed"] = saved
    res.numbers["rollout1_metrics_tokens_resumed"] = res.numbers["rollout1_metrics"].get("rollout/focus/tokens_resumed")
    res.expect(saved > 0, "no generated token was resumed")
    print(f"partial-rollout-resume: {len(partials)} aborted trees resumed, {saved} generated tokens kept instead of generated again")


FLAG_MODES: Dict[str, Callable[[Result], None]] = {
    "sample-filter": mode_sample_filter,
    "dynamic-sampling-stock": mode_dynamic_sampling_stock,
    "dynamic-sampling-n1": mode_dynamic_sampling_n1,
    "dynamic-sampling-n2": mode_dynamic_sampling_n2,
    "custom-rm": mode_custom_rm,
    "custom-rm-batched": mode_custom_rm_batched,
    "rm-type": mode_rm_type,
    "custom-rm-plus-minus-one": mode_custom_rm_plus_minus_one,
    "rm-type-dapo": mode_rm_type_dapo,
    "training-refusals": mode_training_refusals,
    "kl-loss-share": mode_kl_loss_share,
    "metrics": mode_metrics,
    "tool-env": mode_tool_env,
    "partial-rollout-resume": mode_partial_rollout_resume,
}
