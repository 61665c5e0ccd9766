"""Stand-ins for the parts of Slime's rollout that handle what a custom generate hook
returns, written from Slime's source (commit 624b824a) so the tests can run them
without torch, Ray or an SGLang router:

- ``install_generate_state``: ``slime.rollout.sglang_rollout.GenerateState``, the
  process-wide singleton (``SingletonMeta``) holding ``aborted``, ``pendings`` and the
  ``semaphore`` of ``sglang_server_concurrency * get_rollout_num_engines(args)``;
  installed into ``sys.modules`` under Slime's module name, where the FOCUS hook looks
  for it.
- ``generate_and_rm`` / ``generate_and_rm_group`` / ``abort``: sglang_rollout's rules for
  one group element (partial-rollout masking of earlier responses, COMPLETED / TRUNCATED
  elements returned as they are with their response and reward asserted, ``aborted``
  checked under the semaphore, the hook awaited, ABORTED lists passed on) and for the
  abort at the end of a rollout (``aborted`` set, every worker told to abort all
  requests, pending groups awaited, and with ``--partial-rollout`` every element's
  ``response`` / ``metadata`` read and the groups handed back).
- ``DataBuffer``: ``RolloutDataSourceWithBuffer.add_samples`` (its asserts) and
  ``pop_first``.
- ``fully_async_key`` / ``fully_async_done``: fully_async_rollout's ordering key and the
  done-callback that requeues a group with any ABORTED element.
- ``flatten_rollout``: ``validate_rollout_id_annotated`` then RolloutManager's flattening
  of the nested rollout output (slime/ray/rollout.py).
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
import urllib.request
from typing import Any, Callable, Dict, List, Optional

from . import Sample, load_function

SGLANG_ROLLOUT = "slime.rollout.sglang_rollout"


def rollout_num_engines(args: Any) -> int:
    """``slime.utils.http_utils.get_rollout_num_engines``."""
    if getattr(args, "rollout_num_engines", None) is not None:
        return int(args.rollout_num_engines)
    gpus = getattr(args, "rollout_num_gpus", None) or 0
    per_engine = getattr(args, "rollout_num_gpus_per_engine", None) or 1
    return 0 if gpus <= 0 else max(1, gpus // per_engine)


class _Singleton(type):
    _instances: Dict[type, Any] = {}

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls not in cls._instances:
            cls._instances[cls] = super().__call__(*args, **kwargs)
        return cls._instances[cls]


class GenerateState(metaclass=_Singleton):
    """The fields of Slime's GenerateState the rollout functions use."""

    def __init__(self, args: Any) -> None:
        self.args = args
        self.semaphore = asyncio.Semaphore(args.sglang_server_concurrency * rollout_num_engines(args))
        self.reset()

    def reset(self) -> None:
        self.remaining_batch_size = 0
        self.pendings: set = set()
        self.aborted = False

    def submit_generate_tasks(self, groups: List[List[Any]]) -> None:
        for group in groups:
            self.pendings.add(asyncio.ensure_future(generate_and_rm_group(self.args, group, {})))
        self.remaining_batch_size += len(groups)


def install_generate_state() -> types.ModuleType:
    """Put a module named like Slime's sglang_rollout, with a fresh GenerateState class,
    into sys.modules; ``uninstall`` removes it."""
    module = types.ModuleType(SGLANG_ROLLOUT)
    module.GenerateState = type("GenerateState", (GenerateState,), {})  # its own singleton slot
    sys.modules[SGLANG_ROLLOUT] = module
    return module


def uninstall() -> None:
    sys.modules.pop(SGLANG_ROLLOUT, None)


def state(args: Any) -> GenerateState:
    return sys.modules[SGLANG_ROLLOUT].GenerateState(args)


