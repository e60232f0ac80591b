"""Conformance on the JSON-Schema-Test-Suite (draft2020-12, draft7, draft4), every group.

A group whose schema uses a keyword llamay refuses must raise ``SchemaError`` naming one of
those keywords. Every other group compiles with the specification's defaults (open objects,
unbounded whitespace), and the automaton must accept the compact serialization of each
instance (keys in declared order) exactly when the suite calls it valid. Two allowances:

- a warned keyword (``minimum``, ``pattern``, ``format`` ...) that alone decides a case may let an
  invalid instance through: the stripped schema (warned keywords removed) calls it valid;
- ``EXPECTED_FAILURES``: valid instances that are not in the canonical form generation emits
  (``1.0`` as an integer, keys in another order). The set is exact, so that a new failure
  and a new pass both show up.

No invalid instance is ever accepted otherwise: that is the soundness contract.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

import pytest
from conftest import corpus
from jsonschema import Draft4Validator, Draft7Validator, Draft202012Validator

from llamay._core.matcher import Matcher
from llamay.errors import SchemaError
from llamay.schema import ANNOTATIONS, ENFORCED, WARNED, Unsatisfiable, compile_json_schema
from llamay.testing import compact, declared_order

VALIDATORS = {"draft2020-12": Draft202012Validator, "draft7": Draft7Validator, "draft4": Draft4Validator}
SUPPORTED = ENFORCED | WARNED | ANNOTATIONS

# Valid instances the automaton rejects on purpose, by case id ("<draft>/<file>: <group>: <test>").
# Value equality: JSON Schema calls 1.0 (and 1e308) an integer; generation writes integers without
# a fraction or exponent (draft 4 agrees: there 1.0 is not an integer). Key order: an object in
# const/enum matches in its own key order only.
EXPECTED_FAILURES = {
    "draft2020-12/type.json: integer type matches integers: a float with zero fractional part is an integer",
    "draft2020-12/optional/float-overflow.json: all integers are multiples of 0.5, if overflow is handled: "
    "valid if optional overflow handling is implemented",
    "draft2020-12/const.json: const with object: same object with different property order is valid",
    "draft7/type.json: integer type matches integers: a float with zero fractional part is an integer",
    "draft7/optional/float-overflow.json: all integers are multiples of 0.5, if overflow is handled: "
    "valid if optional overflow handling is implemented",
    "draft7/const.json: const with object: same object with different property order is valid",
}


@dataclass
class Tally:
    """Outcome counts for one draft, and every case that broke the contract."""

    cases: Counter = field(default_factory=Counter)
    refused: Counter = field(default_factory=Counter)
    valid_rejected: set = field(default_factory=set)
    problems: list = field(default_factory=list)

    def summary(self, draft: str) -> str:
        refused = ", ".join(f"{k} {n}" for k, n in self.refused.most_common())
        return f"{draft}: cases {dict(self.cases)}; groups refused by keyword: {refused}"


def schema_positions(schema):
    """Every subschema reachable through keywords llamay compiles (where a refusal would be found)."""
    yield schema
    if not isinstance(schema, dict):
        return
    for keyword, value in schema.items():
        if keyword == "properties" and isinstance(value, dict):
            for sub in value.values():
                yield from schema_positions(sub)
        elif keyword == "items" and isinstance(value, list):
            for sub in value:
                yield from schema_positions(sub)
        elif keyword in ("items", "additionalItems", "additionalProperties"):
            yield from schema_positions(value)


def refused_keywords(schema) -> set[str]:
    return {k for node in schema_positions(schema) if isinstance(node, dict) for k in node if k not in SUPPORTED}


def strip_warned(schema):
    """``schema`` without the keywords llamay only warns about, at every schema position."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for keyword, value in schema.items():
        if keyword in WARNED:
            continue
        if keyword == "properties" and isinstance(value, dict):
            value = {k: strip_warned(v) for k, v in value.items()}
        elif keyword == "items" and isinstance(value, list):
            value = [strip_warned(v) for v in value]
        elif keyword in ("items", "additionalItems", "additionalProperties"):
            value = strip_warned(value)
        out[keyword] = value
    return out


def accepts(compiled, data: bytes) -> bool:
    m = Matcher(compiled)
    return m.accept_bytes(data) and m.is_accepting()


def suite_groups(draft: str):
    """(file path relative to the draft folder, group) for every group of every file."""
    root = corpus("json-schema-test-suite", "tests", draft)
    for path in sorted(root.rglob("*.json")):
        for group in json.loads(path.read_text(encoding="utf-8")):
            yield path.relative_to(root).as_posix(), group


def check_group(draft: str, name: str, group: dict, tally: Tally) -> None:
    schema, where = group["schema"], f"{draft}/{name}: {group['description']}"
    refused = refused_keywords(schema)
    try:
        compiled = compile_json_schema(schema, closed_objects=False, whitespace_budget=None)
    except Unsatisfiable:
        tally.cases["unsatisfiable schema, every instance invalid"] += len(group["tests"])
        if any(t["valid"] for t in group["tests"]):
            tally.problems.append(f"{where}: refused as unsatisfiable, but has valid instances")
        return
    except SchemaError as exc:
        tally.refused[exc.keyword] += 1
        if exc.keyword not in refused:
            tally.problems.append(f"{where}: refused naming {exc.keyword!r}, not one of {sorted(refused)}")
        return
    if refused:
        tally.problems.append(f"{where}: compiled although it uses {sorted(refused)}")
        return
    stripped = VALIDATORS[draft](strip_warned(schema))
    for test in group["tests"]:
        check_case(f"{where}: {test['description']}", schema, test, compiled, stripped, tally)


def check_case(case: str, schema, test: dict, compiled, stripped, tally: Tally) -> None:
    accepted = accepts(compiled, compact(declared_order(test["data"], schema)))
    if accepted == test["valid"]:
        tally.cases["pass"] += 1
    elif test["valid"]:
        tally.cases["expected failure"] += 1
        tally.valid_rejected.add(case)
    elif stripped.is_valid(test["data"]):
        tally.cases["invalid accepted where a warned keyword decides"] += 1
    else:
        tally.problems.append(f"{case}: INVALID INSTANCE ACCEPTED")


@pytest.mark.parametrize("draft", list(VALIDATORS))
def test_suite_conformance(draft):
    tally = Tally()
    for name, group in suite_groups(draft):
        check_group(draft, name, group, tally)
    print(tally.summary(draft))
    assert tally.problems == []
    expected = {case for case in EXPECTED_FAILURES if case.startswith(draft + "/")}
    assert sorted(tally.valid_rejected - expected) == [], "new failures"
    assert sorted(expected - tally.valid_rejected) == [], "new passes: shrink EXPECTED_FAILURES"
