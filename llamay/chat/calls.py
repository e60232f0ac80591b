"""A complete tool call, as every API shape and the library hand it out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ToolCall"]


@dataclass(frozen=True)
class ToolCall:
    """One complete call; ``id`` is distinct per call (its form is the dialect's)."""

    id: str
    name: str
    arguments: dict[str, Any]
