"""The flat pre-order trie holds every token the grammar can match exactly once, in byte order."""

from __future__ import annotations

import numpy as np
import pytest

VOCABS = ["byte_vocab", "smollm2_vocab", "llama3_vocab", "gemma_vocab"]


@pytest.mark.parametrize("vocab_name", VOCABS)
def test_trie_spells_every_token_as_the_grammar_matches_it(request, vocab_name):
    vocab = request.getfixturevalue(vocab_name)
    a = vocab.trie.arrays()
    n = vocab.trie.n_nodes
    depth, size, byte = a["node_depth"][:n], a["node_size"][:n], a["node_byte"][:n]
    node_tok, tok_ids = a["node_tok"], a["tok_ids"]
    spelled = {}
    path: list[int] = []
    for i in range(n):
        del path[depth[i] - 1 :]
        path.append(int(byte[i]))
        # a subtree is contiguous and holds only deeper nodes
        assert size[i] >= 1 and (size[i] == 1 or depth[i + 1] == depth[i] + 1)
        assert i + size[i] == n or depth[i + size[i]] <= depth[i]
        for j in range(node_tok[i], node_tok[i + 1]):
            spelled[int(tok_ids[j])] = bytes(path)
    matched = {i: vocab.grammar_bytes(i) for i in range(vocab.size) if vocab.grammar_bytes(i)}
    assert spelled == matched
    assert vocab.trie.max_depth == max(len(b) for b in matched.values())
    assert not set(vocab.eos_ids) & set(spelled)


def test_siblings_are_in_byte_order(llama3_vocab):
    a = llama3_vocab.trie.arrays()
    depth, byte = a["node_depth"], a["node_byte"]
    top = byte[depth == 1]
    assert np.all(np.diff(top.astype(int)) > 0)
