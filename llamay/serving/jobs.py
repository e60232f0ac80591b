"""One request inside a batching runner, and the consumer's side of it.

A runner (the ``Scheduler`` over a ``BatchBackend``, the ``MlxRunner`` over mlx-lm's batch
generator) owns its ``Job``s on its own thread; the thread that asked for the generation reads
the job's tokens through a ``JobStream``. Both runners hand a token over through ``Job.deliver``,
so EOS, the token budget and the log probabilities end and count the same way on either.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from .._core.bitmask import allocate_bitmask
from .._core.matcher import Matcher
from ..backends.base import TokenStream
from ..backends.sampling import Sampling, TokenLogprob

#: What a job's queue holds after its last token, when no error ended it.
END = object()


class Job:
    """One request inside a runner: its prompt, constraint and sampling, and where its tokens go."""

    def __init__(self, prompt: list[int], matcher: Matcher | None, sampling: Sampling, budget: int,
                 cancel: threading.Event | None, vocab_size: int) -> None:
        self.prompt = prompt
        self.matcher = matcher
        self.mask = allocate_bitmask(vocab_size) if matcher is not None else None
        self.sampling = sampling
        self.rng = sampling.rng()
        self.budget = budget
        self.cancel = cancel
        self.produced = 0  # tokens sampled and sent (EOS is not one)
        self.reply: list[int] = []  # those tokens, where a repetition penalty needs them
        self.pending = -1  # the token sampled last, to be evaluated next step
        self.reused = 0  # prompt tokens the runner already held
        self.logprobs: list[TokenLogprob] = []  # each sent token's, where the sampling asks
        self.closed = False  # the consumer stopped reading
        self.followers: list[Job] = []  # choices of the same request, to start from this job's evaluated prompt
        self.out: queue.SimpleQueue[Any] = queue.SimpleQueue()

    @property
    def abandoned(self) -> bool:
        return self.closed or (self.cancel is not None and self.cancel.is_set())

    def fill_mask(self) -> None:
        """The matcher's mask for the next token, closing the document within the tokens left."""
        self.matcher.fill_next_token_bitmask(self.mask, tokens_left=self.budget - self.produced)

    def deliver(self, token: int, logprob: TokenLogprob | None, eos: frozenset[int]) -> bool:
        """Send the token just sampled; True when it ends the job (EOS, unsent, or the budget spent).

        The runner still ends the job itself (``END`` or the error), once it has let go of it.
        """
        if token in eos:
            return True
        if logprob is not None:
            self.logprobs.append(logprob)  # before the token: the consumer reads it once the token comes
        self.out.put(token)
        self.produced += 1
        if self.sampling.adjusts:
            self.reply.append(token)
        self.pending = token
        return self.produced >= self.budget


class JobStream(TokenStream):
    """The consumer's side of a ``Job``: its tokens, in order, then the end or the error that ended it."""

    def __init__(self, job: Job) -> None:
        super().__init__(iter(()), job.logprobs)
        self.job = job
        self._ended = False

    @property
    def reused(self) -> int:  # type: ignore[override]
        return self.job.reused

    def __next__(self) -> int:
        if self._ended:
            raise StopIteration
        item = self.job.out.get()
        if item is END:
            self._ended = True
            raise StopIteration
        if isinstance(item, BaseException):
            self._ended = True
            raise item
        return item

    def close(self) -> None:
        """End the generation; returns once the runner has let go of the job (and its matcher)."""
        if self._ended:
            return
        self.job.closed = True
        while True:
            item = self.job.out.get()
            if item is END or isinstance(item, BaseException):
                self._ended = True
                return
