"""The benchmarks' cross-checks: facts a run can verify about its own results (two
implementations agree, a count adds up), checked while it runs. A run stops with an error
at the first that does not hold; the ones that held are listed with its results, and the
smoke run (benchmarks/test_smoke.py) asserts that every section's checks are there. None
of them is a timing."""

from __future__ import annotations

from typing import List

# The checks that held in this process, in the order they first held. A child process
# running a section prints its own, each after PREFIX (printed()), for the parent to read.
HELD: List[str] = []
PREFIX = "cross-check held: "


def check(held: bool, what: str) -> None:
    """Raise AssertionError naming `what` unless it held; remember it when it did."""
    if not held:
        raise AssertionError(f"cross-check failed: {what}")
    if what not in HELD:
        HELD.append(what)


def printed() -> List[str]:
    """The checks that held, as lines a parent process reads with take()."""
    return [PREFIX + c for c in HELD]


def take(lines: List[str]) -> List[str]:
    """`lines` without a child's printed() checks, which join this process's (the child
    checked them: it stops at the first that does not hold)."""
    out = []
    for line in lines:
        if line.startswith(PREFIX):
            what = line.removeprefix(PREFIX)
            if what not in HELD:
                HELD.append(what)
        else:
            out.append(line)
    return out


def markdown() -> List[str]:
    """The section that lists the checks that held."""
    return ["## Cross-checks", "", "Each held in this run (a run stops with an error at the first that does not):", ""] + [
        f"- {c}" for c in HELD
    ]
