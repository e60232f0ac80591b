"""End-to-end tokens/s on SmolLM2 (llama.cpp backend), constrained over unconstrained, in one run.

Same prompt, greedy, same token budget; the rates are per generated token, so an early EOS
in one mode does not skew the ratio. Read the ratio from ``extra_info["tokens_per_s"]`` of
the two benchmarks in the group (target: constrained >= 0.95 x unconstrained).
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("llama_cpp")

from benchmarks.workloads import CITIES_MESSAGES, CITIES_SCHEMA
from llamay import Matcher
from llamay.backends import Sampling, load_backend
from llamay.schema import compile_json_schema

N_TOKENS = 64


@pytest.fixture(scope="module")
def backend():
    return load_backend("llamacpp")


@pytest.fixture(scope="module")
def prompt(backend):
    from llamay.chat import ChatTemplate

    text = ChatTemplate(backend.chat_template).render(
        CITIES_MESSAGES)
    return backend.tokenize(text)


@pytest.mark.parametrize("constrained", [False, True], ids=["unconstrained", "schema"])
def test_tokens_per_second(benchmark, backend, prompt, constrained):
    grammar = compile_json_schema(CITIES_SCHEMA) if constrained else None
    rates = []

    def run():
        matcher = Matcher(grammar, backend.vocab) if grammar is not None else None
        t0 = time.perf_counter()
        n = sum(1 for _ in backend.generate(prompt, matcher=matcher, sampling=Sampling(), max_tokens=N_TOKENS))
        rates.append(n / (time.perf_counter() - t0))

    run()  # warm: the grammar's mask cache, llama.cpp's buffers
    rates.clear()
    benchmark.group = "end-to-end SmolLM2 tokens/s"
    benchmark.pedantic(run, rounds=5)
    rates.sort()
    benchmark.extra_info["tokens_per_s"] = rates[len(rates) // 2]
