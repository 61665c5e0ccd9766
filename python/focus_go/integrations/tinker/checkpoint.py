"""Checkpoints of the ``train`` loop: the Tinker training state and the loop's cursor
(``TrainCheckpoint``, ``load_checkpoint``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Sequence, Union

from .. import Problem
from ...errors import ConfigError
from .update import _result


@dataclass(frozen=True)
class TrainCheckpoint:
    """One checkpoint of the ``train`` loop: the Tinker training state and the loop's cursor.

    ``train`` draws no random numbers itself (problem order is fixed; search seeds come from
    ``collector_for``), so the cursor is the whole loop state.

    Attributes:
        state_path: Where ``TrainingClient.save_state`` saved the weights and optimizer.
        learner_step: The number of updates applied.
        next_batch: The next batch to collect (problem position ``next_batch *
            problems_per_step``).
        problems_per_step: The loop's ``problems_per_step``.
        problems: The length of the problem list.
        problem_ids: Identifies the problem list the cursor points into.
    """

    state_path: str
    learner_step: int
    next_batch: int
    problems_per_step: int
    problems: int
    problem_ids: str

    def to_json(self) -> str:
        """The checkpoint as one JSON line, as ``train`` appends it to ``checkpoint_path``."""
        return json.dumps(
            {
                "state_path": self.state_path,
                "learner_step": self.learner_step,
                "next_batch": self.next_batch,
                "problems_per_step": self.problems_per_step,
                "problems": self.problems,
                "problem_ids": self.problem_ids,
            },
            sort_keys=True,
        )


def load_checkpoint(path: Union[str, "os.PathLike[str]"]) -> TrainCheckpoint:
    """Read the last checkpoint recorded in a ``checkpoint_path`` file written by ``train``.

    Resume with a training client created from its ``state_path`` (the SDK's
    ``ServiceClient.create_training_client_from_state_with_optimizer``) and
    ``train(..., resume_from=checkpoint)``.

    Args:
        path: The JSONL file ``train`` appends checkpoints to.

    Returns:
        The last checkpoint.

    Raises:
        ConfigError: The file cannot be read, holds no checkpoint, or its last line is not
            one.
    """
    try:
        lines = [line for line in open(path, encoding="utf-8").read().splitlines() if line.strip()]
    except OSError as exc:
        raise ConfigError(f"load_checkpoint: cannot read {os.fspath(path)!r}: {exc}") from exc
    if not lines:
        raise ConfigError(f"load_checkpoint: {os.fspath(path)!r} has no checkpoint")
    try:
        raw = json.loads(lines[-1])
        return TrainCheckpoint(
            state_path=str(raw["state_path"]),
            learner_step=int(raw["learner_step"]),
            next_batch=int(raw["next_batch"]),
            problems_per_step=int(raw["problems_per_step"]),
            problems=int(raw["problems"]),
            problem_ids=str(raw["problem_ids"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"load_checkpoint: the last line of {os.fspath(path)!r} is not a checkpoint: {exc}") from exc


def _problem_ids(problems: Sequence[Problem]) -> str:
    """A fingerprint of the problem list's ids and order."""
    import hashlib

    return hashlib.sha256(json.dumps([repr(p.id) for p in problems]).encode()).hexdigest()[:16]


async def _save_state(training_client: Any, name: str) -> str:
    """Save the training state (weights and optimizer) under ``name``; its tinker:// path."""
    response = await _result(training_client.save_state(name))
    path = getattr(response, "path", None)
    if not isinstance(path, str) or not path:
        raise ConfigError(f"train: save_state returned {type(response).__name__} without a path")
    return path
