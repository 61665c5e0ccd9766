"""Build hooks: compile libfocus.so with the Makefile and ship it inside the package.

The wheel is platform-specific (it carries a shared library) but not tied to a Python ABI,
because the library is loaded with ctypes: the tag is py3-none-<platform>.

Two ways in (docs/development.md, "Building the wheels"):
- from source (`pip install .`, or an sdist): `make lib` builds the library with the
  machine's Go, cargo and C compiler. They are checked first: a missing or too old one stops
  the build at once with a message naming each and the version needed.
- a release wheel (`make wheel`): the Makefile builds the library against the glibc floor
  with its pinned zig toolchain and passes it in FOCUS_GO_PREBUILT_LIBRARY, with the wheel's
  platform tag in FOCUS_GO_PLAT (e.g. manylinux_2_28_x86_64); nothing is compiled here.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1: the wheel package's
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:  # pragma: no cover - wheel is a build requirement
        bdist_wheel = None

ROOT = Path(__file__).resolve().parent
LIBRARY = "libfocus.so"
PREBUILT = os.environ.get("FOCUS_GO_PREBUILT_LIBRARY", "")
PLAT = os.environ.get("FOCUS_GO_PLAT", "")

# What a source build needs. Go's minimum is go.mod's `go` line; Rust's is the highest
# rust-version among the crates Cargo.lock pins (unicode-segmentation 1.13: 1.85).
RUST_MIN = (1, 85)
PREBUILT_WHEELS = (
    "Prebuilt wheels need none of these: manylinux_2_28 wheels for x86_64 and aarch64 "
    "(`make wheel` in a checkout builds them; `pip install focus_go-*.whl`)."
)


def _version(text, pattern):
    m = re.search(pattern, text or "")
    return tuple(int(p) for p in m.groups() if p is not None) if m else None


def _output(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def _fmt(v):
    return ".".join(map(str, v))


def missing_toolchains(root=ROOT, which=shutil.which):
    """What `make lib` needs and this machine lacks, one line each (empty: all present)."""
    problems = []
    go_min = _version((root / "go.mod").read_text(), r"(?m)^go (\d+)\.(\d+)")
    if which("make") is None:
        problems.append("GNU make: not found on PATH")
    go = which("go")
    if go is None:
        problems.append(f"Go {_fmt(go_min)} or newer (the `go` command): not found on PATH")
    else:
        have = _version(_output([go, "env", "GOVERSION"]), r"go(\d+)\.(\d+)")
        if have is None or have < go_min:
            problems.append(f"Go {_fmt(go_min)} or newer: {go} is {_fmt(have) if have else 'of unknown version'}")
    cc = os.environ.get("CC", "").split()
    cc = cc[0] if cc else (_output([go, "env", "CC"]) or "").strip() if go else ""
    if not (cc and which(cc)) and not which("gcc") and not which("cc"):
        problems.append(f"a C compiler for cgo (gcc or clang; CC={cc or 'gcc'}): not found on PATH")
    if not (root / "build" / "libfocus_tokenizer.a").is_file():
        cargo, rustc = which("cargo"), which("rustc")
        if cargo is None or rustc is None:
            problems.append(
                f"Rust {_fmt(RUST_MIN)} or newer (cargo and rustc, for the tokenizer crate "
                f"backends/tokenizer/ffi): {'cargo' if cargo is None else 'rustc'} not found on PATH"
            )
        else:
            have = _version(_output([rustc, "--version"]), r"rustc (\d+)\.(\d+)")
            if have is None or have < RUST_MIN:
                problems.append(f"Rust {_fmt(RUST_MIN)} or newer (cargo and rustc): {rustc} is {_fmt(have) if have else 'of unknown version'}")
    return problems


class BuildWithLibrary(build_py):
    """Run `make lib` (reusing build/ when it is up to date) and copy the library in; or,
    for a release wheel, copy the prebuilt floor library."""

    def run(self):
        if PREBUILT:
            source = Path(PREBUILT)
            if not source.is_file():
                raise SystemExit(f"focus-go: FOCUS_GO_PREBUILT_LIBRARY={PREBUILT} is not a file")
        else:
            problems = missing_toolchains()
            if problems:
                raise SystemExit(
                    "focus-go: cannot build libfocus.so from source; this machine lacks:\n"
                    + "".join(f"  - {p}\n" for p in problems)
                    + "Install them (Go from its official releases, Rust with rustup, gcc and make "
                    "from the system's packages) and build again. " + PREBUILT_WHEELS
                )
            source = ROOT / "build" / LIBRARY
        super().run()
        if not PREBUILT:
            subprocess.run(["make", "-C", str(ROOT), "lib"], check=True)
        target = Path(self.build_lib) / "focus_go" / LIBRARY
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildWithLibrary}

if bdist_wheel is not None:

    class PlatformWheel(bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", PLAT or plat

    cmdclass["bdist_wheel"] = PlatformWheel

options = {}
if PREBUILT:
    # A release wheel builds in its own folder, so no host build's files mix in.
    options["build"] = {"build_base": str(Path(PREBUILT).resolve().parent / "setuptools")}

setup(cmdclass=cmdclass, distclass=BinaryDistribution, options=options)
