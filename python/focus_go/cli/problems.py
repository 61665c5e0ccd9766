"""The problems file of ``focus-go collect``: a JSONL file read and checked whole before
anything starts, so a bad line stops the command with its line number and nothing
written."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..errors import ConfigError
from ..types import Problem


class ProblemsFileError(ConfigError):
    """A problems file that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class LoadedProblem:
    """A problem read from the file, with its 1-based line number and 0-based index (the
    records' ``group_index``)."""

    index: int
    line: int
    problem: Any


def read_problems(
    path: Path, *, prompt_key: str = "prompt", label_key: str = "label", id_key: str = "id", limit: Optional[int] = None,
    label_required: bool = True,
) -> List[LoadedProblem]:
    """Every problem of a JSONL file, checked whole before any is used.

    Blank lines are skipped. Each other line must be a JSON object with a ``prompt_key``
    (a string, or a list of chat messages) and a ``label_key`` (the reference answer: a
    string or a number; optional without ``label_required``, for ``--env``); ``id_key`` is optional (default ``line-N``) and must be unique.
    Other keys become the problem's metadata. Raises ProblemsFileError naming the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProblemsFileError(f"{path}: no such problems file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemsFileError(f"{path}: cannot read it: {exc}") from None
    out: List[LoadedProblem] = []
    seen: Dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            item = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ProblemsFileError(f"{where}: bad JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:
            raise ProblemsFileError(f"{where}: JSON nested too deeply to read") from None
        if not isinstance(item, dict):
            raise ProblemsFileError(f"{where}: expected a JSON object, got {type(item).__name__}")
        if prompt_key not in item:
            raise ProblemsFileError(f"{where}: missing prompt key {prompt_key!r} (keys: {', '.join(sorted(item)) or 'none'}; see --prompt-key)")
        prompt = item[prompt_key]
        if not (isinstance(prompt, str) and prompt.strip()):
            problem = _messages_problem(prompt)
            if problem:
                raise ProblemsFileError(f"{where}: {prompt_key!r} must be a non-empty string or a list of chat messages; {problem}")
        if label_key not in item and label_required:
            raise ProblemsFileError(f"{where}: missing label key {label_key!r} (keys: {', '.join(sorted(item)) or 'none'}; see --label-key)")
        label = item.get(label_key)
        if (label is not None or label_required) and (
                isinstance(label, bool) or not isinstance(label, (str, int, float)) or str(label).strip() == ""):
            raise ProblemsFileError(f"{where}: {label_key!r} must be a non-empty string or a number, got {label!r:.60}")
        if isinstance(label, float) and not math.isfinite(label):
            raise ProblemsFileError(f"{where}: {label_key!r} is {label!r}, not a finite number: no answer can match it")
        pid = item.get(id_key, f"line-{lineno}")
        if pid is None or isinstance(pid, (dict, list, bool)):
            raise ProblemsFileError(f"{where}: {id_key!r} must be a string or a number, got {pid!r:.60}")
        pid = str(pid)
        if pid in seen:
            raise ProblemsFileError(f"{where}: id {pid!r} repeats line {seen[pid]}")
        seen[pid] = lineno
        metadata = {k: v for k, v in item.items() if k not in (prompt_key, label_key, id_key)}
        out.append(LoadedProblem(len(out), lineno, Problem(prompt=prompt, label=None if label is None else str(label), id=pid, metadata=metadata)))
    if not out:
        raise ProblemsFileError(f"{path}: no problems (the file is empty)")
    # Lines past the limit are checked too: the whole file is good, or nothing starts.
    return out if limit is None else out[:limit]


ROLES = ("system", "user", "assistant", "tool")
"""The chat roles a problem's messages may have (the chat template may accept fewer; each
prompt is also rendered before the first problem starts)."""


def _messages_problem(value: Any) -> str:
    """What is wrong with ``value`` as a list of chat messages ("" when nothing is): each a
    JSON object with a role of ``ROLES`` and a content that is a string or a list of parts
    (objects with a string ``type``; a text part has a string ``text``)."""
    if not isinstance(value, list) or not value:
        return f"got {value!r:.60}"
    for i, m in enumerate(value):
        if not isinstance(m, dict):
            return f"message {i} is {type(m).__name__}, not an object"
        role = m.get("role")
        if role not in ROLES:
            return f"message {i} has role {role!r:.40}, expected one of {', '.join(ROLES)}"
        if "content" not in m:
            return f"message {i} has no content"
        content = m["content"]
        if isinstance(content, str) or (content is None and role == "assistant"):
            continue
        if not isinstance(content, list):
            return f"message {i} has content {content!r:.40}, expected a string or a list of parts"
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                return f"message {i} part {j} is {part!r:.40}, expected an object with a string 'type'"
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                return f"message {i} part {j} is a text part without a string 'text'"
    return ""
