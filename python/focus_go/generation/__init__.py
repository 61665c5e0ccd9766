"""Generation: the records, parsers and policies that connect the acting model.

Import the public names from ``focus_go.backends``; this package holds their modules
(``types``, ``parsing``, ``policy``, ``slime``, ``_openai_shared``)."""

from ..types import NativeToolCall

__all__ = ["NativeToolCall"]
