"""What a numeric range costs to build the first time, over every range in the shared corpus.

Every schema of every MaskBench subset is compiled with the peer harness's options (open
objects, uncapped numbers) and with the defaults (numbers capped), and each distinct range the
compiles meet (the arguments of ``numeric._magnitude_rules``) is then built on its own, its memo
cleared before each of ``--runs`` builds, the median kept: what a process pays the first time a
schema holds that range. Printed apart: the ranges with a ``multipleOf`` (a DFA explored,
minimized and written out, unless the step is ``10**-k``) and those without (a ladder of
digits), then the slowest. The residue automaton of a modulus stays built between ranges, as it
does in a process.

    python3 -m benchmarks.numeric_ranges [--runs 3] [--top 8]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import numpy as np

from llamay import SchemaError
from llamay.grammars.jsonschema import numeric
from llamay.grammars.jsonschema.compiler import compile_json_schema

from .peers._data import MASKBENCH, all_subsets, select_schemas
from .workloads import OPEN


def ranges_in(schemas) -> list[tuple]:
    """The distinct ranges that compiling ``schemas`` (both options) builds, in the order first met."""
    met: dict[tuple, None] = {}
    build = numeric._magnitude_rules

    def recorded(*args):
        met[args] = None
        return build(*args)

    numeric._magnitude_rules = recorded  # the compiled module looks its globals up at each call
    try:
        for schema in schemas:
            for options in (OPEN, {}):
                with contextlib.suppress(SchemaError):  # a schema refused builds what it met before
                    compile_json_schema(schema, **options)
    finally:
        numeric._magnitude_rules = build
    return list(met)


def build_ms(args: tuple, runs: int) -> float:
    """The median of ``runs`` builds of one range, each with the ranges' memo cleared."""
    times = []
    for _ in range(runs):
        numeric._magnitude_rules.cache_clear()
        start = time.perf_counter()
        numeric._magnitude_rules(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def summary(values: list[float]) -> str:
    if not values:
        return "none"
    p50, p90, p99 = (float(np.percentile(values, q)) for q in (50, 90, 99))
    return f"{len(values):4d} ranges  p50 {p50:6.3f}  p90 {p90:6.3f}  p99 {p99:6.3f}  max {max(values):6.3f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--top", type=int, default=8, help="slowest ranges listed one by one")
    args = ap.parse_args()
    schemas = [record["schema"] for record in select_schemas(all_subsets(MASKBENCH), None)]
    found = {r: build_ms(r, args.runs) for r in ranges_in(schemas)}
    print(f"{len(schemas)} schemas; a range's first build, the median of {args.runs}:")
    print(f"  every range          {summary(list(found.values()))}")
    print(f"  without multipleOf   {summary([ms for r, ms in found.items() if r[3] is None])}")
    print(f"  with multipleOf      {summary([ms for r, ms in found.items() if r[3] is not None])}")
    print(f"slowest {args.top}:")
    for r, ms in sorted(found.items(), key=lambda item: -item[1])[: args.top]:
        print(f"  {ms:7.3f} ms  {numeric._name(*r)}")


if __name__ == "__main__":
    main()
