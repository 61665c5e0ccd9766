"""Opt-in: FOCUS's Slime hooks against Slime's real code (its plugin-contract tests and its
default loss reducer). Skipped unless ``FOCUS_SLIME_SRC`` names a THUDM/slime checkout and
``FOCUS_SLIME_PYTHON`` a Python that imports Slime's rollout modules, torch and pytest
(``make slime-check`` builds one); the default suite has neither.

    FOCUS_SLIME_SRC=/work/slime-src FOCUS_SLIME_PYTHON=/path/to/slime-venv/bin/python \\
        ../.venv/bin/python -m pytest -q test_integrations_slime_real.py

What Slime's contracts check and which of their assertions apply to FOCUS's hooks is in
docs/slime.md."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from focus_go import _lib

SRC = os.environ.get("FOCUS_SLIME_SRC")
PYTHON = os.environ.get("FOCUS_SLIME_PYTHON")
pytestmark = pytest.mark.skipif(
    not (SRC and PYTHON and Path(SRC, "slime").is_dir()),
    reason="set FOCUS_SLIME_SRC (a THUDM/slime checkout) and FOCUS_SLIME_PYTHON (a Python with its deps)",
)
TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "python"


def run(*argv, env=None):
    path = os.pathsep.join([str(PACKAGE), str(TESTS), *filter(None, [os.environ.get("FOCUS_SLIME_PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": path, "FOCUS_GO_LIBRARY": str(Path(_lib.library_path()).resolve()), "SLIME_SRC": SRC, **(env or {})}
    return subprocess.run([PYTHON, *argv], cwd=SRC, env=env, capture_output=True, text=True, timeout=600)


def outcomes(proc):
    """{test id: "PASSED" | "FAILED"} from pytest's -rA summary."""
    return dict((m.group(2), m.group(1)) for m in re.finditer(r"^(PASSED|FAILED) \S+::(\S+)", proc.stdout, re.M))


def test_runtime_hook_contract():
    proc = run(
        "tests/plugin_contracts/test_plugin_runtime_hook_contracts.py",
        "--custom-reward-post-process-path", "focus.integrations.slime.preserve_advantages",
        "--custom-rollout-log-function-path", "focus.integrations.slime.log_rollout",
        "--custom-eval-rollout-log-function-path", "focus.integrations.slime.log_eval_rollout",
        "-rA", "-p", "no:cacheprovider",
    )
    got = outcomes(proc)
    assert got, proc.stdout + proc.stderr
    failed = {k for k, v in got.items() if v == "FAILED"}
    # The log hooks have Slime's signatures and return a bool; what fails is only the
    # reference plugins' own side effect (args.logged_rollout_id / logged_eval_rollout_id).
    assert failed == {
        "test_runtime_hook_path_aligns_with_expected_format[custom_rollout_log]",
        "test_runtime_hook_path_aligns_with_expected_format[custom_eval_rollout_log]",
    }, proc.stdout
    assert "args.logged_rollout_id" in proc.stdout and "args.logged_eval_rollout_id" in proc.stdout
    assert got["test_runtime_hook_path_aligns_with_expected_format[custom_reward_post_process]"] == "PASSED"


def test_generate_contract():
    proc = run(
        "tests/plugin_contracts/test_plugin_generate_contracts.py",
        "--custom-generate-function-path", "slime_contract.generate_hooks.generate",
        "-rA", "-p", "no:cacheprovider",
    )
    got = outcomes(proc)
    assert got, proc.stdout + proc.stderr
    # The signature check passes and the label-less sample is collected; the fan-out list
    # then meets Slime's list branch, which reads args.custom_rm_path (real Slime args have
    # it, the contract's Args does not), and the contract's single-Sample shape assertion.
    assert {k for k, v in got.items() if v == "FAILED"} == {"test_custom_generate_function_path_supports_user_override"}
    assert "custom_rm_path" in proc.stdout


def test_loss_scale_against_slimes_default_reducer():
    proc = run(str(TESTS / "slime_contract" / "loss_scale.py"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    tokens = result["mean_trained_tokens_per_tree"]
    assert result["sum_policy_tokens"]["ones_ratio"] == pytest.approx(tokens, rel=1e-3)
    assert result["normalized_policy_tokens"]["ones_ratio"] == pytest.approx(1.0, abs=1e-3)
    assert result["normalized_policy_tokens"]["grad_norm_ratio"] == pytest.approx(1.0, abs=0.05)
    # The KL-loss and entropy shares of each tree's loss with sum_policy_tokens and
    # --calculate-per-token-loss equal Slime's default (within 1%: here to rounding); with
    # sum_policy_tokens alone the KL share falls by the tree's trained tokens.
    assert result["kl_share"]["max_rel_diff"] < 1e-4
    assert result["kl_share"]["default_over_alone_min"] > 10


def test_pass_rates_match_slimes_compute_pass_rate():
    script = """
import random
from slime.observability.metric_utils import compute_pass_rate
from slime_contract import compute_pass_rate as stand_in
from focus.integrations.slime import pass_rates
random.seed(0)
worst = 0.0
for n in (2, 3, 4, 8):
    for _ in range(50):
        flat = [random.choice([0.0, 1.0, 1.0, 0.5]) for _ in range(n * 5)]
        real, ours = compute_pass_rate(flat, n), stand_in(flat, n)
        trees = pass_rates([(n, sum(1 for r in flat[i : i + n] if r == 1)) for i in range(0, len(flat), n)])
        assert real.keys() == ours.keys() == trees.keys(), (real, ours, trees)
        worst = max(worst, *(abs(real[k] - ours[k]) for k in real), *(abs(real[k] - trees[k]) for k in real))
print(worst)
"""
    proc = run("-c", script)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert float(proc.stdout.strip().splitlines()[-1]) < 1e-12
