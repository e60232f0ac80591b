"""Tool-call dialects: one module per model family, and the choice of one for a chat template.

A dialect is detected as llama.cpp detects it, by strings its chat template writes; a
template that names none (or renders no tools) gets Hermes, which llamay then writes into
the prompt itself. ``llamay serve --tool-dialect NAME`` overrides the detection.
"""

from __future__ import annotations

from ...errors import UsageError
from .dialect import CallGrammar, CallStream, Dialect, Markers, parse_tool_calls
from .granite import GRANITE
from .hermes import HERMES
from .llama3 import LLAMA3
from .mistral import MISTRAL

__all__ = ["DIALECTS", "CallGrammar", "CallStream", "Dialect", "Markers", "detect", "named", "parse_tool_calls"]

#: By name; detection tries them in this order (the most specific markers first).
DIALECTS = {d.name: d for d in (LLAMA3, MISTRAL, GRANITE, HERMES)}


def detect(template: str | None) -> Dialect:
    """The dialect whose markers ``template`` writes; Hermes where it writes none."""
    for found in DIALECTS.values():
        if template and any(marker in template for marker in found.detect):
            return found
    return HERMES


def named(name: str) -> Dialect:
    """The dialect called ``name``; ``UsageError`` naming the known ones otherwise."""
    found = DIALECTS.get(name)
    if found is None:
        raise UsageError(f"unknown tool dialect {name!r}; known: {', '.join(DIALECTS)}")
    return found
