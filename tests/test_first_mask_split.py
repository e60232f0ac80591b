"""benchmarks.first_mask_split finds the frames the first mask needs: those entered before the first byte."""

from __future__ import annotations

import pytest

from benchmarks.first_mask_split import entry_frames
from benchmarks.workloads import OPEN
from llamay import compile_json_schema

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
