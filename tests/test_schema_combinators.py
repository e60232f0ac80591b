"""JSON Schema, the composite keywords: references, combinators, patterns, formats, bounds.

Three kinds of evidence, as for the core keywords (``test_schema.py``):

- a table of documents each keyword accepts and rejects (``CASES``);
- soundness: random walks of the automaton (bytes picked among those the mask allows) are
  valid for ``jsonschema`` with format assertion on, for every schema in ``SCHEMAS`` and for
  the schemas clients really send (pydantic v2, the openai SDK's strict transform), and load
  back into the pydantic model;
- completeness: instances hypothesis-jsonschema draws from each schema are accepted.
"""

from __future__ import annotations

import json
import random
import re
from decimal import Decimal
from enum import Enum
from typing import Literal, Optional

import jsonschema
import pytest
from feed import accepts, compact
from hypothesis import HealthCheck, assume, given, settings
from hypothesis_jsonschema import from_schema
from key_order import declared_order
from openai.lib._pydantic import to_strict_json_schema
from pydantic import BaseModel, Field
from test_schema import random_walk

from llamay.errors import SchemaError
from llamay.grammars.jsonschema.compiler import compile_json_schema

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["value"],
        }
    },
    "$ref": "#/$defs/node",
}
LINKED = {
    "definitions": {
        "cell": {
            "type": ["object", "null"],
            "properties": {"v": {"type": "string"}, "next": {"$ref": "#/definitions/cell"}},
            "required": ["v", "next"],
        }
    },
    "$ref": "#/definitions/cell",
}
SHAPES = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0}},
            "required": ["kind", "r"],
        },
        {
            "type": "object",
            "properties": {"kind": {"const": "square"}, "side": {"type": "integer", "exclusiveMinimum": 0}},
            "required": ["kind", "side"],
        },
    ]
}
MERGED = {
    "type": "object",
    "properties": {"id": {"type": "integer"}},
    "allOf": [
        {
            "properties": {"id": {"minimum": 1, "maximum": 999}, "name": {"type": "string", "maxLength": 5}},
            "required": ["id"],
        },
        {"properties": {"name": {"pattern": "^[a-z]+$"}}, "required": ["name"]},
    ],
}
EITHER = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
    "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
    "additionalProperties": False,
}
STRINGS = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "id": {"type": "string", "format": "uuid"},
        "ip": {"type": "string", "format": "ipv4"},
        "mail": {"type": "string", "format": "email"},
        "word": {"type": "string", "pattern": "^ab", "maxLength": 4},
    },
    "additionalProperties": False,
}
DIGITS = {"type": "string", "pattern": "^\\d+$"}
NUMBERS = {
    "type": "object",
    "properties": {
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "temp": {"type": "number", "exclusiveMinimum": -273.15, "maximum": 1000},
        "even": {"type": "integer", "multipleOf": 2, "minimum": -10, "maximum": 10},
        "price": {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 100},
        "port": {"type": "integer", "exclusiveMinimum": 1023, "exclusiveMaximum": 65536},
    },
    "additionalProperties": False,
}
TUPLES = {
    "type": "array",
    "prefixItems": [{"type": "string"}, {"type": "integer", "minimum": 0}],
    "items": {"type": "boolean"},
    "maxItems": 4,
}
COUNTED = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
    "additionalProperties": {"type": "boolean"},
    "minProperties": 2,
    "maxProperties": 3,
}
NAMED = {
    "type": "object",
    "propertyNames": {"enum": ["x", "y", "z"]},
    "properties": {"x": {"type": "integer"}},
    "additionalProperties": {"type": "string"},
}
PATTERNED = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "patternProperties": {"^x-[a-z]+$": {"type": "integer"}},
    "additionalProperties": False,
}

SCHEMAS = {
    "tree": TREE, "linked": LINKED, "shapes": SHAPES, "merged": MERGED, "either": EITHER, "strings": STRINGS,
    "numbers": NUMBERS, "tuples": TUPLES, "counted": COUNTED, "named": NAMED, "patterned": PATTERNED,
}  # fmt: skip

