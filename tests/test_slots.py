"""A slot's states and transitions, as data, and which idle slot a prompt takes: no model needed."""

from __future__ import annotations

import itertools

import pytest

from llamay.serving.slots import TRANSITIONS, Event, Slot, SlotError, State, choose_slot, runs

#: Every (state, event) pair with a transition, and where it leads.
ALLOWED = [
    (State.IDLE, Event.ASSIGN, State.PREFILL),
    (State.PREFILL, Event.PROMPT_EVALUATED, State.GENERATE),
    (State.PREFILL, Event.CANCEL, State.IDLE),
    (State.PREFILL, Event.FAIL, State.IDLE),
    (State.GENERATE, Event.FINISH, State.IDLE),
    (State.GENERATE, Event.CANCEL, State.IDLE),
    (State.GENERATE, Event.FAIL, State.IDLE),
]
REFUSED = [(s, e) for s, e in itertools.product(State, Event) if (s, e) not in {(a, b) for a, b, _ in ALLOWED}]


@pytest.mark.parametrize(("state", "event", "after"), ALLOWED)
def test_a_transition_leads_where_the_table_says(state, event, after):
    slot = Slot(0, state=state, job=object())
    assert slot.handle(event) is after
    assert (slot.job is None) == (after is State.IDLE)  # an idle slot runs nothing


@pytest.mark.parametrize(("state", "event"), REFUSED)
def test_an_event_with_no_transition_raises_and_leaves_the_state(state, event):
    slot = Slot(3, state=state)
    with pytest.raises(SlotError, match=f"slot 3: no transition for '{event.value}' from '{state.value}'"):
        slot.handle(event)
    assert slot.state is state


def test_the_table_is_exactly_the_allowed_transitions():
    assert {(s, e): a for s, e, a in ALLOWED} == TRANSITIONS


def test_every_busy_state_has_a_way_back_to_idle_for_cancel_and_failure():
    for state in (State.PREFILL, State.GENERATE):
        assert TRANSITIONS[state, Event.CANCEL] is TRANSITIONS[state, Event.FAIL] is State.IDLE


def slots(*held: list[int], used: tuple[int, ...] = (), busy: tuple[int, ...] = ()) -> list[Slot]:
    out = [Slot(i, held=list(h), last_used=used[i] if used else 0) for i, h in enumerate(held)]
    for i in busy:
        out[i].state = State.PREFILL
    return out


CHOICES = [
    # (held by each slot, last used, busy slots, prompt, reuse) -> (chosen slot, tokens kept)
    ([[1, 2, 3], [1, 2, 9], []], (0, 0, 0), (), [1, 2, 3, 4], True, (0, 3)),
    ([[1, 2, 3], [1, 2, 9], []], (0, 0, 0), (0,), [1, 2, 3, 4], True, (1, 2)),
    ([[1, 2, 3, 4]], (0,), (), [1, 2, 3, 4], True, (0, 3)),  # the last prompt token is evaluated again
    ([[5], [6], [7]], (3, 1, 2), (), [1, 2], True, (1, 0)),  # no match: the least recently used
    ([[1, 2], [1, 2]], (5, 4), (), [1, 2, 3], True, (1, 2)),  # a tie: the least recently used
    ([[1, 2, 3], [4]], (0, 1), (), [1, 2, 3, 4], False, (0, 0)),  # no cache: nothing kept, LRU
    ([[1, 2, 3], []], (0, 1), (), [1, 2, 3, 4], False, (1, 0)),  # no cache: an empty slot first
    ([[1, 9, 9, 9], []], (0, 1), (), [1, 2, 3], True, (1, 0)),  # keeping 1 would lose 3: an empty slot
    ([[1, 2, 3, 9], []], (0, 1), (), [1, 2, 3], True, (1, 0)),  # keeping 2 loses 2: no saving, the empty slot
    ([[1, 9, 9], [1, 8, 8]], (2, 1), (), [1, 2, 3], True, (1, 1)),  # every slot would lose more: LRU
    ([[1, 2, 3, 4, 9], [1, 8, 8]], (0, 1), (), [1, 2, 3, 4], True, (0, 3)),  # keeps 3, loses 2: worth it
    # otherwise alike: the slot next to the busy ones (a step costs a pass per run of busy ids)
    ([[5], [6], [7], [8]], (9, 2, 1, 3), (0,), [1, 2], True, (1, 0)),  # not the LRU slot 2: beside 0
    ([[], [], [], []], (0, 0, 0, 0), (2,), [1, 2], True, (1, 0)),  # empty slots: beside 2, not slot 0
    ([[], [6], [7], [8]], (0, 0, 0, 0), (2,), [1, 2], True, (0, 0)),  # an empty slot still comes first
    ([[5], [6], [7], [1, 2, 3]], (0, 0, 0, 0), (0,), [1, 2, 3, 4], True, (3, 3)),  # a saving comes first
]


@pytest.mark.parametrize(("held", "used", "busy", "prompt", "reuse", "expected"), CHOICES)
def test_a_prompt_takes_the_idle_slot_that_saves_the_most_evaluation(held, used, busy, prompt, reuse, expected):
    slot, keep = choose_slot(slots(*held, used=used, busy=busy), prompt, reuse=reuse)
    assert (slot.seq, keep) == expected


@pytest.mark.parametrize(("seqs", "expected"), [(set(), 0), ({0}, 1), ({0, 1, 2}, 1), ({0, 2}, 2), ({1, 3, 5}, 3)])
def test_busy_ids_count_one_pass_a_run(seqs, expected):
    assert runs(seqs) == expected


def test_no_slot_is_chosen_while_all_are_busy():
    assert choose_slot(slots([1], [2], busy=(0, 1)), [1, 2], reuse=True) is None
