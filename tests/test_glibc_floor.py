"""The release library stays within the glibc floor: the symbol versions libfocus.so needs
(GLIBC_x.y, read from its ELF version-needed section) are at most the Makefile's
GLIBC_FLOOR, and it links only libraries every manylinux system has. Checked on the
floor-toolchain builds `make wheel` makes (build/manylinux/<arch>/libfocus.so)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

import elf_versions
from release_artifacts import ALLOWED_NEEDED, BUILD, FLOOR, FLOOR_TEXT, LOADERS, floor_library, require


def _objdump(path):
    """(NEEDED names, {library: versions}) as binutils reads them: the reader's oracle."""
    out = subprocess.run(["objdump", "-p", str(path)], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"^\s+NEEDED\s+(\S+)", out, re.M)
    versions, current = {}, None
    for line in out.splitlines():
        m = re.match(r"\s+required from (\S+):", line)
        if m:
            current = versions.setdefault(m.group(1), set())
            continue
        m = re.match(r"\s+0x[0-9a-f]+ 0x[0-9a-f]+ \d+ (\S+)", line)
        if m and current is not None:
            current.add(m.group(1))
    return needed, versions


@pytest.mark.parametrize("name", ["libfocus.so", "manylinux/x86_64/libfocus.so"])
def test_reader_agrees_with_objdump(name):
    path = BUILD / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    if shutil.which("objdump") is None:
        pytest.skip("no objdump (binutils) to compare with")
    deps = elf_versions.read(path)
    needed, versions = _objdump(path)
    assert deps.needed == needed
    assert deps.versions == versions
    assert deps.glibc_versions(), "a Go c-shared library needs some GLIBC_ version"


def test_reader_reads_the_python_interpreter():
    """A second ELF, not built by us: the running interpreter's own file."""
    import sys
    from pathlib import Path

    exe = Path(sys.executable).resolve()
    with open(exe, "rb") as f:
        if f.read(4) != b"\x7fELF":
            pytest.skip(f"{exe} is not an ELF file")
    deps = elf_versions.read(exe)
    assert "libc.so.6" in deps.needed or any(n.startswith("libpython") for n in deps.needed)


def test_reader_refuses_a_non_elf_file(tmp_path):
    p = tmp_path / "x.so"
    p.write_bytes(b"#!/bin/sh\n")
    with pytest.raises(ValueError, match="not an ELF file"):
        elf_versions.read(p)


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_floor_build_needs_at_most_the_floor(arch):
    how = "make wheel" if arch == "x86_64" else "make wheel-aarch64"
    path = require(floor_library(arch), how, required_in_ci=arch == "x86_64")
    deps = elf_versions.read(path)
    assert deps.machine == arch
    too_new = [v for v in deps.glibc_versions() if v > FLOOR]
    assert not too_new, f"{path} needs glibc {['.'.join(map(str, v)) for v in too_new]}, above the floor {FLOOR_TEXT}"
    assert deps.max_glibc() >= (2, 2), deps.versions
    extra = set(deps.needed) - ALLOWED_NEEDED - {LOADERS[arch]}
    assert not extra, f"{path} links {sorted(extra)}, which a manylinux system need not have"
