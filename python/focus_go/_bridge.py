"""The Python side of a collection's bridge: the server of the remote Python parts.

A collection whose policy, environment or critic is a Python object runs in Go all the
same; each call the engine makes to such a part is queued on the collection's bridge
(``core/bridge``). ``_Run`` drives one Go collection: it polls the queued requests (a Go
call awaited on the event loop, ``_async``: no thread), serves each from the registry of
Python objects (``_Remote``: ``policy.generate``, ``env.reset``, ``env.step``, ``env.fork``,
``critic.score``), in an asyncio task when the object's method is asynchronous, and
answers the replies of one event-loop turn in one ``focus_collection_answer`` call, token
ids and logprobs as arrays beside the JSON. ``_RecentIds`` hands back the id tuples of
recent requests instead of rebuilding them from each poll's buffer. Go never calls into
Python.

``focus_go.collector`` builds the collection's spec and starts a ``_Run``; nothing here is
public.
"""

from __future__ import annotations

import array
import asyncio
import ctypes
import inspect
import itertools
import json
import math
from contextvars import ContextVar
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from . import _async, _lib
from ._handle import GoObject
from .critic import Critic
from .errors import (
    BackendError,
    ConfigError,
    FocusError,
    FocusTimeoutError,
    InternalError,
    InvalidHandleError,
    OperationCancelled,
    error_for,
)
from .generation.policy import Policy
from .generation.servers import go_arrays
from .generation.types import SamplingParams
from .tree import SchedulerState
from .types import Failure, GenerateResult, Step, TokenChunk, ToolCall, ToolTurn


# The values a bridge method gives most often, none of them awaitable: checked by type
# first, because inspect.isawaitable's Awaitable check costs about 0.6 µs per call.
_PLAIN = frozenset({dict, Step, str, tuple, list, type(None)})


def _awaitable(value: Any) -> bool:
    return type(value) not in _PLAIN and inspect.isawaitable(value)


async def _resolve(value: Any) -> Any:
    return await value if _awaitable(value) else value


def _then(value: Any, fn: Callable[[Any], Any]) -> Any:
    """fn(value), or a coroutine giving fn(await value) when value is awaitable (fn may
    itself return an awaitable, which is then awaited too)."""
    if not _awaitable(value):
        return fn(value)

    async def later() -> Any:
        out = fn(await value)
        return await out if _awaitable(out) else out

    return later()


# json.dumps(allow_nan=False)'s C encoder, made once (json.dumps makes one per call). No
# circular-reference check: a cyclic reply fails its request with RecursionError
# (json.dumps: ValueError); NaN and infinities are refused as json.dumps refuses them.
_REPLY_ENCODER = json.encoder.c_make_encoder and json.encoder.c_make_encoder(
    None, json.JSONEncoder().default, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, False
)


def _plain_json(obj: Any) -> bytes:
    """json.dumps(obj, allow_nan=False), encoded: the reply payloads."""
    if _REPLY_ENCODER is None:  # a Python without the _json accelerator
        return json.dumps(obj, allow_nan=False).encode()
    return "".join(_REPLY_ENCODER(obj, 0)).encode()


