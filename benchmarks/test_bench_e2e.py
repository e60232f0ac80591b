"""End-to-end tokens/s on SmolLM2 (llama.cpp backend), constrained over unconstrained, in one run.

Same prompt, greedy, same token budget; the rates are per generated token, so an early EOS
in one mode does not skew the ratio. The two modes alternate, a pair per round; read
``extra_info["ratio_median_of_pairs"]`` (target: constrained >= 0.95 x unconstrained).
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("llama_cpp")

from benchmarks.workloads import CITIES_MESSAGES, CITIES_SCHEMA
from llamay import Matcher
from llamay.backends import Sampling, load_backend
from llamay.engine import Model
from llamay.grammars.jsonschema.compiler import compile_json_schema

N_TOKENS = 64
ROUNDS = 11


@pytest.fixture(scope="module")
def backend():
    return load_backend("llamacpp")


@pytest.fixture(scope="module")
def prompt(backend):
    from llamay.chat import ChatTemplate

    text = ChatTemplate(backend.chat_template).render(
        CITIES_MESSAGES)
    return backend.tokenize(text)


def test_tokens_per_second(benchmark, backend, prompt):
    """Unconstrained and constrained generations alternate, so machine noise hits both alike."""
    grammar = compile_json_schema(CITIES_SCHEMA)
    runner = Model(backend).scheduler  # llama.cpp batches through a scheduler
    rates: dict[bool, list[float]] = {False: [], True: []}

    def generate(constrained: bool) -> None:
        matcher = Matcher(grammar, backend.vocab) if constrained else None
        t0 = time.perf_counter()
        n = sum(1 for _ in runner.generate(prompt, matcher=matcher, sampling=Sampling(), max_tokens=N_TOKENS))
        rates[constrained].append(n / (time.perf_counter() - t0))

    def pair() -> None:
        generate(False)
        generate(True)

    pair()  # warm: the grammar's mask cache, llama.cpp's buffers
    rates[False].clear()
    rates[True].clear()
    benchmark.group = "end-to-end SmolLM2 tokens/s"
    benchmark.pedantic(pair, rounds=ROUNDS)
    median = {mode: sorted(r)[len(r) // 2] for mode, r in rates.items()}
    ratios = sorted(c / u for u, c in zip(rates[False], rates[True], strict=True))
    benchmark.extra_info.update({"unconstrained_tokens_per_s": median[False], "schema_tokens_per_s": median[True],
                                 "ratio_median_of_pairs": ratios[len(ratios) // 2]})
