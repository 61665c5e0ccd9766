"""The documentation is tested like code: README.md stays short, every relative link in
README.md, CHANGELOG.md, benchmarks/ and docs/ resolves (anchors included), every
``python`` block of README.md and the guides runs against the embedded simulator, the CLI
guide lists exactly the flags each ``focus-go`` subcommand has, and the built site
(``make docs``) renders in headless Chromium with its navigation and no console error.

A python block that cannot run here (it needs a GPU server, Slime, a Tinker key) is marked
by an HTML comment on the line right before its fence, with the reason::

    <!-- not run: needs a running SGLang server -->

The python blocks of one page run in order in one fresh process and share one namespace,
as a reader runs them one after the other.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import unicodedata
from pathlib import Path
from typing import Dict, List, NamedTuple, Set

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
SITE = ROOT / "build" / "site"
README_MAX_BYTES = 20 * 1024

# Markdown files whose relative links must resolve: the front door, the changelog, the
# benchmark pages and every page of the site.
LINKED_PAGES = [README, ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md", ROOT / "benchmarks" / "RESULTS.md",
                *sorted(DOCS.rglob("*.md"))]
# Pages whose python blocks run: README.md, the guides and the API reference's examples.
RUN_PAGES = [README, *sorted(DOCS.rglob("*.md"))]

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>.*?)\s*-->\s*$")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\((?P<target><[^>]+>|[^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
HEADING = re.compile(r"^(#{1,6})\s+(?P<title>.*?)(?:\s+\{#(?P<id>[^}]+)\})?\s*#*\s*$")


class Block(NamedTuple):
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    not_run: str | None  # the reason, when marked not runnable


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@functools.lru_cache(maxsize=None)
def parse(path: Path) -> tuple[list[Block], list[tuple[int, str]]]:
    """The fenced code blocks of a Markdown file, and its other lines (number, text)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: List[Block] = []
    prose: List[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            prose.append((i + 1, lines[i]))
            i += 1
            continue
        fence, indent = m["fence"], len(m["indent"].expandtabs())
        lang = (m["info"].strip().split() or [""])[0].strip("{}.").lower()
        start, body = i, []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence[0] * len(fence)) and not lines[i].strip().strip(fence[0])):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i].lstrip())
            i += 1
        i += 1  # the closing fence
        marker = NOT_RUN.match(lines[start - 1]) if start > 0 else None
        blocks.append(Block(start + 1, lang, "\n".join(body) + "\n", marker["reason"] if marker else None))
    return blocks, prose


def slugify(title: str) -> str:
    """MkDocs' heading anchors (Python-Markdown's toc slugify), as GitHub makes them for
    the headings these pages use."""
    title = re.sub(r"`([^`]*)`", r"\1", title)
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
    title = re.sub(r"<[^>]+>", "", title)
    value = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


@functools.lru_cache(maxsize=None)
def anchors(path: Path) -> Set[str]:
    """The anchors a Markdown file's headings define (duplicates get _1, _2 as in MkDocs)."""
    seen: Dict[str, int] = {}
    out: Set[str] = set()
    _, prose = parse(path)
    for _, text in prose:
        m = HEADING.match(text)
        if not m:
            continue
        slug = m["id"] or slugify(m["title"])
        if slug in seen:
            seen[slug] += 1
            out.add(f"{slug}_{seen[slug]}")
        else:
            seen[slug] = 0
            out.add(slug)
    return out


# ---- README.md, the front door


def test_readme_is_short():
    size = README.stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; keep it at most {README_MAX_BYTES} (move detail to docs/)"


def test_readme_has_no_logbook():
    """No commit hashes, dated passes or pointers to the design documents users lack."""
    text = README.read_text(encoding="utf-8")
    assert not re.search(r"\b[0-9a-f]{7,40}\b(?![0-9a-f-])", re.sub(r"```.*?```", "", text, flags=re.S)), "a commit hash in README.md"
    assert "shared/" not in text and "ALGORITHM.md" not in text and "DESIGN.md" not in text


