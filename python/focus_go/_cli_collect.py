"""Kept for imports written before the command moved: ``focus-go collect`` lives in the
``focus_go.cli`` package (``focus_go.cli.main`` documents it). The names here are the same
objects as there."""

from __future__ import annotations

from .cli.backends import OPENAI_REFUSAL, Backend, open_backend
from .cli.main import DEFAULT_SYSTEM_PROMPT, add_parser
from .cli.outdir import Output, tree_name
from .cli.problems import LoadedProblem, ProblemsFileError, read_problems
from .cli.progress import Progress, Totals
from .cli.resume import completed_indices
from .cli.run import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, run_collect

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "OPENAI_REFUSAL",
    "Backend",
    "LoadedProblem",
    "Output",
    "ProblemsFileError",
    "Progress",
    "Totals",
    "add_parser",
    "completed_indices",
    "open_backend",
    "read_problems",
    "run_collect",
    "tree_name",
]
