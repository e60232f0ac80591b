"""Concurrent generations on MLX through mlx-lm's own continuous batching (``BatchGenerator``).

mlx-lm batches the model's evaluation: prompts are evaluated together, and every step is one
forward pass over the sequences generating. What it does not do is llamay's part: the token of
each sequence is chosen by a logits processor of that request, which fills the request's mask,
samples through ``choose_token`` (the sampler every backend shares) and hands the token over at
once (``Job.deliver``); the processor answers mlx-lm with that one token allowed, so mlx-lm's
greedy sampler takes it. mlx-lm computes one step ahead: when a token comes back from
``next()``, the next one is already chosen. So a processor called after its request ended
(EOS chosen, the budget spent, an error) leaves the logits alone, and the runner removes the
sequence after the step.

Finished sequences leave their KV cache behind (``cache_prompt``): up to ``slots`` of them,
each taken by the next request whose prompt shares the longest prefix with it, trimmed to that
prefix. Several choices of one request each evaluate the prompt, side by side in one batch.

One loop thread runs for the runner's life: mlx gives every thread that uses a stream a worker
thread of its own, which never ends, so a loop thread per busy spell would leave two threads
behind each time. Between requests it waits, holding only a weak reference to the runner, and
it ends within ``IDLE_WAIT`` seconds of the runner being collected.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import numpy as np
from mlx_lm.generate import BatchGenerator
from mlx_lm.models.cache import can_trim_prompt_cache, trim_prompt_cache

from ..backends.base import choose_token
from ..backends.mlx import PREFILL_STEP, MlxBackend
from .jobs import END, Job, Runner
from .slots import shared_prefix

#: Seconds the idle loop thread waits before it looks whether its runner is still there.
IDLE_WAIT = 1.0


@dataclass
class _Sequence:
    """A job inside the generator: whether its last token is chosen, and the error that ended it, if one did."""

    job: Job
    ended: bool = False
    error: BaseException | None = None


@dataclass
class _Cached:
    """A finished sequence's KV cache and the tokens it holds."""

    tokens: list[int]
    cache: list[Any] = field(repr=False)


