"""Benchmarks reuse the test suite's vocabulary fixtures (real tokenizers, no hub)."""

from tests.conftest import (  # noqa: F401  (fixtures are found by name)
    gemma_gguf,
    gemma_vocab,
    llama3_tokenizer_json,
    llama3_vocab,
    smollm2_gguf,
    smollm2_vocab,
)
