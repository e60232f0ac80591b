"""``StructureKeys``: equal JSON texts get equal keys, different texts different ones.

The schema compiler shares a rule among subschemas with equal keys, so a collision would give
one subschema another's grammar; a miss only costs a second compile.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from llamay.grammars.jsonschema.structure import StructureKeys

NESTED = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}

#: (left, right, whether their keys are equal)
CASES = [
    (1, 1, True),
    (1, 1.0, False),  # "1" and "1.0"
    (1, True, False),
    (0, False, False),
    (0.0, -0.0, False),
    (None, False, False),
    ("1", 1, False),
    ([1, 2], (1, 2), True),  # both arrays in the text
    ([1, 2], [2, 1], False),
    ({"a": 1, "b": 2}, {"a": 1, "b": 2}, True),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, False),  # the text keeps the order
    ({"a": [1]}, {"a": [1.0]}, False),
    (NESTED, json.loads(json.dumps(NESTED)), True),  # equal values, distinct objects
    ({"items": NESTED}, {"items": {**NESTED, "minItems": 1}}, False),
    (Decimal("1.5"), "1.5", False),  # not JSON: its type counts too
    (Decimal("1.5"), Decimal("1.50"), False),
    (float("nan"), float("nan"), True),
    ({"a": "x"}, {"a": "x"}, True),  # string members stand for themselves in their container's key
    ({"a": "0"}, {"a": 0}, False),
    ({"a": "s"}, {"a": {}}, False),
    (["x", "y"], ["x", ["y"]], False),
]


@pytest.mark.parametrize(("left", "right", "equal"), CASES, ids=[f"{i}" for i in range(len(CASES))])
def test_keys_are_equal_exactly_when_the_json_texts_are(left, right, equal):
    keys = StructureKeys()
    assert (keys.key(left) == keys.key(right)) is equal
    if equal is False and not any(isinstance(v, Decimal) for v in (left, right)):
        assert json.dumps(left) != json.dumps(right)  # the case is about text, as claimed


def test_a_node_seen_again_keeps_its_key_after_its_siblings_are_keyed():
    keys = StructureKeys()
    node = {"type": "string"}
    first = keys.key(node)
    keys.key({"list": [node, {"type": "integer"}, [node]]})
    assert keys.key(node) == first == keys.key({"type": "string"})
