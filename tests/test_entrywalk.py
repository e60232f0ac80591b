"""The first-visit fast path (``_core.entrywalk``): masks from the set machine and the string slices.

The oracle is the same as in test_mask.py: a bit is set exactly when ``accept_token`` succeeds.
Here the grammars are JSON Schemas, whose masks go through the slice paths (string bodies,
bounded strings, key positions of open objects, escapes, multi-byte characters) that random
IR grammars rarely reach.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from conftest import read_testdata
from feed import greedy_tokens
from test_mask import accepted_by_stepping, allowed

from llamay import Matcher, allocate_bitmask, compile_json_schema
from llamay._core.maskcache import cache_for

VOCABS = ["byte_vocab", "smollm2_vocab", "llama3_vocab", "gemma_vocab"]

#: name -> a schema and documents it accepts, fed whole
SCHEMAS = {name: (c["schema"], c["documents"]) for name, c in read_testdata("schemas", "fastpath.json").items()}


@pytest.mark.parametrize("vocab_name", VOCABS)
@pytest.mark.parametrize("budget", [None, 64], ids=["unbounded-ws", "ws-64"])
def test_masks_along_documents_match_stepping(request, vocab_name, budget):
    vocab = request.getfixturevalue(vocab_name)
    mask = allocate_bitmask(vocab.size)
    # every position on the small vocabularies; a sample on the large ones (each check steps every token)
    stride = {"byte_vocab": 1, "smollm2_vocab": 1, "llama3_vocab": 2, "gemma_vocab": 3}[vocab_name]
    for name, (schema, documents) in SCHEMAS.items():
        grammar = compile_json_schema(schema, closed_objects=False, whitespace_budget=budget)
        for doc in documents:
            text = json.dumps(json.loads(doc), ensure_ascii=False).encode() if budget else doc.encode()
            m = Matcher(grammar, vocab)
            tokens = greedy_tokens(m, vocab, text)
            for p, tok in enumerate([*tokens, None]):
                if p % stride == 0 or tok is None:
                    m.fill_next_token_bitmask(mask)
                    np.testing.assert_array_equal(
                        allowed(mask, vocab.size),
                        accepted_by_stepping(m, vocab),
                        err_msg=f"{name} at token {p} of {text!r}",
                    )
                if tok is not None:
                    assert m.accept_token(tok)


def test_matchers_of_one_grammar_in_threads_agree(smollm2_vocab):
    """Threads share the grammar's set machine (under its lock) and mask cache."""
    schema, documents = SCHEMAS["open-object"]
    grammar = compile_json_schema(schema, closed_objects=False)
    reference = compile_json_schema(schema, closed_objects=False)
    texts = [d.encode() for d in documents] * 3
    expected = []
    for text in texts:
        m = Matcher(reference, smollm2_vocab)
        mask = allocate_bitmask(smollm2_vocab.size)
        masks = []
        for tok in [*greedy_tokens(m, smollm2_vocab, text), None]:
            m.fill_next_token_bitmask(mask)
            masks.append(mask.copy())
            if tok is not None:
                m.accept_token(tok)
        expected.append(masks)
    results: dict[int, list] = {}

    def run(k: int) -> None:
        m = Matcher(grammar, smollm2_vocab)
        mask = allocate_bitmask(smollm2_vocab.size)
        masks = []
        for tok in [*greedy_tokens(m, smollm2_vocab, texts[k]), None]:
            m.fill_next_token_bitmask(mask)
            masks.append(mask.copy())
            if tok is not None:
                m.accept_token(tok)
        results[k] = masks

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(texts))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for k in range(len(texts)):
        assert len(results[k]) == len(expected[k])
        for got, want in zip(results[k], expected[k], strict=True):
            np.testing.assert_array_equal(got, want)


# Counted repetitions whose counters fold (``fold_counter``): each case is a schema, a prefix
# that sets the counter to ``k``, and the counts around the bounds and the fold threshold
# ``max - horizon`` (the vocabulary's longest token, in bytes) where the mask is checked.
COUNTED = {
    "maxLength": ({"type": "string", "minLength": 3, "maxLength": 300}, 300, lambda k: '"' + ("the fox " * 40)[:k]),
    "pattern-class": (
        {"type": "string", "pattern": "^[a-z0-9_-]{2,300}$"},
        300,
        lambda k: '"' + ("snake_case-42" * 30)[:k],
    ),
    "maxItems": (
        {"type": "array", "items": {"type": "integer"}, "maxItems": 200},
        200,
        lambda k: "[" + ",".join(["7"] * k),
    ),
    "nested": (  # k items, the last a string of k characters: the items' counter is in the frame below
        {"type": "array", "maxItems": 250, "items": {"type": "string", "maxLength": 250}},
        250,
        lambda k: "[" + '"ab",' * (max(k, 1) - 1) + '"' + ("xyz " * 70)[:k],
    ),
}


