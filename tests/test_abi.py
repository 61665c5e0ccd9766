"""The C boundary itself: loading, versions, errors, panics, handles, concurrency."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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


def test_foreign_library_is_refused_with_the_reason():
    """A shared library that is not libfocus (here Python's own _json extension module)
    raises LibraryError naming it, not AttributeError."""
    import _json

    path = _json.__file__
    assert path.endswith(".so"), path
    proc = run_python(
        "import focus_go._lib as l\n"
        "try:\n    l.lib()\nexcept Exception as e:\n    print(type(e).__name__, e)",
        FOCUS_GO_LIBRARY=path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("LibraryError "), proc.stdout
    assert "focus_abi_version" in proc.stdout and "not a focus-go library" in proc.stdout


def test_abi_mismatch_is_refused():
    proc = run_python(
        "import focus_go._lib as l\nl.ABI_VERSION = 999\n"
        "try:\n    l.lib()\nexcept l.LibraryError as e:\n    print(e)"
    )
    assert proc.returncode == 0, proc.stderr
    assert f"implements C ABI version {_lib.ABI_VERSION}" in proc.stdout
    assert "needs version 999" in proc.stdout


def test_go_panic_becomes_python_exception_and_process_survives(selftest):
    with pytest.raises(InternalError, match="Go panic: kaboom"):
        _lib.call("focus_selftest_panic", *_lib.text_arg("kaboom"))
    # The library still works after the panic.
    assert _lib.abi_version() == _lib.ABI_VERSION
    with pytest.raises(InternalError):
        _lib.call("focus_selftest_panic", *_lib.text_arg("again"))


def test_bad_json_is_a_config_error(selftest):
    with pytest.raises(ConfigError, match="selftest: bad JSON") as info:
        _lib.call_handle("focus_selftest_box", b"{nope", 5)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, FocusError)


def test_freed_and_invalid_handles_raise(selftest):
    handle = box({"a": [1, 2, 3]})
    assert unbox(handle) == {"a": [1, 2, 3]}
    _lib.release(handle)
    with pytest.raises(InvalidHandleError, match="unknown or already released"):
        unbox(handle)
    with pytest.raises(InvalidHandleError, match="unknown or already released"):
        _lib.release(handle)
    with pytest.raises(InvalidHandleError, match="handle 0 is never valid"):
        unbox(0)


def test_go_object_releases_exactly_once(selftest):
    before = _lib.live_handles()
    obj = GoObject(box("x"))
    assert _lib.live_handles() == before + 1
    with obj:
        assert unbox(obj.handle) == "x"
    assert _lib.live_handles() == before
    obj.close()  # a second close is a no-op
    with pytest.raises(InvalidHandleError, match="this GoObject is closed"):
        unbox(obj.handle)
    dropped = GoObject(box("y"))
    del dropped
    import gc

    gc.collect()
    assert _lib.live_handles() == before


def test_a_closed_policy_says_it_is_closed():
    from focus_go.backends import SamplingParams, SGLangPolicy
    from focus_go.sim import SimServer

    with SimServer() as server:
        policy = SGLangPolicy(model=server.model, base_url=server.url)
        policy.close()
        with pytest.raises(InvalidHandleError, match="this policy is closed"):
            policy.generate_tokens([1, 2, 3], SamplingParams(max_tokens=4))
    with pytest.raises(InvalidHandleError, match="this SimServer is closed"):
        server.handle


def test_hundred_concurrent_calls_from_threads(selftest):
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


# --- NUL bytes cross the boundary intact (ABI 4: every string and payload has a length) ---

QWEN3 = Path(os.environ.get("FOCUS_QWEN3_DIR", Path(__file__).resolve().parents[1] / "build" / "testdata" / "qwen3"))


@pytest.fixture(scope="module")
def qwen3_tokenizer():
    from focus_go.generation.format import HFTokenizer

    if not (QWEN3 / "tokenizer.json").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"Qwen3 tokenizer missing in {QWEN3}: CI must run make testdata")
        pytest.skip(f"Qwen3 tokenizer missing in {QWEN3}: run make testdata")
    tok = HFTokenizer(QWEN3)
    yield tok
    tok.close()


def test_nul_in_error_messages_and_string_inputs(selftest):
    with pytest.raises(InternalError) as info:
        _lib.call("focus_selftest_panic", *_lib.text_arg("boom\x00tail"))
    assert "Go panic: boom\x00tail" in str(info.value)
    data = b'{"result": {}}'
    with pytest.raises(ConfigError) as info:
        _lib.call_string("focus_parse", *_lib.text_arg("hermes\x00x"), data, len(data))
    assert 'unknown profile "hermes\\x00x"' in str(info.value), "Go saw the whole profile name"


def test_nul_in_boxed_json_round_trips(selftest):
    value = {"a\x00b": ["\x00", "x\x00\x00y"]}
    handle = box(value)
    try:
        assert unbox(handle) == value
    finally:
        _lib.release(handle)


def test_nul_encode_decode_render_round_trip(qwen3_tokenizer):
    tok = qwen3_tokenizer
    assert tok.encode("a\x00b") == [64, 188, 65]  # PyPI tokenizers' ids
    assert tok.decode([64, 188, 65]) == "a\x00b"
    assert tok.decode([188]) == "\x00"
    assert tok.decode([188, 151645, 188], skip_special_tokens=True) == "\x00\x00"
    text, tokens = tok.render([{"role": "user", "content": "x\x00y"}], add_generation_prompt=False)
    assert "<|im_start|>user\nx\x00y<|im_end|>" in text
    assert list(tokens) == tok.encode(text)
    assert tok.decode(tokens) == text


def test_nul_parse_tool_blocks_and_grade():
    from focus_go.env import grade_math
    from focus_go.generation.parsing import HermesToolCallParser
    from focus_go.generation.parsing.base import tool_turn
    from focus_go.generation.types import GenerateResult

    text = '<think>r\x00r</think>say\x00so<tool_call>{"name": "f\x00n", "arguments": {"a": "1\x002"}}</tool_call>'
    turn = tool_turn(text, decode=lambda block: block)
    assert turn.reasoning == "r\x00r"
    assert turn.text == "say\x00so"
    assert turn.tool_calls == ('{"name": "f\x00n", "arguments": {"a": "1\x002"}}',)
    text = 'say\x00so<tool_call>{"name": "f\\u0000n", "arguments": {"a": "1\\u00002"}}</tool_call>'
    parsed = HermesToolCallParser().parse(GenerateResult(text=text))
    assert parsed.text == "say\x00so"
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [("f\x00n", {"a": "1\x002"})]
    assert grade_math("so \\boxed{5}", "5")
    assert not grade_math("so \\boxed{5}", "5\x00"), "the label's NUL is part of it"
    assert grade_math("a\x00b \\boxed{7}", "7")
