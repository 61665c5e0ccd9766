"""The learning-signal benchmark (benchmarks/learning_signal.py, `make bench-signal`) runs end
to end on tiny sizes, and its exact quantities are right on a problem small enough to check
by hand. No timing assertions."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("learning_signal", ROOT / "benchmarks" / "learning_signal.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["learning_signal"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_exact_values_and_gradient(bench):
    b = bench.Bandit(0, depth=2, k=2, b=0.0, w=[[1.0, -1.0], [0.5, 0.0]])
    b.theta[()] = [math.log(3), 0.0]  # pi(0) = 3/4 at the root; uniform below
    v = b.values()
    s = bench.sigmoid
    v0 = (s(1.5) + s(1.0)) / 2
    v1 = (s(-0.5) + s(-1.0)) / 2
    assert v[(0,)] == pytest.approx(v0) and v[(1,)] == pytest.approx(v1)
    assert v[()] == pytest.approx(0.75 * v0 + 0.25 * v1)
    g = b.gradient(v)
    assert g[()] == pytest.approx([0.75 * (v0 - v[()]), 0.25 * (v1 - v[()])])
    # Below the root: reach pi(0) = 3/4, pi(a|s) = 1/2.
    assert g[(0,)] == pytest.approx([0.75 * 0.5 * (s(1.5) - v0), 0.75 * 0.5 * (s(1.0) - v0)])
    # Finite differences of J agree.
    eps = 1e-6
    b.theta[()] = [math.log(3) + eps, 0.0]
    assert (b.values()[()] - v[()]) / eps == pytest.approx(g[()][0], rel=1e-4)


def test_area_is_the_mean_of_the_step_function(bench):
    # J = 0.5 until x = 10, 0.7 until 30, then 0.9: over [0, 40] the mean is
    # (0.5 * 10 + 0.7 * 20 + 0.9 * 10) / 40 = 0.7; over [0, 20], (5 + 7) / 20 = 0.6.
    xs, js = [0, 10, 30], [0.5, 0.7, 0.9]
    assert bench.area(xs, js, 40) == pytest.approx(0.7)
    assert bench.area(xs, js, 20) == pytest.approx(0.6)
    assert bench.area(xs, js, 5) == pytest.approx(0.5)


def test_tree_tokens_count_generated_tokens_only(bench):
    """Segments of L tokens: an Independent(B) tree generates B * D * L tokens; a Selective
    tree's generated and reused prefix tokens add up to the same, every branch from depth d
    reusing d * L. Prefill: each call sends its whole context (prompt P, then the earlier
    segments); with the per-tree prefix cache only the prompt is computed, once."""
    import asyncio

    depth, seg, budget = 3, 4, 8
    h = bench.Harness()
    try:
        p = bench.make_problems(1, 1, depth, 4, 1.0)[0]
        for method in (bench.Method("root-only:8", "independent", budget),
                       bench.Method("selective:value_refinement", "selective", budget, "value_refinement")):
            t = asyncio.run(bench.collect_tree(h, p, method, 3, 0.2, 0, 1.0, seg, ["DirectBranchTd", "TreeGroupBaseline"]))
            assert t.rollouts == budget
            assert t.tokens + t.prefix_reused == budget * depth * seg
            assert len(t.edges["DirectBranchTd"]) == len(t.edges["TreeGroupBaseline"]) == t.tokens // seg
            prompt = t.prefill_cached
            if method.search == "independent":
                assert t.prefix_reused == 0
                assert t.prefill == budget * (depth * prompt + seg * depth * (depth - 1) // 2)
            else:
                assert t.prefix_reused > 0
    finally:
        h.close()


def main_default_note(tmp_path) -> bool:
    """The quick run names no method the library's defaults run: no target line."""
    return "The target for" not in (tmp_path / "signal.md").read_text()


