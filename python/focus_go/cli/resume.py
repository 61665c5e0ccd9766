"""``focus-go collect --resume``: which problems an earlier run in the output directory
completed (their tree files exist), whether it collected them the same way (``run.json``
records the settings that shape the data and a digest of each problem: ``check_same_run``
refuses any difference), which of its trees are degraded (have failed rollouts, what
``--retry-failed`` collects again), and dropping every record of the problems it did not
complete (what an interrupted write or an unfinished problem left), so they are collected
again."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Set

from ..errors import ConfigError
from .outdir import tree_name, write_atomic
from .problems import LoadedProblem


def completed_indices(out: Path, problems: Sequence[LoadedProblem], flag: str = "--resume") -> List[int]:
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
            raise ConfigError(f"{flag}: {f} is not a tree of this problems file (problem {int(f.name[:5])} "
                              "has another id, or the file has fewer problems); use another --out or --overwrite")
    return done


RESUMABLE_FLAGS = ("--concurrency", "--capacity", "--max-in-flight", "--routing", "--limit", "--timeout", "--wait-for-server", "--sglang/--vllm URL", "--critic-url URL",
                   "--api-key", "--sim-latency", "--retry-failed", "--progress-interval", "--allow-degraded")
"""What a resumed run may change: flags that do not alter the data (every other setting is
recorded in run.json and must match)."""


RECORDED_SINCE: Dict[str, Any] = {"visitation_weights": False, "stop_alike": False, "allow_weight_change": False}
"""Settings an older run.json does not record, with the value its data was collected with
(records were unweighted before ``--visitation-weights`` existed, and every tree spent its
whole budget before ``--stop-alike``)."""


def problem_digest(problem: Any) -> str:
    """A digest of what a problem feeds the collection: id, prompt, label and metadata."""
    text = json.dumps({"id": problem.id, "prompt": problem.prompt, "label": problem.label,
                       "metadata": dict(problem.metadata or {})}, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def read_run_json(out: Path) -> Dict[str, Any]:
    """The earlier run's run.json (empty when there is none or it cannot be read)."""
    try:
        run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return run if isinstance(run, dict) else {}


PATH_SETTINGS = ("model", "tokenizer")
"""Settings that may name a local directory: the same directory spelled another way
(``./m``, ``m``, an absolute path, a symlink) is the same setting."""


def _same_setting(key: str, before: Any, now: Any) -> bool:
    if before == now:
        return True
    if key in PATH_SETTINGS and isinstance(before, str) and isinstance(now, str):
        a, b = Path(before).expanduser(), Path(now).expanduser()
        return a.exists() and b.exists() and a.resolve() == b.resolve()
    return False


def check_same_run(out: Path, settings: Mapping[str, Any], digests: Sequence[str], problems: Sequence[LoadedProblem],
                   done: Sequence[int], flag: str = "--resume") -> List[str]:
    """Refuse to resume a run collected differently: every recorded setting must match
    (the message names each one that differs, with both values), and every completed
    problem must be unchanged in the problems file. Returns the digests to record: this
    file's, then the earlier run's for problems past this run's ``--limit``."""
    if not done:
        return list(digests)  # nothing kept from the earlier run: nothing can mix
    earlier = read_run_json(out)
    old_settings, old_digests = earlier.get("settings"), earlier.get("problems")
    if not isinstance(old_settings, dict) or not isinstance(old_digests, list):
        raise ConfigError(f"{flag}: {out / 'run.json'} does not record the earlier run's settings and problems "
                          "(it is missing, damaged, or from an older focus-go), so a resumed run cannot be checked "
                          "against it; use --overwrite or another --out")
    old_settings = {**RECORDED_SINCE, **old_settings}
    changed = [f"{key}: {old_settings.get(key)!r} before, {value!r} now"
               for key, value in settings.items() if not _same_setting(key, old_settings.get(key), value)]
    changed += [f"{key}: {value!r} before, not set now" for key, value in old_settings.items() if key not in settings]
    if changed:
        raise ConfigError(f"{flag}: the earlier run in " + str(out) + " was collected with other settings ("
                          + "; ".join(changed) + "). Resume with the same settings (only "
                          + ", ".join(RESUMABLE_FLAGS) + " may change), or use --overwrite or another --out")
    by_index = {p.index: p for p in problems}
    for index in done:
        if index >= len(old_digests) or old_digests[index] != digests[index]:
            p = by_index[index]
            raise ConfigError(f"{flag}: problem {p.problem.id!r} (line {p.line}) is not the one the earlier run "
                              "collected (its prompt, label, id or other keys changed); use --overwrite or another --out")
    return list(digests) + [d for d in old_digests[len(digests):] if isinstance(d, str)]


TREE_FAILURES = ("rollout", "inexact")
"""The failures.jsonl kinds that belong to a collected tree (a failed rollout, an inexact
edge); "problem" is a problem without a tree."""


def degraded_lines(out: Path) -> Set[int]:
    """The problem lines with failed rollouts or inexact edges listed in failures.jsonl
    (degraded trees)."""
    lines: Set[int] = set()
    path = out / "failures.jsonl"
    if not path.exists():
        return lines
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("kind") in TREE_FAILURES and isinstance(record.get("line"), int):
            lines.add(record["line"])
    return lines


def degraded_trees(out: Path, problems: Sequence[LoadedProblem], done: Sequence[int]) -> Set[int]:
    """The completed problems (indexes) whose tree file has a failed or inexact node: the
    degraded trees, found from the trees themselves (failures.jsonl may be gone)."""
    by_index = {p.index: p for p in problems}
    found: Set[int] = set()
    for index in done:
        p = by_index[index]
        try:
            tree = json.loads((out / "trees" / tree_name(index, str(p.problem.id))).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        nodes = tree.get("nodes") if isinstance(tree, dict) else None
        if any(isinstance(n, dict) and (n.get("failed") or n.get("inexact")) for n in nodes or ()):
            found.add(index)
    return found


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
    _keep_lines(out / "failures.jsonl", lambda r: r.get("kind") in TREE_FAILURES and r.get("line") in done_lines)
    failures = out / "failures.jsonl"
    if failures.exists() and failures.stat().st_size == 0:
        failures.unlink()
