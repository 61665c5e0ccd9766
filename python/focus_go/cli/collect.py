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
problem, prints the summary and exits 130; SIGTERM (``timeout``, Slurm, ``docker stop``) does
the same and exits 143. ``--resume`` then collects only the problems without a tree, after
dropping any record of an unfinished one.

Output directory::

    actor.jsonl     actor records of every completed problem (group_index = line order)
    critic.jsonl    critic records
    trees/          one tree per completed problem (``focus-go view`` renders it)
    failures.jsonl  problems that produced no tree, and failed rollouts (only if any)
    run.json        the settings that shape the data, a digest of each problem, the summary
    .focus-go.lock  the lock of the one run writing there (its pid)

One run writes to a directory at a time (a second exits 2 naming the first's pid).
``--resume`` refuses settings or problems that differ from the earlier run's in what
shapes the data; ``--retry-failed`` also collects degraded trees (with failed rollouts)
again. Every server is checked before the first problem (``--wait-for-server`` while it
loads), each request has a deadline (``--timeout``), and every prompt is rendered and
measured against the model's context first. ``--env MODULE:FACTORY`` collects a user's
Env (a ToolEnv, or any Env) per problem instead of MathEnv.

This module declares the command's flags (``add_parser``); ``focus_go.cli`` lists the
modules that do the work.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from .. import _rules
from ..generation.format import PROFILES
from .run import run_collect
from .settings import ESTIMATORS

# Qwen's math prompt: the answer must end in \boxed{...} for MathEnv to grade it.
DEFAULT_SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."


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


DEFAULT_TIMEOUT = 600.0
"""Seconds a request to the policy or critic server may take, retries included (``--timeout``)."""


def _positive_seconds(value: str) -> float:
    x = _finite(value)
    if x <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {value}")
    return x


def _nonnegative_seconds(value: str) -> float:
    x = _finite(value)
    if x < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {value}")
    return x


def add_parser(commands: Any) -> None:
    """Register ``collect`` on the ``focus-go`` subcommand parser. The search, agent and
    reward flags default to the library's own defaults (``_rules.defaults()``, Go's)."""
    lib = _rules.defaults()
    sel, agent, reward, records = lib["selective"], lib["agent"], lib["reward"], lib["records"]
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
                   help="continue an earlier (interrupted) run in --out: collect only the problems without a tree "
                        "(refused if a setting that shapes the data, or a collected problem, changed)")
    p.add_argument("--retry-failed", action="store_true",
                   help="like --resume, and also collect again the problems whose tree has failed rollouts, "
                        "replacing their records")
    g = p.add_argument_group("problems file")
    g.add_argument("--prompt-key", default="prompt", help="key of the prompt (a string or a list of chat messages)")
    g.add_argument("--label-key", default="label", help="key of the reference answer (graded against the last \\boxed{})")
    g.add_argument("--id-key", default="id", help="key of the problem id (optional; default line-N)")
    g.add_argument("--limit", type=_positive, help="collect only the first N problems")
    b = p.add_argument_group("backend (default: the embedded simulated server)")
    which = b.add_mutually_exclusive_group()
    which.add_argument("--sglang", metavar="URL", action="append",
                       help="SGLang server or router, e.g. http://localhost:30000; repeat for several replicas of the model")
    which.add_argument("--vllm", metavar="URL", action="append",
                       help="vLLM OpenAI server base URL, e.g. http://localhost:8000/v1; repeat for several replicas")
    which.add_argument("--openai", metavar="URL", help="refused: chat APIs return no token ids (see the message)")
    which.add_argument("--sim", action="store_true", help="the embedded simulated server (the default)")
    b.add_argument("--model", help="model: a local directory or a model in the Hugging Face cache (its tokenizer and chat template)")
    b.add_argument("--tokenizer", metavar="DIR", help="a local tokenizer directory (tokenizer.json, tokenizer_config.json) to use instead of --model's")
    b.add_argument("--served-model", help="vLLM: the served model name, if not --model")
    b.add_argument("--api-key", help="bearer token (vLLM default: $VLLM_API_KEY or EMPTY)")
    b.add_argument("--timeout", type=_positive_seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help="deadline of each request to the policy or critic server, retries included; a request "
                        "still unanswered then fails its rollout (a server that stalls cannot hang the run)")
    b.add_argument("--wait-for-server", type=_nonnegative_seconds, default=0.0, metavar="SECONDS",
                   help="keep checking servers that are not ready yet (still loading: 503 on /health, or not "
                        "listening) for up to SECONDS before giving up; 0: check once")
    b.add_argument("--capacity", type=_positive, default=None, metavar="N",
                   help="requests one server batches at once, for a server that does not report it (vLLM, a "
                        "router; SGLang reports max_running_requests) [256]")
    b.add_argument("--max-in-flight", type=_positive, default=None, metavar="N",
                   help="cap on the requests in flight over all servers (default: the servers' capacity)")
    b.add_argument("--routing", choices=("affinity", "round_robin"), default="affinity",
                   help="with several server URLs: keep each tree on the replica holding its prefix (affinity) "
                        "or send requests round-robin")
    b.add_argument("--allow-weight-change", action="store_true",
                   help="accept servers whose weight version changes during the run (a trainer updating them); "
                        "each tree edge then records the version that generated it. Without it such a server is "
                        "refused like one serving another model")
    b.add_argument("--sim-seed", type=int, default=0, help="simulator seed")
    b.add_argument("--sim-latency", type=_finite, default=0.0, metavar="SECONDS", help="simulator latency per generated token")
    s = p.add_argument_group("search and sampling")
    s.add_argument("--search", choices=("selective", "independent"), default="selective")
    s.add_argument("--budget", type=_positive, default=sel["budget"], help="rollouts per tree")
    s.add_argument("--warmup", type=_positive, default=sel["warmup"], help="Selective: independent rollouts before branching (at most --budget)")
    s.add_argument("--per-pass", type=_positive, default=sel["per_pass"], help="Selective: branches per round")
    s.add_argument("--max-children", type=_positive, default=sel["max_children"], help="Selective: direct children per checkpoint")
    s.add_argument("--score", choices=lib["scores"], default=sel["score"],
                   help="Selective: the branching score (docs/learning-signal.md; docs/signal.md §S and §F)")
    s.add_argument("--stop-alike", action=argparse.BooleanOptionalAction, default=sel["stop_alike"],
                   help="Selective: stop a tree after its warmup when every warmup rollout returned the same, leaving "
                        "the rest of its budget unspent (docs/signal.md §P)")
    s.add_argument("--seed", type=int, default=sel["seed"], help="search seed")
    s.add_argument("--segment-tokens", type=_positive, default=lib["segments"]["tokens"], help="Segments(n): tokens per segment (with a tool or text --env: of one assistant turn)")
    s.add_argument("--max-segments", type=_positive, default=agent["max_segments"])
    s.add_argument("--max-total-tokens", type=_positive, default=agent["max_total_tokens"], help="generated tokens per rollout")
    s.add_argument("--temperature", type=_finite, default=1.0)
    s.add_argument("--top-p", type=_finite, default=None)
    s.add_argument("--system-prompt", default=DEFAULT_SYSTEM_PROMPT, help="system message ('' for none)")
    s.add_argument("--env", metavar="MODULE:FACTORY",
                   help="build each problem's environment with FACTORY(problem) from MODULE (a module name or a path "
                        "to a .py file): a ToolEnv with its tools, or any Env; a tokens env collects Segments(n), a "
                        "tool or text env one assistant turn per segment (default: MathEnv graded on the label)")
    s.add_argument("--profile", choices=PROFILES,
                   help="with an --env tool or text environment: the policy's tool-call parser "
                        "(default: the model's own; hermes for the simulator)")
    s.add_argument("--progress-interval", type=_nonnegative_seconds, default=10.0, metavar="SECONDS",
                   help="when stderr is not a terminal (a log file, Slurm): a progress line at least this often "
                        "while problems run, besides one per finished problem (0: only those)")
    s.add_argument("--concurrency", type=_positive, default=None,
                   help="at most N problems at once (default: no cap; problems start whenever the requests in "
                        "flight drop below the servers' capacity)")
    s.add_argument("--strict", action="store_true", help="a problem with any failed rollout fails (default: keep the tree, list the failures)")
    s.add_argument("--allow-degraded", action="store_true",
                   help="exit 0 for a degraded run (some rollouts failed, or some edges are inexact: a server "
                        "without logprobs) instead of exit status 3; the losses are listed in failures.jsonl either way")
    c = p.add_argument_group("critic and rewards")
    which_critic = c.add_mutually_exclusive_group()
    which_critic.add_argument("--critic-value", type=_finite, default=0.5, help="constant critic prediction")
    which_critic.add_argument("--critic-url", help="value server: POST {contexts} -> {values}")
    which_critic.add_argument("--no-critic", action="store_true", help="no critic predictions")
    c.add_argument("--gamma", type=_finite, default=reward["gamma"])
    c.add_argument("--critic-weight", type=_finite, default=reward["critic_weight"], help="kappa, the critic prior's strength")
    c.add_argument("--reward-min", type=_finite, default=reward["reward_min"])
    c.add_argument("--reward-max", type=_finite, default=reward["reward_max"])
    c.add_argument("--truncated-reward", type=_finite, default=reward["truncated_reward"])
    c.add_argument("--truncation", choices=lib["truncations"], default=reward["truncation"])
    c.add_argument("--estimator", choices=tuple(ESTIMATORS), default="direct-branch-td")
    c.add_argument("--min-abs-advantage", type=_finite, default=None, help="drop actor records with smaller |advantage|")
    c.add_argument("--visitation-weights", action=argparse.BooleanOptionalAction, default=records["visitation_weights"],
                   help="export each actor advantage times its edge's visitation factor (an unbiased on-policy "
                        "gradient from a searched tree, docs/signal.md §V); --no-visitation-weights (the default) "
                        "exports the unweighted advantage")
    p.set_defaults(run=run_collect)
