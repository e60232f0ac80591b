"""The budget-aware mask: with tokens left at least the distance to completion, every walk ends complete.

A random walk picks uniformly among the tokens the mask allows (the worst model: it never
heads for the end on its own), with ``tokens_left`` counting down from a budget of the start's
``completion_distance`` plus some slack. Whatever the grammar and vocabulary, it must stop on
a complete document within the budget: schemas (checked with ``jsonschema`` too), random IR
grammars with counted repetitions and recursion, and GBNF grammars of llama.cpp's collection.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import llamay
from llamay._core.bitmask import allocate_bitmask
from llamay._core.distance import INF, Distances
from llamay._core.maskcache import cache_for
from llamay._core.matcher import Matcher
from tests.conftest import corpus
from tests.irgen import grammars

VOCABS = ["smollm2_vocab", "llama3_vocab", "gemma_vocab"]
PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


def walk(matcher: Matcher, budget: int, rng: np.random.Generator) -> bytes:
    """A uniform random walk under the budget-aware mask; returns the document's bytes."""
    vocab = matcher.vocab
    mask = allocate_bitmask(vocab.size)
    out = []
    for i in range(budget):
        matcher.fill_next_token_bitmask(mask, tokens_left=budget - i)
        allowed = np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[: vocab.size])
        assert allowed.size, f"empty mask after {out!r}"
        token = int(rng.choice(allowed))
        assert matcher.accept_token(token)
        if token in vocab.eos_ids:
            break
        out.append(vocab.token_bytes(token))
    return b"".join(out)


def closes_within_budget(grammar, vocab, slack: int, seed: int, *, spellable: bool = True) -> bytes:
    """``spellable``: every byte the grammar needs has a token, so a distance must be known.

    A walk under a loose budget goes first, on the same grammar: what its checks leave in the
    mask cache must not let the tight walk after it keep a token it cannot afford.
    """
    matcher = Matcher(grammar, vocab)
    start = matcher.completion_distance()
    if spellable:
        assert start is not None
    assume(start is not None)
    docs = []
    try:
        for budget in (start + slack + 24, start + slack):
            matcher = Matcher(grammar, vocab)
            docs.append(walk(matcher, budget, np.random.default_rng(seed)))
            assert matcher.is_accepting(), f"budget {budget} (distance {start}) ended at {docs[-1][-80:]!r}"
    except llamay.LlamayError as e:  # a random grammar as ambiguous as (a*)*: refused as ever, budget or not
        assume("too ambiguous" not in str(e))
        raise
    return docs[-1]


# -- schemas -------------------------------------------------------------------------------------
_scalar = st.sampled_from([
    {"type": "number"}, {"type": "integer"}, {"type": "boolean"}, {"type": "null"},
    {"type": "string"}, {"type": "string", "minLength": 3}, {"type": "string", "format": "date"},
    {"enum": ["alpha", "beta", 7]}, {"type": "integer", "minimum": 10, "maximum": 99999},
])


def _object(children):
    return st.dictionaries(st.sampled_from(["a", "bb", "name", "value", "x_y"]), children, min_size=1,
                           max_size=3).map(lambda props: {"type": "object", "properties": props,
                                                          "required": sorted(props)})


def _array(children):
    return st.tuples(children, st.integers(0, 3)).map(
        lambda t: {"type": "array", "items": t[0], "minItems": t[1]})


schemas = st.recursive(_scalar, lambda inner: _object(inner) | _array(inner), max_leaves=6)


@pytest.mark.parametrize("vocab_name", VOCABS)
@PROPERTY
@given(schema=schemas, slack=st.integers(0, 6), seed=st.integers(0, 2**32 - 1))
def test_schema_documents_close_within_any_budget_at_least_the_distance(request, vocab_name, schema, slack, seed):
    vocab = request.getfixturevalue(vocab_name)
    doc = closes_within_budget(llamay.compile_json_schema(schema), vocab, slack, seed)
    jsonschema.validate(json.loads(doc), schema)


@pytest.mark.parametrize("vocab_name", VOCABS)
@PROPERTY
@given(slack=st.integers(0, 6), seed=st.integers(0, 2**32 - 1))
def test_any_json_closes_within_any_budget_at_least_the_distance(request, vocab_name, slack, seed):
    vocab = request.getfixturevalue(vocab_name)
    json.loads(closes_within_budget(llamay.any_json(object_only=True), vocab, slack, seed))


