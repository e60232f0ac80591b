"""One llama.cpp batch over several slots: any listing order gives each entry its own logits, in one pass.

Each slot has its own KV stream, and llama.cpp evaluates consecutive sequence ids together in
the order a batch lists them; the scheduler lists slots in the order requests came. Real
SmolLM2, four slots, each holding the same 40-token prefix.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

from llamay.backends.llamacpp import load

PREFIX = 40
TOKENS = {0: 1000, 1: 2000, 2: 3000, 3: 4000}  # a different next token per slot: different logits per entry


@pytest.fixture(scope="module")
def backend():
    b = load(slots=4, n_threads=2)
    for seq in range(4):
        b.decode([100 + k for k in range(PREFIX)], list(range(PREFIX)), [seq] * PREFIX,
                 [False] * (PREFIX - 1) + [True])
    return b


def step(backend, seqs: list[int]) -> dict[int, np.ndarray]:
    """Each listed slot's next token at position ``PREFIX``: its logits, by slot; the slots then forget it."""
    backend.decode([TOKENS[s] for s in seqs], [PREFIX] * len(seqs), seqs, [True] * len(seqs))
    out = {s: backend.logits_at(i).copy() for i, s in enumerate(seqs)}
    for s in seqs:
        backend.forget(s, PREFIX)
    return out


@pytest.mark.parametrize("order", [[3, 1, 0, 2], [3, 2, 1, 0], [2, 0], [1, 3, 2]])
def test_each_entry_reads_its_own_logits_in_any_listing_order(backend, order):
    listed, alone = step(backend, order), {s: step(backend, [s])[s] for s in order}
    for s in order:
        assert int(np.argmax(listed[s])) == int(np.argmax(alone[s])), f"slot {s} got another entry's logits"
        np.testing.assert_allclose(listed[s], alone[s], atol=0.05)
    assert len({int(np.argmax(v)) for v in listed.values()}) > 1  # the entries differ, so a swap would show


def test_a_batch_listed_out_of_order_costs_one_pass(backend):
    """Listed 3, 2, 1, 0, llama.cpp would take four passes over the weights; sorted, it takes one."""
    times: dict[str, list[float]] = {"sorted": [], "reversed": []}
    for _ in range(9):
        for name, seqs in (("sorted", [0, 1, 2, 3]), ("reversed", [3, 2, 1, 0])):
            start = time.perf_counter()
            step(backend, seqs)
            times[name].append(time.perf_counter() - start)
    ratio = statistics.median(times["reversed"]) / statistics.median(times["sorted"])
    assert ratio < 1.4, f"a reversed batch took {ratio:.2f}x a sorted one"