def test_quick_run_writes_its_table(bench, tmp_path):
    assert bench.main(["--quick", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "signal.md").read_text()
    for name in ("selective:value_refinement", "selective:value_refinement+w/tgb", "root-only:8", "grpo:4", "grpo:8",
                 "selective:value_refinement_per_token+stop/auto", "selective:value_refinement+w/free"):
        assert f"| {name} |" in text
    # The library's defaults (Selective() with unweighted records) are named from
    # Selective()'s size, score and stop_alike (docs/signal.md §D).
    assert bench.library_default() == "selective8/4:value_refinement_per_token+stop"
    assert main_default_note(tmp_path)
    for part in ("Per generated token, the first 8 RE", "Per generated token, the first 16 RE", "Margins, the first 16 RE",
                 "Per rollout (the second view)", "Gradient error of one tree",
                 "prefill, prefix cache"):
        assert part in text, part


def test_method_kappa_variants_are_paired_in_one_run(bench, tmp_path):
    """--extra-kappas adds '@k<kappa>' variants that collect at their own critic_weight
    (their own trees), next to the run's --kappa methods, on the same seeds; the group
    baselines ignore kappa and get no variant. The candidate can be one of them."""
    methods = bench.all_methods(["critic_adaptive"], 32, [32], ["critic_adaptive"], extra_kappas=[0.0])
    by_name = {m.name: m for m in methods}
    assert set(by_name) == {"selective:critic_adaptive", "selective:critic_adaptive+w", "selective:critic_adaptive+w/tgb",
                            "root-only:32", "grpo:32", "selective:critic_adaptive@k0", "selective:critic_adaptive+w@k0",
                            "root-only:32@k0"}
    assert by_name["root-only:32@k0"].kappa == 0.0 and by_name["root-only:32"].kappa is None
    assert by_name["root-only:32@k0"].tree_key != by_name["root-only:32"].tree_key
    # Weighted and unweighted variants of one kappa, and the estimators, share their trees.
    assert by_name["selective:critic_adaptive+w@k0"].tree_key == by_name["selective:critic_adaptive@k0"].tree_key
    assert by_name["selective:critic_adaptive+w/tgb"].tree_key == by_name["selective:critic_adaptive"].tree_key
    assert not by_name["grpo:32"].reads_critic and by_name["root-only:32"].reads_critic
    assert by_name["selective:critic_adaptive+w/tgb"].reads_critic, "its search reads the critic"
    assert bench.main(["--quick", "--out", str(tmp_path), "--scores", "critic_adaptive", "--extra-kappas", "0",
                       "--default", "selective:critic_adaptive+w@k0",
                       "--methods", "selective:critic_adaptive+w@k0,selective:critic_adaptive+w,root-only:8,grpo:8"]) == 0
    text = (tmp_path / "signal.md").read_text()
    assert "| selective:critic_adaptive+w@k0 |" in text and "| root-only:8 |" in text
    assert "| selective:value_refinement |" not in text, "--methods keeps only those named"
    # The paired differences of the kappa-0 candidate include the kappa-1 method.
    diffs = text.split("Paired gradient-error difference")[1]
    assert "| selective:critic_adaptive+w |" in diffs and "| root-only:8 |" in diffs
    assert "The target for selective:critic_adaptive+w@k0" in text


def test_selective_specs_and_stop_alike(bench):
    """--selective names Selective(B, W) methods with stop_alike, weights and the tree group
    baseline; a stop_alike tree on a problem every rollout wins stops after its warmup,
    generating only the warmup's tokens (docs/signal.md §P)."""
    import asyncio

    m = bench.parse_selective("8/4:value_refinement_per_token+stop+w/tgb")
    assert (m.name, m.budget, m.warmup_n, m.score, m.stop_alike, m.weighted, m.estimator) == (
        "selective8/4:value_refinement_per_token+stop+w/tgb", 8, 4, "value_refinement_per_token", True, True, "TreeGroupBaseline")
    assert bench.parse_selective("32/16:value_refinement").name == "selective:value_refinement"
    assert bench.parse_selective("8/4:value_refinement").tree_key != m.tree_key

    depth, seg = 3, 4
    sure = bench.Bandit(0, depth=depth, k=4, b=50.0, w=[[0.0] * 4 for _ in range(depth)])
    h = bench.Harness()
    try:
        for stop, rollouts in ((True, 4), (False, 8)):
            method = bench.Method("s", "selective", 8, "value_refinement", warmup=4, stop_alike=stop)
            t = asyncio.run(bench.collect_tree(h, sure, method, 3, 0.2, 0, 1.0, seg))
            assert t.rollouts == rollouts
            if stop:
                assert t.tokens == 4 * depth * seg
    finally:
        h.close()


def test_auto_and_free_methods(bench, tmp_path):
    """'/auto[T]' runs the critic rule (focus_go.critic_rule.CriticRule) batch by batch; '/free'
    is TreeGroupBaseline under Critic.constant(0.5) at every noise (one run serves them all)."""
    auto = bench.parse_selective("8/4:value_refinement_per_token+stop/auto")
    assert (auto.name, auto.estimator, auto.threshold, auto.first_estimator) == (
        "selective8/4:value_refinement_per_token+stop/auto", "auto", None, "TreeGroupBaseline")
    assert bench.parse_selective("8/4:value_refinement/auto2.5").threshold == 2.5
    free = bench.parse_selective("8/4:value_refinement+w/free")
    assert (free.estimator, free.weighted, free.free, free.reads_critic) == ("TreeGroupBaseline", True, True, False)
    assert free.tree_key != bench.parse_selective("8/4:value_refinement+w/tgb").tree_key
    assert bench.main(["--quick", "--out", str(tmp_path), "--scores", "value_refinement", "--tgb-scores", "",
                       "--selective", "8/4:value_refinement/auto,8/4:value_refinement/free"]) == 0
    text = (tmp_path / "signal.md").read_text()
    assert "| selective:value_refinement/auto |" in text and "| selective:value_refinement/free |" in text
    rule_rows = text.split("The critic rule's choices")[1].split("\n\n")[1]
    assert "DBTD, kappa" in rule_rows


def test_dynamic_sampling_groups(bench):
    """'<kind>:<B>/<W>+stop' groups collect W rollouts first and stop there when all W
    returned alike; otherwise they are the group of B with the same seed, whose first W
    rollouts are the W group's (the engine seeds warmup rollout i from the tree's seed)."""
    import asyncio
    from collections import Counter

    methods = {m.name: m for m in bench.all_methods([], 8, [4, 8], stop_sizes=bench.stop_groups("8/4"))}
    assert list(methods) == ["root-only:4", "root-only:8", "root-only:8/4+stop", "grpo:4", "grpo:8", "grpo:8/4+stop"]
    stop = methods["grpo:8/4+stop"]
    assert (stop.budget, stop.warmup_n, stop.stop_alike, stop.reads_critic) == (8, 4, True, False)
    assert methods["root-only:8/4+stop"].reads_critic
    with pytest.raises(ValueError, match="--stop-groups: '4/8' is not B/W with 1 <= W < B"):
        bench.stop_groups("4/8")

    depth, seg = 3, 4
    sure = bench.Bandit(0, depth=depth, k=4, b=50.0, w=[[0.0] * 4 for _ in range(depth)])
    coin = bench.Bandit(1, depth=depth, k=4, b=0.0, w=[[0.0] * 4 for _ in range(depth)])
    h = bench.Harness()
    try:
        def collect(problem, method, seed):
            return asyncio.run(bench.collect_tree(h, problem, method, seed, 0.2, 0, 1.0, seg))

        t = collect(sure, stop, 0)
        assert (t.rollouts, t.tokens, t.alike) == (4, 4 * depth * seg, True)
        assert all(adv == 0.0 for _, _, adv, _ in t.edges["GroupBaseline"])
        differing = []
        for seed in range(8):
            w = collect(coin, methods["grpo:4"], seed)
            if w.alike:
                continue
            b, s = collect(coin, methods["grpo:8"], seed), collect(coin, stop, seed)
            assert (s.rollouts, s.tokens, s.edges) == (b.rollouts, b.tokens, b.edges) == (8, 8 * depth * seg, b.edges)
            edges = lambda t: Counter((st, a) for st, a, _, _ in t.edges["GroupBaseline"])  # noqa: E731
            assert not edges(w) - edges(b), "the W group's rollouts are the first W of the B group"
            differing.append(seed)
        assert differing, "some seed's first 4 coin flips differ"
    finally:
        h.close()


def test_learning_rate_grids_extend_past_their_edges(bench, tmp_path):
    """A method whose chosen rate sits on an edge of its grid gets the next rate past that
    edge (the grid's step there), up to a limit per side; a choice inside the grid stops it."""
    from signal_learning import beyond_edges

    def runs(areas):
        return {lr: [{"tokens": {"8": a, "16": a}}] for lr, a in areas.items()}

    none = {"low": 0, "high": 0}
    assert beyond_edges(runs({16: 0.5, 32: 0.6, 64: 0.7}), [8], none, 4) == [128]
    assert beyond_edges(runs({16: 0.5, 32: 0.6, 64: 0.7}), [8], {"low": 0, "high": 4}, 4) == []
    assert beyond_edges(runs({16: 0.9, 32: 0.6, 64: 0.7}), [8], none, 4) == [8]
    assert beyond_edges(runs({16: 0.5, 32: 0.9, 64: 0.7}), [8, 16], none, 4) == []
    # The quick run's grid (4, 16) has every choice on an edge: each cell runs one rate more
    # past the edge each budget chose (the quick run's limit is one a side).
    import json

    assert bench.main(["--quick", "--out", str(tmp_path), "--grad-seeds", "0", "--methods", "grpo:8,grpo:8/4+stop,root-only:4"]) == 0
    learn = json.loads((tmp_path / "signal.json").read_text())["learning"]
    for tau, cells in learn.items():
        for name, cell in cells.items():
            grid = {float(x) for x in cell["selection"]}
            assert {4.0, 16.0} < grid <= {1.0, 4.0, 16.0, 64.0}, (tau, name, grid)
    text = (tmp_path / "signal.md").read_text()
    assert "| grpo:8/4+stop |" in text
    assert "- bandit trees: every tree's generated plus reused prefix tokens are its rollouts x D x L" in text
