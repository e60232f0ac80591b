"""One request constrained inside another engine: its matcher, the tokens it has taken, and when it may stop."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from .._core.matcher import Matcher
from ..backends.hf_common import tokens_left
from ..errors import LlamayError

log = logging.getLogger("llamay")


@dataclass
class Row:
    """A request's constraint as the engine's sampler meets it, one mask row a step.

    ``stops`` are the engine's stop tokens for the request, allowed wherever the document may
    end (the vocabulary's own end tokens are allowed there anyway); ``max_tokens`` closes the
    document within the request's budget (None: no closing). ``output`` is the engine's own live
    list of the request's output tokens, where it hands one over (vLLM). A row is ``broken`` when
    the engine appended a token the constraint refused, or when its constraint could not be built
    (``matcher`` None): it then allows only the stop tokens, so the request ends instead of the
    engine failing. ``seen`` counts the output tokens looked at, ``taken`` those the matcher took;
    the ones past ``taken`` came after the document ended or broke.
    """

    matcher: Matcher | None
    stops: tuple[int, ...]
    max_tokens: int | None
    output: list[int] | None = None
    seen: int = 0
    taken: int = 0
    broken: bool = False

    def accept(self, tokens: list[int]) -> None:
        for token in tokens:
            self.seen += 1
            if self.broken or self.matcher is None or self.matcher.is_terminated():
                continue
            try:
                ok = self.matcher.accept_token(token)
            except LlamayError:  # an id outside the vocabulary
                ok = False
            if ok:
                self.taken += 1
            else:
                # only something that changes the logits after the mask can do it: end the request cleanly
                log.error("the engine appended token %d, which llamay's constraint refused; only a stop token "
                          "is allowed now", token)
                self.broken = True

    def rollback(self, count: int) -> None:
        """Take back the last ``count`` tokens (speculative decoding's rejected drafts)."""
        back = max(0, count - (self.seen - self.taken))  # of those, the ones the matcher took
        if back and self.matcher is not None:
            self.matcher.rollback(back)
        self.taken -= back
        self.seen -= count
        self.broken = self.broken and (self.matcher is None or self.seen > self.taken)

    def fill(self, mask: np.ndarray, index: int) -> None:
        """Row ``index`` of the int32 bitmask ``mask``: the tokens that keep the document valid."""
        if self.broken or self.matcher is None or self.matcher.is_terminated():
            mask[index] = 0
            allow(mask[index], self.stops)
            return
        self.matcher.fill_next_token_bitmask(mask, index, tokens_left=tokens_left(self.max_tokens, self.seen))
        if self.matcher.is_accepting():
            allow(mask[index], self.stops)


def allow(words: np.ndarray, tokens: tuple[int, ...]) -> None:
    """Set the bits of ``tokens`` in one row of an int32 bitmask."""
    bits = words.view(np.uint32)
    for token in tokens:
        if 0 <= token < 32 * len(bits):
            bits[token >> 5] |= np.uint32(1 << (token & 31))
