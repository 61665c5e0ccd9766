"""Every example in a docstring of the package runs, or says why it cannot.

The docstrings are the API reference (docs/reference/ renders them), and their examples are
```python fences. Each one runs here, as doctest runs ``>>>`` examples: in a namespace that
starts as its module's globals, so the names of the module need no import. Examples are
fragments of a larger program, so the namespace also holds the objects they talk about,
built on the embedded simulated server: ``server``, ``policy`` (an ``SGLangPolicy`` on
it), ``problem``, ``agent``, ``tree`` (a collected tree), ``batch`` (its prepared
samples), ``collector``, ``collector_for``, ``batches``, ``policy_format``, ``backend``
and ``model_name``; ``OPENAI_API_KEY`` is set, as for a user of the OpenAI
policies. A top-level ``await`` runs in a fresh event loop.

An example that cannot run here (it needs a GPU server, Slime, a Tinker key, a model's
tokenizer) is marked, as in the guides, by an HTML comment (invisible on the site) on the
line right before its fence::

    <!-- not run: needs a running SGLang server -->
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "focus_go"
FENCE = re.compile(r"^\s*```python\s*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>.*?)\s*-->\s*$")


class Example(NamedTuple):
    id: str  # path:object
    module: str  # the module whose globals it starts with
    code: str
    not_run: Optional[str]


def examples() -> List[Example]:
    """The ```python fences of every docstring of the package, in file order."""
    out: List[Example] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node, clean=True)
            if not doc:
                continue
            lines = doc.splitlines()
            for i, line in enumerate(lines):
                if not FENCE.match(line):
                    continue
                end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
                marker = NOT_RUN.match(lines[i - 1]) if i > 0 else None
                name = getattr(node, "name", "<module>")
                out.append(Example(f"{path.relative_to(ROOT)}:{name}:{i + 1}", module,
                                   textwrap.dedent("\n".join(lines[i + 1:end])) + "\n", marker["reason"] if marker else None))
    return out


RUNNER = r'''
import ast, asyncio, importlib, inspect, json, sys, traceback

from focus_go import *
from focus_go import Agent, Collector, Critic, MathEnv, Segments, Selective
from focus_go.backends import SamplingParams, SGLangPolicy
from focus_go.sim import SimServer

server = SimServer(seed=0)
policy = SGLangPolicy(model=server.model, base_url=server.url, profile="token_chunk",
                      default_params=SamplingParams(temperature=1.0))
problem = server.problems()[0]
agent = Agent(policy=policy, env=MathEnv(problem.label, policy.decode), context=Segments(64))


async def _one_tree():
    async with Collector(agent, critic=Critic.constant(0.5), search=Selective()) as c:
        state = await c.collect(problem)
        return state, c.prepare(state)


tree, batch = asyncio.run(_one_tree())
fixtures = dict(
    server=server, policy=policy, problem=problem, agent=agent, tree=tree, batch=batch,
    collector=Collector(agent, critic=Critic.constant(0.5), close_services=False),
    collector_for=lambda policy_, problem_: Collector(
        Agent(policy=policy_, env=MathEnv(problem_.label, policy_.decode), context=Segments(64)),
        critic=Critic.constant(0.5), close_services=False),
    batches=[[problem]], policy_format=policy.format, backend=policy, model_name=server.model,
)

results = {}
for example in json.load(sys.stdin):
    namespace = dict(vars(importlib.import_module(example["module"])))
    namespace.update(fixtures)
    try:
        code = compile(example["code"], example["id"], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)
        if inspect.iscoroutine(result):
            asyncio.run(result)
        results[example["id"]] = None
    except BaseException:
        results[example["id"]] = traceback.format_exc()[-4000:]
print(json.dumps(results))
'''


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Dict[str, Optional[str]]:
    """Runs every runnable example in one fresh process; the traceback of each failure."""
    runnable = [e._asdict() for e in examples() if e.not_run is None]
    proc = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(runnable), cwd=tmp_path_factory.mktemp("examples"),
                          env={**os.environ, "OPENAI_API_KEY": "sk-docstring-example"}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("example", [e for e in examples() if e.not_run is None], ids=lambda e: e.id)
def test_docstring_example_runs(example, ran):
    error = ran[example.id]
    assert error is None, f"the docstring example at {example.id} failed:\n{example.code}\n{error}"


def test_not_run_examples_say_why():
    vague = [e.id for e in examples() if e.not_run is not None and len(e.not_run) < 10]
    assert not vague, f"say why these docstring examples cannot run: {vague}"


def test_examples_are_found():
    """The collector reads the docstrings' fences (a change of their format would leave
    every example unchecked)."""
    found = examples()
    assert len(found) >= 30, [e.id for e in found]
    ran_share = sum(e.not_run is None for e in found) / len(found)
    assert ran_share >= 0.7, f"only {ran_share:.0%} of the docstring examples run; mark fewer, or give them fixtures"
