"""One run of ``focus-go collect``: check everything, open the backend, collect every
problem (``--concurrency`` at once), write each completed one as it lands, and report.

``run_collect`` is the command; it returns the exit code (``EXIT_*``). Ctrl-C (any of
``INTERRUPT_SIGNALS``) cancels the collections in flight (the Go engine stops them), keeps
every completed problem, prints the summary and exits ``EXIT_INTERRUPTED``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator, List, Optional, Sequence, TextIO, Tuple

from .._records import tree_records
from ..agent import Agent, Segments
from ..collector import Collector
from ..env import MathEnv
from ..errors import CollectionError, ConfigError, FocusError
from .backends import Backend, check_backend_args, open_backend
from .outdir import Output, check_out_dir, clear_out_dir, write_atomic
from .problems import LoadedProblem, read_problems
from .progress import Progress, Totals
from .resume import completed_indices, trim_for_resume
from .settings import Settings, describe_critic, settings

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

INTERRUPT_SIGNALS: Tuple[signal.Signals, ...] = (signal.SIGINT,)
"""The signals that stop a run cleanly (completed problems kept, summary written)."""


def tree_counts(state: Any) -> Tuple[int, int]:
    """(finished rollouts, successful ones): terminal leaves that did not fail, and those
    that reached the top reward (a correct answer for MathEnv), as the engine counted them
    into the tree's stats."""
    stats = state.stats
    return int(stats["finished_rollouts"]), int(stats["successes"])


async def collect_all(args: argparse.Namespace, run: Settings, problems: List[LoadedProblem], backend: Backend,
                      output: Output, totals: Totals, progress: Progress) -> None:
    """Collect every problem, ``args.concurrency`` at once, writing each as it completes; a
    problem that fails is listed in failures.jsonl and the others go on."""
    search, critic, reward, estimator = run.search, run.critic, run.reward, run.estimator
    policy = backend.policy
    slots = asyncio.Semaphore(args.concurrency)

    async def one(item: LoadedProblem) -> None:
        problem = item.problem
        async with slots:
            agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), system_prompt=args.system_prompt or None,
                          context=Segments(args.segment_tokens), max_segments=args.max_segments,
                          max_total_tokens=args.max_total_tokens)
            collector = Collector(agent, critic=critic, search=search, reward=reward, estimator=estimator)
            state = None
            try:
                async with collector:
                    state = await collector.collect(problem, allow_partial=not args.strict)
                failures = tuple(state.failures)
                finished, successes = tree_counts(state)
                if finished == 0:
                    raise CollectionError(f"every rollout failed ({len(failures)} failures; first: {failures[0][1] if failures else '-'})")
                records = tree_records(state, reward_config=collector.reward, estimator=collector.estimator,
                                       group_index=item.index, min_abs_advantage=args.min_abs_advantage)
                stats = records.stats
                edges = [abs(w) for w in records.sample_weights]
                tree_json = state.to_json()
            except asyncio.CancelledError:
                raise
            except FocusError as exc:
                if state is None:
                    state = getattr(exc, "state", None)
                output.failure({"kind": "problem", "line": item.line, "problem_id": problem.id,
                                "error": f"{type(exc).__name__}: {exc}"})
                totals.failed_problems += 1
                progress.problem_done(f"{problem.id}: failed: {str(exc)[:160]}")
                return
            finally:
                if state is not None:
                    state.close()
        actor, critic_records = records.actor, records.critic
        output.problem(item.index, str(problem.id), tree_json, actor, critic_records)
        for node_id, message in failures:
            output.failure({"kind": "rollout", "line": item.line, "problem_id": problem.id, "node_id": node_id, "error": message})
        totals.completed += 1
        totals.rollouts += int(stats.get("rollouts", 0))
        totals.finished_rollouts += finished
        totals.successes += successes
        totals.abs_advantage_sum += sum(edges)
        totals.edges += len(edges)
        totals.generated_tokens += int(stats.get("generated_tokens", 0))
        totals.prefix_tokens_reused += int(stats.get("prefix_tokens_reused", 0))
        totals.failed_rollouts += len(failures)
        totals.actor_records += len(actor)
        totals.critic_records += len(critic_records)
        progress.problem_done(f"{problem.id}: {successes}/{finished} correct")

    async def ticker() -> None:
        while True:
            await asyncio.sleep(0.5)
            progress.refresh()

    tick = asyncio.create_task(ticker())
    tasks = [asyncio.create_task(one(item)) for item in problems]
    try:
        await asyncio.gather(*tasks)
    finally:
        tick.cancel()
        for task in tasks:
            task.cancel()
        # Every cancelled collection waits for its Go collection to stop.
        await asyncio.gather(tick, *tasks, return_exceptions=True)


