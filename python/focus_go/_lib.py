"""The one module that loads libfocus.so and declares every C signature.

The library is loaded lazily, on the first call that needs it: ``import focus_go`` does not
touch it. It is opened with ``RTLD_NODELETE`` because a Go runtime cannot be unloaded.
A process must not ``fork()`` after the first use (the Go runtime's threads do not survive
a fork): use the ``spawn`` start method for multiprocessing.

ctypes releases the GIL around foreign calls, so Go work runs in parallel with Python
threads; the Go side is safe for concurrent calls. The short calls on a bridged collection's
hot path (_GIL_HELD) keep the GIL instead: a thread that releases it for a few microseconds
must then win it back from whichever thread took it meanwhile.
"""

from __future__ import annotations

import array
import ctypes
import json
import os
import platform
import struct
import threading
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Tuple

from .errors import ConfigError, FocusError, InternalError, LibraryError, error_for

ABI_VERSION = 7
LIBRARY_NAME = "libfocus.so"
ENV_LIBRARY = "FOCUS_GO_LIBRARY"

_lib: ctypes.CDLL | None = None
_held: ctypes.PyDLL | None = None
_path: Path | None = None
_lock = threading.Lock()

c_handle = ctypes.c_uint64


class Bytes(ctypes.Structure):
    """focus_bytes: a string or byte payload the library returns, as pointer + length (it
    may hold NUL bytes). take_string/take_bytes read exactly ``len`` bytes and free it."""

    _fields_ = [("data", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_err_p = ctypes.POINTER(Bytes)
_str_out = ctypes.POINTER(Bytes)
# A generation result: JSON, then the generated ids, their logprobs and their count.
_result_out = (_str_out, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t))
_ids_out = ctypes.POINTER(ctypes.POINTER(ctypes.c_uint32))
_uint32_p = ctypes.POINTER(ctypes.c_uint32)


class _IdsIn:
    """The argument type of a ``uint32_t *`` token-id input: an ``array.array("I")`` (what
    ids_arg returns) is passed as the address of its buffer, which the caller's reference
    keeps alive for the call; None is NULL; anything else goes through
    ``POINTER(c_uint32)``. Unlike a ctypes array, this makes no new ctypes type per
    length."""

    @classmethod
    def from_param(cls, obj: Any) -> Any:
        if isinstance(obj, array.array) and obj.typecode == "I":
            return ctypes.c_void_p(obj.buffer_info()[0] if obj else None)
        return _uint32_p.from_param(obj)


_ids_in = _IdsIn
_size_out = ctypes.POINTER(ctypes.c_size_t)

# name: (restype, argtypes). Every status-returning function takes `focus_bytes *err` last;
# every string input is (char *, size_t).
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "focus_abi_version": (ctypes.c_int32, []),
    "focus_version": (ctypes.c_int32, [_str_out, _err_p]),
    "focus_string_free": (None, [ctypes.c_void_p]),
    "focus_buffer_free": (None, [ctypes.c_void_p]),
    "focus_handle_release": (ctypes.c_int32, [c_handle, _err_p]),
    "focus_live_handles": (ctypes.c_int64, []),
    # the simulated inference server
    "focus_sim_start": (
        ctypes.c_int32,
        [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(c_handle), _str_out, _err_p],
    ),
    "focus_sim_stats": (ctypes.c_int32, [c_handle, _str_out, _err_p]),
    "focus_sim_set_faults": (ctypes.c_int32, [c_handle, ctypes.c_char_p, ctypes.c_size_t, _err_p]),
    # configuration rules (capi/binding)
    "focus_rules_check": (
        ctypes.c_int32,
        [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p],
    ),
    "focus_rules_defaults": (ctypes.c_int32, [_str_out, _err_p]),
    "focus_rules_root_messages": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p]),
    # the binding's schema
    "focus_schema": (ctypes.c_int32, [_str_out, _err_p]),
    # math grading and collection
    "focus_math_grade": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p]),
    "focus_math_grade_text": (
        ctypes.c_int32,
        [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p],
    ),
    "focus_collect_start": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(c_handle), _err_p]),
    "focus_collection_poll": (
        ctypes.c_int32,
        # The ids' buffer (uint32_t **) is read as an address: ctypes.cast of a pointer
        # leaves a reference cycle per call for the garbage collector.
        [c_handle, ctypes.c_uint64, ctypes.c_int64, ctypes.c_int32, _str_out, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), _err_p],
    ),
    "focus_collection_resolve": (ctypes.c_int32, [c_handle, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t, _err_p]),
    "focus_collection_resolve_generate": (
        ctypes.c_int32,
        [c_handle, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, _err_p],
    ),
    "focus_collection_answer": (
        ctypes.c_int32,
        [c_handle, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p,
         ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, _size_out, _err_p],
    ),
    "focus_collection_fail": (ctypes.c_int32, [c_handle, ctypes.c_uint64, ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t, _err_p]),
    "focus_collection_cancel": (ctypes.c_int32, [c_handle, _err_p]),
    "focus_collection_wait": (ctypes.c_int32, [c_handle, ctypes.c_uint64, ctypes.c_int64, ctypes.POINTER(ctypes.c_int32), _err_p]),
    "focus_collection_result": (ctypes.c_int32, [c_handle, ctypes.POINTER(c_handle), _str_out, _err_p]),
    "focus_collection_progress": (ctypes.c_int32, [c_handle, _str_out, _err_p]),
    # action parsing
    "focus_parse": (
        ctypes.c_int32,
        [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p],
    ),
    "focus_tool_blocks": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p]),
    "focus_profile_resolve": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p]),
    # tokenizer and chat template
    "focus_codec_load": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(c_handle), _err_p]),
    "focus_codec_info": (ctypes.c_int32, [c_handle, _str_out, _err_p]),
    "focus_codec_encode": (
        ctypes.c_int32,
        [c_handle, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, _ids_out, _size_out, _err_p],
    ),
    "focus_codec_decode": (
        ctypes.c_int32,
        [c_handle, _ids_in, ctypes.c_size_t, ctypes.c_int32, _str_out, _err_p],
    ),
    # calls that wait (ticket 0 blocks; see _async) and Go-native token policies
    "focus_async_wait": (
        ctypes.c_int32,
        [ctypes.c_int64, ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_int32), _size_out, _err_p],
    ),
    "focus_async_cancel": (ctypes.c_int32, [ctypes.c_uint64, _err_p]),
    "focus_async_fd": (ctypes.c_int32, [ctypes.POINTER(ctypes.c_int), _err_p]),
    "focus_policy_open": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(c_handle), _err_p]),
    "focus_policy_generate": (
        ctypes.c_int32,
        [c_handle, ctypes.c_uint64, _ids_in, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, *_result_out, _err_p],
    ),
    "focus_policy_startup_check": (ctypes.c_int32, [c_handle, ctypes.c_uint64, _str_out, _err_p]),
    "focus_policy_admit": (ctypes.c_int32, [c_handle, ctypes.c_uint64, ctypes.c_int64, ctypes.POINTER(c_handle), _err_p]),
    "focus_policy_load": (ctypes.c_int32, [c_handle, _str_out, _err_p]),
    # trees, preparation, export
    "focus_tree_from_json": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(c_handle), _err_p]),
    "focus_tree_to_json": (ctypes.c_int32, [c_handle, _str_out, _err_p]),
    "focus_tree_summary": (ctypes.c_int32, [c_handle, _str_out, _err_p]),
    "focus_tree_values": (ctypes.c_int32, [c_handle, ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p]),
    "focus_critic_targets": (ctypes.c_int32, [c_handle, ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p]),
    "focus_critic_fit": (ctypes.c_int32, [c_handle, ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p]),
    "focus_critic_rule": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p]),
    "focus_prepare": (
        ctypes.c_int32,
        [c_handle, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(c_handle), _str_out, _err_p],
    ),
    "focus_batch_columns": (ctypes.c_int32, [c_handle, _str_out, ctypes.POINTER(ctypes.c_void_p), _size_out, _err_p]),
    "focus_batch_critic_contexts": (
        ctypes.c_int32,
        [c_handle, _str_out, ctypes.POINTER(ctypes.c_void_p), _size_out, _err_p],
    ),
    "focus_batch_from_json": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(c_handle), _err_p]),
    "focus_batch_spans": (
        ctypes.c_int32,
        [c_handle, ctypes.c_int64, _str_out, ctypes.POINTER(ctypes.c_void_p), _size_out, _err_p],
    ),
    "focus_batch_text": (ctypes.c_int32, [c_handle, ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p]),
    "focus_format_tree": (ctypes.c_int32, [c_handle, c_handle, _str_out, _err_p]),
    "focus_tree_html": (ctypes.c_int32, [c_handle, ctypes.c_char_p, ctypes.c_size_t, c_handle, _str_out, _err_p]),
    "focus_batch_export": (
        ctypes.c_int32,
        [c_handle, ctypes.c_int64, ctypes.c_double, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, _str_out,
         ctypes.POINTER(ctypes.c_void_p), _size_out, _err_p],
    ),
    "focus_tree_export": (
        ctypes.c_int32,
        [c_handle, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int64, ctypes.c_double,
         ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, c_handle, ctypes.c_int32, _str_out, ctypes.POINTER(ctypes.c_void_p),
         _size_out, _err_p],
    ),
    "focus_codec_render": (
        ctypes.c_int32,
        [c_handle, ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p],
    ),
    # native API policies (OpenAI), estimated token accounting, SGLang wire helpers (Slime, Tinker)
    "focus_openai_open": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(c_handle), _err_p]),
    "focus_openai_generate": (
        ctypes.c_int32,
        [c_handle, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p],
    ),
    "focus_openai_validate": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, _err_p]),
    "focus_native_estimate": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p]),
    "focus_native_decode": (ctypes.c_int32, [_ids_in, ctypes.c_size_t, _str_out, _err_p]),
    "focus_sglang_request": (
        ctypes.c_int32,
        [_ids_in, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, _str_out, _err_p],
    ),
    "focus_sglang_parse": (
        ctypes.c_int32,
        [ctypes.c_char_p, ctypes.c_size_t, _ids_in, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, *_result_out, _err_p],
    ),
    "focus_result_validate": (
        ctypes.c_int32,
        [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int64, _err_p],
    ),
}

