"""The ``focus-go`` command line (also ``python -m focus_go``, whose ``__main__`` only calls
``main``), one job per module.

Arrows point down this list; no module imports one above it:

- ``command``: the ``focus-go`` parser, its ``version`` subcommand, and ``main``;
- ``demo``: ``focus-go demo``, FOCUS end to end on the embedded simulated server;
- ``view``: ``focus-go view``, saved trees rendered to self-contained HTML pages;
- ``collect``: the flags of ``focus-go collect`` (``add_parser``) and their types; its
  docstring documents the command;
- ``run``: one collect run, ``run_collect``: check, open the backend, collect every problem
  concurrently, write each as it completes, stop cleanly on ``INTERRUPT_SIGNALS``
  (``cancel_on_signals``), report and choose the exit code;
- ``settings``: the search, critic, reward config and estimator the flags describe;
- ``backends``: the policy (SGLang, vLLM or the embedded simulator), the refusal of
  chat-only APIs, the start-up checks of the servers, and ``--env`` factories;
- ``resume``: what an earlier run completed, whether it was collected the same way
  (settings and problem digests in run.json), its degraded trees, and trimming what it
  left unfinished;
- ``outdir``: the output directory: its files, ``OutLock`` (one writer), ``Output``
  (appending records whole, writing and replacing trees), refusing or clearing an earlier
  run;
- ``progress``: ``Totals`` (the summary) and ``Progress`` (the status line);
- ``problems``: reading and checking the problems file.

They build on the library's public modules (``focus_go.collector``, ``focus_go.types``,
...), never the other way round.
"""

from __future__ import annotations

from .command import main

__all__ = ["main"]
