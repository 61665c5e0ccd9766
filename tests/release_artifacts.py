"""Where the release artifacts of `make wheel` live, the glibc floor they are built for, and
the helpers the wheel and floor tests share (tests/test_glibc_floor.py, tests/test_wheel.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from elf_versions import parse_floor

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
WHEELHOUSE = BUILD / "wheelhouse"
TOOLS = BUILD / "wheel-tools"
VERSION = (ROOT / "VERSION").read_text().strip()


def _make_variable(name: str) -> str:
    m = re.search(rf"^{name}\s*:?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M)
    assert m, f"Makefile defines no {name}"
    return m.group(1)


# The one place the floor is set: the Makefile's GLIBC_FLOOR (the zig target's glibc).
FLOOR_TEXT = _make_variable("GLIBC_FLOOR")
FLOOR = parse_floor(FLOOR_TEXT)

# What a manylinux wheel may link against without bundling it (PEP 600's policy for
# manylinux_2_28, the libraries every glibc system has); the loader's name is per machine.
ALLOWED_NEEDED = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libresolv.so.2",
    "libutil.so.1", "libgcc_s.so.1",
}
LOADERS = {"x86_64": "ld-linux-x86-64.so.2", "aarch64": "ld-linux-aarch64.so.1"}


def platform_tag(arch: str) -> str:
    return f"manylinux_{FLOOR_TEXT.replace('.', '_')}_{arch}"


def wheel_path(arch: str) -> Path:
    return WHEELHOUSE / f"focus_go-{VERSION}-py3-none-{platform_tag(arch)}.whl"


def floor_library(arch: str) -> Path:
    return BUILD / "manylinux" / arch / "libfocus.so"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def require(path: Path, how: str, required_in_ci: bool = True) -> Path:
    """The artifact, or skip saying how to build it; under CI a missing x86_64 artifact
    fails (.ci/run builds it), an opt-in one (aarch64) skips."""
    if path.is_file():
        return path
    message = f"{path} is absent: `{how}` builds it"
    if required_in_ci and in_ci():
        pytest.fail("CI: " + message)
    pytest.skip(message)