# The ABI self-test exports: only in a library built with the focus_selftest Go build tag
# (`make selftest-lib`, build/selftest/libfocus.so), which the test suites and benchmarks
# load through FOCUS_GO_LIBRARY. The shipped library has none of them.
_SELFTEST_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "focus_selftest_panic": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, _err_p]),
    "focus_selftest_box": (
        ctypes.c_int32,
        [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(c_handle), _err_p],
    ),
    "focus_selftest_unbox": (ctypes.c_int32, [c_handle, _str_out, _err_p]),
    "focus_selftest_cpu_profile": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_size_t, _err_p]),
    "focus_selftest_search_tree": (
        ctypes.c_int32,
        [ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint64, ctypes.POINTER(c_handle), _err_p],
    ),
}

# Called with the GIL held (through held()): each is short and never waits. A call with a
# ticket (focus.h, "calls that wait") only starts its work, so _async starts them this way too.
_GIL_HELD = frozenset(
    {
        "focus_collection_resolve",
        "focus_collection_resolve_generate",
        "focus_collection_answer",
        "focus_collection_fail",
        "focus_collection_progress",
        "focus_codec_decode",
        "focus_math_grade",
        "focus_math_grade_text",
        "focus_rules_check",
        "focus_rules_defaults",
        "focus_rules_root_messages",
        "focus_async_cancel",
        "focus_async_wait",  # _async only ever calls it with timeout 0
        "focus_async_fd",
    }
)

