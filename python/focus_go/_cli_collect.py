"""``focus-go collect``: searched trees for the problems of a JSONL file, from your own
SGLang or vLLM server (or the embedded simulator), written as training records.

The problems file is read and checked whole before anything starts: a line that is not a
JSON object, or lacks the prompt or label key, stops the command with the line number and
nothing written. Each problem is one ``MathEnv`` collection (its label graded against the
last ``\\boxed{...}`` of the answer) under ``Segments(n)`` and the chosen search; as each
tree completes, its actor and critic records are appended to ``actor.jsonl`` /
``critic.jsonl`` (one write per file per problem, flushed and synced), and the tree itself
is written whole to ``trees/`` after them (a tree file marks its problem complete). Ctrl-C
cancels the collections in flight (the Go engine stops them), keeps every completed
problem, prints the summary and exits 130; ``--resume`` then collects only the problems
without a tree, after dropping any record of an unfinished one.

Output directory::

    actor.jsonl     actor records of every completed problem (group_index = line order)
    critic.jsonl    critic records
    trees/          one tree per completed problem (``focus-go view`` renders it)
    failures.jsonl  problems that produced no tree, and failed rollouts (only if any)
    run.json        the settings and the summary
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, TextIO, Tuple

from .errors import ConfigError, FocusError

# Qwen's math prompt: the answer must end in \boxed{...} for MathEnv to grade it.
DEFAULT_SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

_RECORD_FILES = ("actor.jsonl", "critic.jsonl", "failures.jsonl", "run.json")


class ProblemsFileError(ConfigError):
    """A problems file that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class LoadedProblem:
    """A problem read from the file, with its 1-based line number and 0-based index (the
    records' ``group_index``)."""

    index: int
    line: int
    problem: Any


