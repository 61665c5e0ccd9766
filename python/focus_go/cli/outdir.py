"""The output directory of ``focus-go collect``::

    actor.jsonl     actor records of every completed problem (group_index = line order)
    critic.jsonl    critic records
    trees/          one tree per completed problem (``focus-go view`` renders it)
    failures.jsonl  problems that produced no tree, and failed rollouts (only if any)
    run.json        the settings and the summary

``check_out_dir`` refuses a directory an earlier run wrote to (unless ``--overwrite`` or
``--resume``), ``clear_out_dir`` removes what such a run wrote, and ``Output`` appends each
completed problem's records and then writes its tree whole: a tree file marks its problem
complete, which is what ``--resume`` reads (``focus_go.cli.resume``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, TextIO

from .._records import jsonl
from ..errors import ConfigError
from ..integrations import _safe_stem, _write_atomic

RECORD_FILES = ("actor.jsonl", "critic.jsonl", "failures.jsonl", "run.json")
"""The files a run writes beside ``trees/`` (and all that ``clear_out_dir`` removes)."""


def tree_name(index: int, pid: str) -> str:
    """The file name of problem ``index``'s tree in ``trees/``."""
    return f"{index:05d}-{_safe_stem(pid, 48)}.json"


def write_atomic(path: Path, text: str) -> None:
    """Write ``path`` whole through a synced temporary file: a reader sees the old file or
    the new one."""
    _write_atomic(path, text)


class Output:
    """The output directory: append-per-problem JSONL files and whole tree files. Writes
    happen on the event loop between awaits, so a cancellation never lands mid-write."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.trees = directory / "trees"
        self.trees.mkdir(parents=True, exist_ok=True)
        self.actor = (directory / "actor.jsonl").open("a", encoding="utf-8")
        self.critic = (directory / "critic.jsonl").open("a", encoding="utf-8")
        self.failures: Optional[TextIO] = None

    def problem(self, index: int, pid: str, tree_json: str, actor: Sequence[Dict[str, Any]], critic: Sequence[Dict[str, Any]]) -> Path:
        for f, records in ((self.actor, actor), (self.critic, critic)):
            if records:
                f.write(jsonl(records))
                f.flush()
                os.fsync(f.fileno())
        # Written last and whole: a tree file marks its problem complete (what --resume reads).
        tree_path = self.trees / tree_name(index, pid)
        write_atomic(tree_path, tree_json)
        return tree_path

    def failure(self, record: Dict[str, Any]) -> None:
        if self.failures is None:
            self.failures = (self.directory / "failures.jsonl").open("a", encoding="utf-8")
        self.failures.write(jsonl([record]))
        self.failures.flush()

    def close(self) -> None:
        for f in (self.actor, self.critic, self.failures):
            if f is not None:
                f.close()


def check_out_dir(out: Path, overwrite: bool, resume: bool) -> List[str]:
    """What an earlier run left in ``out`` (refused unless ``overwrite`` or ``resume``);
    creates nothing."""
    existing = [name for name in RECORD_FILES if (out / name).exists()]
    trees = out / "trees"
    if trees.is_dir() and any(trees.glob("*.json")):
        existing.append("trees/")
    if existing and not (overwrite or resume):
        raise ConfigError(f"--out {out}: already holds {', '.join(existing)} from an earlier run; "
                          "choose another directory, pass --resume to collect only the problems it lacks, "
                          "or --overwrite to start again")
    return existing


def clear_out_dir(out: Path) -> None:
    """Remove what an earlier run wrote (only the files this command writes)."""
    for name in RECORD_FILES:
        with contextlib.suppress(FileNotFoundError):
            (out / name).unlink()
    for f in (out / "trees").glob("*.json"):
        f.unlink()