CASES = [
    (TREE, '{"value":1,"children":[{"value":2,"children":[]}]}', True),
    (TREE, '{"value":1,"children":[{"children":[]}]}', False),
    (LINKED, '{"v":"a","next":{"v":"b","next":null}}', True),
    (LINKED, '{"v":"a","next":{"v":"b"}}', False),
    (SHAPES, '{"kind":"circle","r":1.5}', True),
    (SHAPES, '{"kind":"square","side":0}', False),
    (SHAPES, '{"kind":"square","r":1}', False),
    (MERGED, '{"id":5,"name":"abc"}', True),
    (MERGED, '{"id":0,"name":"abc"}', False),
    (MERGED, '{"id":5,"name":"abcdef"}', False),
    (MERGED, '{"id":5,"name":"ab1"}', False),
    (MERGED, '{"id":5}', False),
    (EITHER, '{"a":1}', True),
    (EITHER, '{"b":"x"}', True),
    (EITHER, "{}", False),
    (STRINGS, '{"code":"AB-123","day":"2024-02-29"}', True),
    (STRINGS, '{"day":"2023-02-29"}', False),
    (STRINGS, '{"code":"AB-12"}', False),
    (DIGITS, '"0123"', True),
    (DIGITS, '"12\u0660"', False),  # ECMA-262: \d is ASCII (Python's re says otherwise)
    (STRINGS, '{"ip":"256.1.1.1"}', False),
    (STRINGS, '{"at":"2024-01-01T12:00:00Z","id":"123e4567-e89b-12d3-a456-426614174000"}', True),
    (STRINGS, '{"word":"abxy"}', True),
    (STRINGS, '{"word":"abxyz"}', False),
    (STRINGS, '{"word":"xab"}', False),
    (NUMBERS, '{"age":130,"temp":-273.14,"even":-10,"price":19.99,"port":1024}', True),
    (NUMBERS, '{"age":131}', False),
    (NUMBERS, '{"age":-1}', False),
    (NUMBERS, '{"temp":-273.15}', False),
    (NUMBERS, '{"even":3}', False),
    (NUMBERS, '{"price":1.001}', False),
    (NUMBERS, '{"port":65536}', False),
    (TUPLES, '["a",1,true,false]', True),
    (TUPLES, '["a",-1]', False),
    (TUPLES, '["a",1,true,false,true]', False),
    (COUNTED, '{"a":1,"b":2}', True),
    (COUNTED, '{"a":1,"x":true,"y":false}', True),
    (COUNTED, '{"a":1}', False),
    (COUNTED, '{"a":1,"b":2,"c":3,"x":true}', False),
    (NAMED, '{"x":1,"y":"s"}', True),
    (NAMED, '{"x":1,"w":"s"}', False),
    (PATTERNED, '{"name":"n","x-ab":3}', True),
    (PATTERNED, '{"name":"n","x-ab":"3"}', False),
    (PATTERNED, '{"name":"n","y":3}', False),
]


@pytest.mark.parametrize(("schema", "text", "accepted"), CASES)
def test_stage_two_keyword_is_enforced(schema, text, accepted):
    compiled = compile_json_schema(schema)
    assert compiled.warnings == []
    assert accepts(compiled, text) == accepted


def validator(schema):
    """``jsonschema`` on exact decimals (``multipleOf: 0.01`` is not a float question), formats asserted."""
    schema = json.loads(json.dumps(schema), parse_float=Decimal)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def load(document: bytes | str):
    return json.loads(document, parse_float=Decimal)


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_random_walks_are_valid_documents(name):
    schema = SCHEMAS[name]
    compiled = compile_json_schema(schema, whitespace_budget=8)
    check = validator(schema)
    rng = random.Random(name)
    for _ in range(30):
        document = random_walk(compiled, rng)
        assert check.is_valid(load(document)), document


@pytest.mark.parametrize("name", [n for n in SCHEMAS if n not in ("tree", "linked")])  # no recursion there
def test_hypothesis_instances_are_accepted(name):
    schema = SCHEMAS[name]
    compiled = compile_json_schema(schema, closed_objects=False, whitespace_budget=None, number_digits=None)
    exact = validator(schema)

    @settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(from_schema(schema))
    def check(instance):
        text = compact(declared_order(instance, schema))
        # hypothesis-jsonschema validates with floats, Python's \d and without prefixItems; and a
        # bounded number is written without an exponent (its spellings with one are not admitted)
        assume(exact.is_valid(load(text)) and not re.search(rb"[0-9][eE][-+]?[0-9]", text))
        assert accepts(compiled, text), instance

    check()


# ------------------------------------------------------------ schemas clients send


class Colour(str, Enum):
    red = "red"
    green = "green"


