"""The step loop: continuous batching over a ``BatchBackend``'s slots.

Each step is one ``decode`` holding every busy slot's next input: the tokens each generating
slot wrote since the last step (the one it sampled, and any its constraint forced after it,
``llamay.jump_ahead``: evaluated together, with logits read at the last), and a chunk of each
prefilling slot's prompt. llama.cpp evaluates a batch of several sequences (each slot its own KV
stream) in passes over the weights that take the same number of tokens from every sequence, so
a step takes as many written tokens from each generating slot as the shortest run holds: alone,
a slot evaluates its whole forced run in one pass; beside others, the rest of a longer run
waits for the next steps (the slot samples again once its run is evaluated), rather than cost
every slot a second pass. On 2 CPU cores a pass of 4 sequences is compute-bound, so a forced
token costs about what a sampled one does there; the jump pays where a pass is bound by reading
the weights (one sequence, or a GPU). A request takes an idle slot
at the next step (the one that holds the longest prefix of its prompt, when prompts are
cached) and gives it back the step it finishes, so no request waits for another to end.
While others generate, a prompt is evaluated ``prefill_chunk`` tokens a step, so a long
prompt slows the running sequences rather than stopping them.

Several choices of one request (``generate_choices``) share one evaluation of their prompt: the
first takes a slot and evaluates it; the step that finishes it copies that slot's keys and values
into an idle slot for each other choice, and every choice samples its first token from the same
logits. A choice that finds no idle slot then waits at the head of the queue and evaluates the
prompt itself.

The masks of a step are filled once ``decode`` returns, on a small thread pool where several
sequences need one (the matcher's mask walk runs without the GIL). They depend only on the
tokens already accepted, so they could be filled while ``decode`` runs; on the CPU that loses:
llama.cpp's threads use every core and wait on each other at every operation, so a mask thread
taking a core slows the whole batch (measured with ``benchmarks.serving``: 4 clients, 108 against
138 tokens/s, and 100 against 118 in a second pair).

The loop's thread runs while there is work and ends when every slot is idle, so a model
nobody uses holds no thread (and can be collected).
"""

from __future__ import annotations

import collections
import functools
import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from ..backends.base import BatchBackend, choose_token
from ..backends.sampling import forced_logprob
from ..errors import InternalError
from ..jump_ahead import jump_ahead
from .jobs import END, Job, Runner
from .slots import Event, Slot, State, choose_slot

#: Prompt tokens a step evaluates while other slots generate: a step of 128 prompt tokens costs
#: those slots about 0.7 s on 2 CPU cores, where a whole 512-token batch would cost 3 s.
PREFILL_CHUNK = 128