_FIX = (
    "Build it with `make lib` in a focus-go checkout, reinstall the package with "
    "`pip install .`, or point {env} at a libfocus.so."
).format(env=ENV_LIBRARY)


def _candidates() -> list[Path]:
    here = Path(__file__).resolve().parent
    env = os.environ.get(ENV_LIBRARY)
    if env:
        return [Path(env)]
    # The installed package carries the library; a source checkout has it in build/.
    return [here / LIBRARY_NAME, here.parent.parent / "build" / LIBRARY_NAME]


def _open() -> tuple[ctypes.CDLL, Path]:
    tried = []
    for path in _candidates():
        if not path.is_file():
            tried.append(f"{path} (missing)")
            continue
        try:
            mode = os.RTLD_NOW | os.RTLD_LOCAL | getattr(os, "RTLD_NODELETE", 0)
            return ctypes.CDLL(str(path), mode=mode), path
        except OSError as exc:
            tried.append(f"{path} ({exc})")
    raise LibraryError(f"cannot load {LIBRARY_NAME}; tried: {'; '.join(tried)}. {_FIX}")


def _declare(lib: ctypes.CDLL, path: Path) -> None:
    """Set every signature on lib (checking the library has it), and the self-test ones
    when it is a self-test build."""
    for name, (restype, argtypes) in _SIGNATURES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LibraryError(f"{path} lacks {name}: it is from another focus-go version. {_FIX}") from None
        fn.restype = restype
        fn.argtypes = argtypes
    for name, (restype, argtypes) in _SELFTEST_SIGNATURES.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = restype
            fn.argtypes = argtypes


