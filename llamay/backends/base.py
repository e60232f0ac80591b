"""The backend interface: load, vocabulary, prompt evaluation, logits, and one generate loop.

A backend supplies four primitives (``encode``, ``begin``, ``logits``, ``feed``); the
loop that masks, samples and advances the matcher is written once, here, so every runtime
enforces constraints the same way. ``logits()`` may return a view of the runtime's own
buffer: the mask is written into it in place (no copy per token).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence

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
    bos_id: int | None = None  # what ``tokenize`` puts first where ``needs_bos``
    control_texts: frozenset[str] = frozenset()  # what ``encode(special=True)`` alone reads as control tokens
    n_ctx: int = 0
    reused: int = 0  # prompt tokens the last generation took from a prompt cache (``LlamaCppBackend``)

    def needs_bos(self, prompt: str) -> bool:
        """Whether ``tokenize`` must put BOS first: the model wants it and the template did not write it."""
        return self.add_bos and not (self.bos_token and prompt.startswith(self.bos_token))

    def tokenize(self, prompt: str | Sequence[tuple[str, bool]]) -> list[int]:
        """Token ids of a prompt, with BOS first where the model wants it and the prompt does not start with it.

        A string is encoded whole, control-token text such as ``<|im_start|>`` parsed as tokens.
        ``(text, special)`` parts (``ChatTemplate.render_parts``) are encoded one by one, so that
        the client's text spelling a control token, a part with ``special`` false, stays text;
        no merge spans two parts, and a tokenizer that puts a space before the text it is given
        (Llama 2's) puts one before each part.
        """
        parts = [(prompt, True)] if isinstance(prompt, str) else prompt
        ids = [self.bos_id] if self.needs_bos("".join(text for text, _ in parts)) else []
        for text, special in parts:
            ids += self.encode(text, special=special)
        return ids

    @abstractmethod
    def encode(self, text: str, *, special: bool) -> list[int]:
        """Token ids of ``text``, no BOS; with ``special``, text in ``control_texts`` becomes the control token."""

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
        yielded, so a consumer never sees a token the constraint refused. The matcher's mask
        closes the document within the budget (``max_tokens``, or what the context still holds);
        ``matcher.closed_by_budget`` tells afterwards whether it had to.
        """
        if self.n_ctx and len(prompt) + 1 > self.n_ctx:
            raise ContextLengthError(f"the prompt has {len(prompt)} tokens; the context holds {self.n_ctx}")
        self.begin(prompt)
        eos = set(self.vocab.eos_ids)
        mask = allocate_bitmask(self.vocab.size) if matcher is not None else None
        rng = sampling.rng()
        budget = max_tokens if not self.n_ctx else min(max_tokens, self.n_ctx - len(prompt))
        for i in range(budget):
            if cancel is not None and cancel.is_set():
                return
            logits = self.logits()
            if matcher is not None:
                matcher.fill_next_token_bitmask(mask, tokens_left=budget - i)
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
