"""`focus-go view`: saved trees rendered to self-contained HTML, checked in headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chromium import dump_dom, screenshot
from focus_go.__main__ import main
from trees import figure61, tree_json


def write_tree(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_view_writes_page_beside_the_tree(tmp_path, capsys):
    tree = write_tree(tmp_path / "fig.json", figure61())
    assert main(["view", str(tree)]) == 0
    page = (tmp_path / "fig.html").read_text()
    assert page.startswith("<!doctype html>")
    assert page.count('<circle data-id="') == 3 and page.count('<rect data-id="') == 4
    assert "7 nodes" in capsys.readouterr().out
    # Prepared with the default reward settings: V*(a) = (0.5 + 3) / 4 = 0.875, target Ḡ(a) = 1.
    nodes = json.loads(re.search(r"const nodes = (.*);\n", page).group(1))
    assert nodes[1]["v_star"] == pytest.approx(0.875) and nodes[1]["target"] == pytest.approx(1.0)


def test_view_reward_flags_change_the_values(tmp_path):
    tree = write_tree(tmp_path / "fig.json", figure61())
    out = tmp_path / "k0.html"
    assert main(["view", str(tree), "-o", str(out), "--critic-weight", "0"]) == 0
    nodes = json.loads(re.search(r"const nodes = (.*);\n", out.read_text()).group(1))
    assert nodes[1]["v_star"] == pytest.approx(1.0), "kappa = 0: tree Monte Carlo"


@pytest.mark.parametrize(
    "setup, args, message",
    [
        (lambda d: write_tree(d / "x.json", '{"x": 1}'), ["{d}/x.json"], "not a focus-go tree"),
        (lambda d: None, ["{d}/missing.json"], "no such tree file"),
        (lambda d: write_tree(d / "x.json", figure61()), ["{d}/x.json", "{d}/x.json", "-o", "{d}/o.html"], "one page"),
        (lambda d: write_tree(d / "x.html", figure61()), ["{d}/x.html"], "would overwrite"),
    ],
    ids=["not a tree", "missing", "output with two trees", "html input"],
)
def test_view_refuses_bad_input(tmp_path, capsys, setup, args, message):
    setup(tmp_path)
    assert main(["view", *[a.format(d=tmp_path) for a in args]]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o.html").exists()


def test_view_picks_up_collect_run_settings(tmp_path):
    (tmp_path / "trees").mkdir()
    tree = write_tree(tmp_path / "trees" / "00000-p.json", figure61())
    (tmp_path / "run.json").write_text(json.dumps({"reward": {"critic_weight": 0.0}, "estimator": "DirectBranchTd"}))
    assert main(["view", str(tree)]) == 0
    nodes = json.loads(re.search(r"const nodes = (.*);\n", tree.with_suffix(".html").read_text()).group(1))
    assert nodes[1]["v_star"] == pytest.approx(1.0), "critic_weight from run.json"


def test_page_renders_in_headless_chromium(tmp_path):
    failed = tree_json(
        [(0, 0.0, False, 0.5, (1,)), (1, 1.0, True, None, (2,)), (1, 0.0, True, None, (3,)), (0, 0.0, True, None, (4,))],
        failed={4: "tool timeout"}, problem_id="chromium-check",
    )
    for name, text, n in (("fig", figure61(), 7), ("failed", failed, 5)):
        tree = write_tree(tmp_path / f"{name}.json", text)
        assert main(["view", str(tree)]) == 0
        page = tree.with_suffix(".html")
        dom = dump_dom(page, "#node-1")
        # The script ran: it counted the drawn nodes and showed node 1 (from the URL fragment).
        assert re.search(r'<body data-nodes="(\d+)"', dom).group(1) == str(n)
        assert len(re.findall(r'<(?:circle|rect) data-id="\d+"', dom)) == n
        panel = re.search(r'<aside id="panel">(.*?)</aside>', dom, re.S).group(1)
        assert "<td>node</td><td>1</td>" in panel and "<pre>edge 1</pre>" in panel
        assert dom.count('class="sel"') == 1


def test_screenshot_is_a_picture_of_the_tree(tmp_path):
    tree = write_tree(tmp_path / "fig.json", figure61())
    assert main(["view", str(tree)]) == 0
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><html><body></body></html>")
    assert screenshot(tree.with_suffix(".html"), tmp_path / "tree.png", fragment="#node-1") == (1200, 800)
    assert screenshot(blank, tmp_path / "blank.png") == (1200, 800)
    # Coloured shapes, lines and the node panel compress far worse than an empty page.
    assert (tmp_path / "tree.png").stat().st_size > 3 * (tmp_path / "blank.png").stat().st_size


def test_view_renders_a_collect_directory_in_chromium(tmp_path, capsys):
    from focus_go.sim import SimServer

    with SimServer(seed=0) as server:
        problems = tmp_path / "p.jsonl"
        problems.write_text("".join(json.dumps({"id": p.id, "prompt": p.prompt, "label": p.label}) + "\n" for p in server.problems()[:2]))
    out = tmp_path / "run"
    assert main(["collect", str(problems), "--out", str(out), "--budget", "6", "--warmup", "3", "--critic-weight", "2"]) == 0
    assert main(["view", str(out)]) == 0
    assert capsys.readouterr().out.count(".html  (") == 2
    for tree in sorted((out / "trees").glob("*.json")):
        nodes = json.loads(tree.read_text())["nodes"]
        page = tree.with_suffix(".html")
        data = json.loads(re.search(r"const nodes = (.*);\n", page.read_text()).group(1))
        assert [n["id"] for n in data] == [n["id"] for n in nodes]
        dom = dump_dom(page)
        assert re.search(r'<body data-nodes="(\d+)"', dom).group(1) == str(len(nodes))
    assert main(["view", str(tmp_path / "p.jsonl").replace("p.jsonl", "")]) == 2, "a directory without trees"