def has_selftest() -> bool:
    """Whether the loaded library is a self-test build (has the focus_selftest_* exports)."""
    return hasattr(lib(), "focus_selftest_panic")


def _missing(name: str) -> Exception:
    """The error for a function the loaded library lacks."""
    if name in _SELFTEST_SIGNATURES:
        return LibraryError(
            f"{library_path()} has no {name}: the self-test exports are only in a library built "
            f"with the focus_selftest Go build tag (`make selftest-lib`, then {ENV_LIBRARY}=build/selftest/libfocus.so)"
        )
    return LibraryError(f"{library_path()} has no {name}. {_FIX}")


def lib() -> ctypes.CDLL:
    """The loaded library, loading and checking it on first use."""
    global _lib, _held, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            loaded, path = _open()
            try:
                abi_fn = loaded.focus_abi_version
            except AttributeError:
                raise LibraryError(
                    f"{path} has no focus_abi_version: it is not a focus-go library (another shared "
                    f"library, or a build of something else). {_FIX}"
                ) from None
            abi = abi_fn()
            if abi != ABI_VERSION:
                raise LibraryError(
                    f"{path} implements C ABI version {abi}, but this focus_go package needs "
                    f"version {ABI_VERSION}. {_FIX}"
                )
            _declare(loaded, path)
            held = ctypes.PyDLL(str(path), mode=os.RTLD_NOW | os.RTLD_LOCAL | getattr(os, "RTLD_NODELETE", 0))
            _declare(held, path)
            _held, _path = held, path
            _lib = loaded  # last: lib()'s unlocked check sees everything set
    return _lib


def held() -> ctypes.PyDLL:
    """The library's functions called with the GIL held: only for calls that never wait."""
    lib()
    assert _held is not None
    return _held


def loaded() -> bool:
    """Whether the library has been loaded in this process."""
    return _lib is not None


def library_path() -> Path:
    """The path of the loaded library (loading it if needed)."""
    lib()
    assert _path is not None
    return _path


def take_bytes(out: Bytes) -> bytes:
    """The exact bytes of a focus_bytes the library filled (NUL bytes included), freeing it."""
    if not out.data:
        return b""
    try:
        return ctypes.string_at(out.data, out.len)
    finally:
        lib().focus_string_free(ctypes.c_void_p(out.data))
        out.data, out.len = None, 0


