"""A Tinker service stand-in behind the real ``tinker`` SDK client classes.

``StandinTinker(sim_policy).training_client()`` returns a real ``tinker.TrainingClient``
whose HTTP transport is an ``httpx.MockTransport`` answering as the Tinker API does: every
request is built and encoded by the SDK itself (the forward-backward body with the SDK's
protobuf encoder, the others as its JSON request types) and decoded here with the SDK's own
types (``StrictBase`` request models forbid unknown fields; the protobuf is parsed with
``tinker_public_pb2``), so a call the SDK or the service would refuse fails the test.
Responses go back the way the service sends them (``ForwardBackwardOutput`` and
``SampleResponse`` as protobuf, the rest as JSON), so the SDK's decoders run too.

The model the stand-in trains (numbers, not a network):

- Weights are a version counter: each ``optim_step`` adds one.
- Sampling forwards to the simulated inference server through a Go ``SGLangPolicy``; a
  sampler of version ``v`` shifts the seed by ``1000 * v`` (different weights sample
  differently) and reports logprobs ``raw - DRIFT * v`` (the simulated server's logprob
  minus a per-version drift).
- ``forward_backward`` at learner version ``v`` scores each target token the stand-in
  sampled as ``raw - DRIFT * v``, so the sampler-vs-learner KL of a batch sampled ``lag``
  updates ago is ``DRIFT * lag`` per token. Targets it did not sample score as the datum's
  own ``logprobs``.
- **Clock cycles**: the training queue runs requests in ``seq_id`` order, in cycles, as
  Tinker's service does. A cycle starts once the caller waits on a training result (the
  holder below marks the futures of ``TrainingClient`` calls, so waiting on one is seen),
  every request id the TrainingClient has reserved so far has arrived, and the SDK's event
  loop has gone ``QUIET_TURNS`` turns without a new training request: then it runs every
  queued request whose predecessors have run. So requests submitted before the caller
  waits (as the SDK's docs ask) share a cycle, and a request submitted only after an
  earlier result came back needs a cycle of its own, whatever the threads' timing.
  ``cycles`` lists each cycle's request kinds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import httpx
import numpy as np
from tinker import types
from tinker.lib.internal_client_holder import InternalClientHolder, _internal_client_holder_thread_singleton
from tinker.lib.public_interfaces.api_future import AwaitableConcurrentFuture
from tinker.lib.public_interfaces.training_client import TrainingClient
from tinker.proto import tinker_public_pb2 as pb
from tinker.proto.response_conv import _tensor_data_from_proto

from focus_go.backends import SamplingParams

DRIFT = 0.01
REF_JITTER = 0.05  # prompt logprobs: + REF_JITTER * (position % 2), a reference that differs per token
QUIET_TURNS = 50
BASE_URL = "http://tinker-standin.invalid"

# Keys each built-in loss reads (Tinker's loss docs); the stand-in refuses any other key.
LOSS_KEYS = {
    "cross_entropy": {"target_tokens", "weights"},
    "importance_sampling": {"target_tokens", "logprobs", "advantages"},
    "ppo": {"target_tokens", "logprobs", "advantages"},
    "cispo": {"target_tokens", "logprobs", "advantages"},
    "dro": {"target_tokens", "logprobs", "advantages"},
    "stable_reinforce": {"target_tokens", "logprobs", "advantages"},
}

_STOP = {"stop": pb.STOP_REASON_STOP, "length": pb.STOP_REASON_LENGTH}


class Rejected(Exception):
    """A request the service refuses (HTTP 400 with the reason)."""


@dataclass
class TrainedDatum:
    """One datum as the service decoded it."""

    tokens: List[int]
    inputs: Dict[str, np.ndarray]
    model_input_spans: List[Tuple[str, str, int, int]]
    loss_fn_input_spans: List[Tuple[str, str, int, int]]


@dataclass
class _Op:
    kind: str
    seq_id: int
    body: Any
    request_id: str
    done: bool = False
    result: Any = None  # (content_type, bytes)


@dataclass
class SampleCall:
    session: str
    version: int
    prompt: Tuple[int, ...]
    num_samples: int
    seed: Optional[int]
    temperature: float = 1.0
    sequence_ids: List[str] = field(default_factory=list)
    record_stability_info: bool = False


class _WatchedFuture(AwaitableConcurrentFuture):
    """The future of a TrainingClient call; waiting on it tells the stand-in's clock."""

    def __init__(self, future: Any, standin: "StandinTinker"):
        super().__init__(future)
        self._standin = standin

    def result(self, timeout: Optional[float] = None) -> Any:
        with self._standin._client_waiting():
            return super().result(timeout)

    async def result_async(self, timeout: Optional[float] = None) -> Any:
        with self._standin._client_waiting():
            return await super().result_async(timeout)


