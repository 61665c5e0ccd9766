"""benchmarks/learn.py's protocol: the factor-2 grid grows at its edge, the cross-checks
catch costs out of order, and the report reads the runs (skipped without torch)."""

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import learn  # noqa: E402
from learn_report import report  # noqa: E402


def _result(method, seed, lr, success):
    """A run whose policy reaches ``success`` after its first update at 100 tokens."""
    points = [{"generated": 0, "forward": 0, "forward_cached": 0, "success": 0.1},
              {"generated": 100, "forward": 400, "forward_cached": 120, "success": success},
              {"generated": 200, "forward": 800, "forward_cached": 240, "success": float("nan")}]
    return {"method": method, "seed": seed, "lr": lr, "points": points, "updates": 2, "trees": 4, "trees_dropped": 0,
            "rollouts": 16, "critic_mse": [0.2, 0.1], "critic_tau2": 0.05, "rule_tgb_share": None, "seconds": 1.0}


class FakePool:
    """Answers every run with a success that peaks at the rate ``peak``."""

    def __init__(self, peak):
        self.peak, self.asked = peak, []

    def map(self, fn, jobs, log=None):
        assert fn is learn._run
        self.asked += [(m, lr) for m, _, lr, _, _ in jobs]
        return [_result(m, s, lr, 0.9 - abs(lr - self.peak) / self.peak / 100) for m, s, lr, _, _ in jobs]


def test_a_rate_at_the_grids_edge_extends_the_grid():
    pool = FakePool(peak=8.0)
    rates, runs = learn.select_rates(pool, ["grpo:8"], [1.0, 2.0], [0, 1], {"budget_tokens": 200}, "", 3, lambda msg: None)
    assert rates["grpo:8"] == 8.0
    assert [lr for _, lr in pool.asked] == [1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 8.0, 8.0, 16.0, 16.0]
    assert sorted(runs["grpo:8"]) == ["1", "16", "2", "4", "8"]
    pool = FakePool(peak=8.0)
    rates, _ = learn.select_rates(pool, ["grpo:8"], [1.0, 2.0], [0], {"budget_tokens": 200}, "", 1, lambda msg: None)
    assert rates["grpo:8"] == 4.0  # one extension allowed: the rate stays at the edge


def test_cross_checks_catch_costs_out_of_order_and_different_starts():
    good = _result("grpo:8", 0, 1.0, 0.5)
    learn.check([good, _result("selective", 0, 1.0, 0.4)])
    bad = _result("grpo:8", 0, 1.0, 0.5)
    bad["points"][-1]["forward_cached"] = 900  # more than the forward tokens without a cache
    with pytest.raises(AssertionError, match="out of order"):
        learn.check([bad])
    other = _result("selective", 0, 1.0, 0.4)
    other["points"][0]["success"] = 0.2
    with pytest.raises(AssertionError, match="different successes"):
        learn.check([good, other])


def test_report_pairs_settings_with_baselines():
    methods = ["selective", "grpo:8"]
    runs = {m: {"1": [_result(m, s, 1.0, 0.5 if m == "grpo:8" else 0.7 + (s - 2) * 0.04) for s in (0, 1)]} for m in methods}
    fresh = [_result(m, s, 1.0, 0.5 if m == "grpo:8" else 0.7 + (s - 2) * 0.04) for m in methods for s in (2, 3)]
    data = {"config": "test", "run": {"digits": 2, "segment": 6, "model": {}, "trees_per_update": 2, "budget_tokens": 200},
            "grid": [1.0], "methods": methods, "selection_seeds": [0, 1], "fresh_seeds": [2, 3], "warm": [(2, 25, 0.1)],
            "rates": {m: 1.0 for m in methods}, "selection": runs, "fresh": fresh, "seconds": 3.0}
    text = "\n".join(report(data))
    # Area over 200 tokens: 0.1 for 100 tokens, then the success: grpo 0.3, selective 0.40 and 0.42;
    # over the first 50 tokens 0.1 for all.
    assert "| selective | grpo:8 | +0.000 ± 0.000 | +0.110 ± 0.010* |" in text
    assert "- selective: mean area" in text and "admissible" in text


def _signal(areas):
    """A bandit signal.json's learning section: ``areas[method]`` is the fresh seeds' area at
    640 RE (the selection seeds' area is its mean)."""
    def entry(xs):
        return {"best_lr": {"640": 16.0}, "selection": {"16": [{"tokens": {"640": sum(xs) / len(xs)}}]},
                "fresh": {"16": {"summary": [{"tokens": {"640": x}} for x in xs]}}}
    return {"learning": {"0.5": {name: entry(xs) for name, xs in areas.items()}}}


def _learn(successes):
    """A bench-learn results.json: ``successes[method]`` is each fresh seed's success after
    the first update; the selection seed 0 reaches the mean."""
    methods = list(successes)
    return {"run": {"budget_tokens": 200}, "methods": methods, "rates": {m: 1.0 for m in methods},
            "selection": {m: {"1": [_result(m, 0, 1.0, sum(xs) / len(xs))]} for m, xs in successes.items()},
            "fresh": [_result(m, 2 + i, 1.0, x) for m, xs in successes.items() for i, x in enumerate(xs)]}


def test_decide_applies_the_rule_to_both_benchmarks(tmp_path):
    import decide

    tree = "selective8/4:value_refinement_per_token+stop"
    (tmp_path / "s.json").write_text(json.dumps(_signal({tree: [0.8, 0.82, 0.81], "grpo:4": [0.7, 0.71, 0.72]})))
    (tmp_path / "l.json").write_text(json.dumps(_learn({"selective": [0.6, 0.62, 0.61], "grpo:4": [0.4, 0.42, 0.41]})))
    cells = decide.bandit_cells(tmp_path / "s.json") + decide.learn_cells(tmp_path / "l.json")
    assert [c.name for c in cells] == ["noise 0.5, 640 RE", "50 generated tokens", "200 generated tokens"]
    text = "\n".join(decide.decide(cells))
    assert "The rule's default: **selective**" in text
    # Ahead in the bandit cell and at 200 tokens, tied over the first 50 (no update yet): not shown.
    assert "- neural, 50 generated tokens: +0.000 ± 0.000 against grpo:4\n" in text + "\n"
    assert "- neural, 200 generated tokens: +0.100 ± 0.000 against grpo:4 *" in text
    assert "teaches more per token than the best plain group: not shown." in text
    # Behind the group in one bandit cell: not admissible, and the group becomes the default.
    (tmp_path / "s.json").write_text(json.dumps(_signal({tree: [0.6, 0.61, 0.6], "grpo:4": [0.7, 0.71, 0.72]})))
    cells = decide.bandit_cells(tmp_path / "s.json") + decide.learn_cells(tmp_path / "l.json")
    text = "\n".join(decide.decide(cells))
    assert "| selective | no |" in text and "grpo:4 (bandit, noise 0.5, 640 RE: -0.107 ± 0.007)" in text
    assert "The rule's default: **grpo:4**" in text and "A plain group is the default" in text
