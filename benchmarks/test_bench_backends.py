"""Tokens/s per backend on SmolLM2, constrained over unconstrained, in one run.

Each backend (llama.cpp on the GGUF; transformers and mlx on the HF folder derived from
it) generates greedily from the same prompt, with and without a JSON Schema, through the
shared loop (``Backend.generate``). The clock starts at the first generated token, so the
prompt's evaluation (slow on MLX's CPU build) does not dilute the ratio; the rate is per
generated token, so an early EOS in one mode does not skew it. The standalone processors
(``LlamayLogitsProcessor`` in ``model.generate`` / ``mlx_lm.generate``) are measured the
same way in their own group.

Read ``extra_info["tokens_per_s"]`` and, on the constrained rows,
``extra_info["ratio_vs_unconstrained"]`` (target: >= 0.95). The figures are noisy on a
shared machine; torch runs on one thread (its threads collapse when other work runs).
"""

from __future__ import annotations

import time

import pytest

from benchmarks.workloads import CITIES_MESSAGES, CITIES_SCHEMA
from llamay import Matcher
from llamay.backends import Sampling
from llamay.chat import ChatTemplate
from llamay.engine import Model
from llamay.grammars.jsonschema.compiler import compile_json_schema
from tests.test_backends_agree import backend, need

N_TOKENS = 32
ROUNDS = 3
_rates: dict[tuple[str, str], float] = {}


def _record(benchmark, key: tuple[str, str], rates: list[float], constrained: bool) -> None:
    rates.sort()
    rate = rates[len(rates) // 2]
    _rates[key] = rate
    benchmark.extra_info["tokens_per_s"] = round(rate, 2)
    free = _rates.get((key[0], "unconstrained"))
    if constrained and free:
        benchmark.extra_info["ratio_vs_unconstrained"] = round(rate / free, 3)


@pytest.mark.parametrize("constrained", [False, True], ids=["unconstrained", "schema"])
@pytest.mark.parametrize("name", ["llamacpp", "transformers", "mlx"])
def test_backend_tokens_per_second(benchmark, request, name, constrained):
    b = backend(request, name)
    runner = Model(b).scheduler or b  # llama.cpp batches through a scheduler; the others run alone
    prompt = b.tokenize(ChatTemplate(b.chat_template).render(CITIES_MESSAGES))
    grammar = compile_json_schema(CITIES_SCHEMA) if constrained else None
    rates: list[float] = []

    def run():
        matcher = Matcher(grammar, b.vocab) if grammar is not None else None
        n, t0 = 0, 0.0
        for _ in runner.generate(prompt, matcher=matcher, sampling=Sampling(), max_tokens=N_TOKENS):
            n += 1
            if n == 1:
                t0 = time.perf_counter()
        if n > 1:
            rates.append((n - 1) / (time.perf_counter() - t0))

    run()  # warm: the grammar's mask cache, the runtime's buffers
    rates.clear()
    benchmark.group = "SmolLM2 tokens/s per backend (shared loop)"
    benchmark.pedantic(run, rounds=ROUNDS)
    _record(benchmark, (name, "schema" if constrained else "unconstrained"), rates, constrained)


@pytest.mark.parametrize("constrained", [False, True], ids=["unconstrained", "schema"])
@pytest.mark.parametrize("name", ["transformers", "mlx"])
def test_standalone_processor_tokens_per_second(benchmark, request, name, constrained):
    b = backend(request, name)
    grammar = compile_json_schema(CITIES_SCHEMA) if constrained else None
    rates: list[float] = []
    if name == "transformers":
        import torch
        from transformers import LogitsProcessor

        from llamay.backends.transformers import LlamayLogitsProcessor

        enc = b.tokenizer.apply_chat_template(CITIES_MESSAGES, add_generation_prompt=True, return_tensors="pt",
                                              return_dict=True)

        class Clock(LogitsProcessor):  # notes when each step's scores arrive: the first one starts the clock
            def __init__(self):
                self.times = []

            def __call__(self, input_ids, scores):
                self.times.append(time.perf_counter())
                return scores

        def run():
            clock = Clock()
            processors = [clock] + ([LlamayLogitsProcessor(grammar, b.vocab)] if grammar is not None else [])
            with torch.inference_mode():
                out = b.model.generate(**enc, max_new_tokens=N_TOKENS, do_sample=False, logits_processor=processors)
            n = out.shape[1] - enc["input_ids"].shape[1]
            if n > 1:
                rates.append((n - 1) / (time.perf_counter() - clock.times[0]))
    else:
        need("mlx")
        import mlx_lm

        from llamay.backends.mlx import LlamayLogitsProcessor as MlxProcessor

        prompt = b.tokenizer.apply_chat_template(CITIES_MESSAGES, add_generation_prompt=True)

        def run():
            processors = [MlxProcessor(grammar, b.vocab)] if grammar is not None else None
            n, t0 = 0, 0.0
            for _ in mlx_lm.stream_generate(b.model, b.tokenizer, prompt, max_tokens=N_TOKENS,
                                            logits_processors=processors):
                n += 1
                if n == 1:
                    t0 = time.perf_counter()
            if n > 1:
                rates.append((n - 1) / (time.perf_counter() - t0))

    run()
    rates.clear()
    benchmark.group = "SmolLM2 tokens/s, standalone logits processors"
    benchmark.pedantic(run, rounds=ROUNDS)
    _record(benchmark, (f"{name} standalone", "schema" if constrained else "unconstrained"), rates, constrained)
