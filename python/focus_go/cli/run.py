"""One run of ``focus-go collect``: check everything, open the backend, collect every
problem (scheduled by requests in flight: a problem starts whenever the servers have
room, see ``collect_all``), write each completed one as it lands, and report.

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
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, TextIO, Tuple

from .. import _rules
from .._records import tree_records
from ..agent import Agent, Segments
from ..collector import Collector, _native_tokenizer
from ..env import MathEnv
from ..errors import CollectionError, ConfigError, FocusError
from ..generation.types import SamplingParams
from ..search import first_burst
from .backends import Backend, check_backend_args, check_critic, load_env_factory, make_env, open_backend, wait_until_ready
from .outdir import OutLock, Output, check_out_dir, clear_out_dir, write_atomic
from .problems import LoadedProblem, read_problems
from .progress import Progress, Totals
from .resume import (check_same_run, completed_indices, degraded_lines, degraded_trees, problem_digest, read_run_json,
                     trim_for_resume)
from .settings import Settings, describe_critic, settings

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DEGRADED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
"""``EXIT_DEGRADED``: every problem has its tree, but some rollouts failed or some edges are
inexact (they train no actor); ``--allow-degraded`` accepts such a run (exit 0)."""
EXIT_TERMINATED = 128 + int(signal.SIGTERM)
"""143: stopped by SIGTERM (``timeout``, Slurm, ``docker stop``), as cleanly as by Ctrl-C."""

INTERRUPT_SIGNALS: Tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a run cleanly (completed problems kept, summary written); the exit
code is 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM)."""


def check_flags(args: argparse.Namespace) -> Settings:
    """Build the library's configuration objects from the flags (sampling parameters,
    segments, search, critic, reward config, estimator) before any backend starts or any
    directory is created, so a bad value fails here with the library's own message (the
    rules live there, not in the command)."""
    SamplingParams(temperature=args.temperature, top_p=args.top_p)
    Segments(args.segment_tokens)
    _rules.check("Agent", {"max_segments": args.max_segments, "max_total_tokens": args.max_total_tokens})  # Agent's rule
    if args.min_abs_advantage is not None:
        _rules.check("min_abs_advantage", {"value": args.min_abs_advantage})  # the export's own rule
    return settings(args)


def context_length(backend: Backend) -> int:
    """The model's context in tokens, as the server's model info gives it (0: not given)."""
    info = getattr(backend.policy, "server_info", None) or {}
    for key in ("ContextLength", "MaxModelLen", "context_length", "max_model_len"):
        value = info.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return 0


