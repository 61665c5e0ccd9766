"""`focus-go demo` runs end to end and its outputs are consistent."""

from __future__ import annotations

import json
import subprocess
import sys


def test_demo_writes_records_and_pictures(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "focus_go", "demo", "--out", str(out), "--problems", "2", "--budget", "8", "--warmup", "4"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "actor records" in proc.stdout and "root" in proc.stdout
    actor = [json.loads(line) for line in (out / "actor.jsonl").read_text().splitlines()]
    critic = [json.loads(line) for line in (out / "critic.jsonl").read_text().splitlines()]
    assert actor and critic
    assert {r["group_index"] for r in actor} == {0, 1}
    assert all(r["lane"] == "actor" and len(r["tokens"]) == len(r["loss_mask"]) for r in actor)
    tree = json.loads((out / "tree.json").read_text())
    assert tree["stats"]["rollouts"] + tree["stats"]["budget_unspent"] == 8
    assert (out / "tree.html").read_text().lstrip().lower().startswith("<!doctype html")
