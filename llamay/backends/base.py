"""The backend interface: load, vocabulary, prompt evaluation, logits, and the token loop.

Two kinds of runtime sit behind it. A ``SteppedBackend`` evaluates one sequence at a time
through three primitives (``begin``, ``logits``, ``feed``), and its loop is written once,
here. A ``BatchBackend`` evaluates several sequences in one call (``decode``) and is driven
by ``llamay.serving.Scheduler``. Both choose each token through ``choose_token``: mask,
sample, accept, the same way on every runtime. Logits may be a view of the runtime's own
buffer: the mask is written into it in place (no copy per token).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from functools import partial

import numpy as np

from .._core.bitmask import allocate_bitmask, apply_bitmask
from .._core.matcher import Matcher
from ..errors import InternalError, LlamayError
from ..jump_ahead import jump_ahead
from ..vocab import Vocabulary
from .sampling import Sampling, TokenLogprob, adjust, forced_logprob, sample, token_logprob


class ContextLengthError(LlamayError):
    """The prompt does not fit the model's context."""


class TokenStream(Iterator[int]):
    """One generation's token ids, as they come; ``close()`` ends it early.

    ``reused``: prompt tokens taken from a prompt cache rather than evaluated (known once the
    first token has come). ``logprobs``: where the sampling asked for them, entry ``i`` is token
    ``i``'s, there once the token has come. ``forced``: tokens the constraint forced, appended
    without sampling (``llamay.jump_ahead``), counted as they come.
    """

    reused: int = 0
    forced: int = 0  # tokens the constraint forced, appended without sampling (``llamay.jump_ahead``)

    def __init__(self, tokens: Iterator[int], logprobs: list[TokenLogprob] | None = None) -> None:
        self._tokens = tokens
        self.logprobs: list[TokenLogprob] = [] if logprobs is None else logprobs

    def __next__(self) -> int:
        return next(self._tokens)

    def close(self) -> None:
        close = getattr(self._tokens, "close", None)
        if close is not None:
            close()


def choose_token(logits: np.ndarray, vocab_size: int, matcher: Matcher | None, mask: np.ndarray | None,
                 sampling: Sampling, rng: np.random.Generator, prompt: Sequence[int] = (),
                 reply: Sequence[int] = ()) -> tuple[int, TokenLogprob | None]:
    """Sample from ``logits`` (modified in place) under ``mask`` (already filled), and accept it in ``matcher``.

    Ids past ``vocab_size`` (padding in the runtime's output) are never allowed under a mask.
    ``prompt`` and ``reply`` (the tokens generated so far) feed the repetition penalties.
    Returns the token, and its log probability where ``sampling.logprobs`` asks for one.
    """
    if matcher is not None:
        apply_bitmask(logits[:vocab_size] if logits.shape[0] > vocab_size else logits, mask)
        if logits.shape[0] > vocab_size:
            logits[vocab_size:] = -np.inf
    if sampling.adjusts:
        adjust(logits, sampling, prompt, reply)
    token = sample(logits, sampling, rng)
    if matcher is not None and not matcher.accept_token(token):
        raise InternalError(f"sampled token {token} that the mask allowed but the matcher refused")
    if sampling.logprobs is None:
        return token, None
    return token, token_logprob(logits, token, sampling.logprobs, sampling.temperature)


def token_budget(max_tokens: int, prompt_len: int, n_ctx: int) -> int:
    """The tokens a generation may write: ``max_tokens``, or fewer where the context fills first."""
    if n_ctx and prompt_len + 1 > n_ctx:
        raise ContextLengthError(f"the prompt has {prompt_len} tokens; the context holds {n_ctx}")
    return max_tokens if not n_ctx else min(max_tokens, n_ctx - prompt_len)


class Backend(ABC):
    """One loaded model: its vocabulary, template metadata and tokenizer."""

    name: str = ""
    model_id: str = ""
    vocab: Vocabulary
    chat_template: str | None = None
    bos_token: str = ""
    eos_token: str = ""
    add_bos: bool = False  # the model expects BOS first (its tokenizer metadata says so)
    bos_id: int | None = None  # what ``tokenize`` puts first where ``needs_bos``
    control_texts: frozenset[str] = frozenset()  # what ``encode(special=True)`` alone reads as control tokens
    n_ctx: int = 0  # the context one sequence holds
    slots: int = 1  # generations run at once (``llamay.serving.runner_for``)
    cache_prompt: bool = False  # a finished generation's KV cache is kept for the next prompt sharing its prefix
    jump_ahead: bool = True  # tokens the constraint forces are appended unsampled (``llamay.jump_ahead``)

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


