"""Mask time per token on a tool-call schema, and vocabulary build time, per real vocabulary.

Warm: the grammar's mask cache is filled by a first pass (as in a server, where every
request with the same schema shares it). Cold: a fresh compile each round, so the figure
includes compile and the first walk of every position (time to a finished document).
"""

from __future__ import annotations

import pytest

import llamay
from benchmarks.workloads import (
    TOOL_DOCUMENT,
    first_visit_tokens,
    first_visit_walk,
    greedy_tokens,
    per_token_stats,
    tool_grammar,
    walk_document,
)

VOCABS = ["smollm2_vocab", "llama3_vocab", "gemma_vocab"]


@pytest.mark.parametrize("vocab_name", VOCABS)
def test_mask_per_token_warm(benchmark, request, vocab_name):
    vocab = request.getfixturevalue(vocab_name)
    grammar = tool_grammar()
    tokens = greedy_tokens(grammar, vocab, TOOL_DOCUMENT)
    matcher = llamay.Matcher(grammar, vocab)
    mask = llamay.allocate_bitmask(vocab.size)
    walk_document(matcher, mask, tokens, vocab.eos_ids[0])  # fill the cache
    times: list[float] = []
    benchmark.group = "mask per token (warm)"
    benchmark.pedantic(walk_document, args=(matcher, mask, tokens, vocab.eos_ids[0], times), rounds=30)
    benchmark.extra_info.update(per_token_stats(times))


@pytest.mark.parametrize("vocab_name", VOCABS)
def test_document_cold(benchmark, request, vocab_name):
    vocab = request.getfixturevalue(vocab_name)
    tokens = greedy_tokens(tool_grammar(), vocab, TOOL_DOCUMENT)
    mask = llamay.allocate_bitmask(vocab.size)

    def cold():
        walk_document(llamay.Matcher(tool_grammar(), vocab), mask, tokens, vocab.eos_ids[0])

    benchmark.group = "compile + first document (cold)"
    benchmark.pedantic(cold, rounds=5)


@pytest.mark.parametrize("vocab_name", VOCABS)
def test_mask_per_token_first_visit(benchmark, request, vocab_name):
    """Masks of freshly compiled schemas: most positions are seen for the first time (the set machine and the
    string slices at work; the slices themselves are built once per vocabulary, before timing)."""
    vocab = request.getfixturevalue(vocab_name)
    cases = first_visit_tokens(vocab)
    first_visit_walk(vocab, cases)  # builds the vocabulary's slices and warms the code
    times: list[float] = []
    benchmark.group = "mask per token (first visits)"
    benchmark.pedantic(first_visit_walk, args=(vocab, cases, times), rounds=10)
    benchmark.extra_info.update(per_token_stats(times))


@pytest.mark.parametrize(
    ("path_fixture", "loader"),
    [("smollm2_gguf", llamay.Vocabulary.from_gguf), ("llama3_tokenizer_json", llamay.Vocabulary.from_tokenizer_json),
     ("gemma_gguf", llamay.Vocabulary.from_gguf)],
    ids=["smollm2", "llama3", "gemma"],
)
def test_vocabulary_build(benchmark, request, path_fixture, loader):
    path = request.getfixturevalue(path_fixture)

    def build():
        return loader(path).trie

    benchmark.group = "vocabulary build (load + trie)"
    benchmark.pedantic(build, rounds=3)
