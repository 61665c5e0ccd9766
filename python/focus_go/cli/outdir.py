"""The output directory of ``focus-go collect``::

    actor.jsonl     actor records of every completed problem (group_index = line order)
    critic.jsonl    critic records
    trees/          one tree per completed problem (``focus-go view`` renders it)
    failures.jsonl  problems that produced no tree, and failed rollouts (only if any)
    run.json        the settings, a digest of each problem, and the summary
    .focus-go.lock  the writer's lock (holds its pid while a run writes)

One writer per directory: ``OutLock`` holds an advisory lock (``flock``) for the whole run,
and a second run fails at once naming the holder's pid. ``check_out_dir`` refuses a
directory an earlier run wrote to (unless ``--overwrite`` or ``--resume``), ``clear_out_dir``
removes what such a run wrote, and ``Output`` appends each completed problem's records and
then writes its tree whole: a tree file marks its problem complete, which is what
``--resume`` reads (``focus_go.cli.resume``). Records are appended in one ``write`` per
file per problem and synced; a write that fails (a full disk) is cut back to the last whole
line, and opening a file cuts a torn last line a crash left, so every line stays whole.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Sequence

from .._records import jsonl
from ..errors import ConfigError
from ..integrations import _safe_stem, _write_atomic

RECORD_FILES = ("actor.jsonl", "critic.jsonl", "failures.jsonl", "run.json")
"""The files a run writes beside ``trees/`` (and all that ``clear_out_dir`` removes)."""

LOCK_FILE = ".focus-go.lock"
"""The lock file in ``--out`` (kept between runs: removing a lock file others may have open
would let two writers in)."""


def tree_name(index: int, pid: str) -> str:
    """The file name of problem ``index``'s tree in ``trees/``."""
    return f"{index:05d}-{_safe_stem(pid, 48)}.json"


def write_atomic(path: Path, text: str) -> None:
    """Write ``path`` whole through a synced temporary file: a reader sees the old file or
    the new one."""
    _write_atomic(path, text)


class OutLock:
    """The advisory lock that makes a run the only writer of ``--out``. ``acquire`` creates
    the directory if needed (``release(discard=True)`` removes it again when the run wrote
    nothing) and fails at once, with the holder's pid, when another run holds it."""

    def __init__(self, out: Path, fd: int, created: bool) -> None:
        self.out, self.fd, self.created = out, fd, created

    @classmethod
    def acquire(cls, out: Path) -> "OutLock":
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {out}: is a file, not a directory")
        created = not out.exists()
        try:
            out.mkdir(parents=True, exist_ok=True)
            fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(f"--out {out}: cannot write there: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ConfigError(f"--out {out}: another focus-go collect (pid {holder}) is writing there; "
                                  "wait for it to end or choose another directory") from None
            raise ConfigError(f"--out {out}: cannot lock it: {exc.strerror or exc}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(out, fd, created)

    def release(self, discard: bool = False) -> None:
        """Unlock; with ``discard``, a directory this run created and left empty (but for
        the lock file) is removed."""
        if self.fd < 0:
            return
        if discard and self.created:
            with contextlib.suppress(OSError):
                (self.out / "trees").rmdir()  # only when empty
            with contextlib.suppress(OSError):
                if [p.name for p in self.out.iterdir()] == [LOCK_FILE]:
                    (self.out / LOCK_FILE).unlink()
                    self.out.rmdir()
        os.close(self.fd)  # closing the last descriptor releases the flock
        self.fd = -1


def _open_append(path: Path) -> int:
    """An O_APPEND descriptor on ``path``, after cutting a torn last line a crash left."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    size = os.fstat(fd).st_size
    if size:
        with path.open("rb") as f:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                # Back to the last newline, reading the tail in blocks (the file may be large).
                end = size
                whole = 0
                while end > 0:
                    start = max(0, end - (1 << 16))
                    f.seek(start)
                    at = f.read(end - start).rfind(b"\n")
                    if at >= 0:
                        whole = start + at + 1
                        break
                    end = start
                os.ftruncate(fd, whole)
    return fd


def _append(fd: int, text: str) -> None:
    """Append ``text`` (whole lines) in one write and sync it; on a failure (a full disk) the
    file is cut back to where it was, so no line is left half written."""
    data = text.encode("utf-8")
    if not data:
        return
    size = os.fstat(fd).st_size
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise


class Output:
    """The output directory: append-per-problem JSONL files and whole tree files. Writes
    happen on the event loop between awaits, so a cancellation never lands mid-write."""

    NAMES = ("actor.jsonl", "critic.jsonl", "failures.jsonl")

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.trees = directory / "trees"
        self.trees.mkdir(parents=True, exist_ok=True)
        self.fds: Dict[str, int] = {}
        self._open()

    def _open(self) -> None:
        for name in ("actor.jsonl", "critic.jsonl"):
            self.fds[name] = _open_append(self.directory / name)
        if (self.directory / "failures.jsonl").exists():
            self.fds["failures.jsonl"] = _open_append(self.directory / "failures.jsonl")

    def _write(self, name: str, records: Sequence[Dict[str, Any]]) -> None:
        if not records:
            return
        if name not in self.fds:
            self.fds[name] = _open_append(self.directory / name)
        _append(self.fds[name], jsonl(records))

    def problem(self, index: int, pid: str, tree_json: str, actor: Sequence[Dict[str, Any]], critic: Sequence[Dict[str, Any]],
                failures: Sequence[Dict[str, Any]] = ()) -> Path:
        """Append a completed problem's records and failed rollouts, then write its tree."""
        self._write("actor.jsonl", actor)
        self._write("critic.jsonl", critic)
        self._write("failures.jsonl", failures)
        # Written last and whole: a tree file marks its problem complete (what --resume reads).
        tree_path = self.trees / tree_name(index, pid)
        write_atomic(tree_path, tree_json)
        return tree_path

    def replace(self, index: int, line: int, pid: str, tree_json: str, actor: Sequence[Dict[str, Any]],
                critic: Sequence[Dict[str, Any]], failures: Sequence[Dict[str, Any]]) -> Path:
        """Replace an earlier tree of problem ``index`` (``--retry-failed``): its tree file goes
        first (the problem is then incomplete, so a crash from here on makes ``--resume``
        collect it again), each JSONL file is rewritten whole without its old lines and with
        the new ones, and the new tree is written last."""
        with contextlib.suppress(FileNotFoundError):
            (self.trees / tree_name(index, pid)).unlink()
        self.close()
        for name, new, old in (("actor.jsonl", actor, lambda r: r.get("group_index") == index),
                               ("critic.jsonl", critic, lambda r: r.get("group_index") == index),
                               ("failures.jsonl", failures, lambda r: r.get("line") == line)):
            path = self.directory / name
            kept = []
            if path.exists():
                for raw in path.read_text(encoding="utf-8").splitlines(keepends=True):
                    try:
                        record = json.loads(raw)
                    except json.JSONDecodeError:
                        continue
                    if isinstance(record, dict) and not old(record):
                        kept.append(raw if raw.endswith("\n") else raw + "\n")
            if kept or new or name != "failures.jsonl":
                write_atomic(path, "".join(kept) + jsonl(new))
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        self._open()
        tree_path = self.trees / tree_name(index, pid)
        write_atomic(tree_path, tree_json)
        return tree_path

    def failure(self, record: Dict[str, Any]) -> None:
        self._write("failures.jsonl", [record])

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


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
