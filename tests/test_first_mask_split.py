"""benchmarks.first_mask_split finds the frames the first mask needs: those entered before the first byte."""

from __future__ import annotations

import pytest

from benchmarks.first_mask_split import entry_frames
from benchmarks.workloads import OPEN, forget_schemas
from llamay import compile_json_schema
from llamay.grammars.jsonschema import compiler, numeric, prebuilt, regex

NODE = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}


@pytest.mark.parametrize(
    ("schema", "entered"),
    [
        # the recursive target is a frame the root calls before reading a byte
        ({"$ref": "#/$defs/node", "$defs": {"node": NODE}}, {"root", "ref0"}),
        # behind a key: entered only after '{"tree":' is read
        ({"type": "object", "properties": {"tree": {"$ref": "#/$defs/node"}}, "$defs": {"node": NODE}}, {"root"}),
        ({"type": "string"}, {"root"}),
    ],
)
def test_entry_frames_are_the_frames_called_before_the_first_byte(schema, entered):
    grammar = compile_json_schema(schema, **OPEN)
    found, per_rule = entry_frames(grammar)
    assert {grammar.rule_names[r] for r in found} == entered
    assert per_rule.sum() == grammar.n_states and all(per_rule[r] > 0 for r in found)


@pytest.mark.parametrize(
    ("schema", "memo"),
    [
        ({"type": "integer", "minimum": 3, "maximum": 917}, numeric._magnitude_rules),
        ({"type": "string", "pattern": "^[a-q]{2,5}$"}, regex.pattern_string),
        ({"type": "object", "properties": {"an_unusual_name": {"type": "null"}}}, compiler._quoted),
    ],
)
def test_forget_schemas_times_a_new_schema_not_a_repeat(schema, memo):
    """The benchmark compiles each schema again: what the first compile memoized must not be found."""
    compile_json_schema(schema, **OPEN)
    assert memo.cache_info().currsize > 0
    compile_json_schema({"type": "string", "format": "date-time"}, **OPEN)
    kept = prebuilt.lookup.cache_info().currsize
    forget_schemas()
    assert memo.cache_info().currsize == 0
    assert prebuilt.lookup.cache_info().currsize == kept > 0  # every process builds the formats once
