"""llamay against its peers on a small fixed MaskBench sample, one benchmark per (engine, vocabulary).

The figures of ``python -m benchmarks.peers.run`` (which see for the full harness, disagreement
checks included), on a sample small enough for pytest-benchmark: 20 schemas with valid instances
(10 from Glaiveai2K, 10 from Github_easy, ``random.Random`` seeded) for Llama 3 and SmolLM2, 6 for
gemma (llama.cpp's sampler takes tens of ms per token on 262k tokens). Only the instances that
every installed engine of that vocabulary compiles and accepts are kept, so every engine in a
group does the same work and the group's ratios compare like with like.

Groups, per vocabulary:
- ``peers: compile + first mask``: compile every schema, make a matcher, fill its first mask.
- ``peers: mask walk (fresh compile)``: walk every instance, a mask before every token and before
  EOS, advancing on the token; the schemas are compiled (untimed) before each round, so lazily
  built caches start cold, as in MaskBench. ``extra_info`` holds the per-token figures.

An engine that is not installed is skipped; so is a vocabulary whose package is missing.
"""

from __future__ import annotations

import functools
import os
import time

import numpy as np
import pytest

from benchmarks.peers import ENGINES, PEERS, SINGLE_THREAD_ENV, Engine, unavailable
from benchmarks.peers._data import MASKBENCH, select_schemas, valid_texts
from benchmarks.peers._vocab import VocabUnavailable, reference, tokenizer

SUBSETS = ("Glaiveai2K", "Github_easy")
SAMPLE = {"llama3": 20, "smollm2": 20, "gemma": 6}
SEED = 0
PAIRS = [(e, v) for v in SAMPLE for e in PEERS if v in ENGINES[e].vocabs]


# One thread: set before any engine's library is imported (they are imported by Engine, lazily).
for _k, _v in SINGLE_THREAD_ENV.items():
    os.environ.setdefault(_k, _v)


@functools.cache
def _engine(name: str, kind: str) -> Engine:
    return Engine(name, kind)


def _walk(engine: Engine, m, mask, tokens, times: list | None = None) -> bool:
    """A mask before every token and before EOS; False at the first token the engine rejects."""
    fill, advance, clock = engine.mod.fill_mask, engine.mod.advance, time.perf_counter
    timed = getattr(engine.mod, "timed_fill", None)  # llama.cpp: its own work, without the packing
    for p in range(len(tokens) + 1):
        if timed is not None:
            dt = timed(m, mask)
        else:
            t0 = clock()
            fill(m, mask)
            dt = clock() - t0
        if times is not None:
            times.append(dt)
        if p < len(tokens) and not advance(m, tokens[p]):
            return False
    return True


@functools.cache
def _workload(kind: str) -> list[tuple[dict, list[list[int]]]]:
    """[(schema, [token lists])]: what every installed engine on ``kind`` compiles and accepts."""
    if not MASKBENCH.is_dir():
        pytest.skip(f"{MASKBENCH} is absent (../shared/testdata is not beside this checkout)")
    try:
        tok = tokenizer(kind)
        eos = reference(kind)["walk_eos"]
    except VocabUnavailable as exc:
        pytest.skip(str(exc))
    records = select_schemas(SUBSETS, SAMPLE[kind], SEED, with_instances=True)
    items = [(r["schema"], [tok(t) for t in valid_texts(r)]) for r in records]
    names = [e for e, v in PAIRS if v == kind and unavailable(e) is None]
    for name in names:
        engine = _engine(name, kind)
        kept = []
        for schema, docs in items:
            try:
                compiled = engine.compile(schema)
            except Exception:
                continue
            mask = engine.allocate_mask()
            ok = []
            for doc in docs:
                m = engine.matcher(compiled)
                if _walk(engine, m, mask, doc):
                    mask_words = mask.reshape(-1).view(np.uint32)
                    if (int(mask_words[eos // 32]) >> (eos % 32)) & 1:
                        ok.append(doc)
            if ok:
                kept.append((schema, ok))
        items = kept
    if not items:
        pytest.skip(f"no sample schema that every engine on {kind} accepts")
    return items


def _stats(times: list[float], scale: float) -> dict:
    a = np.asarray(times) * scale
    return {"n": len(a), "mean": float(a.mean()), "p50": float(np.percentile(a, 50)),
            "p99": float(np.percentile(a, 99)), "max": float(a.max())}


def _setup(engine_name: str, kind: str) -> tuple[Engine, list]:
    why = unavailable(engine_name)
    if why:
        pytest.skip(why)
    items = _workload(kind)
    return _engine(engine_name, kind), items


@pytest.mark.parametrize(("engine_name", "kind"), PAIRS, ids=[f"{e}-{v}" for e, v in PAIRS])
def test_compile_first_mask(benchmark, engine_name, kind):
    engine, items = _setup(engine_name, kind)
    mask = engine.allocate_mask()
    times: list[float] = []

    def compile_all():
        for schema, _ in items:
            t0 = time.perf_counter()
            m = engine.matcher(engine.compile(schema))
            engine.fill_mask(m, mask)
            times.append(time.perf_counter() - t0)

    benchmark.group = f"peers: compile + first mask ({kind}, {len(items)} schemas)"
    benchmark.pedantic(compile_all, rounds=1 if engine_name == "llamacpp" else 3)
    benchmark.extra_info.update({f"ttfm_ms_{k}": v for k, v in _stats(times, 1e3).items()})


@pytest.mark.parametrize(("engine_name", "kind"), PAIRS, ids=[f"{e}-{v}" for e, v in PAIRS])
def test_mask_walk(benchmark, engine_name, kind):
    engine, items = _setup(engine_name, kind)
    mask = engine.allocate_mask()
    times: list[float] = []

    def setup():
        compiled = [engine.compile(schema) for schema, _ in items]
        matchers = [[engine.matcher(c) for _ in docs] for c, (_, docs) in zip(compiled, items, strict=True)]
        return (matchers,), {}

    def walk_all(matchers):
        for ms, (_, docs) in zip(matchers, items, strict=True):
            for m, doc in zip(ms, docs, strict=True):
                assert _walk(engine, m, mask, doc, times=times)

    n_tokens = sum(len(d) + 1 for _, docs in items for d in docs)
    benchmark.group = f"peers: mask walk, fresh compile ({kind}, {n_tokens} masks)"
    benchmark.pedantic(walk_all, setup=setup, rounds=1 if engine_name == "llamacpp" else 3)
    benchmark.extra_info.update({f"mask_us_{k}": v for k, v in _stats(times, 1e6).items()})
