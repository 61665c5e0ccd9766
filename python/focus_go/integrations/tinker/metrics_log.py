"""The ``train`` loop's per-step metrics log: JSON lines and wandb."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional, Union

from ...errors import ConfigError


class _MetricsLog:
    """One JSON line per step to ``path`` (always, when given) and to wandb (when asked)."""

    def __init__(self, path: Optional[Union[str, "os.PathLike[str]"]], wandb_project: Optional[str], *,
                 wandb_name: Optional[str] = None, config: Optional[Mapping[str, Any]] = None):
        self._file = None
        self._wandb = None
        if wandb_project is not None:
            _check_wandb(wandb_project)
            import wandb

            self._wandb = wandb.init(project=wandb_project, name=wandb_name, config=dict(config or {}))
        if path is not None:
            self._file = open(path, "a", encoding="utf-8")

    def write(self, step: int, values: Mapping[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps({"step": step, **values}, sort_keys=True) + "\n")
            self._file.flush()
        if self._wandb is not None:
            self._wandb.log(dict(values), step=step)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        if self._wandb is not None:
            self._wandb.finish()


def _check_wandb(wandb_project: Optional[str]) -> None:
    """Refuse ``wandb_project`` when wandb is not installed."""
    if wandb_project is None:
        return
    try:
        import wandb  # noqa: F401
    except ImportError as exc:
        raise ConfigError("train: wandb_project was given but wandb is not installed (pip install wandb)") from exc
