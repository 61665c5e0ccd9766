"""The smoke run of every benchmark entry point (`make bench-smoke`, which .ci/run calls):
each runs at the smallest settings that still execute every section and its cross-checks
(benchmarks/crosscheck.py), and this file asserts that every section ran and that every
cross-check held. It never asserts a timing: the numbers of such a run mean nothing. One
test per entry point: `make bench` (run.py), `make bench-signal` (learning_signal.py),
resume_tokens.py and `make bench-learn` (learn.py --quick, then decide.py over its results; it needs the `learn` extra's
PyTorch, which `make bench-smoke` installs, and is skipped without it outside CI).

Run by `make bench-smoke`, which builds what the benchmarks load first; by hand:
    cd benchmarks && FOCUS_GO_LIBRARY=$PWD/../build/selftest/libfocus.so ../.venv/bin/python -m pytest -q test_smoke.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]

# `make bench`: each section's heading and the cross-checks it makes.
BENCH_SECTIONS = {
    "## 1-2. throughput against the simulated server": [
        "throughput: every client finished segments or requests in every measurement",
    ],
    "## 3. latency hiding": ["latency: every tree ran branching rounds after its warmup"],
    "## 4. prepare + export (Go core, no Python objects)": [],
    "## 4. prepare + export to Python records: focus-go vs the plain-Python reference": [
        "prepare: the reference builds as many records as focus-go",
        "prepare: the reference's records equal focus-go's, key for key (trees of at most 1,024 rollouts)",
    ],
    "## 5. memory": ["memory: every tree exported records"],
    "## 6. record layouts: per-segment vs path records": [
        "layouts: both layouts train the same tokens",
        "layouts: path records send exactly the floor (the trees' leaf path lengths)",
    ],
    "## 7. keeping the servers busy: scheduling by requests in flight, several servers": [
        "fleet: every collect run generated tokens and failed no problem",
        "fleet: round-robin routing computes more prefill per generated token than prefix affinity",
    ],
}


def run(*argv: str, timeout: float = 600) -> str:
    """stdout of `python argv` from the repository root; fails with its stderr's tail
    unless it exits 0."""
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done.stdout


def sections(text: str) -> dict:
    """A Markdown file's "## " sections: heading -> its lines."""
    out: dict = {}
    current = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = out.setdefault(line, [])
        elif current is not None:
            current.append(line)
    return out


def checks_held(text: str) -> List[str]:
    """The cross-checks a run lists as held (crosscheck.markdown())."""
    return [line[2:] for line in sections(text).get("## Cross-checks", []) if line.startswith("- ")]


def test_make_bench(tmp_path):
    results = tmp_path / "RESULTS.md"
    run("benchmarks/run.py", "--quick", "--results", str(results))
    text = results.read_text()
    found = sections(text)
    for heading in BENCH_SECTIONS:
        assert heading in found, f"section {heading!r} did not run"
        assert any(line.startswith("| ") for line in found[heading]), f"section {heading!r} has no table"
    assert sorted(checks_held(text)) == sorted(c for checks in BENCH_SECTIONS.values() for c in checks)


def test_make_bench_signal(tmp_path):
    run("benchmarks/learning_signal.py", "--quick", "--out", str(tmp_path))
    text = (tmp_path / "signal.md").read_text()
    for part in ("Tokens per tree", "Per generated token, the first 8 RE", "Per generated token, the first 16 RE",
                 "Margins, the first 16 RE", "The worst case", "Per rollout (the second view)", "Gradient error of one tree"):
        assert part in text, f"no {part!r} table"
    for name in ("grpo:4", "grpo:8", "root-only:4", "grpo:8/4+stop", "root-only:8/4+stop"):
        assert f"| {name} |" in text, f"no row for {name}"
    assert checks_held(text) == [
        "bandit trees: every tree's generated plus reused prefix tokens are its rollouts x D x L (the library's stats)"]


def test_resume_tokens():
    out = run("benchmarks/resume_tokens.py", "--problems", "2", "--budget", "8", "--warmup", "4")
    rows = [line for line in out.splitlines() if line.startswith("| ") and "of the calls" in line]
    assert len(rows) == 3, out
    assert checks_held(out) == [
        "resume: a resumed tree's generated tokens are those it kept plus those its collection generated",
        "resume: a resumed tree kept no more tokens or finished rollouts than the aborted tree held",
    ]


def test_make_bench_learn(tmp_path):
    try:
        import torch  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise AssertionError("CI runs bench-learn's smoke: `make bench-smoke` installs torch first")
        import pytest

        pytest.skip("torch is not installed (make bench-smoke installs it)")
    sys.path.insert(0, str(ROOT / "examples" / "tiny_rl"))
    from methods import default_methods

    # learn.py runs its cross-checks (costs in order, one warm start per seed) before it
    # writes the report, and exits non-zero when one fails.
    out = run("benchmarks/learn.py", "--quick", "--out", str(tmp_path))
    for part in ("Warm starts", "Areas (", "Each setting minus each baseline", "Against the best baseline of each cell",
                 "The decision rule's reading", "Costs per tree and the critic"):
        assert part in out, f"no {part!r} table"
    for name in default_methods():
        assert f"| {name} |" in out, f"no row for {name}"
    assert (tmp_path / "quick" / "results.json").exists() and (tmp_path / "quick" / "report.md").exists()
    # The decision rule (docs/signal.md §N) reads the run's fresh seeds.
    out = run("benchmarks/decide.py", "--learn", str(tmp_path / "quick" / "results.json"))
    assert "| selective |" in out and ("The rule's default: **" in out or "No candidate is admissible" in out), out
