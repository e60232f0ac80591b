"""benchmarks.numeric_ranges finds the ranges a compile builds, and times each apart."""

from __future__ import annotations

from benchmarks.numeric_ranges import build_ms, ranges_in
from llamay.grammars.jsonschema import numeric

SCHEMAS = [
    {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0, "maximum": 150}}},
    {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.25},
    {"type": "string"},
]


def test_every_range_met_is_listed_once_with_its_options():
    names = [numeric._name(*r) for r in ranges_in(SCHEMAS + SCHEMAS)]
    assert len(names) == len(set(names))
    # the harness's options leave numbers uncapped; the defaults cap them (a rule of its own)
    assert {"num:int[0,150]", "num:dec(0,inf)*25e-2"} <= set(names)
    assert any(n.startswith("num:dec(0,inf)*25e-2/") for n in names)
    assert numeric._magnitude_rules.__name__ == "_magnitude_rules"  # the recorder is gone


def test_a_range_is_timed_from_a_cleared_memo():
    (first, *_) = ranges_in(SCHEMAS[:1])
    assert build_ms(first, 2) > 0
    assert numeric._magnitude_rules.cache_info().currsize == 1