def check_prompt_lengths(args: argparse.Namespace, backend: Backend, problems: Sequence[LoadedProblem]) -> None:
    """Render every prompt before the first problem starts, refusing one the chat template
    cannot render, or one (system prompt and chat template included) that leaves no room
    in the model's context (``server_info``) for a generated token."""
    limit = context_length(backend)
    policy = backend.policy
    probe = PROBE_CHARS_PER_TOKEN * limit
    for item in problems:
        prompt = item.problem.prompt
        messages = ([{"role": "system", "content": args.system_prompt}] if args.system_prompt else [])
        messages += [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
        text = "".join(m["content"] for m in messages if isinstance(m.get("content"), str))
        if limit and len(text) > probe:
            # A huge prompt is refused from the tokens of its beginning, without rendering the
            # whole (tens of seconds and gigabytes for 20 MB): the whole has as many, give or
            # take the few tokens that straddle the cut.
            n = len(policy.format.codec.tokenizer.encode(text[:probe]))
            if n > limit + 8:
                raise ConfigError(_too_long(args, item, f"more than {n - 8}", limit, backend))
        # Only the exact count decides the rest, so the prompt is rendered as the collection
        # will (which also refuses, now, what the chat template cannot render).
        try:
            n = len(policy.prepare(messages).tokens)
        except FocusError as exc:
            raise ConfigError(f"{args.problems}:{item.line}: problem {item.problem.id!r}: cannot render its prompt: {exc}") from None
        if limit and n >= limit:
            raise ConfigError(_too_long(args, item, str(n), limit, backend))


PROBE_CHARS_PER_TOKEN = 16
"""A prompt longer than this many characters per context token is first counted from its
beginning alone (``check_prompt_lengths``)."""


def _too_long(args: argparse.Namespace, item: LoadedProblem, n: str, limit: int, backend: Backend) -> str:
    return (f"{args.problems}:{item.line}: problem {item.problem.id!r}: its prompt is {n} tokens (system prompt "
            f"and chat template included), and the model's context is {limit} tokens ({backend.description}'s "
            "model info): no room to generate; shorten it or leave the problem out")


def print_fleet_warnings(load: Optional[Dict[str, Any]], said: Set[str], stderr: TextIO) -> Set[str]:
    """Print the warnings of the fleet's ``load()`` not printed before (a server that does
    not say which model it serves, a server refused for serving another); returns every
    one said."""
    for warning in (load or {}).get("warnings") or ():
        if warning not in said:
            print(f"focus-go collect: warning: {warning}", file=stderr)
            said = said | {warning}
    return said


def recorded_settings(args: argparse.Namespace, run: Settings) -> Dict[str, Any]:
    """The settings that shape the data, as run.json records them and ``--resume`` compares
    them (``focus_go.cli.resume.RESUMABLE_FLAGS`` lists what may change instead)."""
    sim = not (args.sglang or args.vllm)
    recorded = {
        "backend": "simulator" if sim else ("sglang" if args.sglang else "vllm"),
        "model": f"simulator seed {args.sim_seed}" if sim else (args.model or args.tokenizer),
        "tokenizer": args.tokenizer,
        "served_model": args.served_model,
        "allow_weight_change": bool(getattr(args, "allow_weight_change", False)),
        "search": repr(run.search),
        "stop_alike": bool(getattr(run.search, "stop_alike", False)),
        "segment_tokens": args.segment_tokens,
        "max_segments": args.max_segments,
        "max_total_tokens": args.max_total_tokens,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "system_prompt": args.system_prompt,
        "critic": "http" if args.critic_url else describe_critic(args),
        "reward": asdict(run.reward),
        "estimator": run.estimator.name,
        "min_abs_advantage": args.min_abs_advantage,
        "visitation_weights": args.visitation_weights,
        "strict": args.strict,
        "keys": [args.prompt_key, args.label_key, args.id_key],
        "env": getattr(args, "env", None),
        "profile": getattr(args, "profile", None),
    }
    return json.loads(json.dumps(recorded))


def tree_counts(state: Any) -> Tuple[int, int]:
    """(finished rollouts, successful ones): terminal leaves that did not fail, and those
    that reached the top reward (a correct answer for MathEnv), as the engine counted them
    into the tree's stats."""
    stats = state.stats
    return int(stats["finished_rollouts"]), int(stats["successes"])


async def collect_all(args: argparse.Namespace, run: Settings, problems: List[LoadedProblem], backend: Backend,
                      output: Output, totals: Totals, progress: Progress, retry: Set[int] = frozenset(),
                      env_factory: Optional[Callable[[Any], Any]] = None) -> None:
    """Collect every problem, starting each as the servers' capacity frees up (and at most
    ``args.concurrency`` at once when set), writing each as it completes; a
    problem that fails is listed in failures.jsonl and the others go on. A problem in
    ``retry`` (``--retry-failed``) replaces its earlier tree and records when it completes;
    when it fails, the earlier tree stays. ``env_factory`` (``--env``) builds each problem's
    Env (exact-token segments for a tokens env, the whole-turn chat context otherwise);
    without it each problem is a MathEnv graded on its label."""
    search, critic, reward, estimator = run.search, run.critic, run.reward, run.estimator
    policy = backend.policy
    # Problems start as the servers' capacity frees up (policy.admit: requests in flight,
    # queued and reserved below it), in file order; --concurrency, when given, also caps the
    # problems running at once.
    limit = asyncio.Semaphore(args.concurrency) if getattr(args, "concurrency", None) else None
    width = first_burst(search)
    # The collectors of the trees running now: the progress line shows their engine counters.
    running: List[Collector] = []
    progress.live = lambda: [p for c in running for p in c.progress()]

    @contextlib.asynccontextmanager
    async def held(admission: Any) -> Any:
        try:
            yield
        finally:
            if admission is not None:
                admission.close()
            if limit is not None:
                limit.release()

    async def one(item: LoadedProblem, admission: Any) -> None:
        problem = item.problem
        async with held(admission):
            state = None
            try:
                if env_factory is None:
                    env: Any = MathEnv(problem.label, policy.decode)
                else:
                    env = make_env(env_factory, args.env, problem)
                whole_turn = env.action != "tokens"
                # A whole-turn segment is one assistant turn of up to --segment-tokens tokens.
                agent = Agent(policy=policy, env=env, system_prompt=args.system_prompt or None,
                              context=None if whole_turn else Segments(args.segment_tokens),
                              max_segments=args.max_segments, max_total_tokens=args.max_total_tokens,
                              sampling=SamplingParams(temperature=args.temperature, top_p=args.top_p,
                                                      max_tokens=args.segment_tokens) if whole_turn else None)
                collector = Collector(agent, critic=critic, search=search, reward=reward, estimator=estimator)
                running.append(collector)
                try:
                    async with collector:
                        state = await collector.collect(problem, allow_partial=not args.strict)
                finally:
                    running.remove(collector)
                failures = tuple(state.failures)
                finished, successes = tree_counts(state)
                if finished == 0:
                    raise CollectionError(f"every rollout failed ({len(failures)} failures; first: {failures[0][1] if failures else '-'})")
                records = tree_records(state, reward_config=collector.reward, estimator=collector.estimator,
                                       group_index=item.index, min_abs_advantage=args.min_abs_advantage,
                                       visitation_weights=args.visitation_weights, tokenizer=_native_tokenizer(agent.policy))
                stats = records.stats
                edges = [abs(w) for w in records.sample_weights]
                tree_json = state.to_json()
            except asyncio.CancelledError:
                raise
            except FocusError as exc:
                if state is None:
                    state = getattr(exc, "state", None)
                # Every rollout of a failed problem is counted, and every error kept.
                lost = _failed_problem_rollouts(state, item)
                for failure in lost["failures"]:
                    output.failure(failure)
                output.failure({"kind": "problem", "line": item.line, "problem_id": problem.id,
                                "error": f"{type(exc).__name__}: {exc}"})
                totals.failed_problems += 1
                totals.rollouts += lost["rollouts"]
                totals.failed_rollouts += len(lost["failures"])
                totals.generated_tokens += lost["generated_tokens"]
                progress.problem_done(f"{problem.id}: failed: {str(exc)[:160]}")
                return
            finally:
                if state is not None:
                    state.close()
        actor, critic_records = records.actor, records.critic
        rollout_failures = [{"kind": "rollout", "line": item.line, "problem_id": problem.id, "node_id": node_id, "error": message}
                            for node_id, message in failures]
        # An inexact edge (no exact ids or logprobs: a server that returns null logprobs)
        # trains no actor: each is named in failures.jsonl and makes the tree degraded.
        inexact = [{"kind": "inexact", "line": item.line, "problem_id": problem.id, "node_id": node_id, "error": message}
                   for node_id, message in records.failures if message.startswith(INEXACT_PREFIX)]
        rollout_failures += inexact
        if item.index in retry:
            output.replace(item.index, item.line, str(problem.id), tree_json, actor, critic_records, rollout_failures)
            totals.retried += 1
        else:
            output.problem(item.index, str(problem.id), tree_json, actor, critic_records, rollout_failures)
        totals.degraded_trees += bool(failures or inexact)
        totals.inexact_edges += len(inexact)
        totals.completed += 1
        totals.rollouts += int(stats.get("rollouts", 0))
        totals.finished_rollouts += finished
        totals.successes += successes
        totals.abs_advantage_sum += sum(edges)
        totals.edges += len(edges)
        totals.generated_tokens += int(stats.get("generated_tokens", 0))
        totals.prefix_tokens_reused += int(stats.get("prefix_tokens_reused", 0))
        totals.failed_rollouts += len(failures)
        totals.budget_unspent += int(stats.get("budget_unspent", 0))
        totals.budget += int(stats.get("rollouts", 0)) + int(stats.get("budget_unspent", 0))
        totals.actor_records += len(actor)
        totals.critic_records += len(critic_records)
        progress.problem_done(f"{problem.id}: {successes}/{finished} correct")

    async def ticker() -> None:
        # Twice a second, or as often as the log lines are due when that is sooner.
        every = min(0.5, progress.interval) if progress.interval > 0 else 0.5
        while True:
            await asyncio.sleep(every)
            progress.refresh()

    tasks: List["asyncio.Task[None]"] = []
    broken: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()

    def watch(task: "asyncio.Task[None]") -> None:
        # A problem that raised past its own handling (a write error) stops the run at once.
        if not task.cancelled() and task.exception() is not None and not broken.done():
            broken.set_exception(task.exception())  # type: ignore[arg-type]

    async def feed() -> None:
        for item in problems:
            if limit is not None:
                await limit.acquire()
            admission = await policy.admit(width) if hasattr(policy, "admit") else None
            task = asyncio.create_task(one(item, admission))
            task.add_done_callback(watch)
            tasks.append(task)
        await asyncio.gather(*tasks)

    tick = asyncio.create_task(ticker())
    feeder = asyncio.create_task(feed())
    try:
        await asyncio.wait([feeder, broken], return_when=asyncio.FIRST_COMPLETED)
        if broken.done():
            broken.result()
        feeder.result()
    finally:
        tick.cancel()
        feeder.cancel()
        for task in tasks:
            task.cancel()
        # Every cancelled collection waits for its Go collection to stop.
        await asyncio.gather(tick, feeder, *tasks, return_exceptions=True)
        if not broken.done():
            broken.cancel()


INEXACT_PREFIX = "inexact edge: "
"""Opens the failure message of an edge that trains no actor (Go's prepare.InexactPrefix)."""


def _failed_problem_rollouts(state: Any, item: LoadedProblem) -> Dict[str, Any]:
    """What a failed problem's tree (None: no tree) spent: its rollouts, tokens, and one
    failures.jsonl entry per failed rollout."""
    if state is None:
        return {"rollouts": 0, "generated_tokens": 0, "failures": []}
    stats = state.stats
    failures = [{"kind": "rollout", "line": item.line, "problem_id": item.problem.id, "node_id": node_id, "error": message}
                for node_id, message in state.failures]
    return {"rollouts": int(stats.get("rollouts", 0)), "generated_tokens": int(stats.get("generated_tokens", 0)),
            "failures": failures}


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
        totals.signal = int(signum)
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
                                     backend: Backend, output: Output, totals: Totals, progress: Progress,
                                     retry: Set[int], env_factory: Optional[Callable[[Any], Any]]) -> None:
    work = asyncio.ensure_future(collect_all(args, run, problems, backend, output, totals, progress, retry, env_factory))
    with cancel_on_signals(work, totals):
        try:
            await work
        except asyncio.CancelledError:
            if not totals.interrupted:
                raise


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[List[int]]:
    """While inside (in the main thread), SIGTERM raises KeyboardInterrupt as Ctrl-C does,
    so a SIGTERM before or after the collection loop (which handles it itself) still runs
    every cleanup; the list yielded gets the signal's number."""
    got: List[int] = []

    def handler(signum: int, frame: Any) -> None:
        got.append(signum)
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield got
        return
    try:
        yield got
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_collect(args: argparse.Namespace, stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None) -> int:
    """The ``collect`` command; returns the exit code."""
    stderr = stderr or sys.stderr
    with _terminate_as_interrupt() as got:
        try:
            return _run_collect(args, stdout or sys.stdout, stderr)
        except KeyboardInterrupt:
            print("focus-go collect: interrupted before the first problem started", file=stderr)
            return 128 + got[0] if got else EXIT_INTERRUPTED