class _Remote:
    """The Python objects one collection's engine calls through the bridge."""

    def __init__(self) -> None:
        self.objects: Dict[int, Any] = {}
        self._next = 1
        self.root_env: Optional[int] = None
        self.recent = _RecentIds()

    def register(self, obj: Any) -> int:
        oid = self._next
        self._next += 1
        self.objects[oid] = obj
        return oid

    def serve(self, req: Dict[str, Any]) -> Any:
        """The reply to ``req``, or an awaitable of it when the Python object's method is
        asynchronous (synchronous env methods are answered without an asyncio task)."""
        kind, payload = req["kind"], req.get("payload") or {}
        obj = self.objects.get(req["object"])
        if obj is None:
            raise ConfigError(f"{kind}: no Python object {req['object']} (already closed?)")
        if kind == "policy.generate":
            return self._generate(obj, payload)
        if kind == "env.reset":
            if req["object"] == self.root_env:
                # The collector already called reset() to build the first user message.
                return {"observation": None}
            return _then(obj.reset(), lambda obs: {"observation": _observation(obs)})
        if kind == "env.step":
            reply = _then(obj.step(_action(payload["action"])), _step_reply)
            if not payload.get("fork"):
                return reply
            # The engine keeps a snapshot of the node unless the step ends the episode: the
            # fork is taken here, after the step, to save it a round trip of its own.
            return _then(reply, lambda r: r if r["done"] else _then(obj.fork(), lambda env: {**r, "object": self.register(env)}))
        if kind == "env.fork":
            return _then(obj.fork(), lambda env: {"object": self.register(env)})
        if kind == "critic.score":
            return self._score(obj, payload["contexts"])
        raise ConfigError(f"unknown bridge request kind {kind!r}")

    async def _generate(self, policy: Policy[Any], payload: Dict[str, Any]) -> "_Generated":
        params = SamplingParams._from_engine(payload.get("params") or {})
        prefix, ids = payload["tokens"], payload.get("ids")
        if ids is not None and prefix:
            _lib.share_ids(prefix, ids)  # a Go policy it is handed to reuses the array
        try:
            result = await policy.agenerate_tokens(prefix, params)
        finally:
            if ids is not None:
                _lib.unshare_ids(prefix, ids)
        if not isinstance(result, GenerateResult):
            raise ConfigError(f"policy returned {type(result).__name__}, expected GenerateResult")
        arrays = go_arrays(result)
        if arrays is not None:
            # A Go policy's result, handed on unchanged: Go checked it, and its ids are ints.
            tokens, logprobs = arrays
            self.recent.add(prefix, ids, tokens, result.tokens)
        else:
            tokens, logprobs = _checked_arrays(result)
            self.recent.add(prefix, ids, tokens)
        # exact=False (or a result with exact_generation False) makes the edge inexact: its
        # tokens condition later turns but train no actor; critic targets still use it.
        meta = {
            "text": result.text,
            "stop_reason": result.stop_reason,
            "matched_stop": result.matched_stop,
            "exact": bool(policy.is_exact(result)),
        }
        return _Generated(tokens, logprobs, _plain_json(meta))

    async def _score(self, critic: Critic, contexts: List[str]) -> Dict[str, Any]:
        values = [float(v) for v in await _resolve(critic.fn(list(contexts)))]  # type: ignore[misc]
        for i, v in enumerate(values):
            if not math.isfinite(v):
                raise ConfigError(f"critic function returned {v} for context {i}; values must be finite")
        return {"values": values}


# Contexts a collection's _RecentIds keeps (each with its generated ids): a tree has at most
# 16 rollouts in flight, and a rollout's next request comes right after its env step. In
# the benchmark's trees 95% of prefixes and actions are found with 32 (88% with 16), for
# at most about 0.7 MB per bridged collection (1,800-id contexts: a tuple and an array).
_RECENT_CONTEXTS = 32