# -- grammars ------------------------------------------------------------------------------------
@pytest.mark.parametrize("vocab_name", VOCABS)
@PROPERTY
@given(g=grammars(), slack=st.integers(0, 6), seed=st.integers(0, 2**32 - 1))
def test_ir_grammars_close_within_any_budget_at_least_the_distance(request, vocab_name, g, slack, seed):
    vocab = request.getfixturevalue(vocab_name)
    try:
        compiled = g.compile()
    except llamay.GrammarError:
        assume(False)
    closes_within_budget(compiled, vocab, slack, seed, spellable=False)  # budgeted whitespace may be required


GBNF = ["arithmetic", "c", "chess", "english", "japanese", "json", "json_arr", "list"]


@pytest.mark.parametrize("vocab_name", VOCABS)
@pytest.mark.parametrize("name", GBNF)
def test_gbnf_grammars_close_within_any_budget_at_least_the_distance(request, vocab_name, name):
    vocab = request.getfixturevalue(vocab_name)
    compiled = llamay.compile_gbnf((corpus("gbnf", "llama.cpp") / f"{name}.gbnf").read_text(encoding="utf-8"))
    matcher = Matcher(compiled, vocab)
    start = matcher.completion_distance()
    assert start is not None
    for seed in range(4):
        matcher.reset()
        doc = walk(matcher, start + seed, np.random.default_rng(seed))
        assert matcher.is_accepting(), f"{name}: budget {start + seed} ended at {doc[-80:]!r}"


# -- the contract --------------------------------------------------------------------------------
@PROPERTY
@given(schema=schemas, seed=st.integers(0, 2**32 - 1), budgets=st.lists(st.integers(1, 40), min_size=3, max_size=8))
def test_a_sets_recorded_check_gives_the_mask_a_fresh_check_gives(smollm2_vocab, schema, seed, budgets):
    """What the budget's checks find is kept per position set and spares later visits the check. At
    every step of two walks over the same positions, under tokens left that rise and fall, the mask
    of a matcher whose cache holds those findings is the mask of one on its own compile, whose cache
    has never seen the set."""
    vocab = smollm2_vocab
    warm = Matcher(llamay.compile_json_schema(schema), vocab)
    warm_mask, cold_mask = allocate_bitmask(vocab.size), allocate_bitmask(vocab.size)
    for _ in range(2):
        warm.reset()
        rng, taken = np.random.default_rng(seed), []
        for left in budgets * 3:
            if warm.is_terminated():
                break
            cold = Matcher(llamay.compile_json_schema(schema), vocab)
            assert all(cold.accept_token(t) for t in taken)
            warm.fill_next_token_bitmask(warm_mask, tokens_left=left)
            cold.fill_next_token_bitmask(cold_mask, tokens_left=left)
            assert (warm_mask == cold_mask).all(), f"tokens_left {left} after {taken}"
            allowed = np.flatnonzero(np.unpackbits(warm_mask.view(np.uint8), bitorder="little")[: vocab.size])
            taken.append(int(rng.choice(allowed)))
            assert warm.accept_token(taken[-1])


def test_far_from_the_budget_the_mask_is_the_plain_mask(smollm2_vocab):
    m = Matcher(llamay.compile_json_schema({"type": "array", "items": {"type": "string"}}), smollm2_vocab)
    plain, budgeted = allocate_bitmask(smollm2_vocab.size), allocate_bitmask(smollm2_vocab.size)
    m.accept_bytes(b'["ab')
    m.fill_next_token_bitmask(plain)
    assert m.fill_next_token_bitmask(budgeted, tokens_left=500) is False
    assert (plain == budgeted).all() and not m.closed_by_budget


@pytest.mark.parametrize(("tokens_left", "kept", "removed"), [
    (1, {b'"]'}, {b'"', b"c", b'",'}),  # '"]' is one SmolLM2 token: the only way to end in one
    (2, {b'"]', b'"', b"c"}, {b'",'}),  # after '",' another string and ']' are owed
])
def test_at_the_distance_only_tokens_that_can_still_close_stay(smollm2_vocab, tokens_left, kept, removed):
    m = Matcher(llamay.compile_json_schema({"type": "array", "items": {"type": "string"}}), smollm2_vocab)
    assert m.accept_bytes(b'["ab')
    assert m.completion_distance() == 1
    mask = allocate_bitmask(smollm2_vocab.size)
    assert m.fill_next_token_bitmask(mask, tokens_left=tokens_left) is True and m.closed_by_budget
    allowed = {smollm2_vocab.token_bytes(int(t))
               for t in np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[: smollm2_vocab.size])}
    assert kept <= allowed and not removed & allowed
    if tokens_left == 1:
        assert allowed == kept


