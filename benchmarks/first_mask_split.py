"""Where a schema's time to first mask goes, over the peer harness's sample, and what lazy lowering would move.

Per schema (the harness's settings: open objects, unbounded whitespace, uncapped numbers; the
median of ``--runs`` compiles in one warm process, each after ``workloads.forget_schemas``, so
that a repeat does not find its numeric ranges and patterns built): the schema-to-IR pass, the
whole compile, and their difference, the lowering. From the automaton, per frame rule: the states of the frames
that the first mask needs at least (those entered before the first byte, from the root's start;
the first mask's walk also reads as far as a token holds, and may enter more) and the largest
of the others, which a lowering built per frame on first entry would build during some later
mask instead. Their times are estimated by the lowering's share of states, so they are rough
(bisimulation and packing are not linear in the states). And the completion distances that a
served request's first mask builds (the engine always passes the tokens left), on ``--vocab``,
and apart the tokens' order, which waits for a check near the budget.

    python3 -m benchmarks.first_mask_split --seed 0 [--limit 100] [--top 12] [--vocab llama3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from llamay import SchemaError
from llamay._core.automaton import CALL
from llamay._core.distance import Distances
from llamay.grammars.gc_pause import gc_paused
from llamay.grammars.jsonschema.compiler import compile_json_schema, schema_expr
from llamay.ir import Grammar
from llamay.options import CompileOptions

from .peers._data import MASKBENCH, all_subsets, select_schemas
from .peers._vocab import KINDS, llamay_vocab
from .workloads import OPEN, forget_schemas


def entry_frames(grammar) -> tuple[set[int], np.ndarray]:
    """The frame rules that the closure of the start configuration enters, and the states per rule.

    A return is not followed: a frame the root enters before its first byte would have to
    accept the empty string to return before it, and a JSON value never does.
    """
    t = grammar.tables
    rule_start, x_start, x_kind, x_arg, x_tgt = (t[k] for k in ("rule_start", "x_start", "x_kind", "x_arg", "x_tgt"))
    root = grammar.rule_names.index("root")
    entered, seen, todo = {root}, set(), [int(rule_start[root])]
    while todo:  # calls, counters and exits move without reading a byte; byte edges end the closure
        s = todo.pop()
        if s in seen:
            continue
        seen.add(s)
        for e in range(x_start[s], x_start[s + 1]):
            if x_kind[e] == CALL:
                entered.add(int(x_arg[e]))
                todo.append(int(rule_start[x_arg[e]]))
            else:
                todo.append(int(x_tgt[e]))
    return entered, np.bincount(t["state_rule"], minlength=len(grammar.rule_names))


def measure(schema, runs: int, trie) -> dict | None:
    options = CompileOptions(**OPEN)
    ir, whole, distances, orders = [], [], [], []
    for _ in range(runs):
        try:
            forget_schemas()
            start = time.perf_counter()
            with gc_paused():  # as compile_json_schema runs it
                schema_expr(Grammar(), schema, "", [], options)
            ir.append(time.perf_counter() - start)
            forget_schemas()
            start = time.perf_counter()
            grammar = compile_json_schema(schema, **OPEN)
            whole.append(time.perf_counter() - start)
        except SchemaError:
            return None
        built = Distances(grammar, trie)
        distances.append(built.build_seconds)
        built.token_order()
        orders.append(built.build_seconds - distances[-1])
    entered, per_rule = entry_frames(grammar)
    deferred = [n for r, n in enumerate(per_rule) if r not in entered]
    ir_ms, whole_ms = statistics.median(ir) * 1e3, statistics.median(whole) * 1e3
    lower_ms = max(whole_ms - ir_ms, 0.0)
    return {
        "ir": ir_ms,
        "lower": lower_ms,
        "whole": whole_ms,
        "distances": statistics.median(distances) * 1e3,
        "order": statistics.median(orders) * 1e3,
        "states": grammar.n_states,
        "entry_states": int(sum(per_rule[r] for r in entered)),
        "largest_deferred": max(deferred, default=0),
        # lazy lowering, eager IR: the IR pass and the entry frames' share of the lowering
        "lazy_first": ir_ms + lower_ms * sum(per_rule[r] for r in entered) / grammar.n_states,
        "worst_build": lower_ms * max(deferred, default=0) / grammar.n_states,
    }


def summary(values: list[float]) -> str:
    mean, p50, p99 = statistics.mean(values), float(np.percentile(values, 50)), float(np.percentile(values, 99))
    return f"mean {mean:6.2f}  p50 {p50:6.2f}  p99 {p99:6.2f}  max {max(values):6.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=100, help="schemas in all, stratified over every subset")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--top", type=int, default=12, help="slowest schemas listed one by one")
    ap.add_argument("--vocab", choices=KINDS, default="llama3", help="the vocabulary of the distances")
    args = ap.parse_args()
    trie = llamay_vocab(args.vocab).trie
    compile_json_schema({"type": "object", "properties": {"a": {"type": "string"}}}, **OPEN)  # warm
    rows = {}
    for record in select_schemas(all_subsets(MASKBENCH), args.limit, args.seed):
        row = measure(record["schema"], args.runs, trie)
        if row is not None:
            rows[record["id"]] = row
    print(f"seed {args.seed}: {len(rows)} schemas compiled of {args.limit}; milliseconds over them:")
    for key, label in (("whole", "compile (eager)"), ("ir", "schema to IR"), ("lower", "lowering"),
                       ("distances", f"distances ({args.vocab}), served requests"),
                       ("order", "tokens' order, a check near the budget"),
                       ("lazy_first", "lazy lowering, first mask (est.)"),
                       ("worst_build", "lazy lowering, largest later build (est.)")):  # fmt: skip
        print(f"  {label:42s} {summary([r[key] for r in rows.values()])}")
    print(f"slowest {args.top}: states (entry frames' / largest other frame's)")
    for name, r in sorted(rows.items(), key=lambda item: -item[1]["whole"])[: args.top]:
        print(f"  {name[-40:]:40s} whole {r['whole']:6.1f} ir {r['ir']:6.1f} lower {r['lower']:6.1f}  "
              f"distances {r['distances']:5.1f}  "
              f"states {r['states']:6d} ({r['entry_states']:5d} / {r['largest_deferred']:5d})  "
              f"lazy first {r['lazy_first']:6.1f} later build {r['worst_build']:5.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