class Scheduler(Runner):
    """Runs every generation on ``backend`` through its slots."""

    def __init__(self, backend: BatchBackend, *, prefill_chunk: int = PREFILL_CHUNK) -> None:
        self.backend = backend
        self.prefill_chunk = prefill_chunk
        self.slots = [Slot(seq) for seq in range(backend.slots)]
        self._eos = frozenset(backend.vocab.eos_ids)
        self._waiting: deque[Job] = deque()
        self._order: list[Slot] = []  # busy slots in the order they were assigned: prompts are evaluated first come
        self._lock = threading.Lock()  # the waiting queue and the loop thread's start and end
        self._thread: threading.Thread | None = None
        self._step_count = 0
        self._encode = functools.partial(backend.encode, special=False)
        self._masks = ThreadPoolExecutor(max_workers=max(1, min(backend.slots, os.cpu_count() or 1)),
                                         thread_name_prefix="llamay-mask")

    def _queue(self, jobs: list[Job]) -> None:
        """The first choice waits for a slot; the others follow it, to share its evaluated prompt."""
        jobs[0].followers = jobs[1:]
        with self._lock:
            self._waiting.append(jobs[0])
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="llamay-scheduler", daemon=True)
                self._thread.start()

    @property
    def steps(self) -> int:
        """Evaluations run so far: one a step, whatever each slot put in it."""
        return self._step_count

    @property
    def busy(self) -> int:
        """Slots running a request now."""
        return sum(s.state is not State.IDLE for s in self.slots)

    # -- the loop -------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._lock:
                self._admit()
                if not self._order:
                    self._thread = None
                    return
            try:
                self._step()
            except Exception as exc:  # the batch's evaluation failed: every running request ends with the error
                for slot in list(self._order):
                    self._end(slot, Event.FAIL, exc)
                    self.backend.forget(slot.seq, 0)
                    slot.held.clear()

    def _admit(self) -> None:
        """Give idle slots to waiting requests, first come first served; drop those already abandoned."""
        for job in [j for j in self._waiting if j.abandoned]:
            self._waiting.remove(job)
            job.out.put(END)
        while self._waiting:
            chosen = choose_slot(self.slots, self._waiting[0].prompt, reuse=self.backend.cache_prompt)
            if chosen is None:
                return
            slot, keep = chosen
            job = self._waiting.popleft()
            slot.handle(Event.ASSIGN)
            self.backend.forget(slot.seq, keep)
            del slot.held[keep:]
            slot.job, slot.last_used, job.reused = job, self._step_count, keep
            self._order.append(slot)

    def _step(self) -> None:
        self._step_count += 1
        for slot in [s for s in self._order if s.job.abandoned]:
            self._end(slot, Event.CANCEL)
        tokens: list[int] = []
        positions: list[int] = []
        seqs: list[int] = []
        outputs: list[bool] = []
        reads: list[tuple[Slot, int]] = []  # slots whose logits this step gives, and their batch index

        def add(slot: Slot, token: int, position: int, output: bool) -> None:
            if output:
                reads.append((slot, len(tokens)))
            tokens.append(token)
            positions.append(position)
            seqs.append(slot.seq)
            outputs.append(output)

        generating = [s for s in self._order if s.state is State.GENERATE]
        # as many written tokens from each generating slot: a pass over the weights takes the same count from
        # every sequence (see the module doc), so a longer forced run waits for steps of its own
        if any(not s.job.pending for s in generating):  # it would never get logits again: the loop would spin
            raise InternalError("a generating slot has no token to evaluate")
        width = min((len(s.job.pending) for s in generating), default=0)
        for slot in generating:
            pending = slot.job.pending
            for k in range(width):
                add(slot, pending[k], len(slot.held) + k, k == len(pending) - 1)
        room = self.backend.batch_size - len(tokens)
        if generating:
            room = min(room, self.prefill_chunk)
        prefilled: list[tuple[Slot, int]] = []  # slots and how many prompt tokens this step evaluates
        for slot in (s for s in self._order if s.state is State.PREFILL):
            if room <= 0:
                break
            start = len(slot.held)
            n = min(len(slot.job.prompt) - start, room)
            for k in range(start, start + n):
                add(slot, slot.job.prompt[k], k, k == len(slot.job.prompt) - 1)
            prefilled.append((slot, n))
            room -= n
        if not tokens:
            return
        self.backend.decode(tokens, positions, seqs, outputs)
        for slot in generating:
            slot.held.extend(slot.job.pending[:width])
            del slot.job.pending[:width]
        for slot, n in prefilled:
            start = len(slot.held)
            slot.held.extend(slot.job.prompt[start:start + n])
        for slot in (s for s, _ in reads if s.state is State.PREFILL):
            slot.handle(Event.PROMPT_EVALUATED)
        for slot, index in [(s, i) for s, i in reads if s.job.followers]:
            reads += [(follower, index) for follower in self._fork(slot)]
        constrained = [s for s, _ in reads if s.job.matcher is not None]
        fills = self._masks.map(self._fill, constrained) if len(constrained) > 1 else map(self._fill, constrained)
        failed = {slot.seq: error for slot, error in zip(constrained, fills, strict=True) if error is not None}
        indexes = collections.Counter(index for _, index in reads)
        for slot, index in reads:
            if slot.seq in failed:
                self._end(slot, Event.FAIL, failed[slot.seq])
            else:
                self._sample(slot, index, shared=indexes[index] > 1)

    def _fork(self, source: Slot) -> list[Slot]:
        """Start ``source``'s followers from its evaluated prompt, each in an idle slot; the slots they took.

        Followers that find no idle slot go back to the head of the queue, to evaluate the prompt themselves.
        """
        followers, source.job.followers = source.job.followers, []
        forked: list[Slot] = []
        for n, job in enumerate(followers):
            if job.abandoned:
                job.out.put(END)
                continue
            chosen = choose_slot(self.slots, job.prompt, reuse=False)
            if chosen is None:
                with self._lock:  # ``_admit`` ends those abandoned meanwhile
                    self._waiting.extendleft(reversed(followers[n:]))
                break
            slot = chosen[0]
            slot.handle(Event.ASSIGN)
            self.backend.copy(source.seq, slot.seq)
            slot.held[:] = source.held
            slot.job, slot.last_used, job.reused = job, self._step_count, len(job.prompt)
            slot.handle(Event.PROMPT_EVALUATED)
            self._order.append(slot)
            forked.append(slot)
        return forked

    @staticmethod
    def _fill(slot: Slot) -> BaseException | None:
        """Fill the slot's mask for its next token; the error, where the matcher raised one."""
        try:
            slot.job.fill_mask()
        except Exception as exc:
            return exc
        return None

    def _sample(self, slot: Slot, index: int, *, shared: bool = False) -> None:
        """Sample the slot's next token from batch entry ``index``; ``shared``: other slots read it too (a copy)."""
        job = slot.job
        logits = self.backend.logits_at(index)
        try:
            token, logprob = choose_token(logits.copy() if shared else logits, self.backend.vocab.size, job.matcher,
                                          job.mask, job.sampling, job.rng, job.prompt, job.reply)
        except Exception as exc:
            self._end(slot, Event.FAIL, exc)
            return
        if job.deliver(token, logprob, self._eos):
            self._end(slot, Event.FINISH)
            return
        job.pending.append(token)
        if job.matcher is None or not self.backend.jump_ahead or job.abandoned:
            return
        # at most a fair share of a batch, so that every slot's run fits the next step's
        room = min(job.budget - job.produced, self.backend.batch_size // self.backend.slots - 1)
        try:
            run = jump_ahead(job.matcher, self._encode, token, limit=room)
        except Exception as exc:  # the matcher's error (too ambiguous): this request's, as a mask's would be
            self._end(slot, Event.FAIL, exc)
            return
        for forced in run:
            ended = job.deliver(forced, forced_logprob(forced, job.sampling), self._eos)
            job.forced += 1
            if ended:
                self._end(slot, Event.FINISH)
                return
            job.pending.append(forced)

    def _end(self, slot: Slot, event: Event, error: BaseException | None = None) -> None:
        if slot.job.followers:  # ended before its prompt was evaluated: the other choices evaluate it themselves
            with self._lock:
                self._waiting.extendleft(reversed(slot.job.followers))
            slot.job.followers = []
        slot.job.out.put(END if error is None else error)
        slot.handle(event)
        self._order.remove(slot)
