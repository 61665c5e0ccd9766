"""Rollout transcripts of the Tinker loop, where tinker-cookbook's ``rl/train.py`` writes
them: for each batch, under ``iteration_NNNNNN/`` beside ``log_path``, the HTML page of its
first ``num_groups_to_log`` trees (the cookbook's logtree pages; here the tree page of
``focus-go view``) and, with ``rollout_json_export``, one JSON line per finished rollout
(the cookbook's rollout summaries).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

from ...errors import ConfigError


class _Transcripts:
    """Writes one batch's transcripts; a batch collected again (after a resume) replaces
    its files."""

    def __init__(self, log_path: Optional[Union[str, "os.PathLike[str]"]], num_groups_to_log: int,
                 rollout_json_export: bool) -> None:
        if not isinstance(num_groups_to_log, int) or isinstance(num_groups_to_log, bool) or num_groups_to_log < 0:
            raise ConfigError(f"train: num_groups_to_log must be an integer >= 0, got {num_groups_to_log!r}")
        self.root = None if log_path is None else Path(log_path).parent
        self.trees = num_groups_to_log
        self.export = bool(rollout_json_export)
        self._rows: Dict[int, Dict[int, List[Dict[str, Any]]]] = {}

    def _dir(self, batch: int) -> Path:
        assert self.root is not None
        out = self.root / f"iteration_{batch:06d}"
        out.mkdir(parents=True, exist_ok=True)
        return out

    def drop_from(self, batch: int) -> None:
        """Remove the transcripts of batches ``batch`` on, which the run collects again."""
        if self.root is None or not self.root.is_dir():
            return
        for folder in self.root.glob("iteration_*"):
            number = folder.name[len("iteration_"):]
            if folder.is_dir() and number.isdigit() and int(number) >= batch:
                for file in folder.iterdir():
                    if file.is_file():
                        file.unlink()

    def on_state(self, batch: int, tree: int) -> Optional[Callable[[Any], None]]:
        """What to do with tree ``tree`` of batch ``batch`` once collected: write its page
        (the first ``num_groups_to_log`` trees of a batch), or nothing."""
        if self.root is None or tree >= self.trees:
            return None

        def write(state: Any) -> None:
            from ...export import format_tree_html
            from ...tree import SchedulerView

            (self._dir(batch) / f"train_tree_{tree}.html").write_text(format_tree_html(SchedulerView(state)), encoding="utf-8")

        return write

    def add(self, batch: int, tree: int, *, problem_id: Optional[str], group_index: int, rollouts: Any,
            tokens_sampled: int) -> None:
        """Keep tree ``tree``'s finished rollouts for the batch's summary."""
        if self.root is None or not self.export:
            return
        self._rows.setdefault(batch, {})[tree] = [
            {"iteration": batch, "group_index": group_index, "problem_id": problem_id, "node_id": r.node_id,
             "return": r.outcome, "done": r.done, "segments": r.segments, "tree_tokens_sampled": tokens_sampled}
            for r in rollouts
        ]

    def flush(self, batch: int) -> None:
        """Write the batch's rollout summary, ``rollouts.jsonl`` (trees in batch order)."""
        trees = self._rows.pop(batch, None)
        if trees is None:
            return
        lines = [json.dumps(row) + "\n" for _, rows in sorted(trees.items()) for row in rows]
        (self._dir(batch) / "rollouts.jsonl").write_text("".join(lines), encoding="utf-8")
