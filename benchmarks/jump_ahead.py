"""Constrained over unconstrained tokens/s on SmolLM2 (llama.cpp), with and without the jump ahead.

    python -m benchmarks.jump_ahead [--rounds 5] [--max-tokens 96] [--threads 2]

Same prompt, greedy, one slot, no prompt cache; the three modes (unconstrained, constrained
sampling every token, constrained with forced runs appended) alternate within each round, so
machine noise hits them alike. A rate is the tokens after the first step over the time they took:
decoding alone, since a mode that writes fewer tokens would otherwise pay more for the same prompt,
and tokens forced with the first one came with the prompt's evaluation, not after it. Prints the medians
over rounds, the median of each round's constrained/unconstrained ratio, and the fraction of the
constrained tokens that were forced, for two schemas: an object with long property names, and a
tool call (``benchmarks.workloads.TOOL_SCHEMA``).
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchmarks.workloads import TOOL_SCHEMA
from llamay import Matcher, compile_json_schema, load
from llamay.backends import Sampling

LONG_NAMES_SCHEMA = {
    "type": "object",
    "properties": {
        "primary_customer_account_identifier": {"type": "integer"},
        "customer_prefers_paperless_billing_statements": {"type": "boolean"},
        "customer_shipping_address_is_residential": {"type": "boolean"},
        "customer_subscription_renewal_frequency_in_months": {"type": "integer"},
        "customer_has_opted_into_marketing_communications": {"type": "boolean"},
        "customer_loyalty_program_membership_tier": {"enum": ["bronze", "silver", "gold"]},
    },
    "required": ["primary_customer_account_identifier", "customer_prefers_paperless_billing_statements",
                 "customer_shipping_address_is_residential", "customer_subscription_renewal_frequency_in_months",
                 "customer_has_opted_into_marketing_communications", "customer_loyalty_program_membership_tier"],
    "additionalProperties": False,
}
CASES = {
    "long property names": (LONG_NAMES_SCHEMA, "Write the account record of a customer as JSON."),
    "tool call": (TOOL_SCHEMA, "Call a tool to get the weather in Paris for three days, as JSON."),
}
MODES = ("unconstrained", "sampled", "jump ahead")
#: Tokens that come within this of the first came with it, in the prompt's step: a decode step takes longer.
FIRST_STEP_S = 0.001


def generate(model, ids: list[int], grammar, mode: str, max_tokens: int) -> tuple[float, int, int]:
    """One greedy generation in ``mode``: its decoding rate (tokens/s), its tokens, and how many were forced."""
    model.backend.jump_ahead = mode == "jump ahead"
    matcher = Matcher(grammar, model.backend.vocab) if mode != "unconstrained" else None
    stream = model.scheduler.generate(ids, matcher=matcher, sampling=Sampling(), max_tokens=max_tokens)
    arrived = [time.perf_counter() for _ in stream]
    # the first step's tokens (the first sampled, and the run forced after it) come at once, with the
    # prompt's evaluation; the rest, a step apart (several milliseconds)
    first = sum(t - arrived[0] < FIRST_STEP_S for t in arrived)
    return (len(arrived) - first) / (arrived[-1] - arrived[0]), len(arrived), stream.forced


def run(rounds: int, max_tokens: int, threads: int) -> None:
    model = load("llamacpp", slots=1, n_threads=threads, cache_prompt=False)
    print(f"SmolLM2-135M on llama.cpp, {threads} threads, one slot, greedy, max_tokens {max_tokens}, "
          f"{rounds} rounds (medians)")
    print("| schema | unconstrained tok/s | constrained, sampled tok/s | constrained, jump ahead tok/s "
          "| ratio sampled | ratio jump ahead | forced |")
    print("|---|---|---|---|---|---|---|")
    for name, (schema, ask) in CASES.items():
        grammar = compile_json_schema(schema)
        ids = model.backend.tokenize(model.template.render([{"role": "user", "content": ask}]))
        rates: dict[str, list[float]] = {mode: [] for mode in MODES}
        forced: list[float] = []
        for mode in MODES:  # warm: the grammar's mask cache, llama.cpp's buffers
            generate(model, ids, grammar, mode, max_tokens)
        for _ in range(rounds):
            for mode in MODES:
                rate, n, n_forced = generate(model, ids, grammar, mode, max_tokens)
                rates[mode].append(rate)
                if mode == "jump ahead":
                    forced.append(n_forced / n)
        median = {mode: statistics.median(r) for mode, r in rates.items()}
        ratio = {mode: statistics.median(c / u for u, c in zip(rates["unconstrained"], rates[mode], strict=True))
                 for mode in MODES[1:]}
        print(f"| {name} | {median['unconstrained']:.1f} | {median['sampled']:.1f} | {median['jump ahead']:.1f} "
              f"| {ratio['sampled']:.2f} | {ratio['jump ahead']:.2f} | {statistics.median(forced):.0%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    run(args.rounds, args.max_tokens, args.threads)


if __name__ == "__main__":
    main()