def _run_collect(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    out = Path(args.out)
    try:
        check_backend_args(args)
        env_spec = getattr(args, "env", None)
        problems = read_problems(Path(args.problems), prompt_key=args.prompt_key, label_key=args.label_key,
                                 id_key=args.id_key, limit=args.limit, label_required=not env_spec)
        run = check_flags(args)  # bad search, sampling or reward settings fail before anything starts
        env_factory = profile = None
        if env_spec:
            # The factory is tried on the first problem now: a broken one fails before anything starts.
            env_factory = load_env_factory(env_spec)
            first = make_env(env_factory, env_spec, problems[0].problem)
            profile = "token_chunk" if first.action == "tokens" else args.profile
        elif args.profile:
            raise ConfigError("--profile chooses the parser of an --env tool or text environment; the default MathEnv "
                              "collects exact-token segments")
        retry_failed = getattr(args, "retry_failed", False)
        resume = args.resume or retry_failed
        if resume and args.overwrite:
            raise ConfigError(f"{'--retry-failed' if retry_failed else '--resume'} keeps an earlier run and "
                              "--overwrite replaces it: pass one")
        lock = OutLock.acquire(out)  # one writer per directory, held to the end
    except FocusError as exc:
        print(f"focus-go collect: {exc}", file=stderr)
        return EXIT_USAGE
    try:
        return _run_locked(args, problems, run, resume, retry_failed, out, stdout, stderr, env_factory,
                           profile if env_factory else "token_chunk")
    finally:
        lock.release(discard=True)


def _run_locked(args: argparse.Namespace, problems: List[LoadedProblem], run: Settings, resume: bool, retry_failed: bool,
                out: Path, stdout: TextIO, stderr: TextIO, env_factory: Optional[Callable[[Any], Any]],
                profile: Optional[str]) -> int:
    recorded = recorded_settings(args, run)
    try:
        existing = check_out_dir(out, args.overwrite, resume)
        flag = "--retry-failed" if retry_failed else "--resume"
        done = completed_indices(out, problems, flag) if resume else []
        digests = [problem_digest(p.problem) for p in problems]
        if resume and existing and not args.overwrite:
            digests = check_same_run(out, recorded, digests, problems, done, flag)
    except ConfigError as exc:
        print(f"focus-go collect: {exc}", file=stderr)
        return EXIT_USAGE
    failed_lines = degraded_lines(out) if resume else set()
    degraded = {p.index for p in problems if p.index in set(done) and p.line in failed_lines}
    if retry_failed:  # the trees themselves say so too, with or without failures.jsonl
        degraded |= degraded_trees(out, problems, done)
    # The summaries of the earlier runs in this directory are kept in run.json beside this one's.
    earlier = read_run_json(out) if resume and existing else {}
    earlier_runs = [*(earlier.get("earlier_runs") or []), *([earlier["summary"]] if earlier.get("summary") else [])]
    retry = degraded if retry_failed else set()
    try:
        backend = open_backend(args, profile)
    except FocusError as exc:
        print(f"focus-go collect: cannot open the backend: {exc}", file=stderr)
        return EXIT_FAILED
    try:
        # Every server is checked before the first problem (--wait-for-server: while they load).
        try:
            wait_until_ready(backend.policy.startup_check, backend.description, args.wait_for_server, stderr)
        except FocusError as exc:
            print(f"focus-go collect: {backend.description} is not ready: {exc}", file=stderr)
            return EXIT_FAILED
        warned = print_fleet_warnings(backend.policy.load() if hasattr(backend.policy, "load") else None, set(), stderr)
        if args.critic_url:
            try:
                wait_until_ready(lambda: check_critic(args.critic_url, args.timeout), f"the critic at {args.critic_url}",
                                 args.wait_for_server, stderr)
            except FocusError as exc:
                print(f"focus-go collect: the critic at {args.critic_url} is not ready: {exc}", file=stderr)
                return EXIT_FAILED
        try:
            check_prompt_lengths(args, backend, [p for p in problems if p.index not in set(done) or p.index in retry])
        except ConfigError as exc:
            print(f"focus-go collect: {exc}", file=stderr)
            return EXIT_USAGE
        if existing and args.overwrite:
            clear_out_dir(out)
        elif existing:
            trim_for_resume(out, problems, done)
        totals = Totals(problems=len(problems), resumed=len(done) - len(retry),
                        degraded_before=len(degraded) - len(retry))
        todo = [p for p in problems if p.index not in set(done) or p.index in retry]
        progress = Progress(len(todo), stderr, totals, interval=args.progress_interval)
        head = {
            "problems_file": str(args.problems),
            "backend": {"kind": backend.name, "url": backend.url, "model": backend.policy.model},
            "search": repr(run.search),
        "stop_alike": bool(getattr(run.search, "stop_alike", False)),
            "segment_tokens": args.segment_tokens,
            "critic": describe_critic(args),
            "reward": asdict(run.reward),
            "estimator": run.estimator.name,
            "settings": recorded,
            "problems": digests,
        }
        if earlier_runs:
            head["earlier_runs"] = earlier_runs
        # Recorded before the first tree, so that --resume can check any run that left one.
        write_atomic(out / "run.json", json.dumps({**head, "summary": None}, indent=2) + "\n")
        output = Output(out)
        # A tool or text env (parsed by a chat profile) branches between whole assistant turns.
        context = (f"Segments({args.segment_tokens})" if profile == "token_chunk"
                   else f"whole turns of up to {args.segment_tokens} tokens")
        print(f"focus-go collect: {len(todo)} problems from {args.problems}"
              + (f" ({len(done) - len(retry)} collected before)" if done else "")
              + (f" ({len(retry)} degraded trees collected again)" if retry else "") + f" on {backend.description}; "
              f"{run.search}, {context}, critic {describe_critic(args)}; writing {out}/", file=stderr)
        t0 = time.perf_counter()
        write_error: Optional[OSError] = None
        try:
            try:
                asyncio.run(_collect_until_interrupted(args, run, todo, backend, output, totals, progress, retry, env_factory))
            except KeyboardInterrupt:
                totals.interrupted = True
                totals.signal = totals.signal or int(signal.SIGINT)
            except OSError as exc:  # the output directory: a full disk, a lost mount
                write_error = exc
        finally:
            totals.elapsed = time.perf_counter() - t0
            progress.finish()
            output.close()
            try:
                load = backend.policy.load() if hasattr(backend.policy, "load") else None
                print_fleet_warnings(load, warned, stderr)
                write_atomic(out / "run.json", json.dumps({**head, "summary": totals.as_json(), "fleet": load}, indent=2) + "\n")
            except OSError as exc:
                write_error = write_error or exc
    finally:
        backend.close()
    if write_error is not None:
        print(f"focus-go collect: cannot write to {out}: {write_error.strerror or write_error}; the problems written "
              "before are whole (--resume continues once there is room)", file=stderr)
        return EXIT_FAILED
    print(("Interrupted: kept the completed problems.\n" if totals.interrupted else "") + totals.table(), file=stdout)
    print(f"\nactor records   {out / 'actor.jsonl'}\ncritic records  {out / 'critic.jsonl'}\n"
          f"trees           {out / 'trees'}/  (focus-go view {out} renders them)\nrun summary     {out / 'run.json'}"
          + (f"\nfailures        {out / 'failures.jsonl'}" if (out / "failures.jsonl").exists() else ""), file=stdout)
    if totals.interrupted:
        return 128 + totals.signal if totals.signal else EXIT_INTERRUPTED
    if totals.failed_problems:
        return EXIT_FAILED
    if totals.degraded and not getattr(args, "allow_degraded", False):
        print(f"focus-go collect: degraded run: {totals.failed_rollouts} failed rollouts, {totals.inexact_edges} "
              f"inexact edges (no actor records) in {totals.degraded_trees} trees, listed in {out / 'failures.jsonl'}; "
              f"exit status {EXIT_DEGRADED} (--allow-degraded accepts such a run; --retry-failed collects those trees again)",
              file=stderr)
        return EXIT_DEGRADED
    return EXIT_OK
