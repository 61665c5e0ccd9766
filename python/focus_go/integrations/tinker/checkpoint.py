"""Checkpoints of the ``train`` loop: the Tinker training state and the loop's cursor
(``TrainCheckpoint``, ``load_checkpoint``).
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from .. import Problem
from ...errors import ConfigError
from .update import _result


@dataclass(frozen=True)
class TrainCheckpoint:
    """One checkpoint of the ``train`` loop: the Tinker training state and the loop's cursor.

    The cursor, with the problem list's fingerprint, is the whole loop state.

    Attributes:
        state_path: Where ``TrainingClient.save_state`` saved the weights and optimizer.
        learner_step: The number of updates applied.
        next_batch: The next batch to collect (problem position ``next_batch *
            problems_per_step``).
        problems_per_step: The loop's ``problems_per_step``.
        problems: The length of the problem list.
        problem_ids: Identifies the problem list the cursor points into.
        base_model: The training client's base model (``get_info()``), when it said.
        lora_rank: The training client's LoRA rank (``get_info()``), when it said.
        order: The problem order: ``"shuffled, seed N"`` or ``"in order"`` (None in
            checkpoints from before it was recorded).
        sampler_path: Where ``save_weights_for_sampler`` exported the weights for sampling
            (``ServiceClient.create_sampling_client(model_path=...)``); None for a rolling
            checkpoint.
        kind: ``"periodic"`` (every ``checkpoint_every``), ``"rolling"`` (every
            ``rolling_save_every``, state only, short-lived) or ``"final"``.
        settings: What the run trained with that a resume must train with too: ``profile``,
            ``loss_fn``, ``loss_fn_config``, ``learning_rate``, ``layout``,
            ``visitation_weights``, ``num_substeps``, ``kl_penalty_coef`` and
            ``kl_discount_factor`` (empty in checkpoints from before they were recorded).
        totals: The run's cumulative counts up to ``learner_step`` (``tokens/*``,
            ``rollouts``, ``trees``), which a resumed run goes on adding to.
    """

    state_path: str
    learner_step: int
    next_batch: int
    problems_per_step: int
    problems: int
    problem_ids: str
    base_model: Optional[str] = None
    lora_rank: Optional[int] = None
    order: Optional[str] = None
    sampler_path: Optional[str] = None
    kind: str = "periodic"
    settings: Mapping[str, Any] = field(default_factory=dict)
    totals: Mapping[str, float] = field(default_factory=dict)

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
                "base_model": self.base_model,
                "lora_rank": self.lora_rank,
                "order": self.order,
                "sampler_path": self.sampler_path,
                "kind": self.kind,
                "settings": dict(self.settings),
                "totals": dict(self.totals),
            },
            sort_keys=True,
        )


def load_checkpoint(path: Union[str, "os.PathLike[str]"]) -> TrainCheckpoint:
    """Read the last checkpoint recorded in a ``checkpoint_path`` file written by ``train``.

    ``train(..., resume_from=checkpoint)`` resumes from it; ``train`` with the same
    ``checkpoint_path`` resumes from this checkpoint by itself.

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
            base_model=None if raw.get("base_model") is None else str(raw["base_model"]),
            lora_rank=None if raw.get("lora_rank") is None else int(raw["lora_rank"]),
            order=None if raw.get("order") is None else str(raw["order"]),
            sampler_path=None if raw.get("sampler_path") is None else str(raw["sampler_path"]),
            kind=str(raw.get("kind", "periodic")),
            settings=dict(raw.get("settings") or {}),
            totals={str(k): float(v) for k, v in (raw.get("totals") or {}).items()},
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"load_checkpoint: the last line of {os.fspath(path)!r} is not a checkpoint: {exc}") from exc


def _problem_ids(problems: Sequence[Problem]) -> str:
    """A fingerprint of the problem list's ids and order."""
    import hashlib

    return hashlib.sha256(json.dumps([repr(p.id) for p in problems]).encode()).hexdigest()[:16]


async def _save_state(training_client: Any, name: str, ttl_seconds: Optional[int] = None) -> str:
    """Save the training state (weights and optimizer) under ``name``, expiring after
    ``ttl_seconds`` (None: never); its tinker:// path."""
    future = training_client.save_state(name) if ttl_seconds is None else training_client.save_state(name, ttl_seconds=ttl_seconds)
    response = await _result(future)
    path = getattr(response, "path", None)
    if not isinstance(path, str) or not path:
        raise ConfigError(f"train: save_state returned {type(response).__name__} without a path")
    return path


async def _save_sampler(training_client: Any, name: str, ttl_seconds: Optional[int] = None) -> str:
    """Export the weights for sampling under ``name`` (``save_weights_for_sampler``); their
    tinker:// path."""
    save = training_client.save_weights_for_sampler
    future = save(name) if ttl_seconds is None else save(name, ttl_seconds=ttl_seconds)
    response = await _result(future)
    path = getattr(response, "path", None)
    if not isinstance(path, str) or not path:
        raise ConfigError(f"train: save_weights_for_sampler returned {type(response).__name__} without a path")
    return path


