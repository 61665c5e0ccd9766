"""Reproducible Slime samples and Tinker datums on the simulated server, as plain JSON
values and digests: what test_records_trainer_ready holds to the values they had before
the records carried their response start, text, return and finished flag from Go.

Run as a script (from tests/) to print the digests:

    FOCUS_GO_LIBRARY=$PWD/../build/selftest/libfocus.so ../.venv/bin/python trainer_snapshots.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import hashlib
import json
import re
from typing import Any, Dict
from urllib.parse import urlparse

from collectors import math_collector as _math_collector
from slime_contract import Sample, make_args

# Slime's GenerateState.sampling_params for make_args' defaults, seeded.
TRAINING = dict(
    temperature=1.0, top_p=1.0, top_k=-1, max_new_tokens=1024, stop=None, stop_token_ids=None,
    skip_special_tokens=False, no_stop_trim=True, spaces_between_special_tokens=False, sampling_seed=5,
)


def math_collector(policy: Any, problem: Any) -> Any:
    """The collector the digests were taken with: Selective(4, 2) with critic_adaptive, the
    default score then (2026-12-02 to 2026-12-04), whatever the library's default now."""
    return _math_collector(policy, problem, score="critic_adaptive")


def plain(value: Any) -> Any:
    """``value`` as JSON values: dataclasses field by field, enums by name, floats by repr."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value))  # 1 and 1.0 compare equal in Python: one rendering
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(plain(value), sort_keys=True).encode()).hexdigest()[:16]


def _tree_samples(out: Any) -> Dict[str, Any]:
    return {"reward": plain(out.reward), "status": plain(out.status), "samples": [plain(s) for s in out]}


def slime_snapshots(server: Any) -> Dict[str, Any]:
    """One Slime generate call per case (spans and paths layouts, special tokens kept and
    skipped, every edge dropped by min_abs_advantage) and one evaluation call."""
    from focus_go.integrations.slime import make_evaluate, make_generate

    args = make_args(sglang_router_port=urlparse(server.url).port, hf_checkpoint=server.model, n_samples_per_prompt=2)
    problems = server.problems()

    def sample(i: int) -> Any:
        return Sample(group_index=7, index=70 + i, prompt=problems[i].prompt, label=problems[i].label, metadata={"src": "t"})

    cases = {
        "spans": (dict(), TRAINING, 0),
        "paths_skip_special": (dict(layout="paths"), dict(TRAINING, skip_special_tokens=True), 1),
        "dropped": (dict(min_abs_advantage=1e9), TRAINING, 2),
    }
    out: Dict[str, Any] = {}
    for name, (hook_args, params, i) in cases.items():
        # visitation_weights=True: the records the digests were taken with (the default then).
        hook = make_generate(math_collector, profile="token_chunk", visitation_weights=True, **hook_args)
        try:
            out[name] = _tree_samples(asyncio.run(hook(args, sample(i), dict(params))))
        finally:
            hook.close()
    evaluate = make_evaluate(math_collector, profile="token_chunk")
    try:
        out["evaluate"] = plain(asyncio.run(evaluate(args, sample(3), dict(TRAINING, skip_special_tokens=True))))
    finally:
        evaluate.close()
    return out


def tinker_snapshots(server: Any) -> Dict[str, Any]:
    """The datums of one tree's records in both layouts (collect_records, to_datum), and what
    one step of Tinker's train (two trees, then an evaluation of two problems) sends and
    reports (fake clients, no latency)."""
    import test_integrations_tinker as fakes

    from focus_go.backends import SGLangPolicy
    from focus_go.integrations import collect_records
    from focus_go.integrations.tinker import to_datum, train

    def datum(d: Any) -> Dict[str, Any]:
        # Sequence ids count the sampler's calls, whose order concurrent rollouts decide.
        def spans(s: Any) -> str:
            return re.sub(r"sequence_id='[^']*'", "sequence_id=*", repr(s))

        return {
            "model_input": d.model_input.to_ints(),
            "inputs": {k: v.tolist() for k, v in sorted(d.loss_fn_inputs.items())},
            "model_input_spans": spans(d.model_input_spans),
            "loss_fn_input_spans": spans(d.loss_fn_input_spans),
        }

    out: Dict[str, Any] = {}
    policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
    try:
        problem = server.problems()[0]
        for layout in ("spans", "paths"):
            actor, _ = asyncio.run(collect_records(math_collector(policy, problem), problem, group_index=0, layout=layout,
                                                   visitation_weights=True))
            out[f"datums_{layout}"] = [datum(to_datum(r)) for r in actor]
        client = fakes.FakeTrainingClient(policy, latency=0.0)
        # shuffle=False: the list order the snapshot was taken with (train shuffles by default).
        reports = asyncio.run(
            train(client, model=server.model, problems=server.problems()[1:3], collector_for=math_collector, steps=1,
                  learning_rate=1e-5, profile="token_chunk", async_depth=0, problems_per_step=2,
                  eval_every=1, eval_problems=server.problems()[3:5], shuffle=False, visitation_weights=True)
        )
        out["train_datums"] = [datum(d) for step in client.trained for d in step]
        keep = ("trees", "rollouts", "reward_mean", "success_rate", "abs_advantage_mean", "tokens_sampled", "tokens_trained",
                "eval/problems", "eval/reward_mean", "eval/success_rate")
        out["train_stats"] = [{k: plain(r.stats[k]) for k in keep} for r in reports]
    finally:
        policy.close()
    return out


def snapshot_digests(snapshots: Dict[str, Any]) -> Dict[str, str]:
    return {k: digest(v) for k, v in sorted(snapshots.items())}


if __name__ == "__main__":
    import sys

    from focus_go.sim import SimServer

    with SimServer(seed=0) as server:
        snaps = {**slime_snapshots(server), **tinker_snapshots(server)}
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(plain(snaps), f, sort_keys=True, indent=0)
    print(json.dumps(snapshot_digests(snaps), indent=1))
