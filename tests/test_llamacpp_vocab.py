"""The GGUF reader and the live llama.cpp model agree on every token's bytes and on EOS."""

from __future__ import annotations

import pytest

from llamay import Vocabulary

llama_cpp = pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (ci/setup installs it)")


@pytest.mark.parametrize("path_fixture", ["smollm2_gguf", "gemma_gguf"])
def test_gguf_vocabulary_matches_llama_cpp_token_to_piece(request, path_fixture):
    path = request.getfixturevalue(path_fixture)
    llama = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    ours, theirs = Vocabulary.from_gguf(path), Vocabulary.from_llama(llama)
    assert ours.size == theirs.size == llama.n_vocab()
    differ = [i for i in range(ours.size) if ours.token_bytes(i) != theirs.token_bytes(i)]
    assert differ == [], [(i, ours.token_bytes(i), theirs.token_bytes(i)) for i in differ[:10]]
    assert set(ours.eos_ids) == set(theirs.eos_ids)
