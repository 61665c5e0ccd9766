"""Measure what Slime's abort does to FOCUS trees in flight: requests the simulated
server receives after the abort, and the time from the abort to the last hook's return.

    cd tests && python measure_slime_abort.py [--real-slime] [--trees 4] [--per-token 0.02]

Without --real-slime it drives the stand-ins of tests/slime_contract/rollout.py (no
torch or Slime needed); with it, Slime's own ``generate_and_rm_group`` and ``abort``
(``slime`` importable, e.g. /work/slime-venv with the Slime checkout on PYTHONPATH;
its router calls are answered by the simulated server directly). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))

from focus_go.sim import SimServer  # noqa: E402

from slime_contract import Sample, make_args  # noqa: E402
from slime_contract import rollout as standin  # noqa: E402
from collectors import math_collector  # noqa: E402

generate = None


def collector_for(policy, problem):
    return math_collector(policy, problem, segment=16, budget=16, warmup=8)


def requests(server):
    return server.stats()["requests"].get("/generate", 0)


def main() -> None:
    global generate
    ap = argparse.ArgumentParser()
    ap.add_argument("--real-slime", action="store_true")
    ap.add_argument("--trees", type=int, default=4)
    ap.add_argument("--per-token", type=float, default=0.02)
    ap.add_argument("--at", type=float, default=0.8,
                    help="abort once this fraction of the requests a whole rollout sends were sent (a calibration run counts them)")
    ap.add_argument("--no-partial", action="store_true", help="without --partial-rollout (abort() then reads no element)")
    opts = ap.parse_args()
    from focus.integrations.slime import make_generate

    with SimServer(seed=0, latency={"per_token": opts.per_token}) as server:
        args = make_args(
            sglang_router_port=urlparse(server.url).port,
            hf_checkpoint=server.model,
            n_samples_per_prompt=2,
            custom_generate_function_path="__main__.generate",
            partial_rollout=not opts.no_partial,
            mask_offpolicy_in_partial_rollout=False,
            sglang_server_concurrency=512,
            rollout_num_gpus=1,
            rollout_num_gpus_per_engine=1,
            rollout_sample_hook_path=None,
            ci_test=False,
            sglang_enable_deterministic_inference=False,
        )
        generate = make_generate(collector_for, profile="token_chunk")
        problems = server.problems()
        groups = [
            [Sample(group_index=g, index=2 * g + k, prompt=problems[g].prompt, label=problems[g].label) for k in range(2)]
            for g in range(opts.trees // 2)
        ]
        if opts.real_slime:
            from slime_real_rollout import _install_standins

            _install_standins()  # what Slime's rollout modules import but these paths never use
            from slime.rollout import sglang_rollout as sr
            from slime.utils import types as slime_types

            for group in groups:  # Slime's own Sample class
                group[:] = [slime_types.Sample(**{k: getattr(s, k) for k in ("group_index", "index", "prompt", "label")}) for s in group]

            async def workers(url):
                return {"workers": [{"url": server.url}]}

            async def abort_until_idle(urls):
                loop = asyncio.get_running_loop()
                for u in urls:
                    await loop.run_in_executor(None, standin.post_abort_all, u)

            sr.get = workers
            sr.abort_servers_until_idle = abort_until_idle
            state = sr.GenerateState.__new__(sr.GenerateState)  # no tokenizer load
            state.args, state.semaphore = args, asyncio.Semaphore(512)
            state.sampling_params, state.dp_counts, state.dp_rank = {}, [0], 0
            state.reset()
            sr.GenerateState._instances[sr.GenerateState] = state
            abort = sr.abort
            sys.modules.setdefault("slime.rollout.sglang_rollout", sr)
        else:
            abort = None

        async def calibrate():
            tasks = [asyncio.ensure_future(generate(args, copy.deepcopy(s), {})) for g in groups for s in g]
            await asyncio.gather(*tasks)

        if not opts.real_slime:
            standin.install_generate_state()
        asyncio.run(calibrate())
        total = requests(server)
        threshold = total + max(1, int(opts.at * total))

        async def rollout():
            if opts.real_slime:
                st = state
                st.pendings = {asyncio.ensure_future(sr.generate_and_rm_group(args, g, {})) for g in groups}
            else:
                st = standin.state(args)
                st.submit_generate_tasks(groups)
            while requests(server) < threshold:
                await asyncio.sleep(0.01)
            # Abort between bursts: a search round launches its requests together, and
            # those still arriving at the server were sent before the abort.
            last, still = requests(server), 0
            while still < 3:
                await asyncio.sleep(0.001)
                now = requests(server)
                last, still = now, (still + 1 if now == last else 0)
            at_abort = requests(server)
            began = time.monotonic()
            if opts.real_slime:
                handed_back = await abort(args, 0)
            else:
                handed_back = await standin.abort(args, 0, [server.url])
            return handed_back, at_abort, time.monotonic() - began

        try:
            handed_back, at_abort, seconds = asyncio.run(rollout())
        finally:
            generate.close()
        statuses = [str(getattr(t, "status", type(t).__name__)) for g in handed_back for t in g]
        print(json.dumps({
            "trees": opts.trees,
            "requests_whole_rollout": total,
            "requests_at_abort": at_abort - total,
            "requests_after_abort": requests(server) - at_abort,
            "abort_to_return_seconds": round(seconds, 4),
            "handed_back_statuses": statuses,
        }))


if __name__ == "__main__":
    main()
