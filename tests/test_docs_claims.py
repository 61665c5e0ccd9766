"""Every default, bound and figure the docs state about the library is read from the library.

``CLAIMS`` is the table: each row names a page, a regular expression that finds the claim
in it (whitespace in the page is collapsed to one space first, so a line break is a space),
and, for each group of the expression, how to read the true value from the library:
``_rules.defaults()`` (the Go core's defaults, through the binding), a signature or
argparse default, a constant exported by the package, the largest value a constructor
accepts, or a Go constant the binding does not export (read from its source). The test
fails when the phrase is no longer on the page (the page changed: update the row with the
page) or when the stated value differs from the library's, naming the page, the claim and
both values. So a default changes in the code and the docs together, or the tests fail.

The flag tables of docs/cli.md ("Every flag of ...") are read whole: every default cell is
compared with the flag's argparse default, and a cell in words ("all", "required") must be
listed in ``CLI_WORDS`` with the argparse default it stands for. The argument tables of
docs/tinker.md and docs/slime.md (``ARGUMENT_TABLES``) are read the same way against the
signatures they describe. The printed output the guides show (getting-started's tree, the
CLI guide's summary) is compared with what the code prints today.

Measured figures (timings, benchmark areas, counts from a run) are not the library's values
and are not here; benchmarks/RESULTS.md is their source.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import math
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Sequence, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]

Reader = Tuple[str, Callable[[], Any]]  # (where the value lives, how to read it)


class Claim(NamedTuple):
    page: str  # relative to the repository root
    what: str  # the claim in words, for the failure message
    pattern: str  # a regex over the page (whitespace collapsed); one group per reader
    readers: Sequence[Reader]


# ---- how to read the library's values


@functools.lru_cache(maxsize=None)
def _defaults() -> Dict[str, Any]:
    from focus_go import _rules

    return _rules.defaults()


def lib(path: str) -> Reader:
    """A value of ``_rules.defaults()`` (the Go core's defaults), by dotted path."""

    def read() -> Any:
        value: Any = _defaults()
        for key in path.split("."):
            value = value[key]
        return value

    return f"_rules.defaults()[{path!r}]", read


def _param_default(dotted: str, name: str) -> Any:
    return inspect.signature(pkgutil.resolve_name(dotted)).parameters[name].default


def param(dotted: str, name: str) -> Reader:
    """The default of parameter ``name`` of the callable (or class) at ``dotted``."""
    return f"{dotted}({name}=...) default", lambda: _param_default(dotted, name)


def const(dotted: str, transform: Callable[[Any], Any] = lambda v: v) -> Reader:
    """A module attribute (a constant the package exports)."""
    return dotted, lambda: transform(pkgutil.resolve_name(dotted))


def cli(sub: str, flag: str) -> Reader:
    """The argparse default of ``focus-go SUB FLAG``."""
    return f"focus-go {sub} {flag} default", lambda: _cli_action(sub, flag).default


def go_const(path: str, name: str) -> Reader:
    """A Go constant the binding does not export, read from its source (durations in
    seconds)."""
    return f"{path}: {name}", lambda: _go_const(path, name)


def largest(what: str, accepts: Callable[[int], Any]) -> Reader:
    """The largest integer ``accepts`` takes without a ConfigError (the bound the library
    enforces), found by bisection."""

    def read() -> int:
        from focus_go import ConfigError

        def ok(v: int) -> bool:
            try:
                accepts(v)
            except ConfigError:
                return False
            return True

        lo, hi = 1, 1 << 40
        assert ok(lo) and not ok(hi), f"{what}: no bound between {lo} and {hi}"
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if ok(mid) else (lo, mid)
        return lo

    return f"the largest {what} accepted", read


def computed(where: str, read: Callable[[], Any]) -> Reader:
    return where, read


@functools.lru_cache(maxsize=None)
def _parser() -> argparse.ArgumentParser:
    from focus_go.cli.command import build_parser

    return build_parser()


def _cli_action(sub: str, flag: str) -> argparse.Action:
    subparsers = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    for action in subparsers.choices[sub]._actions:
        if flag in action.option_strings:
            return action
    raise KeyError(f"focus-go {sub} has no flag {flag}")


_GO_UNITS = {"time.Second": 1.0, "time.Millisecond": 1e-3, "time.Minute": 60.0}


def _go_const(path: str, name: str) -> float:
    source = (ROOT / path).read_text(encoding="utf-8")
    m = re.search(rf"^\s*(?:const\s+)?{name}\s*(?:[A-Za-z0-9_.]+\s*)?=\s*(?P<expr>[^/\n]+)", source, re.M)
    assert m, f"{path} defines no constant {name}"
    expr = m["expr"].strip()
    for unit, seconds in _GO_UNITS.items():
        expr = expr.replace(unit, repr(seconds))
    # Another constant of the same file, by name.
    expr = re.sub(r"\b[A-Z][A-Za-z0-9_]*\b", lambda n: repr(_go_const(path, n.group(0))), expr)
    assert re.fullmatch(r"[0-9.eE+\-*/<>() ]+", expr), f"{path}: {name} = {m['expr']!r} is not a plain number"
    return eval(expr, {"__builtins__": {}})  # digits and operators only (checked above)


# ---- how a page states a value

WORDS = {"on": True, "off": False, "true": True, "false": False, "none": None, "one": 1, "two": 2, "three": 3,
         "four": 4, "eight": 8, "sixteen": 16}


def stated(text: str) -> Any:
    """The value a page's text states: a number (with thousands commas), on/off, True/False,
    None, a small number in words, or a (quoted) string."""
    t = text.strip().strip("`").strip()
    if t.lower() in WORDS:
        return WORDS[t.lower()]
    if re.fullmatch(r"[+-]?[0-9][0-9,]*(\.[0-9]+)?([eE][+-]?[0-9]+)?", t):
        return float(t.replace(",", ""))
    return t.strip("\"'")


def same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b or a == b and type(a) is type(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)
    return str(a) == str(b)


@functools.lru_cache(maxsize=None)
def page_text(page: str) -> str:
    return re.sub(r"\s+", " ", (ROOT / page).read_text(encoding="utf-8"))


# ---- the table

SEL = "focus_go.Selective"
SIGNAL_D = r"\| B / W / R \| 32 / 16 / 4 \| \*\*(\d+) / (\d+)\*\* / (\d+) \|"


def _critic_rule() -> Dict[str, float]:
    from focus_go.critic_rule import CriticRule

    return CriticRule().rule


def _sim_problems() -> int:
    from focus_go.sim import SimServer

    with SimServer(seed=0) as server:
        return len(server.problems())


def _max_kappa(v: int) -> Any:
    from focus_go import RewardConfig

    return RewardConfig(critic_weight=float(v))


def _agent_tokens(v: int) -> Any:
    from focus_go import _rules

    return _rules.check("Agent", {"max_total_tokens": v})


def _selective_budget(v: int) -> Any:
    from focus_go import Selective

    return Selective(budget=v, warmup=1)


def _segments(v: int) -> Any:
    from focus_go import Segments

    return Segments(v)


def _backoff(retry: int, end: str) -> Reader:
    # Retry n (from 0) waits in [d/2, d], d = min(BaseDelay << n, MaxDelay)
    # (backends/transport: RetryPolicy.backoff).
    def read() -> float:
        path = "backends/transport/transport.go"
        d = min(_go_const(path, "DefaultBaseDelay") * (1 << retry), _go_const(path, "DefaultMaxDelay"))
        return round(d / 2 if end == "low" else d, 9)

    return f"backends/transport/transport.go: the {end} end of retry {retry + 1}'s backoff", read


def _retried_statuses() -> str:
    """The HTTP statuses the Go transport retries (the ``case`` that sets ``retryable``), as
    the page lists them: "408, 429, 500, 502, 503 and 504"."""
    from http import HTTPStatus

    source = (ROOT / "backends/transport/transport.go").read_text(encoding="utf-8")
    m = re.search(r"case (?P<names>fasthttp\.Status[^:]*):\s*retryable = true", source)
    assert m, "backends/transport/transport.go: no `case ...: retryable = true`"
    names = re.findall(r"fasthttp\.Status(\w+)", m["names"])
    codes = sorted(HTTPStatus[re.sub(r"(?<!^)(?=[A-Z])", "_", n).upper()].value for n in names)
    return ", ".join(map(str, codes[:-1])) + f" and {codes[-1]}"


CLAIMS: List[Claim] = [
    # README
    Claim("README.md", "the default search tree", r"the default `Selective\((\d+), (\d+)\)` tree",
          [lib("selective.budget"), lib("selective.warmup")]),
    Claim("README.md", "the demo's trees", r"`Selective\(\)` trees \((\d+) rollouts, (\d+) of warmup\) for (\w+) bundled math problems",
          [lib("selective.budget"), lib("selective.warmup"), cli("demo", "--problems")]),
    # getting started
    Claim("docs/getting-started.md", "the demo's trees", r"collects `Selective\(\)` trees \((\d+) rollouts, (\d+) of warmup\) with `Segments\((\d+)\)`",
          [lib("selective.budget"), lib("selective.warmup"), lib("segments.tokens")]),
    Claim("docs/getting-started.md", "the demo's problems", r"`Critic.constant\(0.5\)` for (\w+) bundled math problems", [cli("demo", "--problems")]),
    Claim("docs/getting-started.md", "the demo's output directory", r"\(`--out`, default `\./([a-z-]+)`", [cli("demo", "--out")]),
    # the CLI guide, outside its flag tables
    Claim("docs/cli.md", "the default system prompt", r'the default is "([^"]+)"', [const("focus_go.cli.collect.DEFAULT_SYSTEM_PROMPT")]),
    Claim("docs/cli.md", "the problems the simulator bundles", r"more `--problems` than the (\d+) the simulator bundles",
          [computed("len(SimServer().problems())", _sim_problems)]),
    Claim("docs/cli.md", "the most demo problems", r"\(the hardest first; at most (\d+)\)", [computed("len(SimServer().problems())", _sim_problems)]),
    Claim("docs/cli.md", "the kappa bound", r"`--critic-weight K` \| [^|]* \| [^|]*; in \[0, (\d+)\] \|", [largest("critic_weight", _max_kappa)]),
    # policies: Search settings
    Claim("docs/policies.md", "Independent's signature", r"\*\*`Independent\(n=(\d+), \*, seed=(\d+)\)`\*\*",
          [param("focus_go.Independent", "n"), param("focus_go.Independent", "seed")]),
    Claim("docs/policies.md", "Independent's default n in Go", r"\*\*`Independent\(n=(\d+),", [lib("independent.n")]),
    Claim("docs/policies.md", "Selective's signature",
          r"\*\*`Selective\(budget=(\d+), warmup=(\d+), \*, per_pass=(\d+), max_children=(\d+), min_remaining=(\w+), "
          r'score="(\w+)", seed=(\d+), stop_alike=(\w+)\)`\*\*',
          [param(SEL, "budget"), param(SEL, "warmup"), param(SEL, "per_pass"), param(SEL, "max_children"),
           param(SEL, "min_remaining"), param(SEL, "score"), param(SEL, "seed"), param(SEL, "stop_alike")]),
    *[Claim("docs/policies.md", f"Search settings: {key}", rf"## Search settings .*?\| `{key}` \| ([^|]+?) \|", [lib(f"selective.{key}")])
      for key in ("budget", "warmup", "per_pass", "max_children", "score", "seed", "stop_alike")],
    Claim("docs/policies.md", "the default score", r'\| `"(\w+)"` \(default\) \|', [lib("selective.score")]),
    Claim("docs/policies.md", "the whole-turn context's max_tokens", r"`max_tokens` from the sampling parameters \(default (\d+)\)",
          [lib("sampling.max_tokens")]),
    Claim("docs/policies.md", "the agent's path limits", r"`max_segments` \(default (\d+)\) and `max_total_tokens` \(default (\d+)\)",
          [param("focus_go.Agent", "max_segments"), param("focus_go.Agent", "max_total_tokens")]),
    Claim("docs/policies.md", "the default reward range", r"outside `\[reward_min, reward_max\]` \(default \[(\d+), (\d+)\]",
          [lib("reward.reward_min"), lib("reward.reward_max")]),
    Claim("docs/policies.md", "Env's default action kind", r'\| `action` \(class attribute\) \| [^|]* \| `"(\w+)"` \|', [const("focus_go.Env.action")]),
    # records
    Claim("docs/records.md", "RewardConfig: gamma", r"\| `gamma` \| ([0-9.]+) \|", [param("focus_go.RewardConfig", "gamma")]),
    Claim("docs/records.md", "RewardConfig: critic_weight and its bound", r"\| `critic_weight` \| ([0-9.]+) \| [^|]*in \[0, (\d+)\] \|",
          [param("focus_go.RewardConfig", "critic_weight"), largest("critic_weight", _max_kappa)]),
    Claim("docs/records.md", "RewardConfig: reward range", r"\| `reward_min`, `reward_max` \| ([0-9.]+), ([0-9.]+) \|",
          [param("focus_go.RewardConfig", "reward_min"), param("focus_go.RewardConfig", "reward_max")]),
    Claim("docs/records.md", "RewardConfig: truncated_reward", r"\| `truncated_reward` \| ([0-9.]+) \|", [param("focus_go.RewardConfig", "truncated_reward")]),
    Claim("docs/records.md", "RewardConfig: truncation", r'\| `truncation` \| `"(\w+)"` \|', [lib("reward.truncation")]),
    Claim("docs/records.md", "the default estimator", r"The defaults are `RewardConfig\(\)` and `(\w+)\(\)`\.",
          [computed("type(Collector(estimator=...) default).__name__", lambda: type(_param_default("focus_go.Collector", "estimator")).__name__)]),
    Claim("docs/records.md", "the default estimator in the table", r"\| `(\w+)\(\)` \(default\) \|",
          [computed("type(Collector(estimator=...) default).__name__", lambda: type(_param_default("focus_go.Collector", "estimator")).__name__)]),
    Claim("docs/records.md", "the default kappa", r"The default κ = (\d+) weighs", [lib("reward.critic_weight")]),
    Claim("docs/records.md", "the default record layout", r'\(`layout="(\w+)"`, the default\)', [lib("records.layout")]),
    # servers
    Claim("docs/servers.md", "SamplingParams()' temperature", r"`SamplingParams\(\)` alone means temperature ([0-9.]+)", [lib("sampling.temperature")]),
    Claim("docs/servers.md", "the CLI's temperature", r"`focus-go collect` uses `--temperature`, ([0-9.]+) by default", [cli("collect", "--temperature")]),
    Claim("docs/servers.md", "the CLI's request deadline", r"`focus-go collect --timeout` sets it, (\d+) s by default", [cli("collect", "--timeout")]),
    Claim("docs/servers.md", "a tree's warmup and rounds in flight", r"keeps only its warmup \((\d+) requests by default\) and then its rounds \((\d+) branches\)",
          [lib("selective.warmup"), lib("selective.per_pass")]),
    Claim("docs/servers.md", "a server's default capacity", r"else `capacity=` \(default (\d+);",
          [const("focus_go.generation.servers.DEFAULT_CAPACITY"), go_const("core/fleet/fleet.go", "DefaultCapacity")]),
    Claim("docs/servers.md", "the default routing", r'With `routing="(\w+)"` \(the default, `--routing \w+`\)', [cli("collect", "--routing")]),
    # reliability
    Claim("docs/reliability.md", "the statuses retried", r"It retries: - HTTP ([0-9, and]+);",
          [computed("backends/transport/transport.go: the statuses that set retryable", _retried_statuses)]),
    Claim("docs/reliability.md", "retries per request", r"It makes at most (\d+) retries", [go_const("backends/transport/transport.go", "DefaultMaxRetries")]),
    Claim("docs/reliability.md", "the first backoff", r"jittered exponential backoff: ([0-9.]+)–([0-9.]+) s,", [_backoff(0, "low"), _backoff(0, "high")]),
    Claim("docs/reliability.md", "the second and third backoff", r"0\.1–0\.2 s, then ([0-9.]+)–([0-9.]+) s, then ([0-9.]+)–([0-9.]+) s",
          [_backoff(1, "low"), _backoff(1, "high"), _backoff(2, "low"), _backoff(2, "high")]),
    Claim("docs/reliability.md", "the backoff cap", r"\(the delay is capped at (\d+) s\)", [go_const("backends/transport/transport.go", "DefaultMaxDelay")]),
    Claim("docs/reliability.md", "the longest Retry-After honoured", r"`Retry-After` is honoured up to (\d+) s", [go_const("backends/transport/transport.go", "DefaultMaxRetryAfter")]),
    Claim("docs/reliability.md", "branch retries", r"By default \(`max_retries=(\d+)`\)", [param("focus_go.Collector", "max_retries")]),
    Claim("docs/reliability.md", "the budget bound", r"a budget \(and so a warmup, `per_pass`, `max_children`\) of at most ([0-9,]+) rollouts per tree",
          [largest("Selective budget", _selective_budget)]),
    Claim("docs/reliability.md", "the token bounds", r"`min_remaining`\) of at most ([0-9,]+), and",
          [largest("Segments(n)", _segments), largest("Agent max_total_tokens", _agent_tokens)]),
    Claim("docs/reliability.md", "the in-flight bounds", r"\(`max_concurrency`, `capacity`\) of at most ([0-9,]+)\.",
          [go_const("backends/transport/transport.go", "MaxConcurrencyLimit"), go_const("core/fleet/fleet.go", "MaxSlots")]),
    # the learning signal
    Claim("docs/learning-signal.md", "Selective()", r'`Selective\(\)` = `Selective\((\d+), (\d+), score="(\w+)", stop_alike=(\w+)\)`',
          [lib("selective.budget"), lib("selective.warmup"), lib("selective.score"), lib("selective.stop_alike")]),
    Claim("docs/learning-signal.md", "critic_free()", r'`critic_free\(\)`: `Selective\((\d+), (\d+), score="(\w+)", stop_alike=(\w+)\)`',
          [lib("critic_free.selective.budget"), lib("critic_free.selective.warmup"), lib("critic_free.selective.score"),
           lib("critic_free.selective.stop_alike")]),
    Claim("docs/learning-signal.md", "defaults table: tree size", r"\| tree size \| `Selective\((\d+), (\d+)\)` \(was", [lib("selective.budget"), lib("selective.warmup")]),
    Claim("docs/learning-signal.md", "defaults table: score", r"\| score \| `(\w+)` \(was", [lib("selective.score")]),
    Claim("docs/learning-signal.md", "defaults table: stop_alike", r"\| stop after an alike warmup \| (\w+) \(new\)", [lib("selective.stop_alike")]),
    Claim("docs/learning-signal.md", "defaults table: visitation weights", r"\| visitation weights \| (\w+) \(was", [lib("records.visitation_weights")]),
    Claim("docs/learning-signal.md", "defaults table: kappa", r"\| kappa \| (\d+) \|", [lib("reward.critic_weight")]),
    # signal rules
    Claim("docs/signal.md", "CriticRule's defaults", r"Defaults \(Go `prepare.DefaultCriticRule`\): threshold ([0-9.]+), min_nodes (\d+), decay ([0-9.]+), max_kappa (\d+)\.",
          [computed("CriticRule().rule['threshold']", lambda: _critic_rule()["threshold"]),
           computed("CriticRule().rule['min_nodes']", lambda: _critic_rule()["min_nodes"]),
           computed("CriticRule().rule['decay']", lambda: _critic_rule()["decay"]),
           computed("CriticRule().rule['max_kappa']", lambda: _critic_rule()["max_kappa"])]),
    Claim("docs/signal.md", "CriticRule's signature",
          r"`focus_go.critic_rule.CriticRule\(threshold=(\w+), min_nodes=(\w+), decay=(\w+), max_kappa=(\w+), state=(\w+)\)`",
          [param("focus_go.critic_rule.CriticRule", n) for n in ("threshold", "min_nodes", "decay", "max_kappa", "state")]),
    Claim("docs/signal.md", "the kappa clamp", r"kappa = min\(kappa_hat, `max_kappa`\) \(so in \[0, (\d+)\]\)", [largest("critic_weight", _max_kappa)]),
    Claim("docs/signal.md", "the critic-free preset's search", r'`search`: `Selective\((\d+), (\d+), score="(\w+)", stop_alike=(\w+)\)` \(per_pass (\d+), max_children (\d+)',
          [lib("critic_free.selective.budget"), lib("critic_free.selective.warmup"), lib("critic_free.selective.score"),
           lib("critic_free.selective.stop_alike"), lib("critic_free.selective.per_pass"), lib("critic_free.selective.max_children")]),
    Claim("docs/signal.md", "the critic-free preset's critic", r"`critic`: `Critic.constant\(([0-9.]+)\)` \(the middle", [lib("critic_free.prediction")]),
    Claim("docs/signal.md", "the critic-free preset's estimator", r"`estimator`: `(\w+)\(\)` \(§T\)", [lib("critic_free.estimator")]),
    Claim("docs/signal.md", "the critic-free preset's weights", r"`visitation_weights`: (\w+) \(§V", [lib("critic_free.visitation_weights")]),
    Claim("docs/signal.md", "§D: B / W / R in force", SIGNAL_D, [lib("selective.budget"), lib("selective.warmup"), lib("selective.per_pass")]),
    Claim("docs/signal.md", "§D: the score in force", r"\| \*\*`(\w+)`\*\* \(§P\) \|", [lib("selective.score")]),
    Claim("docs/signal.md", "§D: visitation weights in force", r"\| visitation weights on records \| on \(§V, from 2026-12-02\) \| \*\*(\w+)\*\* \|",
          [lib("records.visitation_weights")]),
    Claim("docs/signal.md", "§D: the rule's warmup", r"1\. Warmup: W = (\d+) independent", [lib("selective.warmup")]),
    Claim("docs/signal.md", "§D: the rule's unspent rollouts", r"the other B - W = (\d+) rollouts",
          [computed("selective.budget - selective.warmup", lambda: _defaults()["selective"]["budget"] - _defaults()["selective"]["warmup"])]),
    Claim("docs/signal.md", "§D: the rule's rounds and budget", r"rounds of R = (\d+) picks.*? until B = (\d+) rollouts", [lib("selective.per_pass"), lib("selective.budget")]),
    Claim("docs/signal.md", "§D: the default estimator's kappa", r"The estimator's default stays `DirectBranchTd` at kappa (\d+)\.", [lib("reward.critic_weight")]),
    # Slime
    Claim("docs/slime.md", "the default kappa", r"With the default `critic_weight` (\d+) and", [lib("reward.critic_weight")]),
    # Tinker
    Claim("docs/tinker.md", "SamplingParams()' temperature", r"the module default is ([0-9.]+)\)", [lib("sampling.temperature")]),
    Claim("docs/tinker.md", "sampling: max_tokens", r"\| `max_tokens` \(default (\d+)\) \|", [lib("sampling.max_tokens")]),
    Claim("docs/tinker.md", "sampling: temperature", r"\| `temperature` \(default ([0-9.]+)\) \|", [lib("sampling.temperature")]),
    Claim("docs/tinker.md", "sampling: top_p", r"\| `top_p` \(default ([0-9.]+)\),", [lib("sampling.top_p")]),
    Claim("docs/tinker.md", "the PPO clip", r"The default is `ppo` with the ratio clipped to 1 ± ([0-9.]+) \(`PPO_CLIP`\)",
          [const("focus_go.integrations.tinker.PPO_CLIP", lambda c: round(1 - c["clip_low_threshold"], 12)),
           const("focus_go.integrations.tinker.PPO_CLIP", lambda c: round(c["clip_high_threshold"] - 1, 12))]),
    Claim("docs/tinker.md", "the example's search size", r"\| `--budget`, `--warmup` \| (\d+), (\d+) \(`Selective\(\)`'s\) \|",
          [lib("selective.budget"), lib("selective.warmup")]),
]


def _claim_id(claim: Claim) -> str:
    return f"{claim.page}: {claim.what}"


@pytest.mark.parametrize("claim", CLAIMS, ids=_claim_id)
def test_doc_claim_matches_library(claim):
    m = re.search(claim.pattern, page_text(claim.page))
    assert m, (f"{claim.page}: the claim {claim.what!r} is no longer found (pattern {claim.pattern!r}); if the page "
               "changed on purpose, update its row in tests/test_docs_claims.py")
    groups = m.groups()
    # One group may be read from several places (a Python default and the Go constant
    # behind it): each must equal it.
    pairs = [(groups[0], r) for r in claim.readers] if len(groups) == 1 else list(zip(groups, claim.readers, strict=True))
    wrong = []
    for text, (where, read) in pairs:
        truth = read()
        if not same(stated(text), truth):
            wrong.append(f"  states {text!r}, but {where} is {truth!r}")
    assert not wrong, f"{claim.page}: {claim.what} ({m.group(0)!r}):\n" + "\n".join(wrong)


# ---- docs/cli.md's flag tables, row by row

CLI_GUIDE = "docs/cli.md"
ROW = re.compile(r"^\| (?P<flag>`[^|]*`) \|\s*(?P<default>[^|]*?)\s*\| .* \|$")
FLAG = re.compile(r"-{1,2}[a-z0-9][a-z0-9-]*")

# Default cells in words, with the argparse default each stands for (a flag whose default
# the command decides later, from the server or the other flags, has None).
CLI_WORDS: Dict[Tuple[str, str], Tuple[str, Any]] = {
    ("collect", "--out"): ("required", None),
    ("collect", "--limit"): ("all", None),
    ("collect", "--sglang"): ("", None),
    ("collect", "--vllm"): ("", None),
    ("collect", "--openai"): ("", None),
    ("collect", "--sim"): ("on when no URL is given", False),
    ("collect", "--model"): ("", None),
    ("collect", "--tokenizer"): ("`--model`'s", None),
    ("collect", "--served-model"): ("from `/v1/models`", None),
    ("collect", "--api-key"): ("vLLM: `$VLLM_API_KEY`, else `EMPTY`", None),
    ("collect", "--max-in-flight"): ("the servers' capacity", None),
    ("collect", "--system-prompt"): ("Qwen's math prompt", const("focus_go.cli.collect.DEFAULT_SYSTEM_PROMPT")),
    ("collect", "--env"): ("`MathEnv` graded on the label", None),
    ("collect", "--profile"): ("the model's own; `hermes` on the simulator", None),
    ("collect", "--concurrency"): ("no cap", None),
    ("collect", "--critic-url"): ("", None),
    ("view", "--output"): ("`TREE` with `.html`", None),
    ("demo", "--out"): ("`./focus-demo`", "focus-demo"),
    **{("view", f): ("from `run.json`", None) for f in ("--gamma", "--critic-weight", "--reward-min", "--reward-max",
                                                         "--truncated-reward", "--truncation", "--estimator")},
}
# Flags whose argparse default is None because the library fills it in: the stated default
# is the library's value, read here.
CLI_LIBRARY: Dict[Tuple[str, str], Reader] = {
    ("collect", "--capacity"): const("focus_go.generation.servers.DEFAULT_CAPACITY"),
    ("collect", "--top-p"): lib("sampling.top_p"),
}


def _cli_rows(sub: str) -> List[Tuple[str, str]]:
    """(first flag, default cell) of each row of the guide's table for ``sub``."""
    rows, inside = [], False
    for line in (ROOT / CLI_GUIDE).read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            inside = line.strip() == f"## Every flag of `focus-go {sub}`"
        elif inside and (m := ROW.match(line)):
            flags = FLAG.findall(m["flag"])
            long = [f for f in flags if f.startswith("--")] or flags
            rows.append((long[0], m["default"].strip()))
    assert rows, f"{CLI_GUIDE} has no flag table for focus-go {sub}"
    return rows


def _cell_value(cell: str) -> Any:
    cell = re.sub(r"\s*\((library|check once)\)$", "", cell)
    return stated(cell)


@pytest.mark.parametrize("sub", ["collect", "view", "demo"])
def test_cli_guide_defaults_match_argparse(sub):
    wrong = []
    for flag, cell in _cli_rows(sub):
        action = _cli_action(sub, flag)
        if (sub, flag) in CLI_WORDS:
            words, meant = CLI_WORDS[(sub, flag)]
            meant = meant[1]() if isinstance(meant, tuple) else meant
            if cell != words:
                wrong.append(f"  {flag}: the guide says {cell!r}; tests/test_docs_claims.py CLI_WORDS expects {words!r}")
            elif not same(action.default, meant):
                wrong.append(f"  {flag}: the guide says {cell!r} (meaning {meant!r}), but argparse's default is {action.default!r}")
            continue
        value = _cell_value(cell)
        if (sub, flag) in CLI_LIBRARY:
            where, read = CLI_LIBRARY[(sub, flag)]
            truth = read()
        else:
            where, truth = "argparse's default", action.default
        if isinstance(value, str) and isinstance(truth, (int, float)) or not same(value, truth):
            wrong.append(f"  {flag}: the guide says {cell!r}, but {where} is {truth!r}")
    assert not wrong, f"{CLI_GUIDE}, the table of focus-go {sub}'s flags:\n" + "\n".join(wrong)


def test_cli_words_name_real_rows():
    """A CLI_WORDS or CLI_LIBRARY entry whose row is gone is stale."""
    rows = {(sub, flag) for sub in ("collect", "view", "demo") for flag, _ in _cli_rows(sub)}
    stale = sorted((set(CLI_WORDS) | set(CLI_LIBRARY)) - rows)
    assert not stale, f"rows no longer in {CLI_GUIDE}: {stale}"


# ---- printed output shown in the guides


def test_getting_started_prints_the_tree_it_shows(tmp_path):
    """The tree getting-started shows is what its python block prints today."""
    from test_docs import parse

    page = ROOT / "docs" / "getting-started.md"
    blocks, _ = parse(page)
    code = next(b.code for b in blocks if b.lang == "python" and "format_tree(" in b.code)
    shown = next(b.code for b in blocks if b.lang == "text" and b.code.startswith("0 root "))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "examples"), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    printed = proc.stdout.split("\n\n")[0].rstrip("\n")
    assert shown.rstrip("\n") == printed, (
        "docs/getting-started.md shows a tree its code no longer prints; paste the new one (and check the text "
        f"about it):\n--- shown\n{shown}--- printed\n{printed}")


