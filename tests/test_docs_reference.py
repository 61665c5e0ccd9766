"""The API reference (docs/reference/*.md) names every public name of the API.

The spec documents (``shared/spec/*.txt``, next to the repository) define the public API.
Each entry there is a line holding just the name, a description, an import line
``from focus... import NAME``, then ``Definition``; a member entry is a line
``Class.member`` (``Class.call`` for ``__call__``, ``Class.init`` for ``__init__``).
The reference pages are mkdocstrings pages: a ``::: focus_go.module.Name`` line renders one
name, with an optional indented ``options:`` block whose ``members: [...]`` lists the
members to show (otherwise mkdocstrings shows the documented public ones).

This test checks, without building the site or importing the package:

- every name a spec entry documents has its own directive (``::: ....Name``);
- every member entry's class has a directive, and a class directive that lists its
  ``members`` explicitly lists the member (``__init__`` is merged into the class);
- every name of ``focus_go.__all__`` (but ``__version__``) and ``SimServer`` has a directive;
- every public name of every public module has one (this check imports the package): the
  ``__all__`` of a module that has one, else the classes and functions it defines whose
  names do not start with ``_``, but the helpers listed in ``NOT_API``. A name re-exported
  elsewhere counts as documented when a directive resolves to the same object (a constant:
  to an equal value under the same name).

``mkdocs build --strict`` (``make docs``) checks that every directive resolves.
"""

from __future__ import annotations

import ast
import os
import pkgutil
import re
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"
SPEC = Path(__file__).resolve().parents[2] / "shared" / "spec"
PACKAGE_INIT = ROOT / "python" / "focus_go" / "__init__.py"

NAME_LINE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MEMBER_LINE = re.compile(r"^(?P<cls>[A-Za-z_][A-Za-z0-9_]*)\.(?P<member>[A-Za-z_][A-Za-z0-9_]*)$")
IMPORT_LINE = re.compile(r"^from (?P<module>focus(?:\.[A-Za-z_][A-Za-z0-9_]*)*) import (?P<names>.+)$")
DIRECTIVE = re.compile(r"^:::\s+(?P<target>[A-Za-z_][A-Za-z0-9_.]*)\s*$")
MEMBERS_OPTION = re.compile(r"^\s+members:\s*\[(?P<names>[^\]]*)\]\s*$")
# Spec member entries drop the underscores of dunder methods: Batch.len is Batch.__len__.
DUNDERS = {"call", "init", "len", "enter", "exit", "aenter", "aexit", "iter", "getitem"}


class Entry(NamedTuple):
    spec: str  # the spec file's stem
    line: int  # 1-based
    module: str  # the documented import module, e.g. focus.backends
    name: str


class Directive(NamedTuple):
    page: str
    line: int
    target: str  # e.g. focus_go.backends.Policy
    members: Optional[Tuple[str, ...]]  # the explicit members list, if any


def _spec_files() -> List[Path]:
    if not SPEC.is_dir() or not sorted(SPEC.glob("*.txt")):
        if os.environ.get("CI"):
            pytest.fail(f"the spec documents are missing: no {SPEC}/*.txt (required under CI)")
        pytest.skip(f"the spec documents are not here ({SPEC}/*.txt, next to the repository)")
    return sorted(SPEC.glob("*.txt"))


def spec_entries() -> Tuple[List[Entry], List[Tuple[str, int, str, str]]]:
    """The named entries of the spec documents, and their member entries
    ``(spec, line, class, member)``."""
    entries: List[Entry] = []
    members: List[Tuple[str, int, str, str]] = []
    for path in _spec_files():
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        definitions = sum(1 for line in lines if line == "Definition")
        found = 0
        for i, line in enumerate(lines):
            m = MEMBER_LINE.match(line)
            if m:
                members.append((path.stem, i + 1, m["cls"], m["member"]))
                continue
            if not NAME_LINE.match(line):
                continue
            # An entry: the name, then (before its Definition) the line importing it. Other
            # bare words (titles, "Fields") have no such line.
            for later in lines[i + 1:]:
                if later == "Definition":
                    break
                imp = IMPORT_LINE.match(later)
                if imp and line in [n.strip() for n in imp["names"].split(",")]:
                    entries.append(Entry(path.stem, i + 1, imp["module"], line))
                    found += 1
                    break
        assert found == definitions, (
            f"{path.name}: found {found} entries with an import line but {definitions} 'Definition' lines; "
            "the spec format changed, update this test's extraction"
        )
    return entries, members


