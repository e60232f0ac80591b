"""A generated token's log probability as the APIs report it: its text and bytes, and the likeliest alternatives."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Logprob:
    """``token``: the token's text (a control token's name; bytes that are not whole UTF-8 characters
    replaced by U+FFFD); ``raw``: its bytes, exact; ``top``: the alternatives, likeliest first (the
    sampled token among them where it is one of the likeliest)."""

    token: str
    raw: bytes
    logprob: float
    top: tuple[Logprob, ...] = ()