def take_string(out: Bytes) -> str:
    """A focus_bytes the library filled, decoded as UTF-8, and freed."""
    return take_bytes(out).decode("utf-8", "replace")


def take_error(code: int, err: Bytes, name: str) -> FocusError:
    """The exception for a failed call: its status code and the error the library wrote to
    ``err`` (``{"message", "field"}``, see focus.h), which is freed."""
    text = take_string(err)
    try:
        payload = json.loads(text)
    except ValueError:  # not the ABI's JSON: keep whatever text came
        payload = None
    if not isinstance(payload, dict):
        payload = {"message": text}
    message = payload.get("message") or f"{name} failed with status {code}"
    field = payload.get("field")
    return error_for(code, message, field if isinstance(field, str) else None)


def text_arg(text: str) -> tuple[bytes, int]:
    """A string input as UTF-8 bytes and their length (the C side's ``char *, size_t``)."""
    data = text.encode("utf-8")
    return data, len(data)


def call(name: str, *args: Any) -> None:
    """Call a status-returning function; raise the mapped FocusError on failure."""
    try:
        fn: Callable[..., int] = getattr(held() if name in _GIL_HELD else lib(), name)
    except AttributeError:
        raise _missing(name) from None
    err = Bytes()
    code = fn(*args, ctypes.byref(err))
    if code != 0:
        raise take_error(code, err, name)


def call_string(name: str, *args: Any) -> str:
    """Call a function whose last output is a string (focus_bytes), and return it decoded."""
    out = Bytes()
    call(name, *args, ctypes.byref(out))
    return take_string(out)


def call_handle(name: str, *args: Any) -> int:
    """Call a function that returns a new handle through its last output."""
    out = c_handle()
    call(name, *args, ctypes.byref(out))
    return out.value


def call_ids(name: str, *args: Any) -> list[int]:
    """Call a function whose last outputs are a token-id buffer and its length."""
    out = ctypes.POINTER(ctypes.c_uint32)()
    count = ctypes.c_size_t()
    call(name, *args, ctypes.byref(out), ctypes.byref(count))
    if not out:
        return []
    try:
        return out[: count.value]
    finally:
        lib().focus_buffer_free(out)


_ITEM_SIZES = {"B": 1, "I": 4, "d": 8}
# PyMemoryView_FromMemory: a read-only view of memory Python does not own, with no ctypes
# array type made per length (those are created and cached for every new length).
_memory_view = ctypes.pythonapi.PyMemoryView_FromMemory
_memory_view.restype = ctypes.py_object
_memory_view.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int]
_PYBUF_READ = 0x100


def view(address: Optional[int], n: int, fmt: str) -> memoryview:
    """n values of struct format fmt ("B", "I" or "d") in a buffer the library allocated,
    without copying (read-only): valid until the buffer is freed."""
    if not n:
        return memoryview(b"").cast(fmt)
    if not address:
        raise InternalError(f"the library returned no buffer for {n} values")
    return _memory_view(address, n * _ITEM_SIZES[fmt], _PYBUF_READ).cast(fmt)


def section(data: memoryview, layout: Mapping[str, Any], name: str, fmt: str) -> memoryview:
    """Section ``name`` of a buffer the library described in ``layout["sections"]``
    ({"offset", "count"} each), as values of struct format fmt."""
    sec = layout["sections"][name]
    start = sec["offset"]
    return data[start : start + sec["count"] * struct.calcsize(fmt)].cast(fmt)


