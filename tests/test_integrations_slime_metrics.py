"""Issue 47: Slime's own rollout metrics that a tree changes (``rollout/truncated_ratio``,
``rollout/response_len/*``) are reported per finished root-to-leaf path, as Slime computes
them for its samples, by focus's ``log_rollout``. Slime's ``log_rollout_data`` lets the
values it computes itself win over the ones a log hook adds, so the hook logs the rollout
itself (Slime's metrics, then the per-path ones in their place) and returns True.

Slime's observability modules are stood in (``slime_observability``), written from
slime/observability/rollout_metrics.py at commit 624b824a: ``compute_metrics_from_samples``
(``response_len/*`` over each sample's ``effective_response_length``, its loss-mask sum;
``truncated_ratio`` the share of samples with status TRUNCATED), ``compute_rollout_step``
and ``logging_utils.log``. The real modules are driven by ``make slime-check`` (mode
``metrics``)."""

from __future__ import annotations

import asyncio
import statistics
import sys
import types
from urllib.parse import urlparse

import pytest

from slime_contract import Sample, make_args
from collectors import math_collector

LOGGED = []


@pytest.fixture
def slime_observability(monkeypatch):
    def compute_statistics(values):
        values = sorted(values)
        return {"mean": statistics.mean(values), "median": statistics.median(values), "max": values[-1], "min": values[0]}

    def compute_metrics_from_samples(args, samples):
        out = {f"response_len/{k}": v for k, v in compute_statistics([sum(s.loss_mask) for s in samples]).items()}
        out["truncated_ratio"] = statistics.mean(int(s.status == Sample.Status.TRUNCATED) for s in samples)
        return out

    rollout_metrics = types.ModuleType("slime.observability.rollout_metrics")
    rollout_metrics.compute_metrics_from_samples = compute_metrics_from_samples
    rollout_metrics.compute_perf_metrics_from_samples = lambda args, samples, t: {"rollout_time": t}
    metric_utils = types.ModuleType("slime.observability.metric_utils")
    metric_utils.compute_rollout_step = lambda args, rollout_id: 100 + rollout_id
    logging_utils = types.ModuleType("slime.observability.logging_utils")
    logging_utils.log = lambda args, metrics, step_key: LOGGED.append((dict(metrics), step_key))
    observability = types.ModuleType("slime.observability")
    observability.rollout_metrics, observability.metric_utils, observability.logging_utils = rollout_metrics, metric_utils, logging_utils
    monkeypatch.setitem(sys.modules, "slime", sys.modules.get("slime") or types.ModuleType("slime"))
    for name, module in (("slime.observability", observability), ("slime.observability.rollout_metrics", rollout_metrics),
                         ("slime.observability.metric_utils", metric_utils), ("slime.observability.logging_utils", logging_utils)):
        monkeypatch.setitem(sys.modules, name, module)
    LOGGED.clear()
    yield


def _trees(server, max_response_len):
    from focus.integrations.slime import make_generate

    def collector_for(policy, problem):
        return math_collector(policy, problem, segment=16)

    hook = make_generate(collector_for, profile="token_chunk")
    args = make_args(sglang_router_port=urlparse(server.url).port, hf_checkpoint=server.model,
                     rollout_max_response_len=max_response_len, load_debug_rollout_data=False)

    async def go():
        return await asyncio.gather(*(
            hook(args, Sample(group_index=k, index=k, prompt=p.prompt, label=p.label, metadata={}), None)
            for k, p in enumerate(server.problems()[:3])
        ))

    try:
        return args, asyncio.run(go())
    finally:
        hook.close()


@pytest.mark.parametrize("max_response_len", [1024, 24])
def test_slimes_rollout_metrics_are_per_finished_path(server, slime_observability, max_response_len):
    from focus.integrations.slime import log_rollout

    args, trees = _trees(server, max_response_len)
    samples = [s for t in trees for s in t]
    extra = {"rollout/dynamic_filter/drop_x": 1}
    assert log_rollout(5, args, samples, extra, 2.5) is True  # logged here; Slime's default would overwrite
    [(logged, step_key)] = LOGGED
    assert step_key == "rollout/step" and logged["rollout/step"] == 105
    firsts = [t[0].metadata["focus"] for t in trees]
    paths = [n for f in firsts for n in f["rollout_tokens"]]
    finished = sum(f["finished_rollouts"] for f in firsts)
    truncated = sum(f["truncated_rollouts"] for f in firsts)
    assert len(paths) == finished == 12
    assert logged["rollout/truncated_ratio"] == pytest.approx(truncated / finished)
    assert logged["rollout/response_len/mean"] == pytest.approx(statistics.mean(paths))
    assert logged["rollout/response_len/median"] == pytest.approx(statistics.median(paths))
    assert (logged["rollout/response_len/max"], logged["rollout/response_len/min"]) == (max(paths), min(paths))
    # Slime's per-sample values stay, named as what they count; the rest of Slime's rollout
    # metrics, the extra metrics and focus's own keys are logged as they were.
    segments = [sum(s.loss_mask) for s in samples]
    assert logged["rollout/focus/segment_response_len/mean"] == pytest.approx(statistics.mean(segments))
    assert logged["rollout/focus/segment_response_len/mean"] < logged["rollout/response_len/mean"]
    assert logged["perf/rollout_time"] == 2.5 and logged["rollout/dynamic_filter/drop_x"] == 1
    assert logged["rollout/focus/truncated_ratio"] == logged["rollout/truncated_ratio"]
    assert "passrate/pass@1" in logged
    if max_response_len == 24:  # every path cut at the limit: Slime's per-sample ratio would read 0.0
        assert logged["rollout/truncated_ratio"] == 1.0
        assert all(s.status == Sample.Status.COMPLETED for s in samples)


def test_debug_rollout_data_logs_nothing_as_slime_does(server, slime_observability):
    from focus.integrations.slime import log_rollout

    args, trees = _trees(server, 1024)
    args.load_debug_rollout_data = True
    assert log_rollout(0, args, [s for t in trees for s in t], None, 1.0) is True and LOGGED == []


def test_focus_metrics_also_reach_the_extra_metrics(server, slime_observability):
    from focus.integrations.slime import log_rollout

    args, trees = _trees(server, 1024)
    extra = {}
    assert log_rollout(0, args, [s for t in trees for s in t], extra, 1.0) is True
    assert "passrate/pass@1" in extra and "rollout/focus/truncated_ratio" in extra
    assert {k: v for k, v in LOGGED[0][0].items() if k in extra} == extra
