"""``focus-go collect --resume``: which problems an earlier run in the output directory
completed (their tree files exist), and dropping every record of the ones it did not (what
an interrupted write or an unfinished problem left), so they are collected again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Sequence

from ..errors import ConfigError
from .outdir import tree_name, write_atomic
from .problems import LoadedProblem


def completed_indices(out: Path, problems: Sequence[LoadedProblem]) -> List[int]:
    """The problems an earlier run in ``out`` completed (their tree files exist). A tree
    file that names another problem than this file's at its index is refused: the run was
    for a different problems file."""
    trees = out / "trees"
    if not trees.is_dir():
        return []
    names = {tree_name(p.index, str(p.problem.id)): p.index for p in problems}
    done: List[int] = []
    for f in sorted(trees.glob("*.json")):
        if f.name in names:
            done.append(names[f.name])
        elif f.name[:5].isdigit() and f.name[5:6] == "-":
            raise ConfigError(f"--resume: {f} is not a tree of this problems file (problem {int(f.name[:5])} "
                              "has another id, or the file has fewer problems); use another --out or --overwrite")
    return done


def _keep_lines(path: Path, keep: Any) -> None:
    """Rewrite a JSONL file with only the lines that parse and that ``keep`` accepts (drops
    what an interrupted write or an unfinished problem left)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and keep(record):
            kept.append(line + "\n")
    write_atomic(path, "".join(kept))


def trim_for_resume(out: Path, problems: Sequence[LoadedProblem], done: Sequence[int]) -> None:
    """Keep only the records and failures of completed problems."""
    done_set = set(done)
    done_lines = {p.line for p in problems if p.index in done_set}
    for name in ("actor.jsonl", "critic.jsonl"):
        _keep_lines(out / name, lambda r: r.get("group_index") in done_set)
    _keep_lines(out / "failures.jsonl", lambda r: r.get("kind") == "rollout" and r.get("line") in done_lines)
    failures = out / "failures.jsonl"
    if failures.exists() and failures.stat().st_size == 0:
        failures.unlink()
