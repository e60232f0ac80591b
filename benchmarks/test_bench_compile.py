"""Schema compile time over the JSONSchemaBench corpus (mean, p50, p99, max).

Two settings: the defaults, and the peer harness's aligned ones (open objects, unbounded
whitespace), where every object with properties also compiles a key that excludes them.

Refused schemas (a named keyword) are counted apart; their time is not in the figures.
"""

from __future__ import annotations

import gzip
import json
import time

import numpy as np
import pytest

from benchmarks.workloads import OPEN
from llamay import SchemaError, compile_json_schema
from tests.conftest import TESTDATA, corpus

#: Every MaskBench subset: a benchmark that samples only the easy ones misleads.
SUBSETS = sorted(p.name.removesuffix(".jsonl.gz") for p in (TESTDATA / "jsonschemabench").glob("*.jsonl.gz")) or [
    "Glaiveai2K"]  # absent corpus: one id, and the test skips with the reason


SETTINGS = {"default": {}, "open": OPEN}


@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.parametrize("subset", SUBSETS)
def test_compile_time(benchmark, subset, settings):
    with gzip.open(corpus("jsonschemabench", f"{subset}.jsonl.gz"), "rt", encoding="utf-8") as lines:
        schemas = [json.loads(line)["schema"] for line in lines]
    times: list[float] = []
    refused = 0

    def run():
        nonlocal refused
        times.clear()
        refused = 0
        for schema in schemas:
            t0 = time.perf_counter()
            try:
                compile_json_schema(schema, **SETTINGS[settings])
            except SchemaError:
                refused += 1
                continue
            times.append(time.perf_counter() - t0)

    benchmark.group = f"schema compile ({settings})"
    benchmark.pedantic(run, rounds=1)
    benchmark.extra_info.update({"compiled": len(times), "refused": refused})
    if not times:  # every schema refused (Synthesized): nothing to time
        return
    ms = np.array(times) * 1e3
    benchmark.extra_info.update({"mean_ms": float(ms.mean()),
                                 "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
                                 "max_ms": float(ms.max())})