def read_problems(
    path: Path, *, prompt_key: str = "prompt", label_key: str = "label", id_key: str = "id", limit: Optional[int] = None
) -> List[LoadedProblem]:
    """Every problem of a JSONL file, checked whole before any is used.

    Blank lines are skipped. Each other line must be a JSON object with a ``prompt_key``
    (a string, or a list of chat messages) and a ``label_key`` (the reference answer: a
    string or a number); ``id_key`` is optional (default ``line-N``) and must be unique.
    Other keys become the problem's metadata. Raises ProblemsFileError naming the line."""
    from .integrations import Problem

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProblemsFileError(f"{path}: no such problems file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemsFileError(f"{path}: cannot read it: {exc}") from None
    out: List[LoadedProblem] = []
    seen: Dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            item = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ProblemsFileError(f"{where}: bad JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(item, dict):
            raise ProblemsFileError(f"{where}: expected a JSON object, got {type(item).__name__}")
        if prompt_key not in item:
            raise ProblemsFileError(f"{where}: missing prompt key {prompt_key!r} (keys: {', '.join(sorted(item)) or 'none'}; see --prompt-key)")
        prompt = item[prompt_key]
        if not (isinstance(prompt, str) and prompt.strip()) and not _is_messages(prompt):
            raise ProblemsFileError(f"{where}: {prompt_key!r} must be a non-empty string or a list of chat messages, got {prompt!r:.60}")
        if label_key not in item:
            raise ProblemsFileError(f"{where}: missing label key {label_key!r} (keys: {', '.join(sorted(item)) or 'none'}; see --label-key)")
        label = item[label_key]
        if isinstance(label, bool) or not isinstance(label, (str, int, float)) or str(label).strip() == "":
            raise ProblemsFileError(f"{where}: {label_key!r} must be a non-empty string or a number, got {label!r:.60}")
        pid = item.get(id_key, f"line-{lineno}")
        if pid is None or isinstance(pid, (dict, list, bool)):
            raise ProblemsFileError(f"{where}: {id_key!r} must be a string or a number, got {pid!r:.60}")
        pid = str(pid)
        if pid in seen:
            raise ProblemsFileError(f"{where}: id {pid!r} repeats line {seen[pid]}")
        seen[pid] = lineno
        metadata = {k: v for k, v in item.items() if k not in (prompt_key, label_key, id_key)}
        out.append(LoadedProblem(len(out), lineno, Problem(prompt=prompt, label=str(label), id=pid, metadata=metadata)))
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise ProblemsFileError(f"{path}: no problems (the file is empty)")
    return out


def _is_messages(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m for m in value)
    )


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
    actor_records: int = 0
    critic_records: int = 0
    resumed: int = 0
    elapsed: float = 0.0
    interrupted: bool = False

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
            ("failures", f"{self.failed_rollouts} rollouts, {self.failed_problems} problems"),
            ("records", f"{self.actor_records} actor, {self.critic_records} critic"),
            ("time", f"{self.elapsed:.1f} s  ({self.completed / secs:.2f} trees/s, {self.generated_tokens / secs:.0f} tokens/s)"),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


class Progress:
    """One status line on stderr: a bar, trees/s and tokens/s. On a terminal it is redrawn
    in place (``\\r``); otherwise a line is printed per finished problem."""

    def __init__(self, total: int, stream: TextIO, totals: Totals) -> None:
        self.total = total
        self.stream = stream
        self.totals = totals
        self.tty = stream.isatty()
        self.start = time.perf_counter()
        self.last_line = ""

    def line(self) -> str:
        t = self.totals
        done = t.completed + t.failed_problems
        secs = max(time.perf_counter() - self.start, 1e-9)
        width = 24
        filled = width * done // max(self.total, 1)
        bar = "#" * filled + "." * (width - filled)
        fail = f" {t.failed_problems} failed" if t.failed_problems else ""
        return (f"[{bar}] {done}/{self.total} trees  {t.completed / secs:.2f} trees/s  "
                f"{t.generated_tokens / secs:.0f} tokens/s  {secs:.0f}s{fail}")

    def refresh(self) -> None:
        if self.tty:
            text = self.line()
            self.stream.write("\r" + text + " " * max(0, len(self.last_line) - len(text)))
            self.stream.flush()
            self.last_line = text

    def problem_done(self, label: str) -> None:
        if self.tty:
            self.refresh()
        else:
            self.stream.write(f"{self.line()}  ({label})\n")
            self.stream.flush()

    def finish(self) -> None:
        if self.tty and self.last_line:
            self.refresh()
            self.stream.write("\n")
            self.stream.flush()


def _safe_stem(text: str) -> str:
    from .integrations import _safe_stem as stem

    return stem(text, 48)


def tree_name(index: int, pid: str) -> str:
    """The file name of problem ``index``'s tree in ``trees/``."""
    return f"{index:05d}-{_safe_stem(pid)}.json"


def _write_atomic(path: Path, text: str) -> None:
    from .integrations import _write_atomic as write

    write(path, text)


class Output:
    """The output directory: append-per-problem JSONL files and whole tree files. Writes
    happen on the event loop between awaits, so a cancellation never lands mid-write."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.trees = directory / "trees"
        self.trees.mkdir(parents=True, exist_ok=True)
        self.actor = (directory / "actor.jsonl").open("a", encoding="utf-8")
        self.critic = (directory / "critic.jsonl").open("a", encoding="utf-8")
        self.failures: Optional[TextIO] = None

    def problem(self, index: int, pid: str, tree_json: str, actor: Sequence[Dict[str, Any]], critic: Sequence[Dict[str, Any]]) -> Path:
        for f, records in ((self.actor, actor), (self.critic, critic)):
            if records:
                f.write("".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in records))
                f.flush()
                os.fsync(f.fileno())
        # Written last and whole: a tree file marks its problem complete (what --resume reads).
        tree_path = self.trees / tree_name(index, pid)
        _write_atomic(tree_path, tree_json)
        return tree_path

    def failure(self, record: Dict[str, Any]) -> None:
        if self.failures is None:
            self.failures = (self.directory / "failures.jsonl").open("a", encoding="utf-8")
        self.failures.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.failures.flush()

    def close(self) -> None:
        for f in (self.actor, self.critic, self.failures):
            if f is not None:
                f.close()


@dataclass
class Backend:
    """The policy and, for the simulator, the server behind it."""

    name: str
    url: str
    policy: Any
    server: Any = None
    tokenizer: Any = None
    description: str = ""

    def close(self) -> None:
        self.policy.close()
        if self.tokenizer is not None:
            self.tokenizer.close()
        if self.server is not None:
            self.server.close()


OPENAI_REFUSAL = (
    "--openai: an OpenAI-compatible chat endpoint cannot collect FOCUS trees. A tree branches by "
    "continuing the exact token ids of a checkpoint, and Chat Completions / Responses take "
    "messages and return text, not token ids (their token counts are estimates), so neither "
    "Segments(n) nor whole-turn branching can be replayed exactly, and the records would have "
    "no behaviour log probabilities to train on. Point --sglang at the server's native "
    "/generate or --vllm at its /v1 (vLLM's /v1/completions with token prompts), which both "
    "return exact tokens."
)


def _check_backend_args(args: argparse.Namespace) -> None:
    if args.openai:
        raise ConfigError(OPENAI_REFUSAL)
    if args.sglang or args.vllm:
        if not (args.model or args.tokenizer):
            flag = "--sglang" if args.sglang else "--vllm"
            raise ConfigError(f"{flag} needs --model (a local model directory or a model in the Hugging Face cache) "
                              "or --tokenizer DIR (a local tokenizer directory)")
    elif args.model or args.tokenizer or args.served_model:
        raise ConfigError("--model / --tokenizer / --served-model need --sglang URL or --vllm URL; the embedded "
                          "simulator serves its own model")


def open_backend(args: argparse.Namespace) -> Backend:
    """The policy the command collects with (and the simulated server when no URL is given)."""
    from .backends import SamplingParams, SGLangPolicy, VLLMPolicy
    from .generation.format import HFTokenizer, PolicyFormat
    from .sim import SimServer

    params = SamplingParams(temperature=args.temperature, top_p=args.top_p)
    if not (args.sglang or args.vllm):
        latency = {"per_token": args.sim_latency} if args.sim_latency else None
        # verbosity=3: worked solutions of ~750-1100 tokens, so Segments(256) makes deep trees.
        server = SimServer(seed=args.sim_seed, verbosity=3, latency=latency)
        try:
            policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk", default_params=params)
        except BaseException:
            server.close()
            raise
        return Backend("simulator", server.url, policy, server=server, description="the embedded simulated server")
    model = args.model or args.tokenizer
    tokenizer = HFTokenizer(args.tokenizer) if args.tokenizer else None
    try:
        fmt = PolicyFormat.resolve(model, tokenizer=tokenizer, profile="token_chunk") if tokenizer else None
        if args.sglang:
            policy: Any = SGLangPolicy(model=model, base_url=args.sglang, format=fmt, profile="token_chunk",
                                       default_params=params, api_key=args.api_key, timeout=args.timeout)
            return Backend("sglang", args.sglang, policy, tokenizer=tokenizer, description=f"SGLang at {args.sglang}")
        api_key = args.api_key or os.environ.get("VLLM_API_KEY") or "EMPTY"
        policy = VLLMPolicy(model=model, base_url=args.vllm, format=fmt, profile="token_chunk", served_model=args.served_model,
                            api_key=api_key, default_params=params, timeout=args.timeout)
        return Backend("vllm", args.vllm, policy, tokenizer=tokenizer, description=f"vLLM at {args.vllm}")
    except BaseException:
        if tokenizer is not None:
            tokenizer.close()
        raise


def _settings(args: argparse.Namespace) -> Tuple[Any, Any, Any, Any]:
    """The search, critic, reward config and estimator the flags describe."""
    from . import Critic, Independent, Selective
    from .preparation import DirectBranchTd, GroupBaseline, RewardConfig

    if args.search == "independent":
        search: Any = Independent(args.budget, seed=args.seed)
    else:
        search = Selective(args.budget, args.warmup if args.warmup is not None else max(1, args.budget // 2),
                           per_pass=args.per_pass, max_children=args.max_children, score=args.score, seed=args.seed)
    if args.no_critic:
        critic = None
    elif args.critic_url:
        critic = Critic.http(args.critic_url)
    else:
        critic = Critic.constant(args.critic_value)
    reward = RewardConfig(gamma=args.gamma, critic_weight=args.critic_weight, reward_min=args.reward_min,
                          reward_max=args.reward_max, truncated_reward=args.truncated_reward, truncation=args.truncation)
    estimator = GroupBaseline() if args.estimator == "group-baseline" else DirectBranchTd()
    return search, critic, reward, estimator


def _tree_counts(state: Any, reward_max: float) -> Tuple[int, int]:
    """(finished rollouts, successful ones): terminal leaves that did not fail, and those
    that reached the top reward (a correct answer for MathEnv)."""
    from .tree import SchedulerView

    finished = successes = 0
    for node in SchedulerView(state).nodes:
        if (node.done or node.truncated) and not node.failed:
            finished += 1
            if node.done and node.reward >= reward_max - 1e-9:
                successes += 1
    return finished, successes


async def _collect_all(args: argparse.Namespace, problems: List[LoadedProblem], backend: Backend, output: Output,
                       totals: Totals, progress: Progress) -> None:
    from . import Agent, Collector, MathEnv, Segments
    from .errors import CollectionError

    search, critic, reward, estimator = _settings(args)
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
                finished, successes = _tree_counts(state, reward.reward_max)
                if finished == 0:
                    raise CollectionError(f"every rollout failed ({len(failures)} failures; first: {failures[0][1] if failures else '-'})")
                batch = collector.prepare(state)
                try:
                    records = batch.to_records(item.index, min_abs_advantage=args.min_abs_advantage)
                    stats = dict(batch.stats)
                    edges = [abs(float(a.weight)) for a in batch.actor]
                finally:
                    if batch._go is not None:
                        batch._go.close()
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
        actor = [r for r in records if r["lane"] == "actor"]
        critic_records = [r for r in records if r["lane"] == "critic"]
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


async def _main(args: argparse.Namespace, problems: List[LoadedProblem], backend: Backend, output: Output,
                totals: Totals, progress: Progress) -> None:
    loop = asyncio.get_running_loop()
    work = asyncio.ensure_future(_collect_all(args, problems, backend, output, totals, progress))

    def interrupt() -> None:
        totals.interrupted = True
        # A second Ctrl-C falls back to Python's KeyboardInterrupt.
        loop.remove_signal_handler(signal.SIGINT)
        work.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):
        installed = False  # not the main thread, or no signal support: KeyboardInterrupt still ends the run
    try:
        await work
    except asyncio.CancelledError:
        if not totals.interrupted:
            raise
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)


def _check_out_dir(out: Path, overwrite: bool, resume: bool) -> List[str]:
    """What an earlier run left in ``out`` (refused unless ``overwrite`` or ``resume``);
    creates nothing."""
    existing = [name for name in _RECORD_FILES if (out / name).exists()]
    trees = out / "trees"
    if trees.is_dir() and any(trees.glob("*.json")):
        existing.append("trees/")
    if existing and not (overwrite or resume):
        raise ConfigError(f"--out {out}: already holds {', '.join(existing)} from an earlier run; "
                          "choose another directory, pass --resume to collect only the problems it lacks, "
                          "or --overwrite to start again")
    return existing


def completed_indices(out: Path, problems: Sequence[LoadedProblem]) -> List[int]:
    """The problems an earlier run in ``out`` completed (their tree files exist). A tree
    file that names another problem than this file's at its index is refused: the run was
    for a different problems file."""
    trees = out / "trees"
    if not trees.is_dir():
        return []
    names = {tree_name(p.index, str(p.problem.id)): p.index for p in problems}
    done: List[int] = []
    for f in sorted(trees.glob("*.json")):
        if f.name in names:
            done.append(names[f.name])
        elif f.name[:5].isdigit() and f.name[5:6] == "-":
            raise ConfigError(f"--resume: {f} is not a tree of this problems file (problem {int(f.name[:5])} "
                              "has another id, or the file has fewer problems); use another --out or --overwrite")
    return done


def _keep_lines(path: Path, keep: Any) -> None:
    """Rewrite a JSONL file with only the lines that parse and that ``keep`` accepts (drops
    what an interrupted write or an unfinished problem left)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and keep(record):
            kept.append(line + "\n")
    _write_atomic(path, "".join(kept))


def _trim_for_resume(out: Path, problems: Sequence[LoadedProblem], done: Sequence[int]) -> None:
    """Keep only the records and failures of completed problems."""
    done_set = set(done)
    done_lines = {p.line for p in problems if p.index in done_set}
    for name in ("actor.jsonl", "critic.jsonl"):
        _keep_lines(out / name, lambda r: r.get("group_index") in done_set)
    _keep_lines(out / "failures.jsonl", lambda r: r.get("kind") == "rollout" and r.get("line") in done_lines)
    failures = out / "failures.jsonl"
    if failures.exists() and failures.stat().st_size == 0:
        failures.unlink()


def _clear_out_dir(out: Path) -> None:
    """Remove what an earlier run wrote (only the files this command writes)."""
    for name in _RECORD_FILES:
        with contextlib.suppress(FileNotFoundError):
            (out / name).unlink()
    for f in (out / "trees").glob("*.json"):
        f.unlink()


def run_collect(args: argparse.Namespace, stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None) -> int:
    """The ``collect`` command; returns the exit code."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        _check_backend_args(args)
        problems = read_problems(Path(args.problems), prompt_key=args.prompt_key, label_key=args.label_key,
                                 id_key=args.id_key, limit=args.limit)
        _settings(args)  # bad search or reward settings fail before anything starts
        out = Path(args.out)
        if args.resume and args.overwrite:
            raise ConfigError("--resume keeps an earlier run and --overwrite replaces it: pass one")
        existing = _check_out_dir(out, args.overwrite, args.resume)
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
            _clear_out_dir(out)
        elif existing:
            _trim_for_resume(out, problems, done)
        totals = Totals(problems=len(problems), resumed=len(done))
        todo = [p for p in problems if p.index not in set(done)]
        progress = Progress(len(todo), stderr, totals)
        output = Output(out)
        search, critic, reward, estimator = _settings(args)
        print(f"focus-go collect: {len(todo)} problems from {args.problems}"
              + (f" ({len(done)} collected before)" if done else "") + f" on {backend.description}; "
              f"{search}, Segments({args.segment_tokens}), critic {_describe_critic(args)}; writing {out}/", file=stderr)
        t0 = time.perf_counter()
        try:
            try:
                asyncio.run(_main(args, todo, backend, output, totals, progress))
            except KeyboardInterrupt:
                totals.interrupted = True
        finally:
            totals.elapsed = time.perf_counter() - t0
            progress.finish()
            output.close()
            run = {
                "problems_file": str(args.problems),
                "backend": {"kind": backend.name, "url": backend.url, "model": backend.policy.model},
                "search": repr(search),
                "segment_tokens": args.segment_tokens,
                "critic": _describe_critic(args),
                "reward": asdict(reward),
                "estimator": estimator.name,
                "summary": totals.as_json(),
            }
            _write_atomic(out / "run.json", json.dumps(run, indent=2) + "\n")
    finally:
        backend.close()
    print(("Interrupted: kept the completed problems.\n" if totals.interrupted else "") + totals.table(), file=stdout)
    print(f"\nactor records   {out / 'actor.jsonl'}\ncritic records  {out / 'critic.jsonl'}\n"
          f"trees           {out / 'trees'}/  (focus-go view {out} renders them)\nrun summary     {out / 'run.json'}"
          + (f"\nfailures        {out / 'failures.jsonl'}" if (out / "failures.jsonl").exists() else ""), file=stdout)
    if totals.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if totals.failed_problems else EXIT_OK


def _describe_critic(args: argparse.Namespace) -> str:
    if args.no_critic:
        return "none"
    if args.critic_url:
        return f"http {args.critic_url}"
    return f"constant {args.critic_value}"


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return n


def _finite(value: str) -> float:
    x = float(value)
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {value}")
    return x


def add_parser(commands: Any) -> None:
    """Register ``collect`` on the ``focus-go`` subcommand parser."""
    p = commands.add_parser(
        "collect",
        help="collect trees for the problems of a JSONL file on your SGLang / vLLM server (or the simulator)",
        description=__doc__.split("\n\n")[0].replace("``", "'"),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("problems", help="JSONL file, one problem per line (keys: --prompt-key, --label-key, --id-key)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--overwrite", action="store_true", help="replace the records of an earlier run in --out")
    p.add_argument("--resume", action="store_true",
                   help="continue an earlier (interrupted) run in --out: collect only the problems without a tree")
    g = p.add_argument_group("problems file")
    g.add_argument("--prompt-key", default="prompt", help="key of the prompt (a string or a list of chat messages)")
    g.add_argument("--label-key", default="label", help="key of the reference answer (graded against the last \\boxed{})")
    g.add_argument("--id-key", default="id", help="key of the problem id (optional; default line-N)")
    g.add_argument("--limit", type=_positive, help="collect only the first N problems")
    b = p.add_argument_group("backend (default: the embedded simulated server)")
    which = b.add_mutually_exclusive_group()
    which.add_argument("--sglang", metavar="URL", help="SGLang server or router, e.g. http://localhost:30000")
    which.add_argument("--vllm", metavar="URL", help="vLLM OpenAI server base URL, e.g. http://localhost:8000/v1")
    which.add_argument("--openai", metavar="URL", help="refused: chat APIs return no token ids (see the message)")
    which.add_argument("--sim", action="store_true", help="the embedded simulated server (the default)")
    b.add_argument("--model", help="model: a local directory or a model in the Hugging Face cache (its tokenizer and chat template)")
    b.add_argument("--tokenizer", metavar="DIR", help="a local tokenizer directory (tokenizer.json, tokenizer_config.json) to use instead of --model's")
    b.add_argument("--served-model", help="vLLM: the served model name, if not --model")
    b.add_argument("--api-key", help="bearer token (vLLM default: $VLLM_API_KEY or EMPTY)")
    b.add_argument("--timeout", type=_finite, help="request deadline in seconds, retries included")
    b.add_argument("--sim-seed", type=int, default=0, help="simulator seed")
    b.add_argument("--sim-latency", type=_finite, default=0.0, metavar="SECONDS", help="simulator latency per generated token")
    s = p.add_argument_group("search and sampling")
    s.add_argument("--search", choices=("selective", "independent"), default="selective")
    s.add_argument("--budget", type=_positive, default=32, help="rollouts per tree")
    s.add_argument("--warmup", type=_positive, default=None, help="Selective: independent rollouts before branching (default: half the budget)")
    s.add_argument("--per-pass", type=_positive, default=4, help="Selective: branches per round")
    s.add_argument("--max-children", type=_positive, default=4, help="Selective: direct children per checkpoint")
    s.add_argument("--score", choices=("value_refinement", "posterior_variance", "uniform"), default="value_refinement")
    s.add_argument("--seed", type=int, default=0, help="search seed")
    s.add_argument("--segment-tokens", type=_positive, default=256, help="Segments(n): tokens per segment")
    s.add_argument("--max-segments", type=_positive, default=64)
    s.add_argument("--max-total-tokens", type=_positive, default=8192, help="generated tokens per rollout")
    s.add_argument("--temperature", type=_finite, default=1.0)
    s.add_argument("--top-p", type=_finite, default=None)
    s.add_argument("--system-prompt", default=DEFAULT_SYSTEM_PROMPT, help="system message ('' for none)")
    s.add_argument("--concurrency", type=_positive, default=4, help="problems collected at once")
    s.add_argument("--strict", action="store_true", help="a problem with any failed rollout fails (default: keep the tree, list the failures)")
    c = p.add_argument_group("critic and rewards")
    which_critic = c.add_mutually_exclusive_group()
    which_critic.add_argument("--critic-value", type=_finite, default=0.5, help="constant critic prediction")
    which_critic.add_argument("--critic-url", help="value server: POST {contexts} -> {values}")
    which_critic.add_argument("--no-critic", action="store_true", help="no critic predictions")
    c.add_argument("--gamma", type=_finite, default=1.0)
    c.add_argument("--critic-weight", type=_finite, default=1.0, help="kappa, the critic prior's strength")
    c.add_argument("--reward-min", type=_finite, default=0.0)
    c.add_argument("--reward-max", type=_finite, default=1.0)
    c.add_argument("--truncated-reward", type=_finite, default=0.0)
    c.add_argument("--truncation", choices=("terminal", "bootstrap"), default="terminal")
    c.add_argument("--estimator", choices=("direct-branch-td", "group-baseline"), default="direct-branch-td")
    c.add_argument("--min-abs-advantage", type=_finite, default=None, help="drop actor records with smaller |advantage|")
    p.set_defaults(run=run_collect)