class _RecentIds:
    """The id tuples of one collection's recent policy.generate requests, handed back when
    the poll brings the same ids again, instead of building a new int object per id from
    the poll's buffer (about 40 µs for a 1,500-id prefix): a continuing segment's prefix is
    the previous request's prefix plus the ids generated from it, and an env.step token
    action is those generated ids. A tuple is handed back only when its ids equal the
    polled ones (a memcmp of the two arrays); the key (the length, the last and the middle
    id) only finds the candidate. The oldest entries go first."""

    def __init__(self, limit: int = _RECENT_CONTEXTS) -> None:
        self.limit = limit
        self._entries: Dict[Tuple[int, int, int], Tuple[Tuple[int, ...], "array.array[int]"]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    @staticmethod
    def _key(buf: "array.array[int]") -> Tuple[int, int, int]:
        n = len(buf)
        return (n, buf[-1], buf[n // 2]) if n else (0, 0, 0)

    def ids(self, buf: "array.array[int]") -> Tuple[int, ...]:
        """The ids in buf (a uint32 array) as a tuple: a recent one when equal."""
        if not buf:
            return ()
        hit = self._entries.get(self._key(buf))
        if hit is not None and hit[1] == buf:
            return hit[0]
        return _lib.untracked_ids(tuple(buf.tolist()))

    def add(
        self,
        prefix: Tuple[int, ...],
        prefix_buf: Optional["array.array[int]"],
        generated_buf: "array.array[int]",
        generated: Optional[Tuple[int, ...]] = None,
    ) -> None:
        """Record a served request: its prefix (a tuple of ints, as polled) and prefix_buf
        (its array, None when empty), and the generated ids as an array (and as a tuple of
        ints when there is one: a Go policy's result)."""
        if not generated_buf:
            return
        if generated is None:
            # From the array, not the policy's result: exact ints, whatever int-like values
            # (numpy's, bools) the policy returned, as ids built from the poll's buffer are.
            generated = _lib.untracked_ids(tuple(generated_buf.tolist()))
        self.keep(generated, generated_buf)
        # prefix holds only ints too: the polled tuple (the Policy contract hands it on
        # unchanged; a Completion that mutates it cannot, it is a tuple).
        self.keep(_lib.untracked_ids(prefix + generated), generated_buf if prefix_buf is None else prefix_buf + generated_buf)

    def keep(self, ids: Tuple[int, ...], buf: "array.array[int]") -> None:
        """Keep the tuple ids, whose values buf holds (the root prompt, or what add keeps)."""
        key = self._key(buf)
        self._entries.pop(key, None)
        self._entries[key] = (ids, buf)
        if len(self._entries) > 2 * self.limit:
            del self._entries[next(iter(self._entries))]


_NO_LOGPROB_YET = (-math.inf,)


def _checked_arrays(result: GenerateResult) -> "Tuple[array.array[int], array.array[float]]":
    """A Python policy's generated ids and logprobs as a uint32 and a float64 array, once
    checked. NaN (no logprob: what SGLang's null reads as) and -inf are kept: the engine
    makes the edge inexact, so it trains no actor. A positive logprob is a broken policy."""
    if _has_positive(result.logprobs):
        i, lp = next((i, lp) for i, lp in enumerate(result.logprobs) if lp > 0)
        raise ConfigError(f"policy returned logprob {lp} for generated token {i}; logprobs must be <= 0 (NaN for none)")
    if len(result.logprobs) != len(result.tokens):
        raise ConfigError(f"policy returned {len(result.tokens)} tokens but {len(result.logprobs)} logprobs")
    try:
        tokens = array.array("I", result.tokens)
    except (OverflowError, TypeError):
        raise ConfigError("policy returned token ids that are not integers in [0, 2**32)") from None
    return tokens, array.array("d", result.logprobs)


def _has_positive(values: Any) -> bool:
    """Whether some value is > 0, as ``any(v > 0 for v in values)`` but at C speed: max()
    only replaces its running maximum with a value greater than it, so the NaNs (no
    logprob) it meets after the leading -inf never win, and a positive one always does."""
    return max(itertools.chain(_NO_LOGPROB_YET, values)) > 0


def _address(values: "array.array[Any]") -> Optional[int]:
    """The address of an array's buffer for a C pointer argument (NULL when empty); the
    caller keeps the array referenced for the call."""
    return values.buffer_info()[0] if values else None


class _Generated:
    """A policy.generate reply: ids and logprobs cross the C boundary as arrays."""

    __slots__ = ("tokens", "logprobs", "meta")

    def __init__(self, tokens: "array.array[int]", logprobs: "array.array[float]", meta: bytes) -> None:
        self.tokens, self.logprobs, self.meta = tokens, logprobs, meta


def _observation(obs: Any) -> Optional[Dict[str, Any]]:
    if obs is None or obs == "":
        return None
    if isinstance(obs, str):
        return {"text": obs}
    if isinstance(obs, (list, tuple)):
        messages = []
        for i, m in enumerate(obs):
            if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
                raise ConfigError(f"observation message {i} must be a dict with a 'role', got {m!r:.80}")
            messages.append(dict(m))
        return {"messages": messages} if messages else None
    raise ConfigError(
        f"observation is a {type(obs).__name__}; expected text, a list of chat messages "
        "(whole-turn context only) or None"
    )


def _step_reply(step: Any) -> Dict[str, Any]:
    if not isinstance(step, Step):
        raise ConfigError(f"env.step returned {type(step).__name__}, expected Step")
    reward = float(step.reward)
    if not math.isfinite(reward):
        raise ConfigError(f"env.step returned reward {reward}, which is not finite")
    return {"observation": _observation(step.observation), "reward": reward, "done": bool(step.done), "info": step.info}


def _action(action: Dict[str, Any]) -> Any:
    kind = action.get("kind")
    if kind == "tokens":
        return TokenChunk(tokens=tuple(action.get("tokens") or ()), finished=bool(action.get("finished")))
    if kind == "text":
        return action.get("text", "")
    if kind == "tool":
        calls = tuple(
            ToolCall(c["name"], c["arguments"], c.get("call_id", ""), c.get("error") or "")
            for c in action.get("tool_calls") or ()
        )
        return ToolTurn(text=action.get("text", ""), tool_calls=calls, reasoning=action.get("reasoning", ""))
    raise ConfigError(f"unknown action kind {kind!r}")


_POLL_BATCH = 256


def _polled(out: "_lib.Bytes", tokens: ctypes.c_void_p, count: ctypes.c_size_t, recent: _RecentIds) -> List[Dict[str, Any]]:
    """The requests a focus_collection_poll call wrote (and freed). The ids that cross
    beside the JSON go back into the payloads as tuples (recent ones where equal, see
    _RecentIds): a policy.generate prefix as "tokens", with its uint32 array as "ids" (see
    _lib.share_ids); an env.step token action's as the action's "tokens"."""
    try:
        requests = json.loads(_lib.take_string(out))
        if tokens:
            raw = _lib.view(tokens.value, count.value * 4, "B")
            for req in requests:
                span = req.pop("tokens", None)
                if span is None:
                    continue
                if not isinstance(span, list) or len(span) != 2 or not 0 <= span[0] <= span[1] <= count.value:
                    raise InternalError(f"bridge request {req.get('id')} has token range {span!r} outside the {count.value} polled ids")
                buf = array.array("I")
                buf.frombytes(raw[span[0] * 4 : span[1] * 4])  # one copy, no int objects
                ids = recent.ids(buf)
                if req["kind"] == "policy.generate":
                    req["payload"]["tokens"], req["payload"]["ids"] = ids, buf
                elif req["kind"] == "env.step":
                    req["payload"]["action"]["tokens"] = ids
    finally:
        if tokens:
            _lib.lib().focus_buffer_free(tokens)
    for req in requests:
        if req["kind"] == "policy.generate":
            req["payload"].setdefault("tokens", ())
    return requests


async def _poll(handle: Any, recent: _RecentIds) -> List[Dict[str, Any]]:
    """The queued bridge requests (waiting for at least one), then those queued by the time
    this task runs again (see _poll_now)."""
    out, tokens, count = _lib.Bytes(), ctypes.c_void_p(), ctypes.c_size_t()
    requests = await _async.call("focus_collection_poll", handle, -1, _POLL_BATCH, slots=(out, tokens, count),
                                 convert=lambda: _polled(out, tokens, count, recent))
    if len(requests) < _POLL_BATCH:
        try:
            requests += _poll_now(handle, recent, _POLL_BATCH - len(requests))
        except OperationCancelled:
            pass  # the bridge closed after the first ones: serve them; the next poll ends
    return requests


def _poll_now(handle: Any, recent: _RecentIds, limit: int) -> List[Dict[str, Any]]:
    """The requests queued now, without waiting (none: []). A poll completes with the
    requests queued when the first of a burst arrived (the replies of one answer call wake
    several rollouts, whose next requests follow within microseconds), and this task runs
    only a loop turn later: taking the rest of the burst here saves a poll's round trip
    (a wake-up of the loop, a future and a task step) for most of them."""
    out, tokens, count = _lib.Bytes(), ctypes.c_void_p(), ctypes.c_size_t()
    try:  # ticket 0 and timeout 0: returns at once, FOCUS_ERR_TIMEOUT when none is queued
        _lib.call("focus_collection_poll", _lib.c_handle(handle), 0, 0, limit, ctypes.byref(out), ctypes.byref(tokens), ctypes.byref(count))
    except FocusTimeoutError:
        return []
    return _polled(out, tokens, count, recent)


# Where a collection cancelled from Python leaves its tree so far (the SchedulerState Go
# returned with its Cancelled error), for a caller that resumes it later (the Slime hook
# keeps an aborted tree's work). Unset: the tree is freed with the collection.
_cancelled_trees: "ContextVar[Optional[List[SchedulerState[Any]]]]" = ContextVar("focus_cancelled_trees", default=None)


class _Run:
    """One Go collection and the Python side of its bridge."""

    def __init__(self, config: Dict[str, Any], remote: _Remote) -> None:
        self.config = config
        self.remote = remote
        self.tasks: Dict[int, asyncio.Future[Any]] = {}
        self.handle: Optional[int] = None  # the Go collection's, while it is open
        self.final: Optional[Dict[str, Any]] = None  # the last counters, once ended
        # Replies waiting to be sent: (request id, JSON payload, generated ids + logprobs or
        # None). They go to Go in one focus_collection_answer call per event-loop turn.
        self._answers: List[Tuple[int, bytes, Optional[_Generated]]] = []

    def progress(self) -> Optional[Dict[str, Any]]:
        """The engine's live counters (focus_collection_progress's JSON, the fields of
        ``CollectionProgress``); None unless running."""
        if self.handle is None:
            return None
        return json.loads(_lib.call_string("focus_collection_progress", _lib.c_handle(self.handle)))

    async def run(self) -> SchedulerState[Any]:
        data = json.dumps(self.config).encode()
        collection = GoObject(_lib.call_handle("focus_collect_start", data, len(data)))
        handle = self.handle = collection.handle
        ended = asyncio.ensure_future(self._serve(handle))
        try:
            try:
                await asyncio.shield(ended)
            except asyncio.CancelledError:
                _lib.call("focus_collection_cancel", _lib.c_handle(handle))
                await asyncio.shield(ended)
                self._keep_cancelled(_lib.c_handle(handle))
                raise
            finally:
                for task in list(self.tasks.values()):
                    task.cancel()
            self.final = self.progress()
            return self._result(_lib.c_handle(handle))
        finally:
            self.handle = None
            self.remote.recent.clear()  # now, not when the ending exception's cycle is collected
            collection.close()

    async def _serve(self, handle: int) -> None:
        """Serve the bridge until the collection closes it, then wait for the end (without
        remote parts, only wait). The waits are Go calls awaited through _async: no thread
        per collection."""
        try:
            serving = bool(self.remote.objects)
            while serving:
                try:
                    requests = await _poll(handle, self.remote.recent)
                except OperationCancelled:
                    break  # the collection finished and closed its bridge
                self._dispatch_all(requests, _lib.c_handle(handle))
        except BaseException:
            _lib.call("focus_collection_cancel", _lib.c_handle(handle))  # nobody serves it any more
            raise
        finally:
            done = ctypes.c_int32()
            await _async.call("focus_collection_wait", handle, -1, slots=(done,), convert=lambda: None)

    def _dispatch_all(self, requests: List[Dict[str, Any]], handle: Any) -> None:
        for req in requests:
            self._dispatch(req, handle)

    def _dispatch(self, req: Dict[str, Any], handle: Any) -> None:
        kind = req["kind"]
        if kind == "cancel":
            task = self.tasks.pop(req["id"], None)
            if task is not None:
                task.cancel()
            return
        if kind == "env.close":
            self.remote.objects.pop(req["object"], None)
            return
        rid = req["id"]
        try:
            reply = self.remote.serve(req)
        except Exception as exc:
            self._fail(handle, rid, exc)
            return
        if _awaitable(reply):
            # The awaitable itself becomes the task: cancelled before its first step, it is
            # still closed properly.
            task = asyncio.ensure_future(reply)
            self.tasks[rid] = task
            task.add_done_callback(lambda done: self._finish(handle, rid, done))
        else:
            self._reply(handle, rid, reply)

    def _finish(self, handle: Any, rid: int, task: "asyncio.Future[Any]") -> None:
        self.tasks.pop(rid, None)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            self._reply(handle, rid, task.result())
        elif isinstance(exc, Exception):
            self._fail(handle, rid, exc)

    def _reply(self, handle: Any, rid: int, reply: Any) -> None:
        if isinstance(reply, _Generated):
            answer = (rid, reply.meta, reply)
        else:
            try:
                answer = (rid, _plain_json(reply), None)
            except Exception as exc:
                self._fail(handle, rid, exc)
                return
        if not self._answers:
            # Every reply given until the loop's next turn crosses the C boundary in one call.
            asyncio.get_running_loop().call_soon(self._send_answers, handle)
        self._answers.append(answer)

    def _send_answers(self, handle: Any) -> None:
        """Answer the queued replies in one focus_collection_answer call: the JSON payloads
        concatenated, the generated ids and logprobs of the policy.generate replies in two
        arrays (a resolve or resolve_generate each, in order)."""
        answers, self._answers = self._answers, []
        if not answers:
            return
        ids, ends, generated = array.array("Q"), array.array("Q"), array.array("q")
        tokens, logprobs = array.array("I"), array.array("d")
        payloads, end = [], 0
        for rid, payload, gen in answers:
            ids.append(rid)
            payloads.append(payload)
            end += len(payload)
            ends.append(end)
            if gen is None:
                generated.append(-1)
            else:
                generated.append(len(gen.tokens))
                tokens.extend(gen.tokens)
                logprobs.extend(gen.logprobs)
        payload = b"".join(payloads)
        try:
            _lib.call(
                "focus_collection_answer", handle, len(answers), _address(ids), payload, len(payload),
                _address(ends), _address(generated), _address(tokens), _address(logprobs), len(tokens), None,
            )
        except InvalidHandleError:
            pass  # the collection has ended: nobody waits for these replies
        except BaseException:
            # Answers that cannot be given would leave the engine waiting: stop it.
            _lib.call("focus_collection_cancel", handle)
            raise

    def _fail(self, handle: Any, rid: int, exc: Exception) -> None:
        """The engine records the failure as a failed rollout or critic call."""
        code = exc.code if isinstance(exc, FocusError) and exc.code > 0 else BackendError.code
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
            code = FocusTimeoutError.code
        self._answer("focus_collection_fail", handle, rid, code, *_lib.text_arg(f"{type(exc).__name__}: {exc}"))

    @staticmethod
    def _answer(name: str, handle: Any, rid: int, *args: Any) -> None:
        try:
            _lib.call(name, handle, rid, *args)
        except InvalidHandleError:
            pass  # the engine stopped waiting for this request (cancelled or finished)

    def _keep_cancelled(self, handle: Any) -> None:
        """Hand the tree of a collection cancelled from Python to ``_cancelled_trees``."""
        sink = _cancelled_trees.get()
        if sink is None:
            return
        try:
            state: Optional[SchedulerState[Any]] = self._result(handle)
        except FocusError as exc:
            state = getattr(exc, "state", None)
        if state is not None:
            sink.append(state)

    def _result(self, handle: Any) -> SchedulerState[Any]:
        tree = _lib.c_handle()
        outcome = json.loads(_lib.call_string("focus_collection_result", handle, ctypes.byref(tree)))
        state = SchedulerState(tree.value) if tree.value else None
        failures = tuple(Failure(f["node_id"], f["message"], f.get("aborted", False)) for f in outcome["failures"] or ())
        if state is not None:
            state.failures = failures
        if outcome["code"]:
            exc = error_for(outcome["code"], outcome["message"], outcome.get("field"))
            exc.state = state  # type: ignore[attr-defined]
            exc.failures = failures  # type: ignore[attr-defined]
            raise exc
        assert state is not None
        return state
