"""What closing documents within the token budget costs, against mask time (target: under 5%).

    python3 -m benchmarks.budget_close --size 60 --seed 0

On a seeded sample of JSONSchemaBench schemas (every subset, ``compile_sample.sample``), per
real vocabulary (SmolLM2, Llama 3, gemma-3):

- **build**: the first-time cost, once per (grammar, vocabulary): ``Distances`` (distance to
  completion of every state, walked over the vocabulary's trie). It is paid by the first mask
  of a request that passes ``tokens_left``; with a warm mask cache, later requests of the
  schema reuse it.
- **first visits**: the same walk the first time, the plain mask first each step (it fills the
  mask cache), so the budget's mask pays only its own first-time costs.
- **check**: every mask far from the budget (the common case): the same token sequence is
  masked with and without ``tokens_left`` (counting down to ``--slack``, 256: the engine's
  default ``max_tokens``), step by step, alternately, with the mask cache warm.
  The check computes the set's distance and finds no token that could overrun.
- **closing**: the last tokens, where the budget binds: a uniform random walk (the model that
  never heads for the end) under a budget of the start's distance plus 4, each step masked with
  and without ``tokens_left``. Every step of this walk is a closing step.

Prints, per vocabulary, the median / p99 / max over all steps of the time with the budget and
without, the overall overhead of the check (sum over sum), its distribution over schemas (how
many pay more than 5%), and the build's median / p99 / max. A closing step costs far more than
a plain mask by design (it checks candidate tokens); what it adds to a document is its few steps.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import llamay
from benchmarks.compile_sample import sample
from benchmarks.workloads import vocabularies
from llamay import LlamayError, SchemaError
from llamay._core.distance import Distances

STEPS = 120  # tokens masked per schema in the check


def allowed(mask: np.ndarray, size: int) -> np.ndarray:
    return np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[:size])


def timed_pair(matcher, plain, budget, tokens_left: int, budget_first: bool) -> tuple[float, float]:
    """One mask without and one with ``tokens_left``; the order alternates, so that the second,
    which finds the caches the first warmed, is each of them half the time."""
    first, second = (budget, plain) if budget_first else (plain, budget)
    t0 = time.perf_counter()
    matcher.fill_next_token_bitmask(first, tokens_left=tokens_left if budget_first else None)
    t1 = time.perf_counter()
    matcher.fill_next_token_bitmask(second, tokens_left=None if budget_first else tokens_left)
    t2 = time.perf_counter()
    return (t2 - t1, t1 - t0) if budget_first else (t1 - t0, t2 - t1)


def walk(matcher, vocab, plain, budget, rng, steps: int, tokens_left: int,
         alternate: bool = True) -> list[tuple[float, float]]:
    """A uniform random walk of at most ``steps`` tokens, timing each position's two masks.

    The walk follows the budget's mask, so with a binding ``tokens_left`` it is a closing walk.
    """
    times = []
    for i in range(steps):
        if matcher.is_terminated():
            break
        left = tokens_left - i
        times.append(timed_pair(matcher, plain, budget, left, alternate and i % 2 == 1))
        token = int(rng.choice(allowed(budget, vocab.size)))
        if not matcher.accept_token(token):
            raise AssertionError(f"the mask allowed token {token}, which the matcher refused")
    return times


def percentiles(xs: list[float]) -> str:
    xs = sorted(xs)
    p99 = xs[min(len(xs) - 1, int(0.99 * len(xs)))]
    return f"{statistics.median(xs) * 1e6:8.1f} {p99 * 1e6:9.1f} {xs[-1] * 1e6:9.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slack", type=int, default=256, help="tokens left at the end of the check's walk")
    args = ap.parse_args()
    grammars = []
    for schema in sample(args.size, args.seed):
        try:
            grammars.append(llamay.compile_json_schema(schema))
        except (SchemaError, LlamayError):
            continue
    print(f"{len(grammars)} of {args.size} sampled schemas compiled; times in us: median p99 max")
    for name, vocab in vocabularies("smollm2", "llama3", "gemma").items():
        plain, budget = llamay.allocate_bitmask(vocab.size), llamay.allocate_bitmask(vocab.size)
        builds, check, closing, per_schema, first, first_doc, unspellable = [], [], [], [], [], [], 0
        for i, grammar in enumerate(grammars):
            builds.append(Distances(grammar, vocab.trie).build_seconds)
            rng = np.random.default_rng(args.seed + i)
            warm = llamay.Matcher(grammar, vocab)
            far = STEPS + args.slack  # the walk ends with ``--slack`` tokens left: never near its budget
            # first visits: the plain mask first fills the mask cache, so that the budget's mask pays
            # only its own first-time costs (the distances, the check's walks)
            steps = walk(warm, vocab, plain, budget, rng, STEPS, far, alternate=False)
            first += steps
            first_doc.append(sum(b - p for p, b in steps))
            rng = np.random.default_rng(args.seed + i)
            steps = walk(llamay.Matcher(grammar, vocab), vocab, plain, budget, rng, len(steps), far)
            check += steps
            per_schema.append(sum(b for _, b in steps) / max(sum(p for p, _ in steps), 1e-9) - 1)
            m = llamay.Matcher(grammar, vocab)
            distance = m.completion_distance()
            if distance is None:
                unspellable += 1
                continue
            closing += walk(m, vocab, plain, budget, np.random.default_rng(args.seed + i), distance + 4, distance + 4)
        ratio = sum(b for _, b in check) / sum(p for p, _ in check) - 1
        print(f"{name}: build (ms) median {statistics.median(builds) * 1e3:.2f}  "
              f"p99 {sorted(builds)[int(0.99 * (len(builds) - 1))] * 1e3:.2f}  max {max(builds) * 1e3:.2f}"
              f"{f'  ({unspellable} with no spellable completion)' if unspellable else ''}")
        print(f"  check   {len(check):6} steps  plain {percentiles([p for p, _ in check])}  "
              f"budget {percentiles([b for _, b in check])}  overhead (sum) {ratio * 100:+.1f}%")
        print(f"  check   added per step {percentiles([b - p for p, b in check])}")
        print(f"  first visits: added per step {percentiles([b - p for p, b in first])}  "
              f"per document (ms) median {statistics.median(first_doc) * 1e3:.2f}  max {max(first_doc) * 1e3:.2f}")
        over = sum(o > 0.05 for o in per_schema)
        print(f"  check per schema (sum over its steps): median {statistics.median(per_schema) * 100:+.1f}%  "
              f"p90 {sorted(per_schema)[int(0.9 * (len(per_schema) - 1))] * 100:+.1f}%  "
              f"max {max(per_schema) * 100:+.1f}%  over +5%: {over} of {len(per_schema)}")
        print(f"  closing {len(closing):6} steps  plain {percentiles([p for p, _ in closing])}  "
              f"budget {percentiles([b for _, b in closing])}")


if __name__ == "__main__":
    main()