class MlxRunner(Runner):
    """Runs every generation on an ``MlxBackend`` through one ``BatchGenerator``."""

    def __init__(self, backend: MlxBackend, *, slots: int, cache_prompt: bool = True) -> None:
        self.backend = backend
        self.capacity = slots
        self.cache_prompt = cache_prompt
        self._eos = frozenset(backend.vocab.eos_ids)
        self._waiting: deque[Job] = deque()
        self._running: dict[int, _Sequence] = {}  # by the generator's uid
        self._cached: list[_Cached] = []  # oldest first
        self._lock = threading.Lock()  # the waiting queue and the loop thread's start
        self._wake = threading.Event()  # work has come
        self._thread: threading.Thread | None = None
        # mlx streams are thread-local, and each thread's has a worker thread of its own that never ends
        self._stream = mx.new_thread_local_stream(mx.default_device())

    @property
    def busy(self) -> int:
        """Sequences in the generator now."""
        return len(self._running)

    def _queue(self, jobs: list[Job]) -> None:
        """Every choice evaluates the prompt itself, side by side with the others in one prefill batch."""
        with self._lock:
            self._waiting.extend(jobs)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, args=(weakref.ref(self),), name="llamay-mlx",
                                                daemon=True)
                self._thread.start()
        self._wake.set()

    # -- the loop -------------------------------------------------------------------------
    @staticmethod
    def _serve(ref: weakref.ref[MlxRunner]) -> None:
        """The loop thread: rounds while there is work, a wait while there is none; ends with the runner."""
        gen: BatchGenerator | None = None
        while (runner := ref()) is not None:
            gen = runner._round(gen or runner._generator())
            wake = runner._wake
            wake.clear()
            with runner._lock:
                idle = not runner._waiting and not runner._running
            del runner  # the wait holds no reference: a model dropped meanwhile is collected
            if idle:
                wake.wait(IDLE_WAIT)

    def _round(self, gen: BatchGenerator) -> BatchGenerator:
        """Admit what waits, evaluate one step, end what finished; the generator to go on with."""
        with self._lock:
            self._admit(gen)
        if not self._running:
            return gen
        try:
            _, responses = gen.next()
        except Exception as exc:  # the batch's evaluation failed: every running request ends with it
            for uid in list(self._running):
                self._running.pop(uid).job.out.put(exc)
            return self._generator()
        self._retire(gen, {r.uid for r in responses if r.finish_reason is not None})
        return gen

    def _generator(self) -> BatchGenerator:
        return BatchGenerator(self.backend.model, max_tokens=1, completion_batch_size=self.capacity,
                              prefill_batch_size=self.capacity, prefill_step_size=PREFILL_STEP,
                              stream=self._stream)

    def _admit(self, gen: BatchGenerator) -> None:
        """Start waiting requests while the generator has room, first come first served."""
        while self._waiting and len(self._running) < self.capacity:
            job = self._waiting.popleft()
            if job.abandoned:
                job.out.put(END)
                continue
            cached = self._take_cache(job.prompt)
            keep = len(cached.tokens) if cached is not None else 0
            job.reused = keep
            seq = _Sequence(job)
            # mlx-lm stops at max_tokens; ours (the job's budget) comes a step before it
            (uid,) = gen.insert([job.prompt[keep:]], max_tokens=[job.budget + 2],
                                caches=[cached.cache] if cached is not None else None,
                                all_tokens=[list(cached.tokens)] if cached is not None else None,
                                logits_processors=[[self._processor(seq)]])
            self._running[uid] = seq

    def _take_cache(self, prompt: list[int]) -> _Cached | None:
        """The kept cache sharing the longest prefix with ``prompt`` (at least one token left to evaluate),
        trimmed to it; None where none shares one."""
        best, best_len = None, 0
        for entry in self._cached:
            n = min(shared_prefix(entry.tokens, prompt), len(prompt) - 1)
            if n > best_len and (n == len(entry.tokens) or can_trim_prompt_cache(entry.cache)):
                best, best_len = entry, n
        if best is None:
            return None
        self._cached.remove(best)
        if best_len < len(best.tokens):
            trim_prompt_cache(best.cache, len(best.tokens) - best_len)
            del best.tokens[best_len:]
        return best

    def _processor(self, seq: _Sequence) -> Any:
        """The request's logits processor: chooses its token, sends it, and lets mlx-lm take only that one."""
        job, size, eos = seq.job, self.backend.vocab.size, self._eos

        def choose(_tokens: mx.array, logits: mx.array) -> mx.array:
            if seq.ended or job.abandoned:
                return logits  # a step computed past the request's end; the runner removes it
            try:
                row = np.array(logits[0].astype(mx.float32))  # evaluates the step; a writeable copy
                if job.matcher is not None:
                    job.fill_mask()
                token, logprob = choose_token(row, size, job.matcher, job.mask, job.sampling, job.rng,
                                              job.prompt, job.reply)
                seq.ended = job.deliver(token, logprob, eos)
            except Exception as exc:
                seq.error, seq.ended = exc, True
                return logits
            only = mx.full(logits.shape, -mx.inf, dtype=logits.dtype)
            only[..., token] = 0
            return only

        return choose

    def _retire(self, gen: BatchGenerator, finished: set[int]) -> None:
        """End the sequences whose request ended or was abandoned, keeping their caches."""
        done = [uid for uid, seq in self._running.items() if seq.ended or seq.job.abandoned or uid in finished]
        if not done:
            return
        live = [uid for uid in done if uid not in finished]  # mlx-lm dropped the finished ones itself
        caches = gen.remove(live, return_prompt_caches=self.cache_prompt) if live else {}
        for uid in done:
            seq = self._running.pop(uid)
            if uid in caches:
                cache, tokens = caches[uid]
                mx.eval([c.state for c in cache])  # no lazy graph crosses to the next loop's thread
                self._cached.append(_Cached(list(tokens), cache))
            seq.job.out.put(END if seq.error is None else seq.error)
        del self._cached[:max(0, len(self._cached) - self.capacity)]
