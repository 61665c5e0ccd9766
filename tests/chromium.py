"""Headless Debian Chromium for the HTML tree checks (test helper, not a test module).

``browser()`` returns the chromium binary, or fails the test under CI (``CI`` set: a
missing browser is a broken CI image, never a skip) and skips it locally with how to
install one. Every run gets a fresh profile directory and no network services (the
machine has no internet)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import List, Tuple

import pytest

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
)


def browser() -> str:
    """The Chromium binary (``FOCUS_CHROMIUM`` overrides the search of PATH)."""
    found = os.environ.get("FOCUS_CHROMIUM") or next((p for p in map(shutil.which, CANDIDATES) if p), None)
    if found:
        return found
    message = ("headless Chromium not found (looked for FOCUS_CHROMIUM, " + ", ".join(CANDIDATES)
               + "); install it with `apt-get install -y chromium` (.ci/run does)")
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail("CI: " + message)
    pytest.skip(message)


def _run(args: List[str], timeout: float = 60) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="focus-chromium-") as profile:
        return subprocess.run(
            [browser(), *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=timeout,
        )


def dump_dom(page: Path, fragment: str = "") -> str:
    """The page's DOM after its scripts ran."""
    proc = _run(["--dump-dom", page.resolve().as_uri() + fragment])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def screenshot(page: Path, png: Path, size: Tuple[int, int] = (1200, 800), fragment: str = "") -> Tuple[int, int]:
    """Screenshot ``page`` into ``png``; returns the PNG's (width, height)."""
    proc = _run([f"--window-size={size[0]},{size[1]}", f"--screenshot={png}", page.resolve().as_uri() + fragment])
    assert proc.returncode == 0 and png.is_file(), proc.stderr[-2000:]
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\] \"(?P<text>.*)\", source: (?P<source>.*)$")


def page_console(url: str, wait_ms: int = 3000) -> Tuple[str, List[dict]]:
    """Load ``url`` (its scripts run for ``wait_ms`` of virtual time) and return its DOM and
    every message its page wrote to the console (``console.*`` calls and uncaught
    exceptions alike: Chromium's log does not tell their levels apart, so a clean page is
    one that writes none)."""
    proc = _run(["--enable-logging=stderr", "--v=0", f"--virtual-time-budget={wait_ms}", "--dump-dom", url])
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [m.groupdict() for m in map(CONSOLE.search, proc.stderr.splitlines()) if m]
    return proc.stdout, console
