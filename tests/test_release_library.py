"""The shipped library holds no test code: the release build (`make lib`, build/libfocus.so,
the one `pip install .` copies into the package) has none of the focus_selftest_* exports,
which only the self-test build (`make selftest-lib`, build/selftest/libfocus.so, the one the
suite runs on) has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import focus_go
from focus_go import _lib

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / "build" / _lib.LIBRARY_NAME
INSTALLED = Path(focus_go.__file__).resolve().parent / _lib.LIBRARY_NAME

# Which of the names a library exports, read by a fresh interpreter (a second Go runtime
# must not be loaded into this one).
_PROBE = """
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
print(json.dumps({name: hasattr(lib, name) for name in sys.argv[2:]}))
"""


def exported(path: Path, names) -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(path), *names], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("path", [RELEASE, INSTALLED], ids=["build", "installed"])
def test_release_library_has_no_selftest_export(path):
    if not path.is_file():
        pytest.skip(f"{path} is absent (make lib / make venv builds it)")
    names = sorted(_lib._SELFTEST_SIGNATURES)
    found = exported(path, names + ["focus_abi_version"])
    assert found.pop("focus_abi_version"), f"{path} is not a focus-go library"
    assert not any(found.values()), f"{path} exports self-test functions: {[n for n, v in found.items() if v]}"


def test_selftest_library_has_every_selftest_export(selftest):
    found = exported(_lib.library_path(), sorted(_lib._SELFTEST_SIGNATURES))
    assert all(found.values()), found


def test_a_missing_selftest_export_names_the_fix():
    if not RELEASE.is_file():
        pytest.skip(f"{RELEASE} is absent (make lib builds it)")
    code = (
        "from focus_go import _lib, LibraryError\n"
        "try:\n"
        "    _lib.call('focus_selftest_panic', b'x', 1)\n"
        "except LibraryError as exc:\n"
        "    print('LibraryError', exc)\n"
    )
    env = {**os.environ, _lib.ENV_LIBRARY: str(RELEASE)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("LibraryError"), proc.stdout
    assert "focus_selftest Go build tag" in proc.stdout and "make selftest-lib" in proc.stdout
