"""What ``focus-go collect`` reports: ``Totals``, the sums over completed problems (the
end-of-run table and ``run.json``'s summary), and ``Progress``, the status line on stderr."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Optional, Sequence, TextIO

from ..collector import CollectionProgress


@dataclass
class Totals:
    """What the completed problems add up to (the end-of-run summary)."""

    problems: int = 0
    completed: int = 0
    failed_problems: int = 0
    rollouts: int = 0
    finished_rollouts: int = 0
    successes: int = 0
    abs_advantage_sum: float = 0.0
    edges: int = 0
    generated_tokens: int = 0
    prefix_tokens_reused: int = 0
    failed_rollouts: int = 0
    inexact_edges: int = 0  # edges that train no actor (no exact ids or logprobs)
    budget: int = 0  # the search budget (rollouts) of the completed trees, summed
    budget_unspent: int = 0
    actor_records: int = 0
    critic_records: int = 0
    resumed: int = 0
    degraded_trees: int = 0  # trees of this run with failed rollouts
    degraded_before: int = 0  # earlier trees with failed rollouts, kept (not --retry-failed)
    retried: int = 0  # degraded earlier trees replaced (--retry-failed)
    elapsed: float = 0.0
    interrupted: bool = False
    signal: int = 0  # the signal that stopped the run (0: none)

    @property
    def degraded(self) -> bool:
        """Whether this run lost rollouts or actor data (failed rollouts, inexact edges)."""
        return bool(self.failed_rollouts or self.inexact_edges or self.degraded_trees)

    @property
    def success_rate(self) -> Optional[float]:
        return self.successes / self.finished_rollouts if self.finished_rollouts else None

    @property
    def mean_abs_advantage(self) -> Optional[float]:
        return self.abs_advantage_sum / self.edges if self.edges else None

    def as_json(self) -> Dict[str, Any]:
        out = asdict(self)
        out.update(success_rate=self.success_rate, mean_abs_advantage=self.mean_abs_advantage)
        return out

    def table(self) -> str:
        def rate(v: Optional[float], fmt: str) -> str:
            return "-" if v is None else format(v, fmt)

        secs = max(self.elapsed, 1e-9)
        not_started = self.problems - self.resumed - self.completed - self.failed_problems
        rows = [
            ("problems", f"{self.completed} completed, {self.failed_problems} failed"
             + (f", {self.resumed} collected before (--resume)" if self.resumed else "")
             + (f", {not_started} not collected (interrupted)" if not_started else "")),
            ("rollouts", f"{self.rollouts}"),
            ("success rate", rate(self.success_rate, ".3f") + f"  ({self.successes}/{self.finished_rollouts} finished rollouts)"),
            ("mean |A|", rate(self.mean_abs_advantage, ".4f") + f"  (over {self.edges} actor edges)"),
            ("tokens generated", f"{self.generated_tokens}"),
            ("prefix tokens reused", f"{self.prefix_tokens_reused}"),
            ("budget unspent", f"{self.budget_unspent} of {self.budget} rollouts"
             + (" (a tree stops early once no checkpoint is worth another branch: each candidate has "
                "--max-children children, too little token room left, or a score of 0)" if self.budget_unspent else "")),
            ("failures", f"{self.failed_rollouts} rollouts, {self.failed_problems} problems"
             + (f", {self.inexact_edges} inexact edges (no logprobs or exact ids: no actor records)" if self.inexact_edges else "")),
            ("degraded trees", f"{self.degraded_trees} with failed rollouts or inexact edges"
             + (f" ({self.retried} replaced earlier ones)" if self.retried else "")
             + (f", {self.degraded_before} earlier (--retry-failed collects them again)" if self.degraded_before else "")),
            ("records", f"{self.actor_records} actor, {self.critic_records} critic"),
            ("time", f"{self.elapsed:.1f} s  ({self.completed / secs:.2f} trees/s, {self.generated_tokens / secs:.0f} tokens/s)"),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def running_part(live: Sequence[CollectionProgress]) -> str:
    """The engine's numbers of the trees running now (``Collector.progress()``), summed:
    rollouts finished of their budgets, tokens generated, tokens/s and the time left of the
    slowest tree at its pace (``-`` before a rollout finished, 0 for one that has just ended);
    empty when none runs."""
    if not live:
        return ""
    done = sum(p.rollouts_finished for p in live)
    budget = sum(p.budget for p in live)
    tokens = sum(p.generated_tokens for p in live)
    rate = sum(p.tokens_per_second for p in live)
    etas = [0.0 if p.done else p.eta_seconds for p in live]  # one that has just ended has no time left
    eta = "-" if any(e is None for e in etas) else _duration(max(etas))  # type: ignore[type-var,arg-type]
    failed = sum(p.rollouts_failed for p in live)
    fail = f" ({failed} failed)" if failed else ""
    trees = "tree" if len(live) == 1 else "trees"
    return (f"  | running {len(live)} {trees}: {done}/{budget} rollouts{fail}, {tokens} tokens, "
            f"{rate:.0f} tokens/s, tree ETA {eta}")


class Progress:
    """One status line on stderr: a bar, trees/s, tokens/s and the time left at that pace,
    then (while trees run) the engine's live numbers of the running trees (``live``, a
    callable returning ``Collector.progress()`` entries; see ``running_part``).
    On a terminal it is redrawn in place (``\\r``); otherwise (a log file, Slurm) a line is
    printed per finished problem and, while problems run, every ``interval`` seconds."""

    def __init__(self, total: int, stream: TextIO, totals: Totals, interval: float = 10.0,
                 live: Optional[Callable[[], Sequence[CollectionProgress]]] = None) -> None:
        self.total = total
        self.live = live
        self.stream = stream
        self.totals = totals
        self.tty = stream.isatty()
        self.interval = interval
        self.start = time.perf_counter()
        self.last_log = self.start
        self.last_line = ""

    def line(self) -> str:
        t = self.totals
        done = t.completed + t.failed_problems
        secs = max(time.perf_counter() - self.start, 1e-9)
        width = 24
        filled = width * done // max(self.total, 1)
        bar = "#" * filled + "." * (width - filled)
        fail = f" {t.failed_problems} failed" if t.failed_problems else ""
        eta = f"  ETA {_duration((self.total - done) * secs / done)}" if 0 < done < self.total else ""
        running = running_part(self.live()) if self.live is not None else ""
        return (f"[{bar}] {done}/{self.total} trees  {t.completed / secs:.2f} trees/s  "
                f"{t.generated_tokens / secs:.0f} tokens/s  {secs:.0f}s{eta}{fail}{running}")

    def refresh(self) -> None:
        if self.tty:
            text = self.line()
            self.stream.write("\r" + text + " " * max(0, len(self.last_line) - len(text)))
            self.stream.flush()
            self.last_line = text
        elif self.interval > 0 and time.perf_counter() - self.last_log >= self.interval:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self.last_log = time.perf_counter()

    def problem_done(self, label: str) -> None:
        if self.tty:
            self.refresh()
        else:
            self.stream.write(f"{self.line()}  ({label})\n")
            self.stream.flush()
            self.last_log = time.perf_counter()

    def finish(self) -> None:
        if self.tty and self.last_line:
            self.refresh()
            self.stream.write("\n")
            self.stream.flush()


def _duration(seconds: float) -> str:
    """Seconds as ``42s``, ``7m05s`` or ``3h12m``."""
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
