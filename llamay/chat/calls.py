"""A complete tool call, as every API shape and the library hand it out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..logprob import Logprob

__all__ = ["ToolCall"]


@dataclass(frozen=True)
class ToolCall:
    """One complete call; ``id`` is distinct per call (its form is the dialect's).

    ``logprobs``: where they were asked for, those of the tokens the call was read from (the
    call is held back until complete, so they come with it).
    """

    id: str
    name: str
    arguments: dict[str, Any]
    logprobs: tuple[Logprob, ...] = ()