def _counts(top: int, horizon: int) -> list[int]:
    edge = top - horizon
    picks = {0, 1, 2, 3, 4, edge - 2, edge - 1, edge, edge + 1, top - 3, top - 1, top}
    return sorted(k for k in picks if 0 <= k <= top)


@pytest.mark.parametrize("vocab_name", ["byte_vocab", "smollm2_vocab", "llama3_vocab"])
@pytest.mark.parametrize("case", COUNTED)
def test_masks_match_stepping_at_every_counter_regime(request, vocab_name, case):
    """At, near and far from ``min`` and ``max``; tokens longer than the room left are refused.

    One grammar serves every count, so folded counters share cache entries and machine sets,
    and each count is checked both on a first visit and after its neighbours filled the cache.
    """
    vocab = request.getfixturevalue(vocab_name)
    schema, top, prefix = COUNTED[case]
    grammar = compile_json_schema(schema, closed_objects=False)
    mask = allocate_bitmask(vocab.size)
    counted = False
    for k in [*_counts(top, vocab.trie.max_depth), *_counts(top, vocab.trie.max_depth)[::-1]]:
        m = Matcher(grammar, vocab)
        assert m.accept_bytes(prefix(k).encode())
        counted |= any(c[1] > 0 for c in m.configurations())
        m.fill_next_token_bitmask(mask)
        np.testing.assert_array_equal(
            allowed(mask, vocab.size), accepted_by_stepping(m, vocab), err_msg=f"{case} with count {k}"
        )
    assert counted, "the schema should lower onto a frame counter"


@pytest.mark.parametrize("vocab_name", ["smollm2_vocab", "llama3_vocab"])
def test_class_strings_match_stepping_at_every_token(request, vocab_name):
    """Every position of the class-constrained values, and the class path is what served them."""
    vocab = request.getfixturevalue(vocab_name)
    schema, documents = SCHEMAS["classes"]
    grammar = compile_json_schema(schema, closed_objects=False)
    mask = allocate_bitmask(vocab.size)
    for doc in documents:
        m = Matcher(grammar, vocab)
        tokens = greedy_tokens(m, vocab, doc.encode())
        for p, tok in enumerate([*tokens, None]):
            m.fill_next_token_bitmask(mask)
            np.testing.assert_array_equal(
                allowed(mask, vocab.size), accepted_by_stepping(m, vocab), err_msg=f"at token {p} of {doc!r}"
            )
            if tok is not None:
                assert m.accept_token(tok)
    assert cache_for(grammar, vocab).machine.kinds[4][0] > 0


@pytest.mark.parametrize("vocab_name", ["smollm2_vocab", "gemma_vocab"])
@pytest.mark.parametrize("left", [0, 1, 5, 15])
def test_a_whitespace_budget_nearly_spent_leaves_no_token_undecided(request, vocab_name, left):
    """A cache key records the whitespace budget left up to a window; below the window it is the whole
    budget, so the entry decides every token: a space past it is refused, not left to the real stack.
    (Left undecided, every token that starts with a space was stepped at every mask once the
    budget was spent: 0.7 ms a mask on SmolLM2, 7 ms on gemma-3.)"""
    vocab = request.getfixturevalue(vocab_name)
    grammar = compile_json_schema({"type": "object", "properties": {"name": {"type": "string"}}}, whitespace_budget=64)
    m = Matcher(grammar, vocab)
    assert m.accept_bytes(b"{" + b" " * (64 - left))
    before = set(cache_for(grammar, vocab).entries)
    mask = allocate_bitmask(vocab.size)
    m.fill_next_token_bitmask(mask)
    (key,) = set(cache_for(grammar, vocab).entries) - before
    assert cache_for(grammar, vocab).entries[key].summary[3] == 0
    np.testing.assert_array_equal(allowed(mask, vocab.size), accepted_by_stepping(m, vocab))


@pytest.mark.parametrize("vocab_name", ["smollm2_vocab", "llama3_vocab", "gemma_vocab"])
def test_tokens_past_the_whitespace_window_follow_the_budget_left_at_every_visit(request, vocab_name):
    """With more budget left than a key records, the tokens holding more whitespace than the window are
    decided by the budget left; what stepping them found is kept per budget left. Revisits of one
    position with budgets that fall and rise again (with a long whitespace token allowed at some, not
    at others) each give the mask stepping gives."""
    vocab = request.getfixturevalue(vocab_name)
    grammar = compile_json_schema({"type": "object", "properties": {"name": {"type": "string"}}}, whitespace_budget=64)
    mask = allocate_bitmask(vocab.size)
    seen = []
    for used in (0, 30, 46, 0, 46, 30):
        m = Matcher(grammar, vocab)
        assert m.accept_bytes(b"{" + b"\n" * used)
        m.fill_next_token_bitmask(mask)
        got = allowed(mask, vocab.size)
        np.testing.assert_array_equal(got, accepted_by_stepping(m, vocab), err_msg=f"{used} bytes spent")
        seen.append(len(got))
    assert seen[0] > seen[2]  # some token spends more whitespace than 18 bytes left allow
