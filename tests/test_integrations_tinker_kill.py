"""The Tinker loop killed (SIGKILL, in its own process) at the moments between its writes,
then rerun with the same command until it finishes: every metric row, critic file,
transcript and checkpoint is the uninterrupted run's, each written exactly once.

Each run is ``tinker_kill_run.py`` (the real tinker SDK client classes over the service
stand-in); ``FOCUS_GO_TINKER_KILL_AT`` names where the loop kills itself."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tinker")

HERE = Path(__file__).resolve().parent


def run(folder: Path, kill_at: str = "") -> int:
    # A killed run cannot remove its simulator's model folder: it lands in the test's tmp.
    scratch = folder.parent / "scratch"
    scratch.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]), TMPDIR=str(scratch))
    env.pop("FOCUS_GO_TINKER_KILL_AT", None)
    if kill_at:
        env["FOCUS_GO_TINKER_KILL_AT"] = kill_at
    proc = subprocess.run([sys.executable, str(HERE / "tinker_kill_run.py"), str(folder)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr[-3000:]
    return proc.returncode


def outcome(folder: Path):
    """What the run left: metric rows (without wall-clock times), the critic files' contents
    (a multiset: file names hold a random part), the transcripts, and the checkpoints'
    steps."""
    rows = [
        {k: v for k, v in json.loads(line).items() if not k.startswith("time_")}
        for line in (folder / "metrics.jsonl").read_text().splitlines()
    ]
    critic = collections.Counter(f.read_text() for f in (folder / "critic").glob("*.jsonl"))
    transcripts = {
        str(f.relative_to(folder)): f.read_text() for f in sorted(folder.glob("iteration_*/*")) if f.is_file()
    }
    checkpoints = [json.loads(line) for line in (folder / "checkpoints.jsonl").read_text().splitlines()]
    return rows, critic, transcripts, [(c["learner_step"], c["kind"]) for c in checkpoints]


def test_kills_between_every_write_leave_each_row_file_and_transcript_once(tmp_path):
    whole = tmp_path / "whole"
    assert run(whole) == 0
    rows, critic, transcripts, checkpoints = outcome(whole)
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4]  # step 0: the starting weights' evaluation
    assert sum(critic.values()) == 8  # 4 updates of 2 trees
    assert sorted(transcripts) == [f"iteration_{b:06d}/{name}" for b in range(4) for name in
                                   ("rollouts.jsonl", "train_tree_0.html", "train_tree_1.html")]
    assert checkpoints == [(2, "periodic"), (4, "final")]

    # Killed at each named moment in turn: before the first checkpoint (after the update,
    # after its row, after its critic files), right after a checkpoint's line, after a
    # later row and critic files, and after the final checkpoint; then a clean rerun.
    killed = tmp_path / "killed"
    moments = ["updated:1", "logged:1", "critic:1", "checkpointed:2", "logged:3", "critic:4", "checkpointed:4"]
    for moment in moments:
        assert run(killed, moment) == -signal.SIGKILL, f"the run was not killed at {moment}"
    assert run(killed) == 0
    assert outcome(killed) == (rows, critic, transcripts, checkpoints)


def test_a_kill_before_the_first_checkpoint_and_rerun_keep_one_row_per_step(tmp_path):
    folder = tmp_path / "run"
    assert run(folder, "critic:1") == -signal.SIGKILL
    assert [json.loads(line)["step"] for line in (folder / "metrics.jsonl").read_text().splitlines()] == [0, 1]
    assert len(list((folder / "critic").glob("*.jsonl"))) == 2
    assert not (folder / "checkpoints.jsonl").exists()
    assert run(folder) == 0
    rows, critic, _, _ = outcome(folder)
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4] and sum(critic.values()) == 8


def test_a_row_cut_short_by_a_kill_is_dropped_on_restart(tmp_path):
    from focus_go.integrations.tinker.checkpoint import _truncate_log

    log = tmp_path / "metrics.jsonl"
    log.write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.25}\n{"step": 3, "lo')
    _truncate_log(log, 2)
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [1, 2]
    _truncate_log(log, 1)
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [1]
