"""What closing documents within the token budget costs, against mask time (target: under 5%).

    python3 -m benchmarks.budget_close --size 60 --seed 0

On a seeded sample of JSONSchemaBench schemas (every subset, ``compile_sample.sample``), per
real vocabulary (SmolLM2, Llama 3, gemma-3):

- **build**: the first-time cost, once per (grammar, vocabulary): ``Distances`` (distance to
  completion of every state, walked over the vocabulary's trie). It is paid by the first mask
  of a request that passes ``tokens_left``; with a warm mask cache, later requests of the
  schema reuse it. **order**: the tokens' bounds summed and sorted (a pass over the whole
  vocabulary), paid apart by the first check whose slack is under the bound of every token,
  which a generation far from its budget never makes.
- **first visits**: the same walk the first time, the plain mask filled once before each step
  (it fills the mask cache), so the budget's mask pays only its own first-time costs: the
  checks whose findings later visits reuse.
- **check**: every mask far from the budget (the common case): the same token sequence is
  masked with and without ``tokens_left``, with the mask cache warm; at each step the tokens
  left are the completion distance plus ``--slack`` (256: the engine's default ``max_tokens``),
  so that a schema whose shortest document is long is not counted as closing all along. Each
  mask is timed ``--repeats`` times, the two kinds interleaved, and its median kept: the first
  fill at a position pays the processor's cache misses for both, and charged to one of them,
  the few costly positions of a walk would decide the sum. The check finds, usually from what
  an earlier check of the same set recorded, that no token could overrun.
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


def timed_pair(matcher, plain, budget, tokens_left: int, budget_first: bool, repeats: int) -> tuple[float, float]:
    """The mask without and with ``tokens_left``, each the median of ``repeats`` fills, interleaved.

    The first fill at a position pays the processor's cache misses for both (the set's entry, the
    mask's words); a single pair charges them to whichever comes first, and at the few costly
    positions of a walk that one pair decides the sum. ``budget_first`` alternates the order.
    """
    times: tuple[list[float], list[float]] = ([], [])
    order = (1, 0) if budget_first else (0, 1)
    clock = time.perf_counter
    for _ in range(repeats):
        for which in order:
            t0 = clock()
            matcher.fill_next_token_bitmask(budget if which else plain, tokens_left=tokens_left if which else None)
            times[which].append(clock() - t0)
    return statistics.median(times[0]), statistics.median(times[1])


def walk(matcher, vocab, plain, budget, rng, steps: int, tokens_left: int | None = None, slack: int = 256,
         alternate: bool = True, repeats: int = 1, prime: bool = False) -> list[tuple[float, float]]:
    """A uniform random walk of at most ``steps`` tokens, timing each position's two masks.

    The walk follows the budget's mask, so with a binding ``tokens_left`` (counting down from the
    given number) it is a closing walk. ``tokens_left`` None: at each step, the completion
    distance plus ``slack``, far from the budget however far the document still is from its end.
    ``prime``: fill the plain mask once before timing, so that the budget's mask pays only its own
    first-time costs at a position the plain mask's cache already holds.
    """
    times = []
    for i in range(steps):
        if matcher.is_terminated():
            break
        left = tokens_left - i if tokens_left is not None else (matcher.completion_distance() or 0) + slack
        if prime:
            matcher.fill_next_token_bitmask(plain)
        times.append(timed_pair(matcher, plain, budget, left, alternate and i % 2 == 1, repeats))
        token = int(rng.choice(allowed(budget, vocab.size)))
        if not matcher.accept_token(token):
            raise AssertionError(f"the mask allowed token {token}, which the matcher refused")
    return times


def percentiles(xs: list[float]) -> str:
    xs = sorted(xs)
    p99 = xs[min(len(xs) - 1, int(0.99 * len(xs)))]
    return f"{statistics.median(xs) * 1e6:8.1f} {p99 * 1e6:9.1f} {xs[-1] * 1e6:9.1f}"


def milliseconds(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    return (f"median {statistics.median(ordered) * 1e3:.2f}  p99 {ordered[int(0.99 * (len(ordered) - 1))] * 1e3:.2f}  "
            f"max {ordered[-1] * 1e3:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slack", type=int, default=256, help="tokens left beyond the completion distance in the check")
    ap.add_argument("--repeats", type=int, default=3, help="fills per mask in the check (their median)")
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
        builds, orders, check, closing, per_schema, first, first_doc, unspellable = [], [], [], [], [], [], [], 0
        for i, grammar in enumerate(grammars):
            distances = Distances(grammar, vocab.trie)
            builds.append(distances.build_seconds)
            distances.token_order()
            orders.append(distances.build_seconds - builds[-1])
            rng = np.random.default_rng(args.seed + i)
            warm = llamay.Matcher(grammar, vocab)
            # first visits: the plain mask first fills the mask cache, so that the budget's mask pays
            # only its own first-time costs (the check's walks; the distances are the build above)
            steps = walk(warm, vocab, plain, budget, rng, STEPS, slack=args.slack, alternate=False, prime=True)
            first += steps
            first_doc.append(sum(b - p for p, b in steps))
            rng = np.random.default_rng(args.seed + i)
            steps = walk(llamay.Matcher(grammar, vocab), vocab, plain, budget, rng, len(steps), slack=args.slack,
                         repeats=args.repeats)
            check += steps
            per_schema.append(sum(b for _, b in steps) / max(sum(p for p, _ in steps), 1e-9) - 1)
            m = llamay.Matcher(grammar, vocab)
            distance = m.completion_distance()
            if distance is None:
                unspellable += 1
                continue
            closing += walk(m, vocab, plain, budget, np.random.default_rng(args.seed + i), distance + 4, distance + 4)
        ratio = sum(b for _, b in check) / sum(p for p, _ in check) - 1
        print(f"{name}: build (ms) {milliseconds(builds)}  order (ms) {milliseconds(orders)}"
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
