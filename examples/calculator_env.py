"""Tool-use collection from the command line: ``focus-go collect --env`` builds each problem's
environment with ``make_env(problem)`` from this file.

Each problem may name the tools it gets in a ``tools`` key (a list of names from ``TOOLS``;
default: all of them); the answer (the text of the turn without tool calls) is graded
against the problem's label. Run it on the embedded simulator (whose model calls tools in
the Hermes format)::

    focus-go demo --out demo                      # writes demo/problems.jsonl
    focus-go collect demo/problems.jsonl --out runs/tools \\
        --env examples/calculator_env.py:make_env --budget 8 --warmup 4 --segment-tokens 2048

(a tool env's segment is one assistant turn: ``--segment-tokens`` bounds a turn).

On your own server, add ``--sglang URL --model M`` (the model's chat template and its own
tool-call dialect are used; ``--profile`` names another).
"""

from __future__ import annotations

import ast
import operator
from typing import Any, Callable, Dict

from focus_go import ToolEnv
from focus_go.env import grade_math

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.USub: operator.neg, ast.Pow: operator.pow, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand))
    raise ValueError(f"unsupported expression element {type(node).__name__}")


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: The expression to evaluate, e.g. "2*(3+4)".
    """
    value = _eval(ast.parse(expression.replace("^", "**").replace("×", "*"), mode="eval"))
    return str(int(value)) if float(value).is_integer() else str(value)


TOOLS: Dict[str, Callable[..., str]] = {"calculator": calculator}


def make_env(problem: Any) -> ToolEnv:
    """The problem's ToolEnv: the tools it names (``tools`` in the problems file), graded on
    its label."""
    names = problem.metadata.get("tools", list(TOOLS))
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        raise ValueError(f"problem {problem.id!r} names unknown tools {unknown}; known: {', '.join(TOOLS)}")
    label = problem.label
    return ToolEnv({n: TOOLS[n] for n in names}, answer=lambda text: 1.0 if grade_math(text, label) else 0.0)
