"""A plain-Python final-answer grader: the last ``\\boxed{...}`` against the label, after the
same normalisation as focus-go's (spaces, ``$``, ``\\left``/``\\right``, ``\\text{}``,
trailing periods, ``\\dfrac``), numbers compared by value."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Optional

_TEXT = re.compile(r"\\text\{([^{}]*)\}")
_FRAC = re.compile(r"^\\frac\{([^{}]+)\}\{([^{}]+)\}$")


def last_boxed(text: str) -> Optional[str]:
    i = text.rfind("\\boxed{")
    if i < 0:
        return None
    j = i + len("\\boxed{")
    depth = 1
    for k in range(j, len(text)):
        c = text[k]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[j:k]
    return None


def _normalise(s: str) -> str:
    s = _TEXT.sub(r"\1", s)
    s = s.replace("\\left", "").replace("\\right", "").replace("\\dfrac", "\\frac").replace("$", "")
    return "".join(s.split()).rstrip(".")


def _number(s: str) -> Optional[Fraction]:
    m = _FRAC.match(s)
    try:
        if m:
            return Fraction(m.group(1)) / Fraction(m.group(2))
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def grade(text: str, label: str) -> bool:
    got = last_boxed(text)
    if got is None:
        return False
    want = last_boxed(label) if "\\boxed{" in label else label
    if want is None:
        return False
    a, b = _normalise(got), _normalise(want)
    if a == b:
        return True
    x, y = _number(a), _number(b)
    return x is not None and x == y
