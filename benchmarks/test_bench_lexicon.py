"""Lexicon masks: skeleton indexing against the same word list compiled as an ordinary grammar.

Both constrain the same text; the ratio of their per-step times (``extra_info``) is the
figure. The ordinary grammar is a case-insensitive word trie in the IR, masked through the
generic automaton and its cache; the word list is cut to 3,000 words so that grammar stays
compilable, and both walk the same token sequence.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import llamay
from benchmarks.workloads import per_token_stats
from llamay import ir
from llamay.grammars.lexicon import compile_lexicon

SEPARATORS = b" \n.,;:!?'\"()-"
TEXT = (b"The cat sat on the mat, and the dog ran in the park. She said: \"Come here!\" "
        b"They walked along the river (slowly) - it was a long day; then night came.")


def _words():
    from english_words import get_english_words_set

    words = sorted(get_english_words_set(["web2"], lower=True, alpha=True))
    keep = {w.decode().lower() for w in TEXT.split() for w in [w.strip(SEPARATORS)] if w}
    return sorted(keep | set(words[::80][:3000]))


def _trie_grammar(words):
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w.encode():
            node = node.setdefault(ch, {})
        node[None] = True

    def expr(node):
        options = [ir.seq(ir.byte_set(bytes({ch, ord(chr(ch).upper())})), expr(child))
                   for ch, child in sorted((k, v) for k, v in node.items() if k is not None)]
        if None in node:
            options.append(ir.EMPTY)
        return ir.alt(*options)

    g = ir.Grammar()
    sep = ir.byte_set(SEPARATORS)
    word = g.define("word", expr(trie))
    g.define("root", ir.seq(ir.star(sep), ir.optional(ir.seq(word, ir.star(ir.seq(ir.plus(sep), word)))),
                            ir.star(sep)))
    return g.compile()


@pytest.mark.parametrize("fresh", [False, True], ids=["warm", "fresh-positions"])
@pytest.mark.parametrize("kind", ["skeleton", "grammar"])
def test_lexicon_mask_per_step(benchmark, smollm2_vocab, kind, fresh):
    """``fresh-positions``: a new compile per round, so every position is met for the first time,
    as in real generation where the text never repeats (the compile and the first Matcher are not timed)."""
    words = _words()
    build = (lambda: compile_lexicon(words)) if kind == "skeleton" else (lambda: _trie_grammar(words))
    grammar = build()
    vocab = smollm2_vocab
    by_bytes = {vocab.token_bytes(i): i for i in range(vocab.size) if vocab.token_bytes(i)}
    m = llamay.Matcher(grammar, vocab)
    mask = llamay.allocate_bitmask(vocab.size)
    tokens, pos = [], 0
    while pos < len(TEXT):  # greedy longest allowed tokens
        for n in range(min(16, len(TEXT) - pos), 0, -1):
            tok = by_bytes.get(TEXT[pos : pos + n])
            if tok is not None and m.accept_token(tok):
                tokens.append(tok)
                pos += n
                break
    times: list[float] = []
    matchers = [m]

    def setup():
        if fresh:
            matchers[0] = llamay.Matcher(build(), vocab)

    def walk():
        m = matchers[0]
        m.reset()
        for tok in tokens:
            t0 = time.perf_counter()
            m.fill_next_token_bitmask(mask)
            times.append(time.perf_counter() - t0)
            assert m.accept_token(tok)

    walk()  # both warm: the lexicon's root walks, the grammar's mask cache
    times.clear()
    benchmark.group = f"lexicon mask per step (SmolLM2, {'fresh' if fresh else 'warm'})"
    benchmark.pedantic(walk, setup=setup, rounds=10 if not fresh else 3)
    benchmark.extra_info.update(per_token_stats(times))
    benchmark.extra_info["median_step_us"] = float(np.median(times) * 1e6)
