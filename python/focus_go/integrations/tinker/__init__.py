"""Tinker: a training loop that collects FOCUS trees from Tinker samplers and trains on them.

``train`` runs one collection per optimizer step: it publishes a frozen sampler of the
current weights (``save_weights_and_get_sampling_client``), collects ``problems_per_step``
problems (default 1) concurrently with collectors ``collector_for(policy, problem)``
built around it, turns the actor records into Tinker Datums (``to_datum``) and takes one
PPO step (``update_actor``: forward_backward and optim_step submitted back to back, one
clock cycle). With ``async_depth=1`` the next collection runs while the current update
trains, so each batch is at most one update behind the learner; every batch is trained
exactly once. Around that: per-step metrics (JSONL, wandb), held-out evaluation,
checkpoints of the training state with the loop's cursor (``TrainCheckpoint``; a rerun
resumes from ``checkpoint_path``, or ``resume_from``), tinker-cookbook's KL penalty,
substeps and checkpoint kinds, and datums its helpers read (``mask``, provenance).

The ``tinker`` package (Python >= 3.11) is imported lazily, inside the functions that
need it; importing this module does not require it.

Tinker SDK shapes relied on (read in tinker 0.38.0, the installed release, and 0.25.0):
``TrainingClient.forward_backward(data, loss_fn, loss_fn_config)`` and
``TrainingClient.optim_step(AdamParams)`` submit at once and return an ``APIFuture``
(awaitable, ``result_async()``). ``save_weights_and_get_sampling_client()`` blocks its
caller until the save is done (0.25 returns the client; 0.38 returns a future of it whose
``result()`` blocks), so it runs in a worker thread and an overlapping collection keeps
going. Sampling goes through ``TinkerPolicy`` (``SamplingClient.sample``). The ``*_async``
twins (``await (await tc.forward_backward_async(...))``) are not used: in 0.38 they are
deprecated (``optim_step_async`` warns) and only wrap the methods used here.

One job per module, every name above importable from the package: ``loop`` (``train``,
``StepReport``), ``update`` (``update_actor``, ``PPO_CLIP``), ``datum`` (``to_datum``,
``SEQUENCE_ID_KEY``), ``checkpoint`` (``TrainCheckpoint``, ``load_checkpoint``); and,
internal, ``config`` (the arguments checked before any request), ``steps`` (samplers,
concurrency, problem order), ``metrics_log`` and ``transcripts``.
"""

from __future__ import annotations

from .checkpoint import TrainCheckpoint, load_checkpoint
from .datum import SEQUENCE_ID_KEY, to_datum
from .loop import StepReport, train
from .update import PPO_CLIP, update_actor

# Names the single-module version also held: the types of train's signature.
from .. import CollectorFor as CollectorFor, CriticSink as CriticSink, Problem as Problem, Workspace as Workspace

__all__ = ["PPO_CLIP", "SEQUENCE_ID_KEY", "StepReport", "TrainCheckpoint", "load_checkpoint", "to_datum", "train", "update_actor"]
