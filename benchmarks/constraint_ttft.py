"""Time to first token with a JSON Schema constraint against without, on a 1,000-token prompt.

    python -m benchmarks.constraint_ttft [--pool 200] [--schemas 12] [--seed 0]

``--pool`` schemas are drawn from every JSONSchemaBench subset (seeded) and compiled once to
time them; ``--schemas`` of the slow half (compile time above the pool's median) are then each
sent once with the constraint and once without, alternately, through ``Model.chat`` on the
embedded SmolLM2 (llama.cpp, 2 threads, no prompt cache, so every prompt is evaluated afresh).
A schema is compiled afresh by the constrained request: the model's cache of constraints has not
seen it. Reported: the ratio of the two times to the first token, median, p90 and max, and the
compile times of the schemas used.
"""

from __future__ import annotations

import argparse
import statistics
import time

from llamay import SchemaError, compile_json_schema, load

from .compile_sample import sample

PROMPT = [{"role": "user", "content": "Fill in the record from these notes. " + "The notes say nothing useful. " * 160}]


def first_token(model, **constraint) -> float:
    start = time.perf_counter()
    stream = model.chat(PROMPT, max_tokens=2, stream=True, **constraint)
    for _ in stream:
        break
    seconds = time.perf_counter() - start
    stream.close()
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", type=int, default=200)
    ap.add_argument("--schemas", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    timed = []
    for schema in sample(args.pool, args.seed):
        start = time.perf_counter()
        try:
            compile_json_schema(schema)
        except SchemaError:
            continue
        timed.append((time.perf_counter() - start, schema))
    median = statistics.median(t for t, _ in timed)
    slow = [pair for pair in timed if pair[0] > median]
    chosen = slow[:: max(1, len(slow) // args.schemas)][: args.schemas]
    model = load("llamacpp", n_threads=2)
    print(f"prompt: {len(model.backend.tokenize(model.template.render_parts(PROMPT)))} tokens; "
          f"pool compile median {median * 1e3:.1f} ms")
    ratios = []
    for compile_s, schema in chosen:
        plain = first_token(model)
        constrained = first_token(model, schema=schema)
        ratios.append(constrained / plain)
        print(f"compile {compile_s * 1e3:7.1f} ms   plain {plain:.2f} s   constrained {constrained:.2f} s   "
              f"ratio {ratios[-1]:.3f}")
    ratios.sort()
    p90 = ratios[min(len(ratios) - 1, int(0.9 * len(ratios)))]
    print(f"ratio median {statistics.median(ratios):.3f}  p90 {p90:.3f}  max {ratios[-1]:.3f}  (n={len(ratios)})")


if __name__ == "__main__":
    main()
