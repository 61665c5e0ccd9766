"""Count the calls from Python into libfocus.so for one Slime generate call, one Slime
evaluation call, one tree through ``collect_records`` plus ``to_datum``, and one tree through
the Tinker loop (issue 35: trainer-ready records from Go).

Not collected by pytest (the name does not start with ``test_``). Run from tests/:

    FOCUS_GO_LIBRARY=$PWD/../build/selftest/libfocus.so ../.venv/bin/python measure_c_calls.py

Every function object ``_lib`` hands out (both the GIL-releasing and the GIL-holding
library) is replaced by a counting wrapper, so every ``_lib.call*`` and every direct
``_lib.lib().focus_*`` call is counted. Each measurement runs once to warm up (the hook's
router policy, tokenizers) and is then counted over ``--repeat`` runs; the numbers are the
mean per call or per tree, with the calls by function name.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))

from focus_go import _lib  # noqa: E402

COUNTS: "collections.Counter[str]" = collections.Counter()


def _install_counters() -> None:
    """Wrap every declared export of both loaded libraries in a counter."""
    names = list(_lib._SIGNATURES) + list(_lib._SELFTEST_SIGNATURES)
    for library in (_lib.lib(), _lib.held()):
        for name in names:
            fn = getattr(library, name, None)
            if fn is None:
                continue

            def counted(*args, _fn=fn, _name=name):
                COUNTS[_name] += 1
                return _fn(*args)

            setattr(library, name, counted)


def _measure(label, run, repeat):
    run()  # warm up: policies, tokenizers
    COUNTS.clear()
    for _ in range(repeat):
        run()
    total = sum(COUNTS.values())
    by_name = {k: v / repeat for k, v in sorted(COUNTS.items(), key=lambda kv: (-kv[1], kv[0]))}
    return {"what": label, "calls": total / repeat, "by_function": by_name}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    opts = parser.parse_args()

    from collectors import math_collector
    from slime_contract import Sample, make_args

    from focus_go.backends import SGLangPolicy
    from focus_go.integrations import collect_records
    from focus_go.integrations.slime import make_evaluate, make_generate
    from focus_go.sim import SimServer

    _install_counters()
    results = []
    with SimServer(seed=0) as server:
        args = make_args(sglang_router_port=urlparse(server.url).port, hf_checkpoint=server.model, n_samples_per_prompt=2)
        problem = server.problems()[0]

        def sample():
            return Sample(group_index=7, index=70, prompt=problem.prompt, label=problem.label)

        generate = make_generate(math_collector, profile="token_chunk")
        evaluate = make_evaluate(math_collector, profile="token_chunk")
        try:
            results.append(_measure("slime generate call", lambda: asyncio.run(generate(args, sample(), {"temperature": 1.0})), opts.repeat))
            results.append(_measure("slime evaluate call", lambda: asyncio.run(evaluate(args, sample(), {"temperature": 1.0})), opts.repeat))
        finally:
            generate.close()
            evaluate.close()

        policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
        try:
            try:
                from focus_go.integrations.tinker import to_datum
            except ImportError:
                to_datum = None

            def one_tree():
                actor, _ = asyncio.run(collect_records(math_collector(policy, problem), problem, group_index=0))
                if to_datum is not None:
                    [to_datum(r) for r in actor]

            results.append(_measure("tree: collect_records + to_datum", one_tree, opts.repeat))
        finally:
            policy.close()

        results.extend(_tinker(server, opts.repeat))

    if opts.json:
        print(json.dumps(results, indent=1))
        return
    for r in results:
        print(f"{r['what']}: {r['calls']:g} C calls")
        for name, n in r["by_function"].items():
            print(f"    {n:8g}  {name}")


def _tinker(server, repeat):
    """One tree through Tinker's train (one update, one problem), with the fake Tinker
    clients of test_integrations_tinker (Python only: none of their calls reach the library)."""
    try:
        import test_integrations_tinker as fakes
    except Exception:  # the Tinker SDK or numpy is missing
        return []
    from collectors import math_collector

    from focus_go.backends import SGLangPolicy
    from focus_go.integrations.tinker import train

    sim_policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
    try:

        def one_step():
            client = fakes.FakeTrainingClient(sim_policy, latency=0.0)
            asyncio.run(
                train(client, model=server.model, problems=server.problems()[:1], collector_for=math_collector, steps=1,
                      learning_rate=1e-5, profile="token_chunk", async_depth=0)
            )

        return [_measure("tinker train, one tree (one step)", one_step, repeat)]
    finally:
        sim_policy.close()


if __name__ == "__main__":
    main()
