"""One request inside a batching runner, and the consumer's side of it.

A runner (the ``Scheduler`` over a ``BatchBackend``, the ``MlxRunner`` over mlx-lm's batch
generator, the ``VllmRunner`` over vLLM's engine) owns its ``Job``s on its own thread; the thread
that asked for the generation reads the job's tokens through a ``JobStream``. Every runner hands
a token over through ``Job.deliver``, so EOS, the token budget and the log probabilities end and
count the same way on each.
"""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from .._core.bitmask import allocate_bitmask
from .._core.matcher import Matcher
from ..backends.base import Backend, TokenStream, token_budget
from ..backends.sampling import Sampling, TokenLogprob

#: What a job's queue holds after its last token, when no error ended it.
END = object()


class Job:
    """One request inside a runner: its prompt, constraint and sampling, and where its tokens go."""

    def __init__(self, prompt: list[int], matcher: Matcher | None, sampling: Sampling, budget: int,
                 cancel: threading.Event | None, vocab_size: int, source: Mapping[str, Any] | None = None) -> None:
        self.prompt = prompt
        self.matcher = matcher
        self.source = source  # the constraint's fields and dialect, where the runner compiles it elsewhere
        self.mask = allocate_bitmask(vocab_size) if matcher is not None else None
        self.sampling = sampling
        self.rng = sampling.rng()
        self.budget = budget
        self.cancel = cancel
        self.produced = 0  # tokens sampled and sent (EOS is not one)
        self.reply: list[int] = []  # those tokens, where a repetition penalty needs them
        self.pending: list[int] = []  # the scheduler's: tokens sent since its last step (one sampled, any forced)
        self.reused = 0  # prompt tokens the runner already held
        self.forced = 0  # tokens sent that the constraint forced (``llamay.jump_ahead``)
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
        """Send the token just chosen (sampled or forced); True when it ends the job (EOS, unsent, or the budget spent).

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

    @property
    def forced(self) -> int:  # type: ignore[override]
        return self.job.forced

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


class Runner(ABC):
    """Runs many generations on one model at once, each a ``Job`` read through a ``JobStream``; thread-safe."""

    backend: Backend

    def generate(self, prompt: list[int], *, matcher: Matcher | None, sampling: Sampling, max_tokens: int,
                 cancel: threading.Event | None = None, source: Mapping[str, Any] | None = None) -> TokenStream:
        """Queue a generation; tokens come through the returned stream as they are chosen.

        The same contract as ``SteppedBackend.generate``: EOS ends it unsent, each token was
        accepted by ``matcher`` before it is sent, ``cancel`` or ``close()`` ends it at the next step.
        ``source`` is what the matcher's grammar was compiled from (``Constraints.pick``'s keywords
        and the dialect), for a runner whose runtime compiles the constraint itself (vLLM's workers).
        """
        return self.generate_choices(prompt, [(matcher, sampling)], max_tokens=max_tokens, cancel=cancel,
                                     source=source)[0]

    def generate_choices(self, prompt: list[int], choices: Sequence[tuple[Matcher | None, Sampling]], *,
                         max_tokens: int, cancel: threading.Event | None = None,
                         source: Mapping[str, Any] | None = None) -> list[TokenStream]:
        """Queue one generation per (matcher, sampling) of ``choices``, all from ``prompt``."""
        budget = token_budget(max_tokens, len(prompt), self.backend.n_ctx)
        size = self.backend.vocab.size
        jobs = [Job(prompt, matcher, sampling, budget, cancel, size, source) for matcher, sampling in choices]
        self._queue(jobs)
        return [JobStream(job) for job in jobs]

    @property
    @abstractmethod
    def busy(self) -> int:
        """Generations running now."""

    @abstractmethod
    def _queue(self, jobs: list[Job]) -> None:
        """Take the jobs of one request (its choices, in order) and start the loop where it is not running."""
