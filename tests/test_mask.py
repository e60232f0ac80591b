"""Token masks on real vocabularies: a bit is set exactly when ``accept_token`` succeeds.

The mask comes from the cached context-independent split plus per-step checks; the oracle
is ``accept_token`` (a plain byte-by-byte step with the real stack), so any error in the
cache, the trie walk or the key folding shows up as a disagreement.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from llamay import GrammarError, LlamayError, Matcher, UsageError, allocate_bitmask, ir
from llamay.options import CompileOptions
from tests.irgen import grammars

VOCABS = ["byte_vocab", "smollm2_vocab", "llama3_vocab", "gemma_vocab"]


def allowed(mask: np.ndarray, size: int) -> np.ndarray:
    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:size]
    return np.flatnonzero(bits)


def accepted_by_stepping(m: Matcher, vocab) -> np.ndarray:
    ok = []
    for i in range(vocab.size):
        if m.accept_token(i):
            ok.append(i)
            m.rollback(1)
    return np.array(ok, dtype=np.int64)


def json_like() -> ir.Grammar:
    """A small recursive JSON-shaped grammar: the kind of position the cache sees in practice."""
    g = ir.Grammar()
    ws = ir.optional(ir.whitespace())
    string = ir.seq(ir.literal('"'), ir.repeat(ir.byte_set(b"abcdefghij xyz"), 0, 12), ir.literal('"'))
    number = ir.seq(ir.optional(ir.literal("-")), ir.plus(ir.byte_range(0x30, 0x39)))
    value = ir.alt(string, number, ir.Ref("obj"), ir.literal("true"))
    member = ir.seq(ws, string, ws, ir.literal(":"), ws, value, ws)
    g.define("obj", ir.seq(ir.literal("{"), ir.optional(ir.seq(member, ir.star(ir.seq(ir.literal(","), member)))),
                           ir.literal("}")))
    g.define("root", ir.seq(ws, ir.Ref("obj"), ws))
    return g


def walk_randomly(m: Matcher, vocab, mask, draw_index, steps: int) -> None:
    """Advance ``m`` by up to ``steps`` tokens chosen among those its mask allows."""
    for _ in range(steps):
        m.fill_next_token_bitmask(mask)
        ids = [i for i in allowed(mask, vocab.size) if i not in vocab.eos_ids]
        if not ids:
            return
        assert m.accept_token(int(ids[draw_index(len(ids))]))


@pytest.mark.parametrize("vocab_name", VOCABS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mask_bit_set_iff_token_accepted(request, vocab_name, data):
    vocab = request.getfixturevalue(vocab_name)
    g = data.draw(st.just("json") | grammars(recursive=True))
    try:
        grammar, budget = (json_like(), 3) if g == "json" else (g, 4)
        compiled = grammar.compile(options=CompileOptions(whitespace_budget=budget))
    except GrammarError:
        return
    m = Matcher(compiled, vocab)
    mask = allocate_bitmask(vocab.size)
    try:
        walk_randomly(m, vocab, mask, lambda n: data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, 12)))
        m.fill_next_token_bitmask(mask)
    except LlamayError as exc:  # nested counters over the same bytes can be refused as too ambiguous
        assert "MAX_CONFIGURATIONS" in str(exc)
        reject()
    np.testing.assert_array_equal(allowed(mask, vocab.size), accepted_by_stepping(m, vocab))


@pytest.mark.parametrize("vocab_name", ["byte_vocab", "smollm2_vocab"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_rollback_restores_the_exact_mask(request, vocab_name, data):
    vocab = request.getfixturevalue(vocab_name)
    m = Matcher(json_like().compile(options=CompileOptions(whitespace_budget=8)), vocab)
    mask, before, after = (allocate_bitmask(vocab.size) for _ in range(3))
    walk_randomly(m, vocab, mask, lambda n: data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, 6)))
    m.fill_next_token_bitmask(before)
    accepting, steps = m.is_accepting(), m.steps
    walk_randomly(m, vocab, mask, lambda n: data.draw(st.integers(0, n - 1)), data.draw(st.integers(1, 8)))
    m.rollback(m.steps - steps)
    m.fill_next_token_bitmask(after)
    np.testing.assert_array_equal(before, after)
    assert (m.is_accepting(), m.steps) == (accepting, steps)


def test_finished_document_allows_only_eos(llama3_vocab):
    g = ir.Grammar()
    g.define("root", ir.literal('{"ok":true}'))
    m = Matcher(g.compile(), llama3_vocab)
    mask = allocate_bitmask(llama3_vocab.size)
    assert m.accept_bytes(b'{"ok":true}')
    m.fill_next_token_bitmask(mask)
    assert list(allowed(mask, llama3_vocab.size)) == sorted(llama3_vocab.eos_ids)
    assert m.accept_token(llama3_vocab.eos_ids[0])
    assert m.is_terminated()
    m.fill_next_token_bitmask(mask)
    assert not mask.any()
    assert not m.accept_token(llama3_vocab.eos_ids[0])


def test_eos_is_allowed_exactly_when_the_automaton_accepts(byte_vocab):
    g = ir.Grammar()
    g.define("root", ir.plus(ir.byte_range(0x30, 0x39)))
    m = Matcher(g.compile(), byte_vocab)
    mask = allocate_bitmask(byte_vocab.size)
    eos = byte_vocab.eos_ids[0]
    m.fill_next_token_bitmask(mask)
    assert eos not in allowed(mask, byte_vocab.size) and not m.accept_token(eos)
    assert m.accept_token(ord("7"))
    m.fill_next_token_bitmask(mask)
    assert eos in allowed(mask, byte_vocab.size)


@pytest.mark.parametrize(
    ("make_mask", "needle"),
    [
        (lambda v: np.zeros((v + 31) // 32 + 1, np.int32), "words"),
        (lambda v: np.zeros((v + 31) // 32, np.int64), "int32"),
        (lambda v: np.zeros((v + 31) // 32, np.uint32), "int32"),
        (lambda v: [0] * ((v + 31) // 32), "int32"),
        (lambda v: np.zeros(((v + 31) // 32) * 2, np.int32)[::2], "contiguous"),
        (lambda v: np.zeros((2, 2, (v + 31) // 32), np.int32), "1-D or 2-D"),
    ],
    ids=["too-long", "int64", "uint32", "list", "strided", "3-d"],
)
def test_bad_bitmask_is_a_usage_error(byte_vocab, make_mask, needle):
    m = Matcher(json_like().compile(), byte_vocab)
    with pytest.raises(UsageError, match=needle):
        m.fill_next_token_bitmask(make_mask(byte_vocab.size))


def test_a_row_of_a_batch_mask_is_filled(byte_vocab):
    m = Matcher(json_like().compile(), byte_vocab)
    batch = allocate_bitmask(byte_vocab.size, batch=3)
    single = allocate_bitmask(byte_vocab.size)
    m.fill_next_token_bitmask(batch, 1)
    m.fill_next_token_bitmask(single)
    np.testing.assert_array_equal(batch[1], single)
    assert (batch[0] == -1).all() and (batch[2] == -1).all()


def test_usage_errors_name_the_problem(byte_vocab):
    m = Matcher(json_like().compile(), byte_vocab)
    with pytest.raises(UsageError, match="outside the vocabulary"):
        m.accept_token(byte_vocab.size)
    with pytest.raises(UsageError, match="roll back"):
        m.rollback(1)
    with pytest.raises(UsageError, match="no vocabulary"):
        Matcher(json_like().compile()).fill_next_token_bitmask(allocate_bitmask(257))
