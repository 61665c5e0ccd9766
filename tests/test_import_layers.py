"""The Python package's layers: no import circle, and a floor of plain types.

Two checks. Statically, every import statement of ``focus_go`` (module level, inside
functions and under ``TYPE_CHECKING`` alike) is an arrow from one module to another; the
arrows must form no cycle, and ``focus_go.types`` (the plain types) must have none leaving
it. Dynamically, each module is imported first and alone in a fresh interpreter, which
records every import statement that reaches a module still being initialised (a runtime
circle, the kind that fails with "partially initialized module").
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Set

import pytest

import focus_go

ROOT = Path(focus_go.__file__).resolve().parent
FLOOR = "focus_go.types"


def package_modules(root: Path) -> Dict[str, Path]:
    """Every module of the package in directory ``root``: dotted name -> source file."""
    out: Dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = package_modules(ROOT)


def _ancestors(name: str) -> Set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def import_arrows(name: str, modules: Dict[str, Path] = MODULES) -> Set[str]:
    """The package modules ``name``'s import statements load. ``from X import y`` loads
    ``X.y`` when that is a module, else takes ``y`` from ``X`` (an arrow to ``X``, even when
    ``X`` is a package enclosing ``name``). Loading a module also loads the packages above
    it, except those enclosing ``name`` (already loading when ``name`` runs)."""
    path = modules[name]
    top = name.partition(".")[0]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: List[str] = []
    names_from: List[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in modules:
                    targets.append(sub)
                else:
                    targets.append(source)
                    names_from.append(source)
    out: Set[str] = set()
    for target in targets:
        if target.partition(".")[0] != top:
            continue
        for loaded in {target} | _ancestors(target):
            if loaded in modules and loaded != name and loaded not in _ancestors(name):
                out.add(loaded)
    out.update(n for n in names_from if n in modules and n != name)
    return out


def find_cycles(arrows: Dict[str, Set[str]]) -> List[List[str]]:
    """One cycle (as a path that returns to its start) per strongly connected group."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    groups: List[Set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(arrows[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(arrows):
        if v not in index:
            visit(v)
    cycles = []
    for group in groups:
        start = min(group)
        path, seen = [start], {start}
        while True:  # walk inside the group until a module repeats
            nxt = min(w for w in arrows[path[-1]] if w in group)
            if nxt in seen:
                cycles.append(path[path.index(nxt):] + [nxt])
                break
            path.append(nxt)
            seen.add(nxt)
    return cycles


def test_the_cycle_finder_finds_cycles():
    arrows = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert find_cycles(arrows) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    arrows = {name: import_arrows(name) for name in MODULES}
    cycles = find_cycles(arrows)
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_plain_types_import_nothing_of_the_package():
    assert FLOOR in MODULES
    assert import_arrows(FLOOR) == set(), f"{FLOOR} must import no other module of focus_go"


# Run in a fresh interpreter: wrap __import__ so that every import statement that reaches a
# module still executing is recorded: a submodule, a module that is not a package enclosing
# the importer, or any module a name is taken from.
_PROBE = r"""
import builtins, importlib, json, sys

target, package = sys.argv[1], sys.argv[2]
reached = []
real_import = builtins.__import__

def initializing(name):
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    return module is not None and bool(getattr(spec, "_initializing", False))

def probe(name, globals=None, locals=None, fromlist=(), level=0):
    module = real_import(name, globals, locals, fromlist, level)
    importer = (globals or {}).get("__name__", "")
    if importer.partition(".")[0] != package:
        return module
    enclosing = {importer.rsplit(".", k)[0] for k in range(1, importer.count(".") + 1)} | {importer}
    if fromlist:
        resolved = module.__name__
        for f in fromlist:
            sub = resolved + "." + f
            if sub in sys.modules:  # a submodule
                if sub not in enclosing and initializing(sub):
                    reached.append([importer, sub])
            elif f != "*" and resolved != importer and initializing(resolved):
                reached.append([importer, resolved])  # a name taken from a module still executing
    else:
        resolved = importlib.util.resolve_name(name, (globals or {}).get("__package__")) if level else name
        if resolved.partition(".")[0] == package and resolved not in enclosing and initializing(resolved):
            reached.append([importer, resolved])
    return module

import importlib.util
builtins.__import__ = probe
importlib.import_module(target)
print(json.dumps(reached))
"""


def import_alone(name: str, cwd: Optional[Path] = None) -> List[List[str]]:
    """Import ``name`` first in a fresh interpreter; the (importer, module) pairs whose
    import statement reached a module still being initialised."""
    package = name.partition(".")[0]
    proc = subprocess.run([sys.executable, "-c", _PROBE, name, package], capture_output=True, text=True, timeout=120, cwd=cwd)
    assert proc.returncode == 0, f"importing {name} alone failed:\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def circle_package(tmp_path: Path) -> Path:
    """A package with two circles that both import fine: ``a`` <-> ``b`` (one side lazy),
    and the package's ``__init__`` <-> ``c`` (``c`` takes a name from it)."""
    pkg = tmp_path / "circle_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("NAME = 1\nfrom . import c\n")
    (pkg / "a.py").write_text("from . import b\nX = 1\n")
    (pkg / "b.py").write_text("def f():\n    from .a import X\n    return X\nfrom . import a\n")
    (pkg / "c.py").write_text("from . import NAME\n")
    (pkg / "d.py").write_text("from . import a, c\n")
    return pkg


def test_the_arrows_show_both_circles(tmp_path):
    modules = package_modules(circle_package(tmp_path))
    arrows = {name: import_arrows(name, modules) for name in modules}
    assert arrows["circle_pkg.d"] == {"circle_pkg.a", "circle_pkg.c"}
    assert sorted(find_cycles(arrows)) == [
        ["circle_pkg", "circle_pkg.c", "circle_pkg"],
        ["circle_pkg.a", "circle_pkg.b", "circle_pkg.a"],
    ]


def test_the_probe_sees_a_runtime_circle(tmp_path):
    circle_package(tmp_path)
    through_init = ["circle_pkg.c", "circle_pkg"]  # every import runs the package's __init__ first
    assert import_alone("circle_pkg.c", cwd=tmp_path) == [through_init]
    assert import_alone("circle_pkg.a", cwd=tmp_path) == [through_init, ["circle_pkg.b", "circle_pkg.a"]]
    assert import_alone("circle_pkg.b", cwd=tmp_path) == [through_init, ["circle_pkg.a", "circle_pkg.b"]]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_each_module_imports_alone_without_a_circle(name):
    reached = import_alone(name)
    assert reached == [], f"importing {name} alone reached partially initialised modules (importer, module): {reached}"