class Node(BaseModel):
    name: str = Field(max_length=8)
    children: list[Node] = []


class Address(BaseModel):
    street: str
    postcode: str = Field(pattern=r"^\d{5}$")


class Pet(BaseModel):
    kind: Literal["cat", "dog"]
    age: Optional[int] = Field(default=None, ge=0, le=40)  # noqa: UP045 (the Optional spelling clients write)
    colour: Colour
    weight: float = Field(gt=0)
    tags: list[str] = Field(default_factory=list, max_length=3)
    home: Optional[Address] = None  # noqa: UP045
    tree: Node


CLIENT_SCHEMAS = {
    "pydantic": Pet.model_json_schema(),
    "openai-strict": to_strict_json_schema(Pet),
    "pydantic-recursive": Node.model_json_schema(),
}


@pytest.mark.parametrize("name", list(CLIENT_SCHEMAS))
def test_client_schemas_compile_and_walks_load_back(name):
    schema = CLIENT_SCHEMAS[name]
    compiled = compile_json_schema(schema, whitespace_budget=8)
    assert compiled.warnings == []
    model = Node if "recursive" in name else Pet
    check = validator(schema)
    rng = random.Random(name)
    for _ in range(20):
        document = random_walk(compiled, rng, stop=0.6, steer_after=300)
        assert check.is_valid(load(document)), document
        model.model_validate_json(document)


def test_pydantic_optional_field_takes_null_or_its_type():
    compiled = compile_json_schema(CLIENT_SCHEMAS["openai-strict"])
    base = '{"kind":"cat","age":%s,"colour":"red","weight":1.5,"tags":[],"home":null,"tree":{"name":"a","children":[]}}'
    assert accepts(compiled, base % "null")
    assert accepts(compiled, base % "3")
    assert not accepts(compiled, base % "41")
    assert not accepts(compiled, base % '"3"')


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"properties": {"a": {"$ref": "#/$defs/b"}}, "$defs": {"b": {"not": {}}}}, "not"),
        ({"$dynamicRef": "#meta"}, "$dynamicRef"),
        ({"$ref": "#/$defs/a", "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}}, "$ref"),
        ({"allOf": [{"patternProperties": {"^a": {}}}, {"additionalProperties": False}]}, "allOf"),
        ({"type": "object", "patternProperties": {"^a": {"type": "integer"}}}, "patternProperties"),
    ],
    ids=["refused-target", "dynamic-ref", "cycle-through-anyOf", "pattern-merge", "pattern-open"],
)
def test_what_cannot_be_exact_is_refused_by_name(schema, keyword):
    with pytest.raises(SchemaError) as exc:
        compile_json_schema(schema, closed_objects=False)
    assert exc.value.keyword == keyword


@pytest.mark.parametrize("ref_first", [True, False])
def test_all_of_keeps_the_order_of_its_entries_around_a_ref(ref_first):
    """A ``$ref`` entry's properties stand where the entry does (MaskBench: 32 valid instances)."""
    entries = [{"$ref": "#/definitions/A"}, {"properties": {"y": {}}}]
    schema = {"allOf": entries if ref_first else entries[::-1], "definitions": {"A": {"properties": {"x": {}}}}}
    compiled = compile_json_schema(schema, closed_objects=False)
    xy, yx = '{"x":1,"y":2}', '{"y":2,"x":1}'
    assert accepts(compiled, xy if ref_first else yx)
    assert not accepts(compiled, yx if ref_first else xy)


@pytest.mark.parametrize(
    ("value", "good", "bad"),
    [
        ({"$ref": "#/$defs/big"}, "{" + ",".join(f'"p{i}":"x"' for i in range(10)) + "}", '{"p0":"x"}'),
        ({"type": "string", "format": "date-time"}, '"2024-02-29T23:59:60Z"', '"2023-02-29T12:00:00Z"'),
    ],
    ids=["ref", "format"],
)
def test_a_value_used_at_many_places_is_built_once(value, good, bad):
    """Past ``Tuning.share_states``, a rule that would be inlined at several places is one frame:
    ten properties with the same ``$ref`` or ``format`` cost little more than two."""
    names = [f"p{i}" for i in range(10)]
    big = {"type": "object", "properties": {name: {"type": "string"} for name in names}, "required": names}

    def schema(uses: int) -> dict:
        return {"$defs": {"big": big}, "type": "object", "properties": {f"k{i}": value for i in range(uses)}}

    one, two, ten = (compile_json_schema(schema(k)) for k in (1, 2, 10))
    assert ten.n_states < 2 * one.n_states
    assert ten.n_states - two.n_states < 8 * 40  # a key, a colon and a call per further use
    doc = "{" + ",".join(f'"k{i}":{good}' for i in range(10)) + "}"
    assert accepts(ten, doc)
    assert not accepts(ten, doc.replace(good, bad, 1))  # the first use
    assert not accepts(ten, doc[: -1 - len(good)] + bad + "}")  # the last


