"""A fixed sample of MaskBench schemas, each compiled once: the workload for profiling compile time.

Wall-clock figures on the 2-core development machine move by 20% or more between runs;
instruction counts do not, so compare commits with

    PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 valgrind --tool=callgrind python3 -m benchmarks.compile_sample

(about two minutes; add ``--callgrind-out-file=F`` to keep the profile for ``callgrind_annotate``,
and ``--open`` for the peer harness's setting),
and subtract a run with ``--size 0``: importing and reading the corpus cost about 6.1G
instructions of the total (numpy's idle BLAS threads add tens of millions more, varying from
run to run, unless pinned to one). The compile deadline is lifted: under valgrind a large
schema would pass it or not depending on the machine's load, and the count with it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random

from llamay import SchemaError, compile_json_schema
from llamay.options import Limits
from tests.conftest import TESTDATA

from .workloads import OPEN


def sample(size: int, seed: int) -> list:
    """``size`` schemas drawn from every subset with ``seed``: the same list for the same corpus."""
    schemas = []
    for path in sorted((TESTDATA / "jsonschemabench").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            schemas += [json.loads(line)["schema"] for line in lines]
    return random.Random(seed).sample(schemas, min(size, len(schemas)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--open", action="store_true",
                    help="open objects, unbounded whitespace, uncapped numbers (the peer harness)")
    args = ap.parse_args()
    settings = dict(OPEN) if args.open else {}
    settings["limits"] = Limits(compile_seconds=float("inf"))
    compiled = states = 0
    for one in sample(args.size, args.seed):
        try:
            states += compile_json_schema(one, **settings).n_states
            compiled += 1
        except SchemaError:
            pass
    print(f"compiled {compiled} of {args.size} schemas, {states} states in all")


if __name__ == "__main__":
    main()
