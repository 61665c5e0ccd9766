"""`focus-go demo` runs end to end and its outputs are consistent."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from chromium import dump_dom, screenshot


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "focus_go", "demo", "--out", str(out), "--problems", "2", "--budget", "8", "--warmup", "4"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return out, proc.stdout


def test_demo_writes_records_and_pictures(demo):
    out, stdout = demo
    assert "actor records" in stdout and "root" in stdout
    actor = [json.loads(line) for line in (out / "actor.jsonl").read_text().splitlines()]
    critic = [json.loads(line) for line in (out / "critic.jsonl").read_text().splitlines()]
    assert actor and critic
    assert {r["group_index"] for r in actor} == {0, 1}
    assert all(r["lane"] == "actor" and len(r["tokens"]) == len(r["loss_mask"]) for r in actor)
    assert all(r["lane"] == "critic" and isinstance(r["target"], float) for r in critic)
    tree = json.loads((out / "tree.json").read_text())
    assert tree["stats"]["rollouts"] + tree["stats"]["budget_unspent"] == 8
    # The summary table: one row per problem, its actor / critic counts those written.
    rows = re.findall(r"^(\S+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", stdout, re.M)
    assert len(rows) == 2
    assert all(int(r[1]) <= 8 for r in rows), "rollouts within the budget"
    assert sum(int(r[4]) for r in rows) == len({(r["group_index"], r["node_id"]) for r in actor})
    assert sum(int(r[5]) for r in rows) == len(critic)
    assert (out / "tree.html").read_text().lstrip().lower().startswith("<!doctype html")


def test_demo_problems_feed_collect(demo, tmp_path):
    out, _ = demo
    problems = [json.loads(line) for line in (out / "problems.jsonl").read_text().splitlines()]
    assert len(problems) == 2 and all({"id", "prompt", "label"} <= set(p) for p in problems)
    proc = subprocess.run(
        [sys.executable, "-m", "focus_go", "collect", str(out / "problems.jsonl"), "--out", str(tmp_path / "c"),
         "--budget", "4", "--warmup", "2"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "c" / "trees").glob("*.json"))) == 2


def test_demo_tree_renders_in_headless_chromium(demo, tmp_path):
    out, _ = demo
    n_nodes = len(json.loads((out / "tree.json").read_text())["nodes"])
    dom = dump_dom(out / "tree.html", "#node-0")
    assert re.search(r'<body data-nodes="(\d+)"', dom).group(1) == str(n_nodes)
    assert len(re.findall(r'<(?:circle|rect) data-id="\d+"', dom)) == n_nodes
    assert "<td>node</td><td>0</td>" in dom, "the URL fragment selected the root"
    assert screenshot(out / "tree.html", tmp_path / "demo.png", fragment="#node-1") == (1200, 800)