def test_equal_subschemas_written_inline_are_built_once():
    """Bundled schemas repeat a definition inline (one in MaskBench 172 times): equal flat schemas
    are one rule, so lowering builds them once; each copy still warns and is enforced where it is."""
    names = [f"p{i}" for i in range(10)]
    big = {"type": "object", "properties": {name: {"type": "string", "format": "x-unknown"} for name in names},
           "required": names}  # fmt: skip

    def schema(uses: int) -> dict:
        return {"type": "object", "properties": {f"k{i}": json.loads(json.dumps(big)) for i in range(uses)}}

    two, ten = (compile_json_schema(schema(k)) for k in (2, 10))
    assert ten.n_states - two.n_states < 8 * 40  # a key, a colon and a call per further use
    assert {f"format not enforced at /properties/k{i}/properties/p9" for i in range(10)} <= set(ten.warnings)
    good = "{" + ",".join(f'"{name}":"x"' for name in names) + "}"
    doc = "{" + ",".join(f'"k{i}":{good}' for i in range(10)) + "}"
    assert accepts(ten, doc)
    assert not accepts(ten, doc.replace('"p9":"x"', '"p9":1', 1))  # the first copy
    assert not accepts(ten, doc[: -len('"x"}}')] + "1}}")  # the last


def test_what_was_built_under_a_target_that_admits_nothing_is_not_reused():
    """``T`` admits nothing (it requires a property that must not be there), which is known only once
    its body is compiled; what was built meanwhile refers to ``T`` (an inline subschema, the target
    ``U`` first met inside ``T``) and must not serve again: it would take an empty value for ``T``."""
    inner = {"type": "object", "properties": {"a": {"$ref": "#/$defs/T"}}}
    defs = {"T": {"type": "object", "properties": {"x": inner, "w": {"$ref": "#/$defs/U"}, "b": False},
                  "required": ["b"]},
            "U": {"type": "object", "properties": {"u": {"$ref": "#/$defs/T"}}}}  # fmt: skip
    properties = {"t": {"$ref": "#/$defs/T"}, "y": json.loads(json.dumps(inner)), "z": {"$ref": "#/$defs/U"}}
    compiled = compile_json_schema({"$defs": defs, "type": "object", "properties": properties})
    assert accepts(compiled, '{"y":{},"z":{}}')
    for bad in ('{"y":{"a":}}', '{"z":{"u":}}', '{"t":}'):
        assert not accepts(compiled, bad), bad


def test_equal_text_under_another_base_uri_is_another_schema():
    """The same ``$ref`` text names another definition under another ``$id``: no sharing by text there."""
    def under(base: str, kind: str) -> dict:
        return {"$id": base, "$defs": {"t": {"type": kind}}, "type": "object",
                "properties": {"v": {"$ref": "#/$defs/t"}}, "required": ["v"]}  # fmt: skip

    schema = {"type": "object", "properties": {"a": under("http://x/a.json", "integer"),
                                               "b": under("http://x/b.json", "string")}}  # fmt: skip
    compiled = compile_json_schema(schema)
    assert accepts(compiled, '{"a":{"v":1},"b":{"v":"s"}}')
    assert not accepts(compiled, '{"a":{"v":"s"},"b":{"v":"s"}}')
    assert not accepts(compiled, '{"a":{"v":1},"b":{"v":1}}')


def test_union_branches_share_one_rule_per_reference():
    """A definition used by many branches is one rule: the automaton grows with the schema, not the uses."""
    branches = [{"$ref": "#/$defs/big"} for _ in range(40)]
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(30)}}
    one = compile_json_schema({"$defs": {"big": big}, "$ref": "#/$defs/big"})
    many = compile_json_schema({"$defs": {"big": big}, "anyOf": branches})
    assert many.n_states <= one.n_states + 8