def test_docs_do_not_point_at_design_documents():
    """Users do not have the design documents or the spec files: the docs stand alone."""
    for page in [*DOCS.rglob("*.md"), ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md"]:
        text = page.read_text(encoding="utf-8")
        for needle in ("shared/", "ALGORITHM.md", "DESIGN.md", "README, \"", "README's \""):
            assert needle not in text, f"{_rel(page)} mentions {needle!r}"


# ---- links


@pytest.mark.parametrize("page", LINKED_PAGES, ids=_rel)
def test_relative_links_resolve(page):
    _, prose = parse(page)
    broken = []
    for number, text in prose:
        for m in LINK.finditer(CODE_SPAN.sub("", text)):
            target = m["target"].strip("<>")
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            if not dest.exists():
                broken.append(f"{_rel(page)}:{number}: {target} (no such file)")
            elif not dest.is_relative_to(ROOT):
                broken.append(f"{_rel(page)}:{number}: {target} (outside the repository)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{_rel(page)}:{number}: {target} (no heading #{anchor} in {_rel(dest)})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_readme_links_every_guide():
    text = README.read_text(encoding="utf-8")
    guides = ["getting-started", "servers", "cli", "policies", "slime", "tinker", "records", "learning-signal",
              "reliability", "architecture", "development"]
    missing = [g for g in guides if f"docs/{g}.md" not in text]
    assert not missing, f"README.md does not link docs/{{{','.join(missing)}}}.md"


# ---- python blocks

RUNNER = r"""
import json, sys, traceback
page, blocks = sys.argv[1], json.load(sys.stdin)
namespace = {"__name__": "__main__"}
for block in blocks:
    try:
        exec(compile(block["code"], f"{page}:{block['line']}", "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print(f"\nthe python block at {page}:{block['line']} failed", file=sys.stderr)
        sys.exit(1)
"""


def _python_pages():
    return [p for p in RUN_PAGES if any(b.lang in ("python", "py") for b in parse(p)[0])]


def test_not_run_blocks_say_why():
    for page in RUN_PAGES:
        for block in parse(page)[0]:
            if block.not_run is not None:
                assert block.lang in ("python", "py"), f"{_rel(page)}:{block.line}: only python blocks run; remove the marker"
                assert len(block.not_run) >= 10, f"{_rel(page)}:{block.line}: say why the block cannot run"


@pytest.mark.parametrize("page", _python_pages(), ids=_rel)
def test_python_blocks_run(page, tmp_path):
    blocks = [{"line": b.line, "code": b.code} for b in parse(page)[0] if b.lang in ("python", "py") and b.not_run is None]
    if not blocks:
        pytest.skip(f"{_rel(page)}: every python block is marked not runnable")
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    # A block may import an example module by name (`from calculator_env import make_env`),
    # as a user who copied it beside their own module does.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "examples"), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", RUNNER, _rel(page)], input=json.dumps(blocks), cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]


# ---- the CLI guide against the command's own flags

CLI_GUIDE = DOCS / "cli.md"
SUBCOMMANDS = ("collect", "view", "demo")
OPTION_LINE = re.compile(r"^  (?P<invocation>-\S.*?)(?:\s{2,}|$)")
FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*")


def _help_flags(sub: str) -> Set[str]:
    proc = subprocess.run([sys.executable, "-m", "focus_go", sub, "--help"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    flags = set()
    for line in proc.stdout.splitlines():
        m = OPTION_LINE.match(line)
        if m:
            flags.update(FLAG.findall(m["invocation"]))
    return flags - {"--help"}


def _guide_flags(sub: str) -> Set[str]:
    heading = f"## Every flag of `focus-go {sub}`"
    _, prose = parse(CLI_GUIDE)
    flags, inside, found = set(), False, False
    for _, text in prose:
        if text.startswith("## "):
            inside = text.strip() == heading
            found = found or inside
        elif inside and text.startswith("|"):
            first_cell = text.strip("|").split("|")[0]
            for span in re.findall(r"`([^`]*)`", first_cell):
                flags.update(FLAG.findall(span))
    assert found, f"docs/cli.md has no section {heading!r}"
    return flags


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_cli_guide_lists_every_flag(sub):
    guide, helped = _guide_flags(sub), _help_flags(sub)
    assert guide == helped, (f"docs/cli.md vs `focus-go {sub} --help`: only in the guide {sorted(guide - helped)}, "
                             f"only in --help {sorted(helped - guide)}")


# ---- the built site, in a browser


def _site_or_skip() -> Path:
    if (SITE / "index.html").is_file():
        return SITE
    message = "build/site is missing: run `make docs` first (.ci/run does)"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail("CI: " + message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def site_url():
    site = _site_or_skip()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("path,title", [("", "focus-go"), ("getting-started/", "Getting started")])
def test_site_renders_with_navigation(site_url, path, title):
    from chromium import page_console

    dom, console = page_console(f"{site_url}/{path}")
    assert "<title>" in dom and title in dom
    assert 'class="md-nav' in dom, "no navigation in the rendered page"
    for guide in ("Getting started", "Your servers", "Slime", "Tinker", "API reference"):
        assert guide in dom, f"the navigation lacks {guide!r}"
    assert not console, f"the page wrote to the console on /{path}: {console}"