def test_a_budget_below_the_distance_keeps_the_tokens_that_come_nearer(smollm2_vocab):
    m = Matcher(llamay.compile_json_schema({"type": "object", "properties": {"name": {"type": "string"}},
                                            "required": ["name"]}), smollm2_vocab)
    before = m.completion_distance()
    mask = allocate_bitmask(smollm2_vocab.size)
    m.fill_next_token_bitmask(mask, tokens_left=1)
    allowed = np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[: smollm2_vocab.size])
    assert allowed.size
    for t in allowed[:50]:
        assert m.accept_token(int(t))
        assert m.completion_distance() < before
        m.rollback(1)


@pytest.mark.parametrize("tokens_left", [0, -3])
def test_tokens_left_below_one_is_refused(smollm2_vocab, tokens_left):
    m = Matcher(llamay.compile_json_schema({"type": "string"}), smollm2_vocab)
    with pytest.raises(llamay.UsageError, match="tokens_left"):
        m.fill_next_token_bitmask(allocate_bitmask(smollm2_vocab.size), tokens_left=tokens_left)


@pytest.mark.parametrize(("vocab_name", "byte", "spelled"), [
    ("smollm2_vocab", 0x04, False),  # no SmolLM2 token holds this control character
    ("llama3_vocab", 0x04, True),
    ("gemma_vocab", 0x04, True),
])
def test_distances_count_only_what_the_vocabulary_spells(request, vocab_name, byte, spelled):
    vocab = request.getfixturevalue(vocab_name)
    g = llamay.ir.Grammar()
    g.define("root", llamay.ir.literal(bytes([byte])))
    d = Matcher(g.compile(), vocab).completion_distance()
    assert (d == 1) if spelled else (d is None)


LONG_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1000}, "minItems": 100}
LOOSE = {"anyOf": [{"type": "null"}, LONG_STRINGS]}  # a bound is a maximum over alternatives


@pytest.mark.parametrize("vocab_name", VOCABS)
@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"type": "integer"}}}},
    LOOSE,  # bounds that span more than 16 bits: both passes of the sort decide
])
def test_token_bounds_are_their_bytes_sums_checked_largest_first_ties_by_id(request, vocab_name, schema):
    vocab = request.getfixturevalue(vocab_name)
    distances = Distances(llamay.compile_json_schema(schema), vocab.trie)
    bounds = distances.token_bounds()
    per_byte = distances.byte_bounds().astype(np.int64)
    spelled = [vocab.grammar_bytes(t) for t in range(vocab.size)]  # what the trie holds: special tokens' edges
    sums = [per_byte[np.frombuffer(b, np.uint8)].sum() if b else -INF for b in spelled]
    np.testing.assert_array_equal(bounds, np.clip(sums, -INF, INF))  # a token's bound: its bytes' sum
    checked = bounds > -INF
    expected = np.argsort(-bounds.astype(np.int64), kind="stable")[: np.count_nonzero(checked)]
    np.testing.assert_array_equal(distances.token_order(), expected)
    if schema is LOOSE:
        assert bounds[checked].max() - bounds[checked].min() >= 1 << 16


@pytest.mark.parametrize("vocab_name", VOCABS)
@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
    LOOSE,
])
def test_tokens_are_ordered_only_once_a_check_comes_within_the_largest_bound(request, vocab_name, schema):
    """A mask far from its budget reads no token's bound: the pass over the vocabulary waits for one near it."""
    vocab = request.getfixturevalue(vocab_name)
    grammar = llamay.compile_json_schema(schema)
    mask = allocate_bitmask(vocab.size)
    far = Matcher(grammar, vocab)
    far.fill_next_token_bitmask(mask, tokens_left=INF - 1)
    distances = cache_for(grammar, vocab).distances
    loose = distances.upper
    assert not distances.ordered and loose >= 0
    near = Matcher(grammar, vocab)
    near.fill_next_token_bitmask(mask, tokens_left=near.completion_distance())  # no slack at all
    assert cache_for(grammar, vocab).distances is distances and distances.ordered
    assert loose >= int(distances.token_bounds().max()) == distances.upper
