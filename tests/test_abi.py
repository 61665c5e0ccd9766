"""The C boundary itself: loading, versions, errors, panics, handles, concurrency."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import focus_go
from focus_go import _lib
from focus_go._handle import GoObject
from focus_go.errors import (
    ConfigError,
    FocusError,
    InternalError,
    InvalidHandleError,
    LibraryError,
    error_for,
)


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )


def box(value) -> int:
    data = json.dumps(value).encode()
    return _lib.call_handle("focus_selftest_box", data, len(data))


def unbox(handle: int):
    return json.loads(_lib.call_string("focus_selftest_unbox", _lib.c_handle(handle)))


def test_import_does_not_load_the_library():
    proc = run_python(
        "import focus_go, focus, focus_go.errors, focus_go._lib as l; print(l.loaded())"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_abi_and_versions_match():
    assert _lib.abi_version() == _lib.ABI_VERSION
    assert _lib.library_version() == focus_go.__version__
    assert _lib.library_path().name == "libfocus.so"


def test_missing_library_names_the_fix():
    proc = run_python(
        "import focus_go._lib as l\n"
        "try:\n    l.lib()\nexcept ImportError as e:\n    print(type(e).__name__, e)",
        FOCUS_GO_LIBRARY="/nonexistent/libfocus.so",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("LibraryError cannot load libfocus.so")
    assert "/nonexistent/libfocus.so (missing)" in proc.stdout
    assert "make lib" in proc.stdout


def test_abi_mismatch_is_refused():
    proc = run_python(
        "import focus_go._lib as l\nl.ABI_VERSION = 999\n"
        "try:\n    l.lib()\nexcept l.LibraryError as e:\n    print(e)"
    )
    assert proc.returncode == 0, proc.stderr
    assert f"implements C ABI version {_lib.ABI_VERSION}" in proc.stdout
    assert "needs version 999" in proc.stdout


def test_go_panic_becomes_python_exception_and_process_survives():
    with pytest.raises(InternalError, match="Go panic: kaboom"):
        _lib.call("focus_selftest_panic", b"kaboom", 6)
    # The library still works after the panic.
    assert _lib.abi_version() == _lib.ABI_VERSION
    with pytest.raises(InternalError):
        _lib.call("focus_selftest_panic", b"again", 5)


def test_bad_json_is_a_config_error():
    with pytest.raises(ConfigError, match="selftest: bad JSON") as info:
        _lib.call_handle("focus_selftest_box", b"{nope", 5)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, FocusError)


def test_freed_and_invalid_handles_raise():
    handle = box({"a": [1, 2, 3]})
    assert unbox(handle) == {"a": [1, 2, 3]}
    _lib.release(handle)
    with pytest.raises(InvalidHandleError, match="unknown or already released"):
        unbox(handle)
    with pytest.raises(InvalidHandleError, match="unknown or already released"):
        _lib.release(handle)
    with pytest.raises(InvalidHandleError, match="handle 0 is never valid"):
        unbox(0)


def test_go_object_releases_exactly_once():
    before = _lib.live_handles()
    obj = GoObject(box("x"))
    assert _lib.live_handles() == before + 1
    with obj:
        assert unbox(obj.handle) == "x"
    assert _lib.live_handles() == before
    obj.close()  # a second close is a no-op
    with pytest.raises(InvalidHandleError, match="never valid"):
        unbox(obj.handle)
    dropped = GoObject(box("y"))
    del dropped
    import gc

    gc.collect()
    assert _lib.live_handles() == before


def test_hundred_concurrent_calls_from_threads():
    def work(i: int):
        handle = box({"i": i, "s": "x" * i})
        try:
            return unbox(handle)
        finally:
            _lib.release(handle)

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(work, range(100)))
    assert results == [{"i": i, "s": "x" * i} for i in range(100)]

    def panics(i: int):
        with pytest.raises(InternalError, match=f"boom {i}"):
            _lib.call("focus_selftest_panic", *_lib.text_arg(f"boom {i}"))
        return i

    with ThreadPoolExecutor(max_workers=16) as pool:
        assert list(pool.map(panics, range(100))) == list(range(100))


def test_error_codes_map_to_classes():
    assert isinstance(error_for(2, "x"), ValueError)
    assert isinstance(error_for(8, "x"), FileNotFoundError)
    unknown = error_for(77, "odd")
    assert isinstance(unknown, InternalError) and "unknown status code 77" in str(unknown)
    assert issubclass(LibraryError, ImportError)


def test_focus_alias_is_the_same_package():
    import focus
    import focus.errors

    assert focus is focus_go
    assert focus.errors is focus_go.errors
    from focus.errors import ConfigError as AliasConfigError

    assert AliasConfigError is ConfigError


def test_cli_version():
    proc = subprocess.run(
        [sys.executable, "-m", "focus_go", "version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert f"focus-go {focus_go.__version__}" in proc.stdout
    assert f"C ABI {_lib.ABI_VERSION}" in proc.stdout
