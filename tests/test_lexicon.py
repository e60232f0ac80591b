"""Lexicon mode on real vocabularies: masks agree with stepping, and generated text is made of words."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay import GrammarError, Matcher, UsageError, allocate_bitmask
from llamay.grammars.lexicon import compile_lexicon, default_lexicon
from tests.test_mask import accepted_by_stepping, allowed

WORDS = ["the", "cat", "sat", "on", "mat", "category", "Dog", "dogs", "a", "an", "and", "über"]
SPLIT = re.compile(rb"[ \n.,;:!?'\"()\-]+")


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (b"the cat sat on the mat.", True), (b"The CAT, the dog!", True), (b"(a) - \"an\"", True),
        (b"\xc3\xbcber", True), (b"cats", False), (b"the 2 cats", False), (b"the\tcat", False),
        (b"categor", None), (b"", True),
    ],
)
def test_text_is_accepted_iff_made_of_words(text, ok):
    m = Matcher(compile_lexicon(WORDS))
    advanced = m.accept_bytes(text)
    if ok is None:  # a prefix of a word: alive, not complete
        assert advanced and not m.is_accepting()
    else:
        assert (advanced and m.is_accepting()) == ok


@pytest.mark.parametrize("vocab_name", ["byte_vocab", "smollm2_vocab", "llama3_vocab", "gemma_vocab"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mask_bit_set_iff_token_accepted(request, vocab_name, data):
    vocab = request.getfixturevalue(vocab_name)
    m = Matcher(compile_lexicon(WORDS), vocab)
    mask = allocate_bitmask(vocab.size)
    for _ in range(data.draw(st.integers(0, 6))):
        m.fill_next_token_bitmask(mask)
        ids = [int(i) for i in allowed(mask, vocab.size) if i not in vocab.eos_ids]
        if not ids:
            break
        assert m.accept_token(ids[data.draw(st.integers(0, len(ids) - 1))])
    m.fill_next_token_bitmask(mask)
    np.testing.assert_array_equal(allowed(mask, vocab.size), accepted_by_stepping(m, vocab))


def test_random_walk_writes_only_lexicon_words(smollm2_vocab):
    lexicon = default_lexicon()
    words = {w.lower() for w in _english_words()}
    rng = np.random.default_rng(11)
    mask = allocate_bitmask(smollm2_vocab.size)
    for _ in range(5):
        m = Matcher(lexicon, smollm2_vocab)
        text = b""
        for _ in range(40):
            m.fill_next_token_bitmask(mask)
            ids = allowed(mask, smollm2_vocab.size)
            token = int(rng.choice(ids))
            assert m.accept_token(token)
            if token in smollm2_vocab.eos_ids:
                break
            text += smollm2_vocab.token_bytes(token)
        complete = m.is_accepting()
        pieces = [p for p in SPLIT.split(text) if p]
        for piece in pieces if complete else pieces[:-1]:
            assert piece.decode().lower() in words, (piece, text)


def _english_words():
    from english_words import get_english_words_set

    return get_english_words_set(["web2"], lower=True, alpha=True)


@pytest.mark.parametrize(
    ("words", "error", "needle"),
    [(["", "123", "a b"], GrammarError, "no usable word"), ("the cat", UsageError, "list of words"),
     ([1, 2], GrammarError, "must be strings")],
)
def test_bad_lexicons_are_refused(words, error, needle):
    with pytest.raises(error, match=needle):
        compile_lexicon(words)


def test_unusable_entries_are_warned():
    assert compile_lexicon(["ok", "not ok", "r2d2"]).warnings == [
        "2 lexicon entries hold a separator, a digit or nothing and were left out"]
