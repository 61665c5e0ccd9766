"""focus-go benchmarks (`make bench`). Each section runs its variants side by side in one
run and reports ratios, because these machines are noisy. Results are printed and written to
benchmarks/results/latest.md.

Sections:
- prepare/export (Go): prepare + flat export of Selective-shaped trees, 32 to 4,096 rollouts
  x 8 segments of 256 tokens (`go test -bench` on core/export), time per node and per token.
- prepare/export (Python API): the same trees through the C boundary, prepare_samples +
  Batch.to_records, records per second and bytes crossing the boundary.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SIZES = [32, 256, 1024, 4096]


def go_prepare_export() -> list[str]:
    out = subprocess.run(
        ["go", "test", "-run", "^$", "-bench", "BenchmarkPrepare", "-benchmem", "-benchtime", "5x", "./core/export"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    rows = ["| benchmark | rollouts | ms/op | nodes | ns/node or ns/token | MB/op | allocs/op |", "|---|---|---|---|---|---|---|"]
    for line in out.splitlines():
        m = re.match(r"Benchmark(\w+)/rollouts=(\d+)-\d+\s+\d+\s+(\d+) ns/op(.*)", line)
        if not m:
            continue
        name, n, ns, rest = m.groups()
        metrics = dict((unit, float(v)) for v, unit in re.findall(r"([\d.]+) (\S+)", rest))
        per = metrics.get("ns/token") or metrics.get("ns/node") or 0
        rows.append(
            f"| {name} | {n} | {int(ns) / 1e6:.1f} | {int(metrics.get('nodes', 0))} | {per:.2f} | "
            f"{metrics.get('B/op', 0) / 1e6:.1f} | {int(metrics.get('allocs/op', 0))} |"
        )
    return rows


def python_prepare_export() -> list[str]:
    from focus_go import DirectBranchTd, RewardConfig, _lib
    from focus_go.preparation import prepare_samples
    from focus_go.tree import SchedulerState

    rows = ["| rollouts | prepare_samples ms | to_records ms | records | records/s | tokens | boundary MB |", "|---|---|---|---|---|---|---|"]
    for n in SIZES:
        state = SchedulerState(_lib.call_handle("focus_selftest_search_tree", n, 8, 256, 1))
        t0 = time.perf_counter()
        batch = prepare_samples(state, reward_config=RewardConfig(), estimator=DirectBranchTd())
        t1 = time.perf_counter()
        records = batch.to_records(0)
        t2 = time.perf_counter()
        actor = [r for r in records if r["lane"] == "actor"]
        tokens = sum(len(r["tokens"]) for r in actor)
        own = sum(sum(r["loss_mask"]) for r in actor)
        # what crossed: u32 tokens + (u8 mask + f64 logprob) per own token + per-record columns
        boundary = tokens * 4 + own * 9 + len(actor) * 44
        rows.append(
            f"| {n} | {(t1 - t0) * 1e3:.1f} | {(t2 - t1) * 1e3:.1f} | {len(records)} | "
            f"{len(records) / (t2 - t1):,.0f} | {tokens:,} | {boundary / 1e6:.1f} |"
        )
        del records, actor, batch
        state.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args()
    lines = ["# focus-go benchmarks", "", "## prepare + export (Go core)", ""]
    lines += go_prepare_export()
    lines += ["", "## prepare + export through the Python API", ""]
    lines += python_prepare_export()
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "latest.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
