"""Slime's own rollout code (generate_and_rm_group, abort with --partial-rollout, the data
buffer, fully-async ordering and requeueing, validate_rollout_id_annotated) over the FOCUS
hook: runs tests/slime_real_rollout.py with a Python that has torch and Ray (Slime's
rollout imports) and a THUDM/slime checkout. Opt-in: skipped unless FOCUS_SLIME_PYTHON
and FOCUS_SLIME_SRC name them (`make slime-check` sets both)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from focus_go import _lib

SLIME_PYTHON = os.environ.get("FOCUS_SLIME_PYTHON", "")
SLIME_SRC = os.environ.get("FOCUS_SLIME_SRC", "")


@pytest.mark.skipif(
    not (SLIME_PYTHON and SLIME_SRC and Path(SLIME_PYTHON).exists()
         and (Path(SLIME_SRC) / "slime" / "rollout" / "sglang_rollout.py").exists()),
    reason="no Slime environment (set FOCUS_SLIME_PYTHON and FOCUS_SLIME_SRC)",
)
def test_slime_rollout_functions_over_the_hook():
    import focus_go

    package_root = Path(focus_go.__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(package_root), SLIME_SRC]),
               FOCUS_GO_LIBRARY=str(_lib.library_path()))
    script = Path(__file__).with_name("slime_real_rollout.py")
    proc = subprocess.run([SLIME_PYTHON, str(script)], capture_output=True, text=True, env=env, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    result = json.loads(lines[-1])
    print(result, file=sys.stderr)
    assert result["checks"] == 13
    # requests_after_abort and abort_to_return_seconds are measurements (printed), not
    # checks: tests/test_integrations_slime_rollout.py checks the abort deterministically.
    assert set(result["handed_back_statuses"]) <= {"aborted", "completed"}
