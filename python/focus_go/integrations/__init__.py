"""Hand FOCUS collections to a trainer.

Every integration asks for the same thing: a ``CollectorFor`` that builds the collector
for one ``Problem`` under the trainer's current policy, plus a critic sink.
``focus_go.integrations.tinker`` supplies a loop you run; ``focus_go.integrations.slime``
supplies hooks Slime calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping


@dataclass(frozen=True)
class Problem:
    """One training item: the prompt the policy sees, a label that stays out of the prompt
    (typically a reference answer the environment grades against), an id recorded in
    exported metadata, and free-form metadata."""

    prompt: Any
    label: Any = None
    id: Any = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


__all__ = ["Problem"]
