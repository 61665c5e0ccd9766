"""The ``make slime-check`` modes of the flags a Slime user sets on top of launch.sh's
(issue #37): a rollout sample filter, dynamic sampling, reward models, the reward KL, the
rollout metrics, and the multi-turn guide's tool environment. Each is checked against
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


def _reward_model(res: Result, flags: List[str], calls: Callable[[], int], expect_successes: Optional[str]) -> None:
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


def mode_kl_coef(res: Result) -> None:
    """--kl-coef 0.1 with --use-rollout-logprobs: Slime's compute_advantages_and_returns
    computes each token's KL to the reference policy (reference log-probs here the
    rollout's, shifted per token) and focus's advantages hook must apply it as Slime's
    REINFORCE++-baseline applies the reward KL: advantage = reward - kl_coef * kl."""
    import torch

    from slime.backends.megatron_utils.loss import compute_advantages_and_returns

    ref = WORK / "ref-checkpoint"  # Slime checks that --ref-load exists when kl_coef is set
    ref.mkdir(parents=True, exist_ok=True)
    argv = set_flag(set_flag(base_argv(batch=2), "--kl-coef", "0.1"), "--use-rollout-logprobs")
    argv = set_flag(argv, "--ref-load", str(ref))
    args = parse(argv)
    cluster = Cluster(args)  # held to the end: its simulated server closes when the Cluster is collected
    manager = rollout_manager(args)
    data = collect(manager, 0, res)
    init_parallel_state()
    init_ray()
    rd = rollout_data_of(manager, data)
    gen = torch.Generator().manual_seed(7)
    rd["ref_log_probs"] = [lp + 0.2 * torch.randn(lp.shape, generator=gen) for lp in rd["rollout_log_probs"]]
    rewards = [float(r) for r in rd["rewards"]]
    compute_advantages_and_returns(args, rd)
    worst, kl_max = 0.0, 0.0
    for adv, kl, reward in zip(rd["advantages"], rd["kl"], rewards):
        expected = reward - 0.1 * kl
        worst = max(worst, float((adv - expected).abs().max()))
        kl_max = max(kl_max, float(kl.abs().max()))
    res.numbers["kl_abs_max"] = round(kl_max, 6)
    res.numbers["advantage_vs_reward_minus_kl_max_abs_diff"] = worst
    res.expect(kl_max > 0, "Slime computed no KL (the check measured nothing)")
    res.expect(worst < 1e-6, f"advantages differ from reward - kl_coef * kl by up to {worst}")
    res.numbers["generate_requests"] = cluster.generate_requests()


def mode_metrics(res: Result) -> None:
    """Slime's rollout metrics on trees, with --rollout-max-response-len 80 so that some
    rollouts are cut and others finish (a tree whose warmup rollouts all end alike, as all
    cut ones do, stops there under the default stop_alike and reuses no prefix): Slime's own compute_metrics_from_samples gives
    rollout/prefix_cache_hit_rate as the trees' prefix reuse (reused prefix tokens over
    those plus the generated ones, from the trees' stats), and log_rollout adds
    rollout/focus/truncated_ratio and rollout/focus/response_len/* per finished rollout,
    each path within the cap."""
    from slime.observability.rollout_metrics import compute_metrics_from_samples

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
    "kl-coef": mode_kl_coef,
    "metrics": mode_metrics,
    "tool-env": mode_tool_env,
    "partial-rollout-resume": mode_partial_rollout_resume,
}
