"""One run of the Tinker loop in its own process, for the kill tests
(test_integrations_tinker_kill.py): ``python tinker_kill_run.py RUN_DIR``.

The same command every time: a fresh ``StandinTinker`` client (weights at version 0)
over a simulated server (seed 0), the run's folder for metrics, critic files, transcripts
and checkpoints. The stand-in's saved states (path -> weights version: what the service
keeps between processes) live in ``RUN_DIR/states.json``, written as each save lands.
``FOCUS_GO_TINKER_KILL_AT`` (see ``focus_go.integrations.tinker.loop``) kills the process
at a named moment.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from collectors import math_collector
from tinker_standin import StandinTinker

from focus_go.backends import SGLangPolicy
from focus_go.integrations import JsonlDirectory
from focus_go.integrations.tinker import train
from focus_go.sim import SimServer

STEPS = 4
PROBLEMS_PER_STEP = 2


class PersistentStandin(StandinTinker):
    """A stand-in whose saved states outlive the process, as the service's do."""

    def __init__(self, sim_policy, states_file: Path):
        self.states_file = states_file
        states = json.loads(states_file.read_text()) if states_file.exists() else {}
        super().__init__(sim_policy, states=states)

    def _execute(self, op):
        super()._execute(op)
        if op.kind == "save_state":
            tmp = self.states_file.with_suffix(".part")
            tmp.write_text(json.dumps(self.states))
            os.replace(tmp, self.states_file)


def main(run: Path) -> None:
    run.mkdir(exist_ok=True)
    with SimServer(seed=0) as server:
        policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk")
        standin = PersistentStandin(policy, run / "states.json")
        try:
            problems = server.problems()
            asyncio.run(
                train(
                    standin.training_client(),
                    model=server.model,
                    problems=problems[:4],
                    collector_for=math_collector,
                    steps=STEPS,
                    learning_rate=1e-5,
                    profile="token_chunk",
                    problems_per_step=PROBLEMS_PER_STEP,
                    async_depth=0,  # each batch from the current weights: a resumed run samples as the whole one
                    checkpoint_every=2,
                    checkpoint_path=run / "checkpoints.jsonl",
                    log_path=run / "metrics.jsonl",
                    critic_sink=JsonlDirectory(run / "critic"),
                    eval_problems=problems[4:6],
                    eval_every=2,
                )
            )
        finally:
            standin.close()
            policy.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