def directives() -> List[Directive]:
    """Every ``:::`` directive of the reference pages, with its explicit members list."""
    out: List[Directive] = []
    for page in sorted(REFERENCE.glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            m = DIRECTIVE.match(line)
            if not m:
                continue
            members: Optional[Tuple[str, ...]] = None
            for option in lines[i + 1:]:
                if not option.startswith((" ", "\t")) or not option.strip():
                    break
                mm = MEMBERS_OPTION.match(option)
                if mm:
                    members = tuple(n.strip().strip("'\"") for n in mm["names"].split(",") if n.strip())
            out.append(Directive(page.name, i + 1, m["target"], members))
    return out


def by_name() -> Dict[str, List[Directive]]:
    names: Dict[str, List[Directive]] = {}
    for d in directives():
        names.setdefault(d.target.rsplit(".", 1)[-1], []).append(d)
    return names


def test_reference_pages_have_directives():
    found = directives()
    assert found, f"no ':::' directive in {REFERENCE}"
    for d in found:
        assert d.target.startswith("focus_go."), f"{d.page}:{d.line}: ::: {d.target} (use focus_go. paths)"


def test_no_name_is_documented_twice():
    seen: Dict[str, Directive] = {}
    twice = []
    for d in directives():
        if d.target in seen:
            twice.append(f"{d.page}:{d.line} and {seen[d.target].page}:{seen[d.target].line}: ::: {d.target}")
        seen[d.target] = d
    assert not twice, "directives repeated:\n" + "\n".join(twice)


def test_every_spec_name_has_a_directive():
    entries, _ = spec_entries()
    assert entries
    names = by_name()
    missing = [
        f"{e.name} (from {e.module} import {e.name}; shared/spec/{e.spec}.txt:{e.line})"
        for e in entries
        if e.name not in names
    ]
    assert not missing, "spec names without a '::: focus_go....Name' directive in docs/reference/:\n" + "\n".join(missing)


def test_every_spec_member_is_shown_under_its_class():
    entries, members = spec_entries()
    spec_names = {e.name for e in entries}
    names = by_name()
    problems = []
    for spec, line, cls, member in members:
        where = f"{cls}.{member} (shared/spec/{spec}.txt:{line})"
        if cls not in spec_names:
            problems.append(f"{where}: {cls} is not a spec entry")
            continue
        if cls not in names:
            problems.append(f"{where}: no directive for {cls}")
            continue
        if member == "init":
            continue  # merged into the class's signature and parameters
        wanted = {member, f"__{member}__"} if member in DUNDERS else {member}
        for d in names[cls]:
            if d.members is not None and not wanted & set(d.members):
                problems.append(f"{where}: {d.page}:{d.line} lists members {list(d.members)} without it")
    assert not problems, "\n".join(problems)


def _package_all() -> List[str]:
    tree = ast.parse(PACKAGE_INIT.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(elt) for elt in node.value.elts]  # type: ignore[attr-defined]
    raise AssertionError(f"no __all__ in {PACKAGE_INIT}")


def test_top_level_names_have_directives():
    names = by_name()
    wanted = [n for n in _package_all() if not n.startswith("__")] + ["SimServer"]
    missing = [n for n in wanted if n not in names]
    assert not missing, "focus_go names without a directive in docs/reference/: " + ", ".join(missing)


# Names without a leading underscore that other modules of the package import, but that
# are not API: a user never calls them. (The command's modules, focus_go.cli, are documented
# as the command in docs/cli.md.)
NOT_API = {
    "focus_go.generation.policy.run_sync": "runs the blocking twins' coroutines; internal to the policies",
    "focus_go.generation.servers.params_json": "SamplingParams' wire encoding for the Go core",
    "focus_go.generation.servers.call_result": "decodes a Go generation result; shared by the policies",
    "focus_go.generation.servers.result_from_json": "decodes a Go generation result; shared by the policies",
    "focus_go.generation.servers.go_arrays": "hands a result's arrays back to Go without copying",
    "focus_go.search.first_burst": "the admission width the collector and the integrations reserve",
}


def _public_modules() -> List[str]:
    package = PACKAGE_INIT.parent
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if any(p.startswith("_") for p in parts[1:]) or parts[:2] == ("focus_go", "cli"):
            continue
        out.append(".".join(parts))
    return out


def test_every_public_name_has_a_reference_entry():
    import importlib
    import inspect

    targets = {d.target for d in directives()}
    documented = {id(pkgutil.resolve_name(t)) for t in targets}
    missing = []
    for name in _public_modules():
        module = importlib.import_module(name)
        public = getattr(module, "__all__", None)
        if public is None:
            public = [n for n, obj in vars(module).items()
                      if not n.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ == name]
        for attr in public:
            if attr.startswith("__") or f"{name}.{attr}" in NOT_API or f"{name}.{attr}" in targets:
                continue
            obj = getattr(module, attr)
            if inspect.isclass(obj) or callable(obj):
                found = id(obj) in documented
            else:  # a constant re-exported: an entry of the same name and the same value
                found = any(t.rsplit(".", 1)[-1] == attr and type(pkgutil.resolve_name(t)) is type(obj) and pkgutil.resolve_name(t) == obj for t in targets)
            if not found:
                missing.append(f"{name}.{attr}")
    assert not missing, ("public names without a '::: ...' entry in docs/reference/ (add one, or list a helper in "
                         "NOT_API with the reason):\n" + "\n".join(missing))


def test_not_api_names_exist():
    stale = []
    for dotted in NOT_API:
        try:
            pkgutil.resolve_name(dotted)
        except (ImportError, AttributeError):
            stale.append(dotted)
    assert not stale, f"NOT_API names that are gone: {stale}"