async def generate_and_rm(args: Any, sample: Any, sampling_params: dict) -> Any:
    if args.partial_rollout and args.mask_offpolicy_in_partial_rollout and sample.response_length > 0:
        sample.loss_mask = [0] * sample.response_length
    if sample.status in (Sample.Status.COMPLETED, Sample.Status.TRUNCATED):
        assert sample.response is not None
        if not args.group_rm:
            assert sample.reward is not None
        return sample
    st = state(args)
    async with st.semaphore:
        if st.aborted:
            sample.status = Sample.Status.ABORTED
            return sample
        fn = load_function(args.custom_generate_function_path)
        out = await fn(args, sample, sampling_params)
    if isinstance(out, list):
        if any(s.status == Sample.Status.ABORTED for s in out):
            return out
        assert all(s.reward is not None for s in out), "FOCUS samples carry their reward"
        return out
    return out


async def generate_and_rm_group(args: Any, group: List[Any], sampling_params: dict) -> List[Any]:
    st = state(args)
    if st.aborted:
        return group
    for k, sample in enumerate(group):
        if sample.session_id is None:
            sample.session_id = f"session-{sample.index}-{k}"
    return list(await asyncio.gather(*(generate_and_rm(args, s, dict(sampling_params)) for s in group)))


def post_abort_all(url: str) -> None:
    """POST /abort_request {"abort_all": true}, as Slime's abort_server_until_idle does."""
    req = urllib.request.Request(
        url + "/abort_request", data=json.dumps({"abort_all": True}).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()


async def abort(args: Any, rollout_id: int, worker_urls: List[str], on_aborted: Optional[Callable[[], None]] = None) -> List[List[Any]]:
    st = state(args)
    assert not st.aborted
    st.aborted = True
    if on_aborted is not None:
        on_aborted()
    loop = asyncio.get_running_loop()
    for url in worker_urls:
        await loop.run_in_executor(None, post_abort_all, url)
    groups = []
    while st.pendings:
        done, st.pendings = await asyncio.wait(st.pendings, return_when=asyncio.FIRST_COMPLETED)
        if not args.partial_rollout:
            continue
        for task in done:
            group = task.result()
            for sample in group:
                if sample.response and "start_rollout_id" not in sample.metadata:
                    sample.metadata["start_rollout_id"] = rollout_id
            groups.append(group)
    return groups


class DataBuffer:
    """RolloutDataSourceWithBuffer's buffer: add_samples and pop_first."""

    def __init__(self, args: Any) -> None:
        self.args = args
        self.buffer: List[List[Any]] = []

    def add_samples(self, groups: List[List[Any]]) -> None:
        if not groups:
            return
        assert isinstance(groups, list), f"samples must be a list, got {type(groups)}"
        assert isinstance(groups[0], list), f"the elements of samples must be list, got {type(groups[0])}"
        for group in groups:
            assert len(group) == self.args.n_samples_per_prompt, (len(group), self.args.n_samples_per_prompt)
            self.buffer.append(group)

    def get_samples(self, n: int) -> List[List[Any]]:
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out


def fully_async_key(group: List[Any]) -> int:
    for s in group:
        idx = getattr(s, "index", None)
        if idx is not None:
            return int(idx)
    return 0


def fully_async_done(result: Any, buffer: DataBuffer, output: List[Any]) -> None:
    if not isinstance(result, list):
        return
    if any(getattr(s, "status", None) == Sample.Status.ABORTED for s in result):
        buffer.add_samples([result])
        return
    output.append(result)


def validate_rollout_id_annotated(node: Any, depth: int = 0) -> None:
    if isinstance(node, Sample):
        return
    assert isinstance(node, list), f"unexpected rollout output node type: {type(node).__name__}"
    if node and isinstance(node[0], Sample):
        if depth >= 2 and len(node) > 1:
            ids = [s.rollout_id for s in node]
            assert None not in ids and len(set(ids)) == 1, ids
        return
    for item in node:
        validate_rollout_id_annotated(item, depth + 1)


def flatten_rollout(data: List[Any]) -> List[Sample]:
    validate_rollout_id_annotated(data)
    while isinstance(data[0], list):
        data = [x for item in data for x in item]
    return data
