"""Extension points and inspection: the tree types, packed sequences and action kinds
that custom environments, context managers and tools build on."""

from .types import ActionKind
from .tree import NodeView, PackedSequence, SchedulerState, SchedulerView

__all__ = ["ActionKind", "NodeView", "PackedSequence", "SchedulerState", "SchedulerView"]