def _client_identity(training_client: Any) -> "tuple[Optional[str], Optional[int]]":
    """The base model and LoRA rank the client reports (``get_info()``), None where it
    does not say."""
    get_info = getattr(training_client, "get_info", None)
    if not callable(get_info):
        return None, None
    try:
        info = get_info()
    except Exception:  # an SDK whose get_info needs the service; the identity is optional
        return None, None
    data = getattr(info, "model_data", None)
    base = getattr(data, "model_name", None) or getattr(info, "model_name", None)
    rank = getattr(info, "lora_rank", None)
    return (base if isinstance(base, str) else None), (rank if isinstance(rank, int) else None)


def _check_client(training_client: Any, checkpoint: TrainCheckpoint) -> None:
    """Refuse a training client of another base model or LoRA rank than the checkpoint's."""
    base, rank = _client_identity(training_client)
    if checkpoint.base_model is not None and base is not None and base != checkpoint.base_model:
        raise ConfigError(
            f"train: the training client's base model is {base!r}, but the checkpoint "
            f"{checkpoint.state_path!r} was saved from {checkpoint.base_model!r}"
        )
    if checkpoint.lora_rank is not None and rank is not None and rank != checkpoint.lora_rank:
        raise ConfigError(
            f"train: the training client has LoRA rank {rank}, but the checkpoint "
            f"{checkpoint.state_path!r} was saved with LoRA rank {checkpoint.lora_rank}"
        )


async def _load_state(training_client: Any, checkpoint: TrainCheckpoint) -> None:
    """Load the checkpoint's weights and optimizer state into the client, whatever it held
    (a fresh LoRA client, one created from the weights only, or from this state)."""
    load = getattr(training_client, "load_state_with_optimizer", None)
    if not callable(load):
        raise ConfigError(
            f"train: resuming loads {checkpoint.state_path!r} into the training client, but "
            f"{type(training_client).__name__} has no load_state_with_optimizer; create the client with "
            f"ServiceClient.create_training_client_from_state_with_optimizer({checkpoint.state_path!r}) and pass "
            "state_loaded=True"
        )
    with warnings.catch_warnings():
        # Deprecated in tinker 0.38 in favour of creating a client from the state; still the
        # one way to put a state into the client the caller passed.
        warnings.simplefilter("ignore", FutureWarning)
        future = load(checkpoint.state_path)
    await _result(future)


def _truncate_log(path: Union[str, "os.PathLike[str]"], learner_step: int) -> None:
    """Drop the metric rows of steps after ``learner_step`` (a resumed run logs them
    again), and a line a kill cut short."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return
    kept = []
    for line in lines:
        try:
            step = json.loads(line).get("step")
        except (ValueError, AttributeError):
            continue  # a row cut short by a kill; its step is written again
        if not (isinstance(step, int) and step > learner_step):
            kept.append(line)
    if len(kept) != len(lines):
        tmp = Path(os.fspath(path) + ".part")
        tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        os.replace(tmp, path)


def _truncate_sink(sink: Any, learner_step: int) -> None:
    """Remove, from a ``JsonlDirectory`` sink, the critic files of updates after
    ``learner_step`` (their records' ``learner_step`` is the update's, counted from 0)."""
    from .. import JsonlDirectory

    if not isinstance(sink, JsonlDirectory) or not sink.directory.is_dir():
        return
    for part in sink.directory.glob("*.jsonl.part"):  # a file a kill left unrenamed
        part.unlink()
    for file in sink.directory.glob("*.jsonl"):
        try:
            with open(file, encoding="utf-8") as f:
                first = json.loads(f.readline())
        except (OSError, ValueError):
            continue
        step = first.get("learner_step") if isinstance(first, dict) else None
        if isinstance(step, int) and step >= learner_step:
            file.unlink()


def _append_line(path: Union[str, "os.PathLike[str]"], line: str) -> None:
    """Append ``line`` to the checkpoint file as one atomic replacement, so a kill leaves
    either the old file or the new one, never a line cut short."""
    try:
        old = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        old = ""
    if old and not old.endswith("\n"):
        old += "\n"
    tmp = Path(os.fspath(path) + ".part")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(old + line + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _check_settings(checkpoint: TrainCheckpoint, settings: Mapping[str, Any]) -> None:
    """Refuse a resume whose settings differ from those the checkpoint recorded."""
    for name, saved in checkpoint.settings.items():
        if name in settings and _jsonable(settings[name]) != saved:
            raise ConfigError(
                f"train: the checkpoint {checkpoint.state_path!r} was trained with {name}={saved!r}, got "
                f"{_jsonable(settings[name])!r}; resume with the checkpoint's {name} (or start a new run)"
            )


def _jsonable(value: Any) -> Any:
    """``value`` as the checkpoint's JSON gives it back."""
    return json.loads(json.dumps(dict(value) if isinstance(value, Mapping) else value, sort_keys=True))
