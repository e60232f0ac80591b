"""Conformance on the JSON-Schema-Test-Suite (draft2020-12, draft7, draft4), every group.

A group's schema either compiles with the specification's defaults (open objects, unbounded
whitespace, uncapped numbers) or is refused with a ``SchemaError`` naming a keyword the schema uses (or a bound
of ``llamay.options.Limits``). A compiled automaton must accept the compact serialization of each instance
(keys in declared order) exactly when the suite calls it valid. Two allowances:

- an invalid instance may be accepted where the compile said a keyword is not enforced
  (``compiled.warnings``): counted apart, never silent;
- ``EXPECTED_FAILURES``: valid instances rejected on purpose, each with its reason (the
  canonical forms generation emits: ``1.0`` is not written for an integer, keys come in
  declared order, strings matched by a pattern or format use canonical escapes). The set is
  exact, so that a new failure and a new pass both show up.

No invalid instance is ever accepted otherwise: that is the soundness contract. The test
prints a per-keyword table (one suite file per keyword) of passes, expected failures,
refused groups and invalid instances let through under a warning.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pytest
from conftest import corpus
from feed import accepts, compact
from key_order import declared_order

from llamay.errors import SchemaError
from llamay.grammars.jsonschema.compiler import Unsatisfiable, compile_json_schema

DRAFTS = ["draft2020-12", "draft7", "draft4"]
# The suite's files leave "$schema" out; llamay reads it (drafts 4-7 ignore the siblings of "$ref").
DECLARED = {"draft7": "http://json-schema.org/draft-07/schema#", "draft4": "http://json-schema.org/draft-04/schema#"}

# Valid instances the automaton rejects on purpose, by case id ("<draft>/<file>: <group>: <test>").
EXPECTED_FAILURES = {
    # Value equality: JSON Schema calls 1.0 (and 1e308) an integer; generation writes integers without
    # a fraction or exponent (draft 4 agrees: there 1.0 is not an integer).
    "draft2020-12/type.json: integer type matches integers: a float with zero fractional part is an integer",
    "draft7/type.json: integer type matches integers: a float with zero fractional part is an integer",
    *(
        f"{draft}/optional/float-overflow.json: all integers are multiples of 0.5, if overflow is handled: "
        "valid if optional overflow handling is implemented"
        for draft in ("draft2020-12", "draft7", "draft4")
    ),
    # Key order: an object in const/enum matches in its own key order only.
    "draft2020-12/const.json: const with object: same object with different property order is valid",
    "draft7/const.json: const with object: same object with different property order is valid",
    # 2020-12 makes "format" an annotation by default; llamay asserts the formats it knows (a
    # constrained generator that writes "2024-13-45" for format: date helps nobody).
    *(
        f"draft2020-12/format.json: {name} format: invalid {name} string is only an annotation by default"
        for name in (
            "date", "date-time", "duration", "email", "hostname", "ipv4", "ipv6", "iri", "iri-reference",
            "json-pointer", "relative-json-pointer", "time", "uri", "uri-reference", "uuid",
        )
    ),
    # A custom metaschema that drops the validation vocabulary: llamay does not read metaschemas.
    "draft2020-12/vocabulary.json: schema that uses custom metaschema with with no validation vocabulary: "
    "no validation: invalid number, but it still validates",
}  # fmt: skip


@dataclass
class Tally:
    """Outcome counts for one draft, per keyword file, and every case that broke the contract."""

    keywords: dict = field(default_factory=lambda: defaultdict(Counter))
    refused: Counter = field(default_factory=Counter)
    valid_rejected: set = field(default_factory=set)
    problems: list = field(default_factory=list)

    def summary(self, draft: str) -> str:
        lines = [f"{draft}: groups refused by keyword: {dict(self.refused.most_common())}"]
        for name, counts in sorted(self.keywords.items()):
            lines.append(f"  {name:45} " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
        return "\n".join(lines)


def keys_used(schema) -> set[str]:
    """Every object key anywhere in ``schema`` (a refusal must name one of them, or a bound)."""
    if isinstance(schema, dict):
        return set(schema) | {k for v in schema.values() for k in keys_used(v)}
    if isinstance(schema, list):
        return {k for v in schema for k in keys_used(v)}
    return set()


def suite_groups(draft: str):
    """(file path relative to the draft folder, group) for every group of every file."""
    root = corpus("json-schema-test-suite", "tests", draft)
    for path in sorted(root.rglob("*.json")):
        for group in json.loads(path.read_text(encoding="utf-8")):
            yield path.relative_to(root).as_posix(), group


def check_group(draft: str, name: str, group: dict, tally: Tally) -> None:
    schema, where = group["schema"], f"{draft}/{name}: {group['description']}"
    if draft in DECLARED and isinstance(schema, dict):
        schema = {"$schema": DECLARED[draft], **schema}
    counts = tally.keywords[name.removesuffix(".json")]
    try:
        compiled = compile_json_schema(schema, closed_objects=False, whitespace_budget=None, number_digits=None)
    except Unsatisfiable:
        counts["pass"] += len(group["tests"])
        if any(t["valid"] for t in group["tests"]):
            tally.problems.append(f"{where}: refused as unsatisfiable, but has valid instances")
        return
    except SchemaError as exc:
        tally.refused[exc.keyword] += 1
        counts["refused groups"] += 1
        if exc.keyword not in keys_used(schema) and not exc.keyword.isupper():
            tally.problems.append(f"{where}: refused naming {exc.keyword!r}, which it does not use")
        return
    for test in group["tests"]:
        case = f"{where}: {test['description']}"
        accepted = accepts(compiled, compact(declared_order(test["data"], schema)))
        if accepted == test["valid"]:
            counts["pass"] += 1
        elif test["valid"]:
            counts["expected failure"] += 1
            tally.valid_rejected.add(case)
        elif compiled.warnings:
            counts["invalid accepted under a warning"] += 1
        else:
            tally.problems.append(f"{case}: INVALID INSTANCE ACCEPTED")


@pytest.mark.parametrize("draft", DRAFTS)
def test_suite_conformance(draft):
    tally = Tally()
    for name, group in suite_groups(draft):
        check_group(draft, name, group, tally)
    print(tally.summary(draft))
    assert tally.problems == []
    expected = {case for case in EXPECTED_FAILURES if case.startswith(draft + "/")}
    assert sorted(tally.valid_rejected - expected) == [], "new failures"
    assert sorted(expected - tally.valid_rejected) == [], "new passes: shrink EXPECTED_FAILURES"
