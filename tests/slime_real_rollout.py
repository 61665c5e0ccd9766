"""Drive Slime's own rollout functions (THUDM/slime checkout on PYTHONPATH) over the FOCUS
generate hook and the simulated server, with no GPU, router or model:

- ``sglang_rollout.generate_and_rm_group`` / ``generate_and_rm`` call the hook per sample;
- ``sglang_rollout.abort`` mid-tree with ``--partial-rollout`` (its ``/workers`` lookup and
  ``abort_servers_until_idle`` answered by the simulated server: one worker, abort_all);
- ``RolloutDataSourceWithBuffer.add_samples`` / ``get_samples`` take the handed-back groups,
  which are collected again next rollout;
- ``fully_async_rollout``: the worker's done-callback (requeue aborted groups) and
  ``_generate_rollout_async`` (its ``_key`` ordering), fed through a stand-in worker;
- ``validate_rollout_id_annotated`` and the flattening of ``RolloutManager._get_rollout_data``;
- ``sglang_rollout.generate_rollout_async``: over-sampling, then abort with partial rollout.

    PYTHONPATH=<repo>/python:<slime checkout> FOCUS_GO_LIBRARY=<repo>/build/libfocus.so \\
        <slime venv>/bin/python tests/slime_real_rollout.py

Slime's rollout modules import numpy, tqdm, httpx, PIL, transformers and pylatexenc at
module level without using them on these paths; any of them that is missing is replaced
by a small stand-in module written to a temporary directory (torch is imported first so
that it never sees the numpy stand-in). Prints one JSON line of measurements; exits 1 on
a failed check.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import tempfile
import time
import types
from pathlib import Path
from urllib.parse import urlparse

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

_STANDINS = {
    "numpy": "import random as _r\nclass random:\n    @staticmethod\n    def choice(xs):\n        return _r.choice(list(xs))\n",
    "tqdm": "class tqdm:\n    def __init__(self, *a, **k): pass\n    def update(self, n=1): pass\n    def close(self): pass\n",
    "httpx": (
        "class AsyncClient:\n    def __init__(self, *a, **k): raise RuntimeError('httpx stand-in')\n"
        "class Limits:\n    def __init__(self, *a, **k): pass\n"
        "class Timeout:\n    def __init__(self, *a, **k): pass\n"
        "class HTTPStatusError(Exception): pass\n"
    ),
}
_ANYTHING = (
    "class _Meta(type):\n"
    "    def __getattr__(cls, name):\n"
    "        if name.startswith('__'): raise AttributeError(name)\n"
    "        return _Meta(name, (), {})\n"
    "def __getattr__(name):\n"
    "    if name.startswith('__'): raise AttributeError(name)\n"
    "    return _Meta(name, (), {})\n"
)


def _install_standins() -> list:
    try:
        import torch  # noqa: F401  (before any numpy stand-in)
        import torch.utils.data  # noqa: F401
    except ImportError:
        pass
    missing = [m for m in ("numpy", "tqdm", "httpx", "PIL", "transformers", "pylatexenc") if importlib.util.find_spec(m) is None]
    if missing:
        root = Path(tempfile.mkdtemp(prefix="focus-slime-standins-"))
        for name in missing:
            (root / name).mkdir()
            (root / name / "__init__.py").write_text(_STANDINS.get(name, _ANYTHING))
        sys.path.insert(0, str(root))
    return missing


CHECKS: list = []


def check(cond: bool, what: str) -> None:
    CHECKS.append(what)
    if not cond:
        raise AssertionError(what)


def main() -> None:
    standins = _install_standins()
    from slime.observability.rollout_data_utils import validate_rollout_id_annotated
    from slime.rollout import data_source as ds
    from slime.rollout import fully_async_rollout as fa
    from slime.rollout import sglang_rollout as sr
    from slime.utils.types import Sample

    from collectors import math_collector
    from focus_go.sim import SimServer
    from focus.integrations.slime import TreeSamples, make_generate

    from slime_contract import make_args
    from slime_contract.rollout import post_abort_all

    def collector_for(policy, problem):
        return math_collector(policy, problem, segment=16, budget=16, warmup=8)

    hook = make_generate(collector_for, profile="token_chunk")
    module = types.ModuleType("focus_slime_real_hook")
    module.generate = hook
    sys.modules[module.__name__] = module
    out: dict = {"standins": standins}
    with SimServer(seed=0, latency={"per_token": 0.01}) as server:
        args = make_args(
            sglang_router_port=urlparse(server.url).port, hf_checkpoint=server.model, n_samples_per_prompt=2,
            custom_generate_function_path="focus_slime_real_hook.generate", partial_rollout=True,
            mask_offpolicy_in_partial_rollout=False, sglang_server_concurrency=64, rollout_num_gpus=1,
            rollout_num_gpus_per_engine=1, rollout_sample_hook_path=None, ci_test=False,
            sglang_enable_deterministic_inference=False, buffer_filter_path=None, rollout_global_dataset=True,
            prompt_data=None, use_rollout_routing_replay=False,
        )

        async def workers(url):
            return {"workers": [{"url": server.url}]}

        async def abort_until_idle(urls):
            loop = asyncio.get_running_loop()
            for u in urls:
                await loop.run_in_executor(None, post_abort_all, u)

        sr.get, sr.abort_servers_until_idle = workers, abort_until_idle
        # GenerateState without its tokenizer load (the hook renders prompts itself).
        state = sr.GenerateState.__new__(sr.GenerateState)
        state.args, state.sampling_params, state.dp_counts, state.dp_rank = args, {}, [0], 0
        state.reset()
        sr.GenerateState._instances[sr.GenerateState] = state
        problems = server.problems()

        def groups(n_groups, first_index=0):
            return [[Sample(group_index=g, index=first_index + 2 * g + k, prompt=problems[g].prompt, label=problems[g].label)
                     for k in range(2)] for g in range(n_groups)]

        requests = lambda: server.stats()["requests"].get("/generate", 0)  # noqa: E731

        async def rollout_then_abort(batch, after):
            state.semaphore = asyncio.Semaphore(64)
            state.pendings = {asyncio.ensure_future(sr.generate_and_rm_group(args, g, {})) for g in batch}
            while requests() < after:
                await asyncio.sleep(0.005)
            at = requests()
            began = time.monotonic()
            handed_back = await sr.abort(args, 0)
            return handed_back, at, time.monotonic() - began

        # 1. A whole rollout: every tree finishes; the real checks and flattening pass.
        async def whole(batch):
            state.semaphore = asyncio.Semaphore(64)
            return await asyncio.gather(*(sr.generate_and_rm_group(args, g, {}) for g in batch))

        base = requests()
        done = asyncio.run(whole(groups(2)))
        per_rollout = requests() - base
        check(all(isinstance(t, TreeSamples) and t.status == Sample.Status.COMPLETED for g in done for t in g), "trees COMPLETED")
        validate_rollout_id_annotated(done)
        flat = done
        while isinstance(flat[0], list):
            flat = [x for item in flat for x in item]
        check(all(isinstance(s, Sample) for s in flat), "flattened to Slime samples")

        # 2. Fully async: the worker's done-callback ships finished groups, ordered by _key.
        buffer = ds.RolloutDataSourceWithBuffer.__new__(ds.RolloutDataSourceWithBuffer)
        buffer.args, buffer.buffer, buffer.buffer_filter = args, [], ds.pop_first
        worker = fa.AsyncRolloutWorker.__new__(fa.AsyncRolloutWorker)
        import queue
        import threading

        worker.data_buffer, worker.output_queue = buffer, queue.Queue()
        worker.worker_thread = threading.Thread(target=lambda: None)

        def finish(result, gid):
            loop = asyncio.new_event_loop()
            fut = loop.create_future()
            fut.set_result(result)
            worker._make_done_cb(gid)(fut)
            loop.close()

        for gid, group in enumerate(reversed(done)):
            finish(group, gid)
        check(worker.output_queue.qsize() == 2 and buffer.buffer == [], "fully async ships finished groups")
        worker.is_alive = True
        worker.worker_thread.is_alive = lambda: True  # type: ignore[method-assign]
        fa._global_worker = worker
        ordered = fa.run(fa._generate_rollout_async(make_args(**{**vars(args), "rollout_batch_size": 2}), 0, buffer))
        check([g[0].index for g in ordered] == [0, 2], "fully async orders groups by the source index")

        # 3. Partial rollout: abort mid-tree; every element is read by abort(), the groups
        #    go back to the buffer, the aborted ones are requeued by fully async too.
        base = requests()
        handed_back, at, seconds = asyncio.run(rollout_then_abort(groups(2), base + int(0.6 * per_rollout)))
        out.update(requests_per_rollout=per_rollout, requests_at_abort=at - base,
                   requests_after_abort=requests() - at, abort_to_return_seconds=round(seconds, 4))
        check(len(handed_back) == 2, "abort hands back every pending group")
        statuses = sorted(t.status.value for g in handed_back for t in g)
        out["handed_back_statuses"] = statuses
        check(all(s in ("aborted", "completed") for s in statuses), "handed-back trees are aborted or finished")
        buffer.add_samples(handed_back)
        state.reset()
        again = asyncio.run(whole(buffer.get_samples(2)))
        check(all(t.status == Sample.Status.COMPLETED and len(t) > 1 for g in again for t in g), "handed-back groups complete next rollout")
        validate_rollout_id_annotated(again)

        # 4. A group mixing a finished tree and an aborted one (one request aborted by the
        #    server): fully async requeues it; resubmitted, generate_and_rm returns the
        #    finished tree as it is and the hook collects the aborted one again.
        server.set_faults([{"kind": "abort", "count": 1}])
        try:
            [mixed] = asyncio.run(whole(groups(1, first_index=10)))
        finally:
            server.set_faults([])
        check(sorted(t.status.value for t in mixed) == ["aborted", "completed"], "one tree aborted, one finished")
        finish(mixed, 100)
        check(buffer.buffer == [mixed] and worker.output_queue.qsize() == 0, "fully async requeues the aborted group")
        finished = next(t for t in mixed if t.status == Sample.Status.COMPLETED)
        [redone] = asyncio.run(whole(buffer.get_samples(1)))
        check(any(t is finished for t in redone), "the finished tree comes back as it is")
        check(all(t.status == Sample.Status.COMPLETED and len(t) > 1 for t in redone), "the aborted tree is collected again")
        validate_rollout_id_annotated([redone])

        # 5. Slime's over-sampling rollout itself (generate_rollout_async): four groups
        #    submitted for a batch of two; once two are in, abort() stops the others and,
        #    with --partial-rollout, hands them back.
        counter = iter(range(100, 1000, 2))

        def data_source(n):
            batch = []
            for g in range(n):
                first = next(counter)
                batch.append([Sample(group_index=g, index=first + k, prompt=problems[g].prompt, label=problems[g].label)
                              for k in range(2)])
            return batch

        state.reset()
        state.semaphore = None
        over = make_args(**{**vars(args), "rollout_batch_size": 2, "over_sampling_batch_size": 4,
                            "dynamic_sampling_filter_path": None, "rollout_sample_filter_path": None,
                            "rollout_all_samples_process_path": None})
        state.args = over

        async def oversampled():
            state.semaphore = asyncio.Semaphore(64)
            return await sr.generate_rollout_async(over, 1, data_source)

        train, handed = asyncio.run(oversampled())
        check(len(train.samples) == 2 and all(t.status == Sample.Status.COMPLETED for g in train.samples for t in g),
              "over-sampling trains the first two groups")
        check(len(handed) == 2 and all(t.status in (Sample.Status.ABORTED, Sample.Status.COMPLETED) for g in handed for t in g),
              "the other two are handed back")
        validate_rollout_id_annotated(train.samples)
        out["over_sampling_handed_back"] = sorted(t.status.value for g in handed for t in g)
    fa._global_worker = None
    hook.close()
    out["checks"] = len(CHECKS)
    print(json.dumps(out))


if __name__ == "__main__":
    try:
        main()
    except AssertionError as exc:
        sys.modules["slime.rollout.fully_async_rollout"]._global_worker = None
        print(json.dumps({"failed": str(exc), "passed": CHECKS}))
        sys.exit(1)
