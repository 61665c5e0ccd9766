"""``focus-go view``: render saved trees (``SchedulerState.save`` / ``to_json`` files, as
``focus-go collect`` writes to ``trees/`` and ``focus-go demo`` to ``tree.json``) to
self-contained HTML pages: nodes coloured by refined value V*, edges by advantage; click a
node to read its segment text, critic prediction and critic target.

The tree is prepared again (``prepare_samples``) to get V*, advantages and targets. The
reward settings come from the flags, else from the ``run.json`` that ``focus-go collect``
wrote beside the ``trees/`` directory, else the defaults.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, TextIO

from ..errors import ConfigError, FocusError

_REWARD_FLAGS = ("gamma", "critic_weight", "reward_min", "reward_max", "truncated_reward", "truncation")


def _run_settings(tree_path: Path) -> Dict[str, Any]:
    """The settings of the ``focus-go collect`` run that wrote ``tree_path``, if any."""
    run = tree_path.resolve().parent.parent / "run.json"
    if tree_path.resolve().parent.name != "trees" or not run.is_file():
        return {}
    try:
        data = json.loads(run.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def render(tree_path: Path, html_path: Path, args: argparse.Namespace) -> Dict[str, Any]:
    """Render one tree file to ``html_path``; returns what the page shows (node count,
    problem id, reward settings used)."""
    from ..export import format_tree_html
    from ..preparation import RewardConfig, prepare_samples
    from .settings import ESTIMATORS
    from ..tree import SchedulerState, SchedulerView

    try:
        text = tree_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{tree_path}: no such tree file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{tree_path}: cannot read it: {exc}") from None
    run = _run_settings(tree_path)
    reward_fields: Dict[str, Any] = dict(run.get("reward") or {})
    for name in _REWARD_FLAGS:
        value = getattr(args, name, None)
        if value is not None:
            reward_fields[name] = value
    try:
        reward = RewardConfig(**{k: v for k, v in reward_fields.items() if k in _REWARD_FLAGS})
    except TypeError as exc:
        raise ConfigError(f"reward settings {reward_fields}: {exc}") from None
    by_name = {cls.name: flag for flag, cls in ESTIMATORS.items()}
    estimator_name = args.estimator or by_name.get(run.get("estimator", ""), "direct-branch-td")
    estimator = ESTIMATORS[estimator_name]()
    try:
        state = SchedulerState.from_json(text)
    except FocusError as exc:
        raise ConfigError(f"{tree_path}: not a focus-go tree ({exc})") from None
    try:
        view = SchedulerView(state)
        n_nodes = len(view)
        batch = prepare_samples(state, reward_config=reward, estimator=estimator)
        try:
            page = format_tree_html(view, batch)
        finally:
            if batch._go is not None:
                batch._go.close()
        problem_id = state.problem_id
    finally:
        state.close()
    html_path.write_text(page, encoding="utf-8")
    return {"nodes": n_nodes, "problem_id": problem_id, "reward": reward, "estimator": estimator.name}


def run_view(args: argparse.Namespace, stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None) -> int:
    """The ``view`` command; returns the exit code."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    trees: List[Path] = []
    for arg in map(Path, args.trees):
        if arg.is_dir():
            # A `focus-go collect` output directory (its trees/), or a directory of trees.
            found = sorted((arg / "trees" if (arg / "trees").is_dir() else arg).glob("*.json"))
            if not found:
                print(f"focus-go view: {arg}: no tree files (*.json) in it or in its trees/", file=stderr)
                return 2
            trees.extend(found)
        else:
            trees.append(arg)
    if args.output and len(trees) != 1:
        print("focus-go view: --output names one page; give one tree, or drop --output to write TREE.html beside each", file=stderr)
        return 2
    status = 0
    for tree in trees:
        out: Path = Path(args.output) if args.output else tree.with_suffix(".html")
        if out.resolve() == tree.resolve():
            print(f"focus-go view: {tree}: the page would overwrite the tree; pass --output", file=stderr)
            status = 2
            continue
        try:
            info = render(tree, out, args)
        except FocusError as exc:
            print(f"focus-go view: {exc}", file=stderr)
            status = 2 if isinstance(exc, ConfigError) else 1
            continue
        print(f"{out}  ({info['nodes']} nodes, problem {info['problem_id'] or '-'}; open it in a browser and click a node)", file=stdout)
    return status


def add_parser(commands: Any) -> None:
    """Register ``view`` on the ``focus-go`` subcommand parser."""
    p = commands.add_parser(
        "view",
        help="render saved trees to self-contained HTML (click a node to read it)",
        description=__doc__.split("\n\n")[0].replace("``", "'"),
    )
    p.add_argument("trees", nargs="+", metavar="TREE", help="tree JSON file(s), or a directory: every tree in it (or in its trees/)")
    p.add_argument("-o", "--output", help="the HTML file (one tree only; default: TREE with .html)")
    g = p.add_argument_group("reward settings (default: the collect run's run.json, else RewardConfig())")
    g.add_argument("--gamma", type=float)
    g.add_argument("--critic-weight", type=float)
    g.add_argument("--reward-min", type=float)
    g.add_argument("--reward-max", type=float)
    g.add_argument("--truncated-reward", type=float)
    g.add_argument("--truncation", choices=("terminal", "bootstrap"))
    g.add_argument("--estimator", choices=("direct-branch-td", "group-baseline", "tree-group-baseline"))
    p.set_defaults(run=run_view)