@contextlib.contextmanager
def cancel_on_signals(work: "asyncio.Future[Any]", totals: Totals,
                      signals: Sequence[signal.Signals] = INTERRUPT_SIGNALS) -> Iterator[None]:
    """While inside, the first of ``signals`` to arrive marks the run interrupted and
    cancels ``work``; its handler is then removed, so a second one falls back to Python's
    own handling (KeyboardInterrupt for Ctrl-C). Outside the main thread, or without signal
    support, nothing is installed and KeyboardInterrupt still ends the run."""
    loop = asyncio.get_running_loop()
    installed: List[signal.Signals] = []

    def interrupt(signum: signal.Signals) -> None:
        totals.interrupted = True
        loop.remove_signal_handler(signum)
        work.cancel()

    try:
        for signum in signals:
            loop.add_signal_handler(signum, interrupt, signum)
            installed.append(signum)
    except (NotImplementedError, RuntimeError, ValueError):
        pass  # not the main thread, or no signal support
    try:
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


async def _collect_until_interrupted(args: argparse.Namespace, run: Settings, problems: List[LoadedProblem],
                                     backend: Backend, output: Output, totals: Totals, progress: Progress) -> None:
    work = asyncio.ensure_future(collect_all(args, run, problems, backend, output, totals, progress))
    with cancel_on_signals(work, totals):
        try:
            await work
        except asyncio.CancelledError:
            if not totals.interrupted:
                raise


def run_collect(args: argparse.Namespace, stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None) -> int:
    """The ``collect`` command; returns the exit code."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        check_backend_args(args)
        problems = read_problems(Path(args.problems), prompt_key=args.prompt_key, label_key=args.label_key,
                                 id_key=args.id_key, limit=args.limit)
        run = settings(args)  # bad search or reward settings fail before anything starts
        out = Path(args.out)
        if args.resume and args.overwrite:
            raise ConfigError("--resume keeps an earlier run and --overwrite replaces it: pass one")
        existing = check_out_dir(out, args.overwrite, args.resume)
        done = completed_indices(out, problems) if args.resume else []
    except ConfigError as exc:
        print(f"focus-go collect: {exc}", file=stderr)
        return EXIT_USAGE
    try:
        backend = open_backend(args)
    except FocusError as exc:
        print(f"focus-go collect: cannot open the backend: {exc}", file=stderr)
        return EXIT_FAILED
    try:
        try:
            backend.policy.startup_check()
        except FocusError as exc:
            print(f"focus-go collect: {backend.description} is not ready: {exc}", file=stderr)
            return EXIT_FAILED
        if existing and args.overwrite:
            clear_out_dir(out)
        elif existing:
            trim_for_resume(out, problems, done)
        totals = Totals(problems=len(problems), resumed=len(done))
        todo = [p for p in problems if p.index not in set(done)]
        progress = Progress(len(todo), stderr, totals)
        output = Output(out)
        print(f"focus-go collect: {len(todo)} problems from {args.problems}"
              + (f" ({len(done)} collected before)" if done else "") + f" on {backend.description}; "
              f"{run.search}, Segments({args.segment_tokens}), critic {describe_critic(args)}; writing {out}/", file=stderr)
        t0 = time.perf_counter()
        try:
            try:
                asyncio.run(_collect_until_interrupted(args, run, todo, backend, output, totals, progress))
            except KeyboardInterrupt:
                totals.interrupted = True
        finally:
            totals.elapsed = time.perf_counter() - t0
            progress.finish()
            output.close()
            summary = {
                "problems_file": str(args.problems),
                "backend": {"kind": backend.name, "url": backend.url, "model": backend.policy.model},
                "search": repr(run.search),
                "segment_tokens": args.segment_tokens,
                "critic": describe_critic(args),
                "reward": asdict(run.reward),
                "estimator": run.estimator.name,
                "summary": totals.as_json(),
            }
            write_atomic(out / "run.json", json.dumps(summary, indent=2) + "\n")
    finally:
        backend.close()
    print(("Interrupted: kept the completed problems.\n" if totals.interrupted else "") + totals.table(), file=stdout)
    print(f"\nactor records   {out / 'actor.jsonl'}\ncritic records  {out / 'critic.jsonl'}\n"
          f"trees           {out / 'trees'}/  (focus-go view {out} renders them)\nrun summary     {out / 'run.json'}"
          + (f"\nfailures        {out / 'failures.jsonl'}" if (out / "failures.jsonl").exists() else ""), file=stdout)
    if totals.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if totals.failed_problems else EXIT_OK