class _StandinHolder(InternalClientHolder):
    """The SDK's holder, unchanged except that the futures of TrainingClient calls made
    from the caller's threads are watched (see ``_WatchedFuture``)."""

    standin: "StandinTinker"

    def run_coroutine_threadsafe(self, coro: Any) -> Any:
        future = super().run_coroutine_threadsafe(coro)
        if threading.current_thread() is self.standin._loop_thread():
            return future
        frame = sys._getframe(1)
        for _ in range(4):  # the TrainingClient method, under the SDK's telemetry wrappers
            if frame is None:
                break
            if frame.f_code.co_qualname.startswith("TrainingClient."):
                return _WatchedFuture(future.future(), self.standin)
            frame = frame.f_back
        return future


class StandinTinker:
    def __init__(
        self,
        sim_policy: Any,
        *,
        base_model: str = "standin/base-model",
        fail_on_fb: Optional[int] = None,
        start_version: int = 0,
        lora_rank: Optional[int] = 32,
        states: Optional[Dict[str, int]] = None,
    ):
        """``start_version`` is the weights version the model starts from (a training client
        created from a saved state); ``states`` the saved states the service holds (another
        stand-in's ``states``: the same account)."""
        self.sim_policy = sim_policy
        self.base_model = base_model
        self.model_id = "standin-model-0"
        self.fail_on_fb = fail_on_fb
        self.version = start_version
        self.cycles: List[List[str]] = []
        self.trained: List[List[TrainedDatum]] = []  # datums per forward_backward
        self.fb_calls: List[Tuple[str, Dict[str, float], bool]] = []  # (loss_fn, config, forward_only)
        self.optim_calls: List[Dict[str, Any]] = []
        self.samplers: Dict[str, int] = {}  # sampling_session_id -> weights version
        self.sampler_order: List[str] = []
        self.sample_calls: List[SampleCall] = []
        self.score_calls: List[Tuple[str, Tuple[int, ...]]] = []  # compute_logprobs: (session, sequence)
        self.sequences: Dict[str, Tuple[Tuple[int, ...], Tuple[int, ...]]] = {}  # id -> (prompt, tokens)
        self.states: Dict[str, int] = dict(states or {})  # save_state path -> version
        self.lora_rank = lora_rank
        self.state_ttls: Dict[str, Optional[int]] = {}  # save_state path -> ttl_seconds
        self.sampler_exports: Dict[str, Tuple[int, Optional[int]]] = {}  # path -> (version, ttl_seconds)
        self.loads: List[Tuple[str, bool]] = []  # (path, optimizer) of each load_weights
        self.paths: List[str] = []  # every request path, in arrival order
        self._raw: Dict[Tuple[int, ...], List[float]] = {}  # prompt+tokens -> raw logprobs of tokens
        self._ops: Dict[int, _Op] = {}
        self._by_request: Dict[str, Any] = {}
        self._next_run = 1
        self._arrivals = 0
        self._lock: Optional[asyncio.Lock] = None
        self._ids = itertools.count(1)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="tinker-standin")
        self._mutex = threading.Lock()
        self.holder: Optional[InternalClientHolder] = None
        self.client: Optional[TrainingClient] = None
        self._waiting = 0  # caller threads waiting on a TrainingClient future

    # -- clients ---------------------------------------------------------------------------

    def training_client(self) -> TrainingClient:
        """A real TrainingClient (fresh session) over this stand-in's transport."""
        _StandinHolder.standin = self
        holder = _StandinHolder(
            session_id="standin-session",
            base_url=BASE_URL,
            api_key="tml-standin",
            _client_config=types.ClientConfigResponse(use_pyqwest_transport=False).model_dump(),
            _client_dynamic_config=types.ClientDynamicConfigResponse().model_dump(),
        )
        # A shadow holder (no session requests) that may create sampling clients.
        holder._sampling_client_counter = 0
        holder._training_client_counter = 1
        holder._constructor_kwargs["http_client"] = httpx.AsyncClient(
            transport=httpx.MockTransport(self._handle), base_url=BASE_URL
        )
        self.holder = holder
        info = types.GetInfoResponse(
            model_id=self.model_id,
            model_data=types.ModelData(model_name=self.base_model, arch="standin", tokenizer_id=self.base_model),
            is_lora=self.lora_rank is not None,
            lora_rank=self.lora_rank,
        )
        self.client = TrainingClient(holder, 0, self.model_id, info=info)
        return self.client

    @staticmethod
    def _loop_thread() -> Optional[threading.Thread]:
        """The SDK's event-loop thread (one per process)."""
        return _internal_client_holder_thread_singleton._thread

    @contextlib.contextmanager
    def _client_waiting(self) -> Any:
        with self._mutex:
            self._waiting += 1
        try:
            yield
        finally:
            with self._mutex:
                self._waiting -= 1

    def close(self) -> None:
        if self.holder is not None:
            self.holder.close()
        self._pool.shutdown(wait=True)

    # -- measurements ----------------------------------------------------------------------

    def update_cycles(self) -> List[List[str]]:
        """The cycles that ran a forward_backward or an optim_step."""
        return [c for c in self.cycles if "fb" in c or "optim" in c]

    # -- transport ---------------------------------------------------------------------------

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.paths.append(path)
        body = await request.aread()
        try:
            if path == "/api/v1/forward_backward":
                return self._json(self._submit("fb", self._decode_fb(request, body)))
            if path == "/api/v1/optim_step":
                req = types.OptimStepRequest.model_validate(json.loads(body))
                return self._json(self._submit("optim", req))
            if path == "/api/v1/save_weights_for_sampler":
                req = types.SaveWeightsForSamplerRequest.model_validate(json.loads(body))
                return self._json(self._submit("save_sampler", req))
            if path == "/api/v1/save_weights":
                req = types.SaveWeightsRequest.model_validate(json.loads(body))
                return self._json(self._submit("save_state", req))
            if path == "/api/v1/load_weights":
                req = types.LoadWeightsRequest.model_validate(json.loads(body))
                if req.path not in self.states:
                    raise Rejected(f"unknown state {req.path!r}")
                return self._json(self._submit("load", req))
            if path == "/api/v1/asample":
                return self._json(self._sample(types.SampleRequest.model_validate(json.loads(body))))
            if path == "/api/v1/retrieve_future":
                req = types.FutureRetrieveRequest.model_validate(json.loads(body))
                return await self._retrieve(req.request_id)
            if path == "/api/v1/telemetry":
                return self._json({"status": "accepted"})
            if path == "/api/v1/session_heartbeat":
                return self._json({})
        except Rejected as exc:
            return httpx.Response(400, json={"detail": str(exc)})
        except Exception as exc:  # a request the SDK types refuse to decode
            return httpx.Response(400, json={"detail": f"{type(exc).__name__}: {exc}"})
        return httpx.Response(404, json={"detail": f"stand-in has no {path}"})

    @staticmethod
    def _json(value: Any) -> httpx.Response:
        return httpx.Response(200, json=value)

    # -- training queue ----------------------------------------------------------------------

    def _decode_fb(self, request: httpx.Request, body: bytes) -> Tuple[pb.ForwardBackwardRequest, List[TrainedDatum]]:
        if request.headers.get("content-type") != "application/x-protobuf":
            raise Rejected("forward_backward body must be application/x-protobuf")
        msg = pb.ForwardBackwardRequest()
        msg.ParseFromString(body)
        if msg.model_id != self.model_id:
            raise Rejected(f"unknown model_id {msg.model_id!r}")
        if msg.loss_fn not in LOSS_KEYS:
            raise Rejected(f"unknown loss_fn {msg.loss_fn!r}")
        if not msg.data:
            raise Rejected("forward_backward without data")
        datums = []
        for i, d in enumerate(msg.data):
            tokens: List[int] = []
            for chunk in d.model_input:
                if not chunk.HasField("encoded_text"):
                    raise Rejected(f"datum {i}: only encoded_text chunks are modelled")
                tokens.extend(np.frombuffer(chunk.encoded_text.tokens, dtype=np.int32).tolist())
            inputs = {k: np.asarray(_tensor_data_from_proto(v).data) for k, v in d.loss_fn_inputs.items()}
            want = LOSS_KEYS[msg.loss_fn]
            if set(inputs) != want:
                raise Rejected(f"datum {i}: loss_fn {msg.loss_fn!r} takes {sorted(want)}, got {sorted(inputs)}")
            for k, v in inputs.items():
                if v.shape != (len(tokens),):
                    raise Rejected(f"datum {i}: {k} has shape {list(v.shape)}, model input has {len(tokens)} tokens")
            spans = [self._span(s) for s in d.model_input_spans]
            target_spans = [self._span(s) for s in d.loss_fn_input_spans]
            datum = TrainedDatum(tokens, inputs, spans, target_spans)
            if msg.loss_fn == "stable_reinforce":
                self._check_provenance(i, datum)
            datums.append(datum)
        return msg, datums

    @staticmethod
    def _span(s: pb.ProvenanceSpan) -> Tuple[str, str, int, int]:
        kind = "sampled_tokens" if s.HasField("sampled_tokens") else "prompt_tokens"
        arm = getattr(s, kind)
        return (kind, arm.sequence_id, arm.offset, arm.length)

    def _check_provenance(self, i: int, d: TrainedDatum) -> None:
        """The service's provenance check: the runs tile each field, and each run names a
        sequence sampled in this session whose prompt or sampled tokens it reproduces."""
        targets = d.inputs["target_tokens"].astype(np.int64).tolist()
        for field_name, spans, values in (("model_input", d.model_input_spans, d.tokens), ("loss_fn_inputs", d.loss_fn_input_spans, targets)):
            if not spans:
                raise Rejected(f"datum {i}: stable_reinforce needs {field_name} provenance")
            if sum(s[3] for s in spans) != len(values):
                raise Rejected(f"datum {i}: {field_name} spans do not tile its {len(values)} positions")
            pos = 0
            for kind, seq, offset, length in spans:
                if seq not in self.sequences:
                    raise Rejected(f"datum {i}: span names unknown sequence {seq!r}")
                prompt, sampled = self.sequences[seq]
                source = prompt if kind == "prompt_tokens" else sampled
                if list(source[offset : offset + length]) != values[pos : pos + length]:
                    raise Rejected(f"datum {i}: {field_name} span {kind}({seq}, {offset}, {length}) does not match the tokens")
                pos += length

    def _submit(self, kind: str, payload: Any) -> Dict[str, Any]:
        if kind == "fb":
            msg = payload[0]
            seq_id = msg.seq_id
        else:
            seq_id = payload.seq_id
            if payload.model_id != self.model_id:
                raise Rejected(f"unknown model_id {payload.model_id!r}")
        if seq_id is None or seq_id < 1 or seq_id in self._ops:
            raise Rejected(f"bad or repeated seq_id {seq_id!r}")
        op = _Op(kind, seq_id, payload, f"{kind}-{seq_id}")
        self._ops[seq_id] = op
        self._by_request[op.request_id] = op
        self._arrivals += 1
        return {"request_id": op.request_id, "model_id": self.model_id}

    async def _run_until_done(self, op: _Op) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        while not op.done:
            async with self._lock:
                if op.done:
                    return
                quiet = 0
                while True:
                    seen = self._arrivals
                    await asyncio.sleep(0)
                    quiet = quiet + 1 if self._arrivals == seen else 0
                    if quiet >= QUIET_TURNS and self._waiting > 0 and self._all_reserved_arrived():
                        break
                    if quiet >= QUIET_TURNS:
                        await asyncio.sleep(0.001)  # the caller is still submitting: poll gently
                cycle = []
                while self._next_run in self._ops:
                    nxt = self._ops[self._next_run]
                    self._execute(nxt)
                    cycle.append(nxt.kind)
                    self._next_run += 1
                if not cycle:
                    raise AssertionError(f"stand-in: {op.request_id} waits behind a seq_id that never arrived")
                self.cycles.append(cycle)

    def _all_reserved_arrived(self) -> bool:
        assert self.client is not None
        reserved = self.client._request_id_counter  # request ids 0..n-1 are seq_ids 1..n
        return all(s in self._ops for s in range(self._next_run, reserved + 1))

    def _execute(self, op: _Op) -> None:
        op.done = True
        if op.kind == "fb":
            msg, datums = op.body
            config = {k: float(v) for k, v in msg.loss_fn_config.items()}
            index = len(self.trained)
            self.trained.append(datums)
            self.fb_calls.append((msg.loss_fn, config, msg.forward_only))
            if self.fail_on_fb == index:
                op.result = ("json", {"error": f"stand-in: forward_backward {index} failed", "category": "Server"})
                return
            op.result = ("proto", self._fb_output(msg.loss_fn, config, datums))
        elif op.kind == "optim":
            params = op.body.optim_params
            self.optim_calls.append(params.model_dump() if hasattr(params, "model_dump") else dict(params))
            self.version += 1
            op.result = ("json", {"metrics": {"optim/lr": float(params.learning_rate)}})
        elif op.kind == "save_sampler" and op.body.path:
            # save_weights_for_sampler(name): exported sampler weights, no session.
            path = f"tinker://standin/sampler_weights/{op.body.path}"
            self.sampler_exports[path] = (self.version, op.body.ttl_seconds)
            op.result = ("json", {"path": path, "type": "save_weights_for_sampler"})
        elif op.kind == "save_sampler":
            session = f"sampler-{len(self.sampler_order)}-v{self.version}"
            self.samplers[session] = self.version
            self.sampler_order.append(session)
            op.result = ("json", {"sampling_session_id": session, "type": "save_weights_for_sampler"})
        elif op.kind == "load":
            self.loads.append((op.body.path, bool(op.body.optimizer)))
            self.version = self.states[op.body.path]
            op.result = ("json", {"path": op.body.path, "type": "load_weights"})
        elif op.kind == "save_state":
            path = f"tinker://standin/weights/{op.body.path}"
            self.states[path] = self.version
            self.state_ttls[path] = op.body.ttl_seconds
            op.result = ("json", {"path": path, "type": "save_weights"})

    def _fb_output(self, loss_fn: str, config: Dict[str, float], datums: List[TrainedDatum]) -> bytes:
        out = pb.ForwardBackwardOutput(loss_fn_output_type="ArrayRecord")
        record = out.loss_fn_outputs.add()
        record.num_datums = len(datums)
        lp_field = record.fields["logprobs"]
        lp_field.dtype = pb.DTYPE_FLOAT32
        offsets = [0]
        blobs = []
        loss = 0.0
        low, high = config.get("clip_low_threshold", 0.8), config.get("clip_high_threshold", 1.2)
        for d in datums:
            train = self._learner_logprobs(d)
            blobs.append(train.astype(np.float32).tobytes())
            offsets.append(offsets[-1] + 4 * len(train))
            if "advantages" in d.inputs:
                ratio = np.exp(train - d.inputs["logprobs"])
                adv = d.inputs["advantages"]
                if loss_fn == "ppo":
                    loss += float(-np.minimum(ratio * adv, np.clip(ratio, low, high) * adv).sum())
                else:
                    loss += float(-(ratio * adv).sum())
            else:
                loss += float(-(train * d.inputs["weights"]).sum())
        lp_field.data = b"".join(blobs)
        lp_field.offsets = np.asarray(offsets, dtype=np.int64).tobytes()
        out.metrics["loss:sum"] = loss
        return out.SerializeToString()

    def _learner_logprobs(self, d: TrainedDatum) -> np.ndarray:
        """The learner's logprob of each target token at the current version."""
        targets = d.inputs["target_tokens"].astype(np.int64).tolist()
        full = tuple(d.tokens) + (targets[-1],)
        given = d.inputs.get("logprobs", np.zeros(len(targets), dtype=np.float32)).astype(np.float64)
        out = given.copy()
        with self._mutex:
            for prompt_len in range(len(full) - 1, 0, -1):
                key = full[:prompt_len]
                raw = self._raw.get((key, full[prompt_len:]))
                if raw is not None:
                    # targets[j] is full[j+1]; sampled token k is full[prompt_len + k].
                    for k, value in enumerate(raw):
                        out[prompt_len + k - 1] = value - DRIFT * self.version
                    break
        return out

    # -- sampling ----------------------------------------------------------------------------

    def _sample(self, req: types.SampleRequest) -> Dict[str, Any]:
        session = req.sampling_session_id
        if session not in self.samplers:
            raise Rejected(f"unknown sampling_session_id {session!r}")
        version = self.samplers[session]
        prompt = tuple(req.prompt.to_ints())
        sp = req.sampling_params
        call = SampleCall(session, version, prompt, req.num_samples, sp.seed, sp.temperature)
        call.record_stability_info = bool(req.record_stability_info)
        if req.prompt_logprobs:
            return self._score(req, session, version, prompt)
        call.sequence_ids = [f"seq-{next(self._ids)}" for _ in range(req.num_samples)]
        self.sample_calls.append(call)
        request_id = f"sample-{req.seq_id}-{session}"

        def work() -> bytes:
            out = pb.SampleResponse()
            for i, sequence_id in enumerate(call.sequence_ids):
                seed = None if sp.seed is None else sp.seed + i + 1000 * version
                result = self.sim_policy.generate_tokens(
                    list(prompt),
                    SamplingParams(temperature=sp.temperature, max_tokens=sp.max_tokens, top_p=sp.top_p, seed=seed, logprobs=0),
                )
                tokens = tuple(int(t) for t in result.tokens)
                raw = [float(v) for v in result.logprobs]
                with self._mutex:
                    self._raw[(prompt, tokens)] = raw
                    self.sequences[sequence_id] = (prompt, tokens)
                seq = out.sequences.add()
                seq.stop_reason = _STOP[result.stop_reason]
                seq.tokens = np.asarray(tokens, dtype=np.int32).tobytes()
                seq.logprobs = np.asarray([v - DRIFT * version for v in raw], dtype=np.float32).tobytes()
            return out.SerializeToString()

        self._by_request[request_id] = self._pool.submit(work)
        return {"request_id": request_id, "sample_sequence_ids": call.sequence_ids}

    def _score(self, req: types.SampleRequest, session: str, version: int, prompt: Tuple[int, ...]) -> Dict[str, Any]:
        """A ``compute_logprobs`` request (prompt logprobs, one token): position p of the
        prompt scores ``raw - DRIFT * version + REF_JITTER * (p % 2)``, raw being the
        simulated server's logprob where the stand-in sampled that token, else 0."""
        self.score_calls.append((session, prompt))
        values = np.zeros(len(prompt), dtype=np.float64)
        with self._mutex:
            for prompt_len in range(len(prompt) - 1, 0, -1):
                raw = self._raw.get((prompt[:prompt_len], prompt[prompt_len:]))
                if raw is not None:
                    values[prompt_len : prompt_len + len(raw)] = raw
                    break
        scored = [float("nan")] + [values[p] - DRIFT * version + REF_JITTER * (p % 2) for p in range(1, len(prompt))]
        out = pb.SampleResponse()
        seq = out.sequences.add()
        seq.stop_reason = _STOP["length"]
        seq.tokens = np.asarray([0], dtype=np.int32).tobytes()
        seq.logprobs = np.asarray([0.0], dtype=np.float32).tobytes()
        out.prompt_logprobs = np.asarray(scored, dtype=np.float32).tobytes()
        request_id = f"score-{req.seq_id}-{session}-{len(self.score_calls)}"
        data = out.SerializeToString()
        future: "concurrent.futures.Future[bytes]" = concurrent.futures.Future()
        future.set_result(data)
        self._by_request[request_id] = future
        return {"request_id": request_id, "sample_sequence_ids": [f"seq-{next(self._ids)}"]}

    async def _retrieve(self, request_id: str) -> httpx.Response:
        item = self._by_request.get(request_id)
        if item is None:
            return httpx.Response(404, json={"detail": f"unknown request_id {request_id!r}"})
        if isinstance(item, concurrent.futures.Future):
            data = await asyncio.wrap_future(item)
            return httpx.Response(200, content=data, headers={"content-type": "application/x-protobuf"})
        await self._run_until_done(item)
        kind, value = item.result
        if kind == "proto":
            return httpx.Response(200, content=value, headers={"content-type": "application/x-protobuf"})
        return self._json(value)

