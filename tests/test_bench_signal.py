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


def test_quick_run_writes_its_table(bench, tmp_path):
    assert bench.main(["--quick", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "signal.md").read_text()
    for name in ("selective:value_refinement", "root-only", "grpo"):
        assert f"| {name} |" in text
    # The library's defaults (Selective() with visitation-weighted records) are marked.
    assert bench.library_default() == "selective:critic_adaptive+w"
    assert "| selective:critic_adaptive+w (the default) |" in text
    assert "Learning:" in text


def test_method_kappa_variants_are_paired_in_one_run(bench, tmp_path):
    """--extra-kappas adds '@k<kappa>' variants that collect at their own critic_weight
    (their own trees), next to the run's --kappa methods, on the same seeds; GRPO ignores
    kappa and gets no variant. The candidate can be one of them."""
    methods = bench.all_methods(["critic_adaptive"], extra_kappas=[0.0])
    by_name = {m.name: m for m in methods}
    assert set(by_name) == {"selective:critic_adaptive", "selective:critic_adaptive+w", "root-only", "grpo",
                            "selective:critic_adaptive@k0", "selective:critic_adaptive+w@k0", "root-only@k0"}
    assert by_name["root-only@k0"].kappa == 0.0 and by_name["root-only"].kappa is None
    assert by_name["root-only@k0"].tree_key != by_name["root-only"].tree_key
    # Weighted and unweighted variants of one kappa still share their trees.
    assert by_name["selective:critic_adaptive+w@k0"].tree_key == by_name["selective:critic_adaptive@k0"].tree_key
    assert bench.main(["--quick", "--out", str(tmp_path), "--scores", "critic_adaptive", "--extra-kappas", "0",
                       "--default", "selective:critic_adaptive+w@k0",
                       "--learn-methods", "selective:critic_adaptive+w@k0,selective:critic_adaptive+w,root-only,grpo"]) == 0
    text = (tmp_path / "signal.md").read_text()
    assert "| selective:critic_adaptive+w@k0 |" in text and "| root-only@k0 |" in text
    # The paired differences of the kappa-0 candidate include the kappa-1 default and root-only.
    diffs = text.split("Paired gradient-error difference")[1].split("Learning:")[0]
    assert "| selective:critic_adaptive+w (the default) |" in diffs and "| root-only |" in diffs and "| root-only@k0 |" in diffs
    assert "| 0.2/lr16 | selective:critic_adaptive+w (the default) |" in text
