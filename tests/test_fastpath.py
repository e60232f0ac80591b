"""The first-visit fast path (``_core.dfa``): string slices of the vocabulary and the set machine.

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
from llamay._core.dfa import slices_for
from llamay._core.maskcache import cache_for

VOCABS = ["byte_vocab", "smollm2_vocab", "llama3_vocab", "gemma_vocab"]

#: name -> a schema and documents it accepts, fed whole
SCHEMAS = {name: (c["schema"], c["documents"]) for name, c in read_testdata("schemas", "fastpath.json").items()}


def _safe_chars(b: bytes) -> tuple[int, int]:
    """(bytes, characters) of the longest prefix of ``b`` made of whole safe characters."""
    i = n = 0
    while i < len(b):
        for k in (1, 2, 3, 4):
            try:
                ch = b[i : i + k].decode("utf-8")
            except UnicodeDecodeError:
                continue
            break
        else:
            break
        if len(ch) != 1 or ch in '"\\' or ord(ch) < 0x20:
            break
        i += k
        n += 1
    return i, n


@pytest.mark.parametrize("vocab_name", VOCABS)
def test_slices_split_the_vocabulary(request, vocab_name):
    vocab = request.getfixturevalue(vocab_name)
    sl = slices_for(vocab.trie)
    a = sl.arrays()
    kinds, cum = a["kinds"], a["cum"]
    expected = np.full(len(kinds), -1)
    for i in range(len(kinds)):
        b = vocab.token_bytes(i)
        if b:
            used, chars = _safe_chars(b)
            if used == len(b):
                expected[i] = chars
    np.testing.assert_array_equal(kinds, expected)
    for r in sorted({min(r, sl.kmax) for r in (1, 2, 5, 16, sl.kmax)}):
        want = np.flatnonzero((kinds >= 1) & (kinds <= r))
        np.testing.assert_array_equal(allowed(cum[r].view(np.int32), vocab.size), want)
    # the short slice tokens by the bytes they hold, and by group of ASCII bytes
    short = [i for i in range(len(kinds)) if 1 <= kinds[i] <= sl.levels]
    holds = {i: set(vocab.token_bytes(i)) for i in short}
    for b in (0x20, 0x2D, 0x30, 0x41, 0x5F, 0x61, 0x7A, 0x7F):
        want = [i for i in short if b in holds[i]]
        np.testing.assert_array_equal(allowed(a["has"][b].view(np.int32), vocab.size), want, err_msg=hex(b))
    np.testing.assert_array_equal(
        allowed(a["wide"].view(np.int32), vocab.size), [i for i in short if max(holds[i]) >= 0x80]
    )
    digits = [i for i in short if holds[i] & set(b"0123456789")]
    np.testing.assert_array_equal(allowed(a["grp"][0].view(np.int32), vocab.size), digits)


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