class SteppedBackend(Backend):
    """A runtime that evaluates one sequence at a time; not thread-safe: the engine runs one generation at a time,
    unless the runtime batches generations of its own (mlx-lm: ``llamay.serving.MlxRunner``)."""

    @abstractmethod
    def begin(self, prompt: list[int]) -> None:
        """Evaluate ``prompt`` so that ``logits()`` gives the first generated position."""

    @abstractmethod
    def logits(self) -> np.ndarray:
        """Next-token logits, float32 or float16, at least ``vocab.size`` wide; may be modified in place."""

    @abstractmethod
    def feed(self, token: int) -> None:
        """Append ``token`` and evaluate it."""

    def feed_tokens(self, tokens: Sequence[int]) -> None:
        """Append ``tokens`` and evaluate them; a runtime that takes several in one evaluation says so here."""
        for token in tokens:
            self.feed(token)

    def generate(
        self,
        prompt: list[int],
        *,
        matcher: Matcher | None,
        sampling: Sampling,
        max_tokens: int,
        cancel: threading.Event | None = None,
    ) -> TokenStream:
        """Generated token ids; stops after EOS (not yielded), ``max_tokens``, or when ``cancel`` is set.

        With a matcher, only tokens it allows are sampled, and each is accepted before it is
        yielded, so a consumer never sees a token the constraint refused. The matcher's mask
        closes the document within the budget (``max_tokens``, or what the context still holds);
        ``matcher.closed_by_budget`` tells afterwards whether it had to. Tokens the constraint
        forces after a sampled one come without sampling, evaluated with it (``jump_ahead``).
        """
        stream = TokenStream(iter(()))
        stream._tokens = self._steps(prompt, token_budget(max_tokens, len(prompt), self.n_ctx), matcher, sampling,
                                     cancel, stream)
        return stream

    def _steps(self, prompt: list[int], budget: int, matcher: Matcher | None, sampling: Sampling,
               cancel: threading.Event | None, stream: TokenStream) -> Iterator[int]:
        self.begin(prompt)
        eos = set(self.vocab.eos_ids)
        mask = allocate_bitmask(self.vocab.size) if matcher is not None else None
        rng = sampling.rng()
        reply: list[int] = []
        encode = partial(self.encode, special=False)
        written = 0
        while written < budget:
            if cancel is not None and cancel.is_set():
                return
            logits = self.logits()
            if matcher is not None:
                matcher.fill_next_token_bitmask(mask, tokens_left=budget - written)
            token, logprob = choose_token(logits, self.vocab.size, matcher, mask, sampling, rng, prompt, reply)
            if token in eos:
                return
            run = [(token, logprob)]
            if matcher is not None and self.jump_ahead:
                forced = jump_ahead(matcher, encode, token, limit=budget - written - 1)
                run += [(t, forced_logprob(t, sampling)) for t in forced]
                stream.forced += len(forced)
            for token, logprob in run:
                reply.append(token)
                if logprob is not None:
                    stream.logprobs.append(logprob)
                yield token
            written += len(run)
            self.feed_tokens([token for token, _ in run])


class BatchBackend(Backend):
    """A runtime that evaluates several sequences in one call; ``llamay.serving.Scheduler`` drives it.

    ``slots`` sequences (ids ``0 .. slots - 1``), each holding up to ``n_ctx`` positions;
    ``cache_prompt``: a sequence keeps what it evaluated between requests, for the next to reuse.
    Called from the scheduler's thread only.
    """

    batch_size: int = 512  # the most tokens one ``decode`` takes

    @abstractmethod
    def decode(self, tokens: Sequence[int], positions: Sequence[int], seqs: Sequence[int],
               outputs: Sequence[bool]) -> None:
        """Evaluate one batch: token ``i`` at ``positions[i]`` of sequence ``seqs[i]``; logits where ``outputs[i]``."""

    @abstractmethod
    def logits_at(self, index: int) -> np.ndarray:
        """The logits of batch entry ``index`` of the last ``decode``; may be modified in place."""

    @abstractmethod
    def forget(self, seq: int, start: int) -> None:
        """Drop sequence ``seq``'s positions from ``start`` on."""

    @abstractmethod
    def copy(self, src: int, dst: int) -> None:
        """Make sequence ``dst`` hold what ``src`` holds (keys and values), dropping what it held."""
