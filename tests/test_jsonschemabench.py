"""JSONSchemaBench (the MaskBench data, README section 3): coverage, soundness, completeness.

One test per subset file. Every schema either compiles within the time bound or is refused
with a ``SchemaError`` naming a keyword (or a bound of ``limits.py``): never another error,
never a hang. Schemas compile with the specification's defaults (open objects, unbounded
whitespace), as the instances were validated that way. For a compiled schema every valid
instance (keys in declared order) must be accepted; for one without warnings every invalid
instance must be rejected. ``EXPECTED_FAILURES`` lists, by name, the valid instances that
are not in the canonical form generation writes (``1.0`` for an integer).
"""

from __future__ import annotations

import gzip
import json
import time
from collections import Counter

import pytest
from conftest import corpus

from llamay._core.matcher import Matcher
from llamay.errors import SchemaError
from llamay.limits import COMPILE_SECONDS
from llamay.schema import compile_json_schema
from llamay.schema_keywords import SHAPES
from llamay.testing import compact, declared_order

SUBSETS = [
    "Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Github_ultra", "Glaiveai2K", "Kubernetes",
    "Snowplow", "WashingtonPost", "JsonSchemaStore", "MCPspec", "Handwritten", "Synthesized", "JME",
    "BFCL_simple", "BFCL_multiple", "BFCL_parallel", "BFCL_java", "BFCL_javascript", "BFCL_sql",
]  # fmt: skip

HANG_SECONDS = 5 * COMPILE_SECONDS

# Valid instances rejected on purpose or not yet understood, as "<schema id>#<test index>", by reason.
EXPECTED_FAILURES: set[str] = {
    # a bounded number spelled with an exponent (1e-05): bounded numbers are written plainly
    "Github_medium---o74551.json#0",
    "Github_medium---o74551.json#1",
    "Github_hard---o19353.json#0",
    "Github_hard---o19353.json#3",
    "Github_hard---o21819.json#0",
    "Github_hard---o21819.json#1",
    "Github_hard---o57716.json#0",
    "Github_hard---o57716.json#1",
    # keys in another order than the merged declared order (an object in enum/const, or a branch
    # jsonschema picks differently)
    "Github_medium---o77739.json#1",
    "JsonSchemaStore---label-commenter-config.json#0",
    "JsonSchemaStore---label-commenter-config.json#2",
    # keys of a oneOf/anyOf branch merged in an order declared_order does not reproduce, or a key the
    # branch merge closes: not yet investigated one by one
    "Github_easy---o12649.json#0",
    "Github_easy---o25976.json#0",
    "Github_easy---o78062.json#0",
    "Github_easy---o78062.json#1",
    "Github_medium---o12623.json#0",
    "Github_medium---o12623.json#3",
    "Github_medium---o25771.json#0",
    "Github_medium---o25771.json#1",
    "Github_medium---o67449.json#0",
    "Github_medium---o67449.json#3",
    "Github_hard---o45586.json#0",
    "Github_hard---o45586.json#1",
    "Github_hard---o64963.json#0",
    "Github_hard---o64963.json#1",
    "Github_hard---o67450.json#0",
    "Github_hard---o67450.json#3",
    "Github_hard---o73933.json#0",
    "Github_hard---o73933.json#1",
    "Github_ultra---o2312.json#0",
    "Kubernetes---kb_494_Normalized.json#0",
    "JsonSchemaStore---accelerator.json#0",
    "JsonSchemaStore---accelerator.json#1",
    "JsonSchemaStore---briefcase-schema.json#0",
    "JsonSchemaStore---briefcase-schema.json#1",
    "JsonSchemaStore---dart-test.json#0",
    "JsonSchemaStore---jasmine.json#0",
    "JsonSchemaStore---jasmine.json#4",
}


def records(subset: str):
    with gzip.open(corpus("jsonschemabench", f"{subset}.jsonl.gz"), "rt", encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


def accepts(compiled, data: bytes) -> bool:
    m = Matcher(compiled)
    return m.accept_bytes(data) and m.is_accepting()


def check_schema(rec: dict, tally: Counter, problems: list[str], rejected: set[str]) -> None:
    start = time.monotonic()
    try:
        compiled = compile_json_schema(rec["schema"], closed_objects=False, whitespace_budget=None)
    except SchemaError as exc:
        tally[f"refused: {exc.keyword}"] += 1
        if not isinstance(exc.keyword, str) or not exc.keyword:
            problems.append(f"{rec['id']}: refused without naming a keyword: {exc}")
        return
    finally:
        # A hang, not an overshoot: the deadline is checked between steps, on a shared machine.
        if time.monotonic() - start > HANG_SECONDS:
            problems.append(f"{rec['id']}: compile ran {time.monotonic() - start:.1f} s")
    tally["compiled" if not compiled.warnings else "compiled with warnings"] += 1
    # only a warning about a validation keyword loosens the automaton (an unknown keyword means nothing)
    loosened = any(w.split()[0] in SHAPES for w in compiled.warnings)
    for i, test in enumerate(rec["tests"]):
        accepted = accepts(compiled, compact(declared_order(test["data"], rec["schema"])))
        if test["valid"] and not accepted:
            rejected.add(f"{rec['id']}#{i}")
        elif not test["valid"] and accepted and not loosened:
            problems.append(f"{rec['id']}#{i}: INVALID INSTANCE ACCEPTED")
        tally[f"{'valid' if test['valid'] else 'invalid'} {'accepted' if accepted else 'rejected'}"] += 1


@pytest.mark.parametrize("subset", SUBSETS)
def test_subset(subset):
    tally: Counter = Counter()
    problems: list[str] = []
    rejected: set[str] = set()
    ids = set()
    for rec in records(subset):
        ids.add(rec["id"])
        check_schema(rec, tally, problems, rejected)
    print(f"{subset}: {dict(sorted(tally.items()))}")
    assert problems == []
    expected = {case for case in EXPECTED_FAILURES if case.partition("#")[0] in ids}
    assert sorted(rejected - expected) == [], "new failures"
    assert sorted(expected - rejected) == [], "new passes: shrink EXPECTED_FAILURES"
