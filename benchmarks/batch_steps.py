"""What one decoding step of k sequences costs on the llama.cpp backend, against a step of one.

    python -m benchmarks.batch_steps [--threads 2] [--steps 12] [GGUF ...]

Each sequence first holds the same 80-token prompt in its own slot; then a step gives every
sequence one token, and each figure is the median of ``--steps`` steps. The ratio to k=1 is
batching's ceiling on this machine: a step of 4 that costs 2.9x a step of one makes at most
4 / 2.9 = 1.4x the tokens per second of one stream. Default: the embedded SmolLM2.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from llamay.backends.llamacpp import LlamaCppBackend
from llamay.modelfiles.shipped import default_model_path

WIDTHS = (1, 2, 4, 8)
PROMPT = "Write a JSON object describing a person with a name, an age and a list of hobbies. " * 4


def step_costs(path: Path, threads: int, steps: int) -> dict[int, float]:
    """Milliseconds per step, by the number of sequences in it."""
    backend = LlamaCppBackend(path, path.stem, n_ctx=512, n_threads=threads, slots=max(WIDTHS))
    prompt = backend.encode(PROMPT, special=False)[:80]
    last_only = [False] * (len(prompt) - 1) + [True]
    for seq in range(max(WIDTHS)):
        backend.decode(prompt, range(len(prompt)), [seq] * len(prompt), last_only)
    costs = {}
    for k in WIDTHS:
        times = []
        for step in range(steps):
            started = time.perf_counter()
            backend.decode([prompt[step]] * k, [len(prompt) + step] * k, range(k), [True] * k)
            times.append((time.perf_counter() - started) * 1e3)
        for seq in range(k):
            backend.forget(seq, len(prompt))
        costs[k] = statistics.median(times)
    return costs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path, help="GGUF files (default: the embedded SmolLM2)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    print(f"ms per step, median of {args.steps}; {args.threads} threads; in brackets, the cost over k=1's")
    print("| model | " + " | ".join(f"k={k}" for k in WIDTHS) + " |")
    print("|---|" + "---|" * len(WIDTHS))
    for path in args.models or [default_model_path()]:
        costs = step_costs(path, args.threads, args.steps)
        print(f"| {path.name} | " + " | ".join(f"{costs[k]:.1f} ({costs[k] / costs[1]:.1f}x)" for k in WIDTHS) + " |")


if __name__ == "__main__":
    main()
