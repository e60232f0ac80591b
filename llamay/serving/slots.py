"""A slot's states and transitions, written as data (the way h11 writes a connection's).

A slot is one sequence of the backend's KV cache. It is ``IDLE`` between requests (the
tokens it evaluated stay, for the next request to reuse), ``PREFILL`` while its request's
prompt is evaluated in chunks, and ``GENERATE`` while it yields a token a step. Every way
out of a busy state leads back to ``IDLE``; anything else is a scheduler bug and raises.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InternalError


class State(enum.Enum):
    IDLE = "idle"
    PREFILL = "prefill"
    GENERATE = "generate"


class Event(enum.Enum):
    ASSIGN = "assign"  # a waiting request takes the slot
    PROMPT_EVALUATED = "prompt evaluated"  # the last prompt chunk was in this step's batch
    FINISH = "finish"  # EOS, the token budget, or the consumer stopped reading
    CANCEL = "cancel"  # the client left
    FAIL = "fail"  # the backend's evaluation failed


TRANSITIONS: dict[tuple[State, Event], State] = {
    (State.IDLE, Event.ASSIGN): State.PREFILL,
    (State.PREFILL, Event.PROMPT_EVALUATED): State.GENERATE,
    (State.PREFILL, Event.CANCEL): State.IDLE,
    (State.PREFILL, Event.FAIL): State.IDLE,
    (State.GENERATE, Event.FINISH): State.IDLE,
    (State.GENERATE, Event.CANCEL): State.IDLE,
    (State.GENERATE, Event.FAIL): State.IDLE,
}


class SlotError(InternalError):
    """An event the slot's state has no transition for."""


@dataclass
class Slot:
    """One KV sequence: its state, the tokens it holds evaluated, and the job it runs."""

    seq: int
    state: State = State.IDLE
    held: list[int] = field(default_factory=list)  # token ids whose keys and values the sequence holds, in order
    job: Any = None  # the running request (the scheduler's), None while idle
    last_used: int = 0  # the step it was last assigned at: ties in prefix length go to the least recently used

    def handle(self, event: Event) -> State:
        try:
            self.state = TRANSITIONS[self.state, event]
        except KeyError:
            raise SlotError(f"slot {self.seq}: no transition for {event.value!r} from {self.state.value!r}") from None
        if self.state is State.IDLE:
            self.job = None
        return self.state


def shared_prefix(held: Sequence[int], prompt: Sequence[int]) -> int:
    """How many leading tokens ``prompt`` shares with ``held``."""
    n = 0
    for a, b in zip(held, prompt, strict=False):
        if a != b:
            break
        n += 1
    return n


def runs(seqs: set[int]) -> int:
    """How many runs of consecutive ids ``seqs`` make: {0, 1, 3} makes two."""
    return sum(seq - 1 not in seqs for seq in seqs)


def choose_slot(slots: Sequence[Slot], prompt: Sequence[int], *, reuse: bool) -> tuple[Slot, int] | None:
    """The idle slot for ``prompt`` and how many of its held tokens to keep; None when every slot is busy.

    With ``reuse``, the slot that saves the most evaluation: the longest prefix of the prompt,
    less what the slot holds beyond it and would lose (another conversation, which may come
    back). So a conversation returns to its own slot and a new one sharing a long system prompt
    joins a slot that holds it. Where no slot saves more than it loses (a prompt sharing only the
    template's first few tokens), an empty slot comes first. Then the slot whose sequence id sits
    next to the busy ones, since a step costs a pass over the weights for each run of
    consecutive busy ids (see ``LlamaCppBackend.decode``); then the least recently used, as a
    conversation just served is the likeliest to come back. At least the prompt's last token is
    evaluated again, since its logits are the first the loop reads.
    """
    idle = [s for s in slots if s.state is State.IDLE]
    if not idle:
        return None
    busy = {s.seq for s in slots if s.state is not State.IDLE}

    def kept(slot: Slot) -> int:
        return min(shared_prefix(slot.held, prompt), len(prompt) - 1) if reuse else 0

    def rank(slot: Slot) -> tuple[int, bool, int, int]:
        keep = kept(slot)
        return max(0, keep - (len(slot.held) - keep)), not slot.held, -runs(busy | {slot.seq}), -slot.last_used

    slot = max(idle, key=rank)
    return slot, kept(slot)
