"""Peak resident memory of ``focus-go collect`` against the budget.

Runs the collector (``python -m focus_go collect``, its embedded simulated server) on one
problem with ``--search independent --budget N`` (and, with ``--warmup``, Selective with
the whole budget as warmup) for each budget, stops it after ``--seconds`` seconds (or when
it ends), and reports the process's peak resident set (``VmHWM``) and the rollouts it
finished, read from its progress lines. Memory, not speed, is what it measures: the
seconds only bound the run.

    FOCUS_GO_LIBRARY=build/selftest/libfocus.so .venv/bin/python benchmarks/collector_memory.py
    ... --budgets 1024,16384,131072,1048576 --seconds 20 --warmup
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional


def peak_rss_mib(pid: int) -> Optional[float]:
    """VmHWM of a live process in MiB (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def problems_file(directory: str) -> str:
    """One bundled problem of the simulated server as a JSONL file."""
    from focus_go.sim import SimServer

    with SimServer(seed=0) as server:
        p = server.problems()[0]
    path = os.path.join(directory, "problems.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps({"id": p.id, "prompt": p.prompt, "label": p.label}) + "\n")
    return path


_FINISHED = re.compile(r"(\d+)\s*/\s*\d+\s+rollouts|^rollouts\s+(\d+)\s*$", re.MULTILINE)


def run_one(problems: str, directory: str, budget: int, warmup: bool, seconds: float) -> Dict[str, object]:
    """Collect with one budget for at most `seconds`; return its peak RSS and progress."""
    out = tempfile.mkdtemp(dir=directory)
    search = ["--search", "selective", "--warmup", str(budget)] if warmup else ["--search", "independent"]
    cmd = [sys.executable, "-m", "focus_go", "collect", problems, "--out", out, "--overwrite",
           "--budget", str(budget), *search, "--progress-interval", "1"]
    log = open(os.path.join(out, "stderr.log"), "w+")
    began = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    peak = 0.0
    while proc.poll() is None and time.monotonic() - began < seconds:
        peak = max(peak, peak_rss_mib(proc.pid) or 0.0)
        time.sleep(0.1)
    ended = proc.poll() is not None
    peak = max(peak, peak_rss_mib(proc.pid) or 0.0)
    if not ended:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    log.seek(0)
    text = log.read()
    finished = [int(m.group(1) or m.group(2)) for m in _FINISHED.finditer(text)]
    return {
        "budget": budget,
        "search": "selective (warmup = budget)" if warmup else "independent",
        "seconds": round(time.monotonic() - began, 1),
        "ended": ended,
        "rollouts_finished": finished[-1] if finished else None,
        "peak_rss_mib": round(peak),
    }


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budgets", default="1024,16384,131072,1048576", help="comma-separated budgets")
    ap.add_argument("--seconds", type=float, default=20.0, help="stop each run after this long")
    ap.add_argument("--warmup", action="store_true", help="also run Selective with warmup = budget")
    ap.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    args = ap.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",") if b]
    with tempfile.TemporaryDirectory() as d:
        problems = problems_file(d)
        rows = []
        for warmup in ([False, True] if args.warmup else [False]):
            for b in budgets:
                row = run_one(problems, d, b, warmup, args.seconds)
                rows.append(row)
                if args.json:
                    print(json.dumps(row), flush=True)
    if not args.json:
        load = os.getloadavg()[0]
        print(f"| search | budget | peak RSS (MiB) | rollouts finished | seconds | ended |  (load {load:.1f})")
        print("|---|---:|---:|---:|---:|---|")
        for r in rows:
            print(f"| {r['search']} | {r['budget']} | {r['peak_rss_mib']} | {r['rollouts_finished']} | {r['seconds']} | {r['ended']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