def result_slots() -> tuple[Any, ...]:
    """Output slots for a generation result (see focus.h): its JSON, generated ids, their
    logprobs and their count."""
    return Bytes(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_size_t()


def take_result(slots: Sequence[Any]) -> "tuple[str, array.array[int], array.array[float]]":
    """Read result_slots() a call filled (JSON, ids, logprobs) and free them: the ids and
    logprobs are copied into a uint32 and a float64 array (one copy each, no int or float
    objects)."""
    out, tokens, logprobs, count = slots
    try:
        meta, n = take_string(out), count.value
        ids, values = array.array("I"), array.array("d")
        ids.frombytes(view(tokens.value, n * 4, "B"))
        values.frombytes(view(logprobs.value, n * 8, "B"))
        return meta, ids, values
    finally:
        lib().focus_buffer_free(tokens)
        lib().focus_buffer_free(logprobs)


def _no_untrack(ids: Tuple[int, ...]) -> Tuple[int, ...]:
    return ids


def _untracker() -> Callable[[Tuple[int, ...]], Tuple[int, ...]]:
    """A function that takes a tuple of ints out of CPython's cycle collector and returns
    it. CPython untracks such a tuple itself (it can hold no cycle) at the first collection
    that sees it, but only after traversing every item twice: for a 1,500-id prefix per
    segment those traversals were most of the young generation's cost in the collector's
    bridge (issue 22). Elsewhere (no ``ctypes.pythonapi``) the tuples are left as they are."""
    if platform.python_implementation() != "CPython" or not hasattr(ctypes, "pythonapi"):
        return _no_untrack
    untrack = ctypes.pythonapi.PyObject_GC_UnTrack
    untrack.argtypes, untrack.restype = [ctypes.py_object], None

    def untracked(ids: Tuple[int, ...]) -> Tuple[int, ...]:
        untrack(ids)
        return ids

    return untracked


# Only for tuples whose items are all ints (built from the library's uint32 arrays, or
# concatenations of such tuples): nothing else may leave the cycle collector's view.
untracked_ids = _untracker()


def call_result(name: str, *args: Any) -> "tuple[str, array.array[int], array.array[float]]":
    """Call a function whose last outputs are a generation result: its JSON, generated ids
    and logprobs."""
    slots = result_slots()
    call(name, *args, *[ctypes.byref(s) for s in slots])  # a failed call writes no outputs
    return take_result(slots)


# Token-id tuples whose uint32 array already exists: a bridged policy.generate prefix is
# built from the poll's buffer, and a Python policy that hands it on to a Go one (Slime's,
# a Completion forwarding to a Go policy) passes that array instead of converting the tuple
# back. Keyed by id(); each entry holds its tuple, so the id is not reused while it is
# registered. Entries live while their request is being served (share_ids / unshare_ids).
_shared_ids: dict[int, tuple[tuple, "array.array[int]"]] = {}


def share_ids(ids: tuple, buf: "array.array[int]") -> None:
    """Register buf as the uint32 array of the tuple ids (same values) for ids_arg."""
    _shared_ids[id(ids)] = (ids, buf)


def unshare_ids(ids: tuple, buf: "Optional[array.array[int]]" = None) -> None:
    """End share_ids(ids, buf). The same tuple may be shared by requests served at once
    (siblings continuing one context, see _bridge._RecentIds): given buf, the entry is
    removed only while it is still that request's."""
    shared = _shared_ids.get(id(ids))
    if shared is not None and (buf is None or shared[1] is buf):
        del _shared_ids[id(ids)]


def ids_arg(ids: Sequence[int]) -> tuple[Any, int]:
    """Token ids as a C uint32 array argument (an ``array.array("I")``, see _IdsIn) and
    its length."""
    shared = _shared_ids.get(id(ids))
    if shared is not None and shared[0] is ids:
        buf = shared[1]
    else:
        try:
            buf = array.array("I", ids)
        except OverflowError:
            raise ConfigError("token ids must be integers in [0, 2**32)") from None
        except TypeError:
            raise ConfigError("token ids must be integers") from None
    if not buf:
        return None, 0
    return buf, len(buf)


def release(handle: int) -> None:
    """Release a handle; releasing one twice raises InvalidHandleError."""
    call("focus_handle_release", c_handle(handle))


def live_handles() -> int:
    """How many Go objects Python still holds handles to (for leak checks)."""
    return int(lib().focus_live_handles())


def abi_version() -> int:
    return int(lib().focus_abi_version())


def library_version() -> str:
    return call_string("focus_version")