def test_cli_guide_prints_the_summary_it_shows(tmp_path):
    """The summary docs/cli.md shows is what `focus-go collect` prints on the demo's problems
    with the defaults; its last line (the time taken, a measurement) is left out."""
    from test_docs import parse

    shown = next(b.code for b in parse(ROOT / CLI_GUIDE)[0] if b.lang == "text" and b.code.startswith("problems "))
    run = [sys.executable, "-m", "focus_go"]
    subprocess.run([*run, "demo", "--out", "focus-demo"], cwd=tmp_path, check=True, capture_output=True, timeout=600)
    proc = subprocess.run([*run, "collect", "focus-demo/problems.jsonl", "--out", "runs/sim"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = [line for line in proc.stdout.split("\n\n")[0].splitlines() if not line.startswith("time ")]
    expected = [line for line in shown.splitlines() if not line.startswith("time ")]
    assert expected == summary, ("docs/cli.md shows a summary `focus-go collect` no longer prints:\n--- shown\n"
                                 + "\n".join(expected) + "\n--- printed\n" + "\n".join(summary))


# ---- argument tables against the signatures they describe

# (page, the heading above the table, the function): a row per parameter, its default
# `required`, a Python literal, or a name of the function's module (`PPO_CLIP`).
ARGUMENT_TABLES = [
    ("docs/tinker.md", "### Every argument", "focus_go.integrations.tinker.train"),
    ("docs/slime.md", "## `make_generate` and `make_evaluate`", "focus_go.integrations.slime.make_generate"),
]


def _table_after(page: str, heading: str) -> List[Tuple[str, str]]:
    """(first cell, second cell) of the rows of the first table under ``heading``."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    assert heading in lines, f"{page} has no heading {heading!r}"
    rows, started = [], False
    for line in lines[lines.index(heading) + 1:]:
        if line.startswith("|"):
            started = True
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells[0].startswith("`"):
                rows.append((cells[0].strip("`"), cells[1]))
        elif started:
            break
    assert rows, f"{page}: no table under {heading!r}"
    return rows


@pytest.mark.parametrize("page,heading,function", ARGUMENT_TABLES, ids=[f"{p}: {f}" for p, _, f in ARGUMENT_TABLES])
def test_argument_table_matches_signature(page, heading, function):
    import ast

    fn = pkgutil.resolve_name(function)
    params = inspect.signature(fn).parameters
    wrong = []
    for name, cell in _table_after(page, heading):
        if name not in params:
            wrong.append(f"  `{name}`: {function} has no such parameter")
            continue
        default = params[name].default
        if cell == "required":
            if default is not inspect.Parameter.empty:
                wrong.append(f"  `{name}`: the page says required, but its default is {default!r}")
            continue
        text = cell.strip("`")
        try:
            stated_value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            assert text in fn.__globals__, f"{page}: `{name}`'s default {cell!r} is neither a literal nor a name of {fn.__module__}"
            stated_value = fn.__globals__[text]
        if not (stated_value is default or same(stated_value, default) and type(stated_value) is type(default)):
            wrong.append(f"  `{name}`: the page says {cell}, but {function}'s default is {default!r}")
    assert not wrong, f"{page}, the table under {heading!r} against {function}'s signature:\n" + "\n".join(wrong)
