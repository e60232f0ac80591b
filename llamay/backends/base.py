"""The backend interface: load, vocabulary, prompt evaluation, logits, and one generate loop.

A backend supplies four primitives (``tokenize``, ``begin``, ``logits``, ``feed``); the
loop that masks, samples and advances the matcher is written once, here, so every runtime
enforces constraints the same way. ``logits()`` may return a view of the runtime's own
buffer: the mask is written into it in place (no copy per token).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator

import numpy as np

from .._core.bitmask import allocate_bitmask, apply_bitmask
from .._core.matcher import Matcher
from ..errors import InternalError, LlamayError
from ..vocab import Vocabulary
from .sampling import Sampling, sample


class ContextLengthError(LlamayError):
    """The prompt does not fit the model's context."""


class Backend(ABC):
    """One loaded model. Not thread-safe: the engine runs one generation at a time per backend."""

    name: str = ""
    model_id: str = ""
    vocab: Vocabulary
    chat_template: str | None = None
    bos_token: str = ""
    eos_token: str = ""
    add_bos: bool = False  # the model expects BOS first (its tokenizer metadata says so)
    n_ctx: int = 0

    def needs_bos(self, prompt: str) -> bool:
        """Whether ``tokenize`` must put BOS first: the model wants it and the template did not write it."""
        return self.add_bos and not (self.bos_token and prompt.startswith(self.bos_token))

    @abstractmethod
    def tokenize(self, text: str) -> list[int]:
        """Token ids of a rendered prompt (special-token text such as ``<|im_start|>`` parsed as tokens)."""

    @abstractmethod
    def begin(self, prompt: list[int]) -> None:
        """Evaluate ``prompt`` so that ``logits()`` gives the first generated position."""

    @abstractmethod
    def logits(self) -> np.ndarray:
        """Next-token logits, float32 or float16, at least ``vocab.size`` wide; may be modified in place."""

    @abstractmethod
    def feed(self, token: int) -> None:
        """Append ``token`` and evaluate it."""

    def generate(
        self,
        prompt: list[int],
        *,
        matcher: Matcher | None,
        sampling: Sampling,
        max_tokens: int,
        cancel: threading.Event | None = None,
    ) -> Iterator[int]:
        """Yield generated token ids; stops after EOS (not yielded), ``max_tokens``, or when ``cancel`` is set.

        With a matcher, only tokens it allows are sampled, and each is accepted before it is
        yielded, so a consumer never sees a token the constraint refused.
        """
        if self.n_ctx and len(prompt) + 1 > self.n_ctx:
            raise ContextLengthError(f"the prompt has {len(prompt)} tokens; the context holds {self.n_ctx}")
        self.begin(prompt)
        eos = set(self.vocab.eos_ids)
        mask = allocate_bitmask(self.vocab.size) if matcher is not None else None
        rng = sampling.rng()
        budget = max_tokens if not self.n_ctx else min(max_tokens, self.n_ctx - len(prompt))
        for _ in range(budget):
            if cancel is not None and cancel.is_set():
                return
            logits = self.logits()
            if matcher is not None:
                matcher.fill_next_token_bitmask(mask)
                apply_bitmask(logits[: self.vocab.size] if logits.shape[0] > self.vocab.size else logits, mask)
                if logits.shape[0] > self.vocab.size:
                    logits[self.vocab.size :] = -np.inf
            token = sample(logits, sampling, rng)
            if matcher is not None and not matcher.accept_token(token):
                raise InternalError(f"sampled token {token} that the mask allowed but the matcher refused")
            if token in eos:
                return
            yield token
            self.feed(token)
