"""No Python module of the package grows past 700 lines.

A module that holds several jobs is split by job before it grows past about 700 lines
(docs/architecture.md, "The Python package"): the Slime integration, the collector and the
command line were split so. This test reads the source tree (``python/``), the modules of
``focus_go`` and of its ``focus`` alias alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict

SOURCE = Path(__file__).resolve().parents[1] / "python"
MAX_LINES = 700


def module_lines(root: Path) -> Dict[str, int]:
    """The line count of every ``.py`` file under ``root``, by its path relative to it."""
    return {
        str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(root.rglob("*.py"))
        if not any(part.endswith(".egg-info") for part in path.parts)
    }


def too_long(root: Path, limit: int = MAX_LINES) -> Dict[str, int]:
    return {name: n for name, n in module_lines(root).items() if n > limit}


def test_the_size_check_finds_a_long_module(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert too_long(tmp_path) == {"pkg/long.py": MAX_LINES + 1}


def test_no_module_is_over_700_lines():
    lines = module_lines(SOURCE)
    assert "focus_go/collector.py" in lines and "focus/__init__.py" in lines
    long = too_long(SOURCE)
    assert not long, (
        f"modules over {MAX_LINES} lines: {long}; split each by job into a package or private "
        "sibling modules (as integrations/slime/, _bridge.py and cli/ are)"
    )
