"""JSON Schema, the core keywords: what is enforced, warned, refused, and the JSON lexicon.

The keyword list these tests hold the compiler to is in ``README.md`` ("Tools and schemas").

Tables of (schema, instance text, accepted) per keyword run through the byte-level matcher;
property tests check that instances hypothesis-jsonschema draws are accepted, and that
random walks through the automaton only ever produce documents ``jsonschema`` validates.
"""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
from feed import accepts, compact, generate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from key_order import declared_order

from llamay import ir
from llamay._core.bitmask import allocate_bitmask
from llamay._core.matcher import Matcher
from llamay.backends.fixture import ScriptedScorer
from llamay.chat.tool_grammar import compile_tool_calls
from llamay.errors import SchemaError, UsageError
from llamay.grammars.jsonschema.compiler import Unsatisfiable, any_json, compile_json_schema
from llamay.options import DEFAULT, Limits
from llamay.vocab import Vocabulary

BYTE_VOCAB = Vocabulary([bytes([i]) for i in range(256)] + [b""], eos_ids=[256])


def case(schema, text, accepted, id_, **options):
    return pytest.param(schema, text, accepted, options, id=id_)


OBJ = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
    "required": ["b"],
}
ALL_OPTIONAL = {"type": "object", "properties": {k: {"type": "integer"} for k in "abcd"}}
OPEN = {**OBJ, "additionalProperties": True}
# Extra keys are told apart from names over their whole length, however long the names.
LONG = {"properties": {"k" * 30: {"type": "integer"}, "q" * 80: {"type": "integer"}}, "additionalProperties": True}
TUPLE = {"type": "array", "items": [{"type": "integer"}, {"type": "string"}], "additionalItems": False}

ENFORCED_CASES = [
    # "type": all seven, and lists
    case({"type": "null"}, "null", True, "null-accepts-null"),
    case({"type": "null"}, "0", False, "null-rejects-zero"),
    case({"type": "boolean"}, "true", True, "boolean-accepts-true"),
    case({"type": "boolean"}, "false", True, "boolean-accepts-false"),
    case({"type": "boolean"}, "1", False, "boolean-rejects-one"),
    case({"type": "integer"}, "-12", True, "integer-accepts-negative"),
    case({"type": "integer"}, "-0", True, "integer-accepts-minus-zero"),
    case({"type": "integer"}, "1.5", False, "integer-rejects-fraction"),
    case({"type": "integer"}, "1.0", False, "integer-is-canonical-no-fraction"),
    case({"type": "integer"}, "1e3", False, "integer-is-canonical-no-exponent"),
    case({"type": "number"}, "1.5", True, "number-accepts-fraction"),
    case({"type": "number"}, "7", True, "number-accepts-integer"),
    case({"type": "number"}, '"1"', False, "number-rejects-string"),
    case({"type": "string"}, '"a"', True, "string-accepts-string"),
    case({"type": "string"}, "1", False, "string-rejects-number"),
    case({"type": "array"}, "[1,[],{}]", True, "array-accepts-any-items"),
    case({"type": "array"}, "{}", False, "array-rejects-object"),
    case({"type": "object"}, '{"x":[1,{"y":null}]}', True, "object-without-properties-is-open"),
    case({"type": "object"}, "[]", False, "object-rejects-array"),
    case({"type": ["string", "null"]}, "null", True, "type-list-accepts-first"),
    case({"type": ["string", "null"]}, '"x"', True, "type-list-accepts-second"),
    case({"type": ["string", "null"]}, "1", False, "type-list-rejects-others"),
    case({"type": ["integer", "number"]}, "2.5", True, "type-list-integer-and-number"),
    # "properties" / "required": declared order, optional keys skippable, no key twice
    case(OBJ, '{"b":"x"}', True, "required-only"),
    case(OBJ, '{"a":1,"b":"x","c":true}', True, "all-in-declared-order"),
    case(OBJ, '{"b":"x","c":false}', True, "optional-skipped-before"),
    case(OBJ, '{"a":1,"b":"x"}', True, "optional-skipped-after"),
    case(OBJ, '{"b":"x","a":1}', False, "declared-order-enforced"),
    case(OBJ, '{"a":1}', False, "required-missing"),
    case(OBJ, "{}", False, "required-missing-empty"),
    case(OBJ, '{"a":"1","b":"x"}', False, "property-type-enforced"),
    case(OBJ, '{"b":"x","b":"y"}', False, "no-key-twice"),
    case(OBJ, '{"b":"x",}', False, "no-trailing-comma"),
    case(OBJ, '{,"b":"x"}', False, "no-leading-comma"),
    case(OBJ, '{"a":1,,"b":"x"}', False, "no-double-comma"),
    case(ALL_OPTIONAL, "{}", True, "all-optional-empty"),
    case(ALL_OPTIONAL, '{"d":4}', True, "all-optional-last-only"),
    case(ALL_OPTIONAL, '{"a":1,"c":3}', True, "all-optional-gap"),
    case(ALL_OPTIONAL, '{"a":1,"b":2,"c":3,"d":4}', True, "all-optional-all"),
    case(ALL_OPTIONAL, '{"c":3,"a":1}', False, "all-optional-order"),
    case(
        {"type": "object", "properties": {"o": {"type": "object", "properties": {"p": {"type": "null"}}}}},
        '{"o":{"p":null}}',
        True,
        "nested-object",
    ),
    case(
        {"type": "object", "properties": {"o": {"type": "object", "properties": {"p": {"type": "null"}}}}},
        '{"o":{"p":null,"q":1}}',
        False,
        "nested-object-closed",
    ),
    # "additionalProperties": false, true, a schema; closed objects by default
    case(OBJ, '{"b":"x","d":1}', False, "closed-by-default"),
    case(OBJ, '{"b":"x","d":1}', True, "open-with-closed-objects-false", closed_objects=False),
    case(OPEN, '{"b":"x","d":[1]}', True, "additional-true"),
    case(OPEN, '{"d":1,"b":"x"}', False, "declared-before-additional"),
    case(OPEN, '{"b":"x","a":1}', False, "declared-name-is-not-additional"),
    case(OPEN, '{"b":"x","\\u0061":1}', False, "declared-name-escaped-is-not-additional"),
    case(OPEN, '{"b":"x","aa":1,"":2}', True, "extension-and-empty-key-are-additional"),
    case(LONG, '{"' + "k" * 30 + ' ":1}', True, "extra-key-extends-long-name"),
    case(LONG, '{"' + "k" * 29 + '":1}', True, "extra-key-prefix-of-long-name"),
    case(LONG, '{"' + "k" * 30 + '":1,"' + "k" * 30 + '":1}', False, "long-name-never-twice"),
    case(LONG, '{"' + "q" * 80 + '":1,"' + "q" * 80 + '":1}', False, "very-long-name-never-twice"),
    case(LONG, '{"' + "q" * 81 + '":1}', True, "extra-key-extending-a-very-long-name"),
    case(LONG, '{"' + "q" * 79 + '":1}', True, "extra-key-prefix-of-a-very-long-name"),
    case(LONG, '{"' + "q" * 40 + 'x":1}', True, "extra-key-leaving-a-very-long-name-late"),
    case(LONG, '{"' + "q" * 20 + 'x":1}', True, "extra-key-leaving-a-very-long-name-early"),
    case({**OBJ, "additionalProperties": False}, '{"b":"x","d":1}', False, "additional-false"),
    case({**OBJ, "additionalProperties": {"type": "integer"}}, '{"b":"x","d":1}', True, "additional-schema"),
    case({**OBJ, "additionalProperties": {"type": "integer"}}, '{"b":"x","d":"1"}', False, "additional-schema-type"),
    case({"type": "object", "required": ["x"]}, '{"x":1}', True, "required-undeclared-open"),
    case({"type": "object", "required": ["x"]}, '{"y":1}', False, "required-undeclared-missing"),
    case({"properties": {"a": False}}, '{"a":1}', False, "false-property-never-appears"),
    case({"properties": {"a": False}}, "{}", True, "false-property-object-still-fine"),
    # "items", the draft-4/7 list form and "additionalItems", "minItems" / "maxItems"
    case({"items": {"type": "integer"}}, "[1,2]", True, "items-schema"),
    case({"items": {"type": "integer"}}, '[1,"2"]', False, "items-schema-type"),
    case({"items": {"type": "integer"}}, "[]", True, "items-empty"),
    case(TUPLE, '[1,"a"]', True, "tuple-full"),
    case(TUPLE, "[1]", True, "tuple-prefix"),
    case(TUPLE, "[]", True, "tuple-empty"),
    case(TUPLE, '[1,"a",2]', False, "tuple-additional-false"),
    case(TUPLE, '["a"]', False, "tuple-position-type"),
    case({**TUPLE, "additionalItems": {"type": "null"}}, '[1,"a",null,null]', True, "additional-items-schema"),
    case({**TUPLE, "minItems": 2}, "[1]", False, "tuple-min-items"),
    case({"type": "array", "minItems": 2, "maxItems": 3}, "[1]", False, "min-items"),
    case({"type": "array", "minItems": 2, "maxItems": 3}, "[1,2]", True, "min-items-boundary"),
    case({"type": "array", "minItems": 2, "maxItems": 3}, "[1,2,3]", True, "max-items-boundary"),
    case({"type": "array", "minItems": 2, "maxItems": 3}, "[1,2,3,4]", False, "max-items"),
    case({"type": "array", "maxItems": 5000}, "[" + ",".join(["0"] * 5000) + "]", True, "max-items-large"),
    case({"type": "array", "maxItems": 5000}, "[" + ",".join(["0"] * 5001) + "]", False, "max-items-large-over"),
    case({"type": "array", "minItems": 5000}, "[" + ",".join(["0"] * 4999) + "]", False, "min-items-large"),
    case({"type": "array", "minItems": 5000}, "[" + ",".join(["0"] * 5001) + "]", True, "min-items-large-over"),
    case({"items": False}, "[]", True, "items-false-empty-only"),
    case({"items": False}, "[1]", False, "items-false-no-item"),
    # "enum" / "const": any JSON value, numbers by value in their exponent-free spellings
    case({"enum": ["a", 1, None]}, '"a"', True, "enum-string"),
    case({"enum": ["a", 1, None]}, "null", True, "enum-null"),
    case({"enum": ["a", 1, None]}, '"b"', False, "enum-other-string"),
    case({"enum": ["a", 1, None]}, "1.00", True, "enum-number-by-value"),
    case({"enum": ["a", 1, None]}, "true", False, "enum-true-is-not-one"),
    case({"enum": [2.5]}, "2.50", True, "enum-fraction-trailing-zero"),
    case({"enum": [2.5]}, "2.5e0", False, "enum-exponent-kept-canonical"),
    case({"enum": ["ab", "abc", "b"]}, '"abc"', True, "enum-shared-prefix"),
    case({"enum": ["ab", "abc", "b"]}, '"a"', False, "enum-prefix-only"),
    case({"enum": [1, "x"], "type": "string"}, "1", False, "enum-filtered-by-type"),
    case({"enum": ["xy", "x"], "maxLength": 1}, '"xy"', False, "enum-filtered-by-max-length"),
    case({"const": 0}, "-0.0", True, "const-zero-any-sign"),
    case({"const": {"k": [1, None]}}, '{"k":[1,null]}', True, "const-object"),
    case({"const": {"k": [1, None]}}, '{"k":[1,null],"z":1}', False, "const-object-extra-key"),
    case({"const": {"k": 1, "j": 2}}, '{"j":2,"k":1}', False, "const-object-own-key-order"),
    case({"const": "é\n"}, '"é\\n"', True, "const-string-canonical"),
    case({"const": "é"}, '"\\u00e9"', False, "const-string-escaped-kept-canonical"),
    case({"type": "integer", "enum": [3]}, "3.0", False, "enum-integer-type-no-fraction"),
    # "minLength" / "maxLength" in code points
    case({"type": "string", "maxLength": 1}, '"é"', True, "length-two-byte-char-is-one"),
    case({"type": "string", "maxLength": 1}, '"😀"', True, "length-four-byte-char-is-one"),
    case({"type": "string", "maxLength": 1}, '"\\ud83d\\ude00"', True, "length-surrogate-pair-is-one"),
    case({"type": "string", "maxLength": 1}, '"\\n"', True, "length-escape-is-one"),
    case({"type": "string", "maxLength": 1}, '"ab"', False, "max-length"),
    case({"type": "string", "minLength": 2}, '"a"', False, "min-length"),
    case({"type": "string", "minLength": 2}, '"\\ud83d\\ude00"', False, "min-length-surrogate-pair"),
    case({"type": "string", "minLength": 2, "maxLength": 2}, '"ab"', True, "exact-length"),
    case({"type": "string", "maxLength": 10000}, '"' + "x" * 10000 + '"', True, "max-length-large-boundary"),
    case({"type": "string", "maxLength": 10000}, '"' + "x" * 10001 + '"', False, "max-length-large"),
    case({"type": "string", "maxLength": 10000}, '"' + "x" * 8191 + '"', True, "max-length-large-below-block"),
    case({"type": "string", "minLength": 4097, "maxLength": 12289}, '"' + "x" * 12289 + '"', True, "range-large"),
    case({"type": "string", "minLength": 4097, "maxLength": 12289}, '"' + "x" * 12290 + '"', False, "range-large-over"),
    case({"type": "string", "minLength": 5000}, '"' + "x" * 4999 + '"', False, "min-length-large"),
    case({"type": "string", "minLength": 5000}, '"' + "x" * 5000 + '"', True, "min-length-large-boundary"),
    # schemas without "type", "{}", "true"
    case({}, '{"a":[1,2.5e-3,"x",true,null]}', True, "empty-schema-any"),
    case(True, "[[],{}]", True, "true-schema-any"),
    case({"properties": {"a": {"type": "integer"}}}, '"x"', True, "no-type-other-types-free"),
    case({"properties": {"a": {"type": "integer"}}}, '{"a":"x"}', False, "no-type-object-keywords-hold"),
    case({"minLength": 2}, "1", True, "no-type-string-keyword-other-types"),
    case({"minLength": 2}, '"a"', False, "no-type-string-keyword-holds"),
    case({"minItems": 3, "maxItems": 1}, "null", True, "no-type-impossible-array-other-types"),
    case({"minItems": 3, "maxItems": 1}, "[]", False, "no-type-impossible-array"),
]


@pytest.mark.parametrize(("schema", "text", "accepted", "options"), ENFORCED_CASES)
def test_enforced_keyword(schema, text, accepted, options):
    assert accepts(compile_json_schema(schema, **options), text) == accepted


NUMBER_CASES = [
    ("1.", False),
    ("1e", False),
    ("1e+", False),
    ("01", False),
    ("-", False),
    ("+1", False),
    (".5", False),
    ("NaN", False),
    ("Infinity", False),
    ("0x10", False),
    ("1.5.2", False),
    ("-0.5e+10", True),
    ("0", True),
    ("-0", True),
    ("10.25E-3", True),
    ("1e999", True),
]


@pytest.mark.parametrize(("text", "accepted"), NUMBER_CASES, ids=[t for t, _ in NUMBER_CASES])
def test_number_is_a_json_number(text, accepted):
    assert accepts(compile_json_schema({"type": "number"}), text) == accepted


@pytest.mark.parametrize("prefix", ["12.", "-", "1e", "1e-", "0.0e+"])
def test_generation_cannot_stop_mid_number(prefix):
    m = Matcher(compile_json_schema({"type": "number"}))
    assert m.accept_bytes(prefix.encode())
    assert not m.is_accepting()


STRING_CASES = [
    (b'"\\"\\\\\\/\\b\\f\\n\\r\\t"', True, "short-escapes"),
    (b'"\\u00e9\\u20AC"', True, "unicode-escapes"),
    (b'"\\ud83d\\ude00"', True, "surrogate-pair-escape"),
    (b'"\\ud83d"', False, "lone-high-surrogate-escape"),
    (b'"\\ude00"', False, "lone-low-surrogate-escape"),
    (b'"\\x41"', False, "invalid-escape"),
    (b'"\\u12"', False, "short-unicode-escape"),
    (b'"\\u12g4"', False, "non-hex-unicode-escape"),
    (b'"a\x01b"', False, "raw-control-character"),
    (b'"a\nb"', False, "raw-newline"),
    (b'"a\x7fb"', True, "delete-is-not-a-control-character-in-json"),
    ('"é€😀"'.encode(), True, "utf-8"),
    (b'"\xff"', False, "invalid-utf-8-byte"),
    (b'"\xc3"', False, "truncated-utf-8"),
    (b'"\xc0\xaf"', False, "overlong-utf-8"),
    (b'"\xed\xa0\x80"', False, "utf-8-encoded-surrogate"),
    (b'"\xf4\x90\x80\x80"', False, "above-max-code-point"),
    (b'"abc', False, "unterminated"),
]


@pytest.mark.parametrize(("data", "accepted"), [c[:2] for c in STRING_CASES], ids=[c[2] for c in STRING_CASES])
def test_string_is_a_json_string(data, accepted):
    assert accepts(compile_json_schema({"type": "string"}), data) == accepted


# ------------------------------------------------------------ whitespace


WHITESPACE_CASES = [
    ('{ "b" : "x" , "c" : true }', True, {}),
    ('\n\t {"b":"x"}', False, {}),  # the document starts at its first byte: no leading whitespace
    ('{"b":"x"}\n', False, {}),
    ('{"b":"x"}', True, {"whitespace_budget": 0}),
    ('{"b":"x" }', False, {"whitespace_budget": 0}),
    ('{"b":"x"' + " " * 64 + "}", True, {}),
    ('{"b":"x"' + " " * 65 + "}", False, {}),
    ('{' + " " * 32 + '"b":"x"' + " " * 32 + "}", True, {}),  # one budget for the whole document
    ('{' + " " * 33 + '"b":"x"' + " " * 32 + "}", False, {}),
    ('{"b":"x"' + " " * 1000 + "}", True, {"whitespace_budget": None}),
    ('{"b":"' + " " * 100 + '"}', True, {}),
]


@pytest.mark.parametrize(("text", "accepted", "options"), WHITESPACE_CASES)
def test_whitespace_between_tokens_within_budget(text, accepted, options):
    assert accepts(compile_json_schema(OBJ, **options), text) == accepted


# ------------------------------------------------------------ number digits

INTEGER, NUMBER = {"type": "integer"}, {"type": "number"}
UNCAPPED = {"number_digits": None}
NUMBER_DIGIT_CASES = [
    case(INTEGER, "9" * 16, True, "integer-of-16-digits-accepted"),
    case(INTEGER, "-" + "9" * 16, True, "negative-integer-of-16-digits-accepted"),
    case(INTEGER, "1" + "0" * 16, False, "integer-of-17-digits-refused"),
    case(INTEGER, "1" + "0" * 16, True, "integer-of-17-digits-accepted-uncapped", **UNCAPPED),
    case(NUMBER, "1" + "0" * 16, False, "number-of-17-integer-digits-refused"),
    case(NUMBER, "0." + "1" * 16, True, "fraction-of-16-digits-accepted"),
    case(NUMBER, "0." + "1" * 17, False, "fraction-of-17-digits-refused"),
    case(NUMBER, "0." + "1" * 17, True, "fraction-of-17-digits-accepted-uncapped", **UNCAPPED),
    case(NUMBER, "-1.5e308", True, "exponent-of-3-digits-accepted"),
    case(NUMBER, "5E-324", True, "negative-exponent-of-3-digits-accepted"),
    case(NUMBER, "1e1000", False, "exponent-of-4-digits-refused"),
    case(NUMBER, "1e0001", False, "exponent-leading-zeros-count"),
    case(NUMBER, "1e1000", True, "exponent-of-4-digits-accepted-uncapped", **UNCAPPED),
    case(INTEGER, "9" * 40, True, "a-none-cap-lifts-that-cap-only", number_digits=(None, 16, 3)),
    case(NUMBER, "0." + "1" * 17, False, "a-none-cap-leaves-the-others", number_digits=(None, 16, 3)),
    case(INTEGER, "9" * 5, False, "a-smaller-cap", number_digits=(4, 16, 3)),
    # a bound raises its number's caps to one digit more than it spells: 10**20 has 21
    case({"type": "integer", "maximum": 10**20}, str(10**20), True, "bound-of-21-digits-accepted"),
    case({"type": "integer", "maximum": 10**20}, "-" + "9" * 22, True, "bound-raises-the-unbounded-side"),
    case({"type": "integer", "maximum": 10**20}, "-1" + "0" * 22, False, "raised-cap-still-caps"),
    case({"type": "integer", "minimum": 1e20}, "1" + "0" * 21, True, "float-bound-raises-the-cap"),
    case({"type": "integer", "minimum": 10**20}, "1" + "0" * 22, False, "raised-cap-caps-the-bound-side"),
    case({"type": "integer", "exclusiveMinimum": 10**16 - 1}, str(10**16), True, "past-an-exclusive-bound"),
    case({"type": "number", "minimum": 0}, "0." + "1" * 17, False, "bounded-number-fraction-capped"),
    case({"type": "number", "minimum": 0}, "1" * 17, False, "bounded-number-integer-capped"),
    case({"type": "number", "minimum": 0, "maximum": 1}, "0." + "5" * 17, False, "fraction-between-bounds-capped"),
    case({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1e-20}, "0." + "0" * 20 + "5", True,
         "fraction-between-close-bounds-accepted"),
    case({"type": "number", "minimum": 0, "multipleOf": 1e-20}, "0." + "0" * 19 + "3", True,
         "multiple-raises-the-fraction-cap"),
    case({"type": "integer", "minimum": 0, "multipleOf": 13}, str(13 * 10**20), True, "multiple-kept-exact-uncapped"),
    case({"type": "integer", "minimum": 0, "multipleOf": 13}, str(13 * 10**20 + 1), False,
         "multiple-kept-exact-refuses-non-multiples"),
    case({"type": "integer", "minimum": 0, "multipleOf": 2}, "2" * 17, False, "small-multiple-capped"),
    case({"const": 2}, "2." + "0" * 16, True, "const-trailing-zeros-within-the-cap"),
    case({"const": 2}, "2." + "0" * 17, False, "const-trailing-zeros-capped"),
    case({"const": 2.5}, "2.5" + "0" * 15, True, "const-fraction-zeros-within-the-cap"),
    case({"const": 2.5}, "2.5" + "0" * 16, False, "const-fraction-zeros-capped"),
    case({"const": 2}, "2." + "0" * 40, True, "const-trailing-zeros-uncapped", **UNCAPPED),
    case({"enum": [10**30]}, str(10**30), True, "enum-value-keeps-its-digits"),
    case({"const": 1e-20}, "0." + "0" * 19 + "1", True, "const-value-keeps-its-fraction-digits"),
]


@pytest.mark.parametrize(("schema", "text", "accepted", "options"), NUMBER_DIGIT_CASES)
def test_number_digits_within_caps(schema, text, accepted, options):
    compiled = compile_json_schema(schema, **options)
    assert accepts(compiled, text) == accepted
    assert not compiled.warnings


@pytest.mark.parametrize("value", [(0, 16, 3), (16, -1, 3), (16, 16, 2.5), (16, 16, True), 16, (1, 2, 3, 4)])
def test_number_digits_refuses_a_bad_cap(value):
    with pytest.raises(UsageError):
        compile_json_schema(INTEGER, number_digits=value)


ADD = [{"name": "add", "parameters": {"type": "object", "properties": {"a": INTEGER}, "required": ["a"]}}]
DIGITS_17 = "1" * 17


@pytest.mark.parametrize(("mode", "text"), [
    ("required", '<tool_call>{"name": "add", "arguments": {"a": ' + DIGITS_17 + "}}</tool_call>"),
    ("auto", "[" + DIGITS_17 + "]"),  # the json document beside the calls
])  # fmt: skip
def test_tool_calls_cap_numbers(mode, text):
    assert not accepts(compile_tool_calls(ADD, mode, json=True), text)
    assert accepts(compile_tool_calls(ADD, mode, json=True, number_digits=None), text)


# ------------------------------------------------------------ warnings


WARNING_CASES = [
    ({"type": "integer", "minimum": 1, "maximum": 9}, []),
    ({"type": "number", "multipleOf": 0.5}, []),
    ({"properties": {"a/b": {"type": "string", "pattern": "^x"}}}, []),
    ({"items": [{"format": "date"}]}, []),
    ({"type": "string", "format": "colour"}, [("format", "")]),
    ({"type": "string", "pattern": "^a", "format": "date"}, [("format", "")]),
    ({"type": "integer", "format": "int32"}, []),
    ({"type": "array", "uniqueItems": True}, [("uniqueItems", "")]),
    ({"type": "string", "uniqueItems": True}, []),
    ({"enum": [[1], [2]], "uniqueItems": True}, []),
    ({"additionalProperties": {"x-vendor": 1}}, [("x-vendor", "/additionalProperties")]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, [("oneOf", "")]),
    ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, []),
    ({"allOf": [{"type": "string", "pattern": "a"}, {"pattern": "b"}]}, [("pattern", "")]),
    ({"const": "x", "pattern": "x", "maximum": 1}, []),
    (
        {"title": "t", "description": "d", "default": 1, "examples": [1], "$schema": "x", "$id": "y"},
        [],
    ),
    ({"$comment": "c", "deprecated": True, "readOnly": True, "writeOnly": False, "$defs": {"a": 1}}, []),
    ({"type": "string", "contentEncoding": "base64"}, [("contentEncoding", "")]),
]


@pytest.mark.parametrize(("schema", "warned"), WARNING_CASES)
def test_warned_keywords_say_so(schema, warned):
    expected = [f"{keyword} not enforced at {pointer or '(root)'}" for keyword, pointer in warned]
    assert compile_json_schema(schema).warnings == expected


def test_warned_keyword_is_ignored():
    assert accepts(compile_json_schema({"type": "array", "uniqueItems": True}), "[1,1]")


# ------------------------------------------------------------ refusals


REFUSED = ["not", "if", "then", "else", "contains", "minContains", "maxContains", "dependencies",
           "dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
           "$recursiveRef"]  # fmt: skip
REFUSAL_VALUES = {"$dynamicRef": "#", "$recursiveRef": "#", "dependencies": {}, "dependentRequired": {},
                  "dependentSchemas": {}, "minContains": 1, "maxContains": 1}  # fmt: skip


@pytest.mark.parametrize("keyword", REFUSED)
@pytest.mark.parametrize(
    ("wrap", "pointer"),
    [
        (lambda s: s, ""),
        (lambda s: {"properties": {"a~b": {"items": s}}}, "/properties/a~0b/items"),
        (lambda s: {"items": [True, s]}, "/items/1"),
        (lambda s: {"additionalProperties": s}, "/additionalProperties"),
    ],
    ids=["root", "nested", "tuple", "additional"],
)
def test_refused_keyword_named_with_pointer(keyword, wrap, pointer):
    with pytest.raises(SchemaError) as exc:
        compile_json_schema(wrap({"type": "object", keyword: REFUSAL_VALUES.get(keyword, [{}])}))
    assert (exc.value.keyword, exc.value.pointer) == (keyword, pointer)
    assert exc.value.http_status == 400


MALFORMED = [
    ({"required": "a"}, "required", ""),
    ({"required": [1]}, "required", ""),
    ({"type": "array", "minItems": 3, "maxItems": 1}, "minItems", ""),
    ({"type": "string", "minLength": 3, "maxLength": 1}, "minLength", ""),
    ({"enum": []}, "enum", ""),
    (False, "false", ""),
    ({"type": "integer", "enum": ["a"]}, "enum", ""),
    ({"type": "integer", "const": 1.5}, "const", ""),
    ({"type": "foo"}, "type", ""),
    ({"type": []}, "type", ""),
    ({"type": ["string", "string"]}, "type", ""),
    ({"minLength": -1}, "minLength", ""),
    ({"minLength": "3"}, "minLength", ""),
    ({"maxItems": 1.5}, "maxItems", ""),
    ({"minItems": True}, "minItems", ""),
    ({"properties": []}, "properties", ""),
    ({"properties": {"a": 5}}, "properties", "/properties/a"),
    ({"items": 3}, "items", ""),
    ({"additionalProperties": "no"}, "additionalProperties", ""),
    ({"multipleOf": 0}, "multipleOf", ""),
    ({"pattern": 1}, "pattern", ""),
    ({"pattern": "(?=a)"}, "pattern", ""),
    ({"pattern": "a(b"}, "pattern", ""),
    ({"$ref": "#/$defs/missing"}, "$ref", ""),
    ({"$ref": "https://example.com/schema.json"}, "$ref", ""),
    ({"properties": {"a": {"$ref": "other.json#/x"}}}, "$ref", "/properties/a"),
    ({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}, "$ref", "/$defs/a/allOf/0/$ref"),
    ({"anyOf": []}, "anyOf", ""),
    ({"allOf": {}}, "allOf", ""),
    ({"prefixItems": {}}, "prefixItems", ""),
    ({"minProperties": -1}, "minProperties", ""),
    ({"allOf": [{"type": "string"}, {"type": "integer"}]}, "allOf", ""),
    ({"type": "integer", "minimum": 3, "maximum": 2}, "minimum", ""),
    ({"type": "object", "properties": {"a": {}}, "required": ["z"]}, "required", ""),
    ({"type": "object", "properties": {"a": False}, "required": ["a"]}, "required", ""),
    ({"type": "array", "items": [{"type": "integer"}], "additionalItems": False, "minItems": 2}, "items", ""),
    ({"type": "object", "properties": {"a": {"enum": []}}, "required": ["a"]}, "required", ""),
    (5, "schema", ""),
    ("object", "schema", ""),
]


@pytest.mark.parametrize(("schema", "keyword", "pointer"), MALFORMED)
def test_malformed_schema_is_a_clear_error(schema, keyword, pointer):
    with pytest.raises(SchemaError) as exc:
        compile_json_schema(schema)
    assert (exc.value.keyword, exc.value.pointer) == (keyword, pointer)
    assert str(exc.value).endswith(f" - at {pointer or '(root)'}")


@pytest.mark.parametrize("schema", [False, {"enum": []}, {"type": "null", "enum": [1]}])
def test_unsatisfiable_schema_is_refused_as_such(schema):
    with pytest.raises(Unsatisfiable):
        compile_json_schema(schema)


def nested(depth: int):
    schema: dict = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


def circular():
    """A schema (a Python value, not JSON) that contains itself."""
    schema: dict = {"type": "object"}
    schema["properties"] = {"self": schema}
    return schema


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        (nested(DEFAULT.limits.max_depth + 1), "MAX_DEPTH"),
        (nested(5000), "MAX_DEPTH"),
        ({"description": "x" * DEFAULT.limits.max_source_bytes}, "MAX_SOURCE_BYTES"),
        ({"type": "string", "minLength": ir.MAX_REPEAT**2 + 1}, "MAX_REPEAT"),
        (circular(), "MAX_DEPTH"),
    ],
    ids=["depth", "deep-recursion", "size", "repeat", "circular"],
)
def test_bound_of_limits_is_named(schema, keyword):
    with pytest.raises(SchemaError) as exc:
        compile_json_schema(schema)
    assert exc.value.keyword == keyword


def test_compile_time_bound_is_named():
    with pytest.raises(SchemaError) as exc:
        compile_json_schema({"type": "object", "properties": {"a": {}}}, limits=Limits(compile_seconds=-1.0))
    assert exc.value.keyword == "COMPILE_SECONDS"


def test_many_optional_properties_stay_small():
    """The comma chain of optional keys is linear: 60 optional properties compile quickly."""
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(60)}}
    compiled = compile_json_schema(schema)
    assert accepts(compiled, '{"p7":1,"p59":2}')
    assert not accepts(compiled, '{"p59":2,"p7":1}')


# ------------------------------------------------------------ any_json


@pytest.mark.parametrize(
    ("text", "object_only", "accepted"),
    [
        ('{"a":[1,-2.5e3,"x\\n",true,false,null,{}]}', False, True),
        ("[]", False, True),
        ('"x"', False, True),
        ("1", False, True),
        ("[1,]", False, False),
        ("{'a':1}", False, False),
        ('{"a":1}', True, True),
        ("[]", True, False),
        ("1", True, False),
    ],
)
def test_any_json(text, object_only, accepted):
    assert accepts(any_json(object_only=object_only), text) == accepted


@pytest.mark.parametrize("compiled", [compile_json_schema(OBJ), any_json()], ids=["schema", "any-json"])
def test_document_ends_at_its_last_byte(compiled):
    """It starts at its first byte and, once complete, only EOS is allowed: no whitespace to wander into."""
    m = Matcher(compiled, BYTE_VOCAB)
    assert not m.accept_bytes(b" ")
    assert m.accept_bytes(b'{"b":"x"}')
    mask = allocate_bitmask(BYTE_VOCAB.size)
    m.fill_next_token_bitmask(mask)
    bits = int.from_bytes(mask.tobytes(), "little")
    assert [i for i in range(BYTE_VOCAB.size) if bits >> i & 1] == [256]


def test_any_json_budget():
    assert not accepts(any_json(whitespace_budget=3), "[ 1 , 2 ]")
    assert accepts(any_json(whitespace_budget=None), "[" + " " * 500 + "]")


@pytest.mark.parametrize("object_only", [False, True], ids=["json", "json-object"])
@pytest.mark.parametrize(("number", "capped"), [("9" * 16, True), ("1" * 17, False), ("0." + "1" * 17, False),
                                                ("1e999", True), ("1e1000", False)])  # fmt: skip
def test_any_json_numbers_capped(object_only, number, capped):
    text = '{"a":[' + number + "]}"
    assert accepts(any_json(object_only), text) == capped
    assert accepts(any_json(object_only, number_digits=None), text)


# ------------------------------------------------------------ property tests

# Schemas that use enforced keywords only, written with the specification's open default
# in mind (hypothesis-jsonschema and jsonschema follow it): compiled with closed_objects=False.
PROPERTY_SCHEMAS = {
    "object": OBJ,
    "open": {**OBJ, "additionalProperties": {"type": "integer"}},
    "optional": ALL_OPTIONAL,
    "nested": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 8},
            "tags": {"type": "array", "items": {"enum": ["a", "b", 3, None]}, "maxItems": 3},
            "point": {"type": "array", "items": [{"type": "number"}, {"type": "number"}], "additionalItems": False},
            "meta": {"type": ["object", "null"], "properties": {"k": {"const": [1, {"x": True}]}}},
        },
        "required": ["name", "point"],
        "additionalProperties": False,
    },
    "strings": {"type": "array", "items": {"type": "string", "maxLength": 4}, "minItems": 1, "maxItems": 4},
    "numbers": {"type": "array", "items": {"type": ["number", "integer", "boolean"]}},
    "untyped": {"properties": {"a": {"minLength": 1}}, "items": {"type": "null"}},
    "any": {},
}


@pytest.mark.parametrize("name", list(PROPERTY_SCHEMAS))
def test_hypothesis_instances_are_accepted(name):
    schema = PROPERTY_SCHEMAS[name]
    compiled = compile_json_schema(schema, closed_objects=False, whitespace_budget=None, number_digits=None)

    @settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(from_schema(schema))
    def check(instance):
        assert accepts(compiled, compact(declared_order(instance, schema)))

    check()


_CLOSERS = [256, *b'"]}0']


def random_walk(compiled, rng: random.Random, stop: float = 0.3, steer_after: int = 400) -> bytes:
    """Bytes chosen at random among those the mask allows, until EOS is chosen.

    EOS is taken with probability ``stop`` whenever it is allowed; past ``steer_after``
    bytes the walk prefers closing bytes, so that every walk ends.
    """
    m = Matcher(compiled, BYTE_VOCAB)
    mask = allocate_bitmask(BYTE_VOCAB.size)
    out = bytearray()
    while True:
        m.fill_next_token_bitmask(mask)
        bits = int.from_bytes(mask.tobytes(), "little")
        allowed = [i for i in range(BYTE_VOCAB.size) if bits >> i & 1]
        assert allowed, f"dead end after {bytes(out)!r}"
        if 256 in allowed and (allowed == [256] or rng.random() < stop or len(out) > steer_after):
            assert m.accept_token(256) and m.is_terminated()
            return bytes(out)
        choices = [t for t in _CLOSERS if t in allowed and t != 256] if len(out) > steer_after else []
        token = choices[0] if choices else rng.choice([t for t in allowed if t != 256])
        assert m.accept_token(token)
        out.append(token)


@pytest.mark.parametrize("name", list(PROPERTY_SCHEMAS))
@pytest.mark.parametrize("closed", [False, True], ids=["open", "closed"])
def test_random_walks_are_valid_documents(name, closed):
    schema = PROPERTY_SCHEMAS[name]
    compiled = compile_json_schema(schema, closed_objects=closed)
    validator = jsonschema.Draft7Validator(close_objects(schema) if closed else schema)
    rng = random.Random(f"{name}-{closed}")
    for _ in range(25):
        document = random_walk(compiled, rng)
        value = json.loads(document.decode("utf-8"))
        assert validator.is_valid(value), document


def close_objects(schema):
    """``schema`` with ``additionalProperties: false`` wherever llamay's closed default applies."""
    if not isinstance(schema, dict):
        return schema
    out = {k: close_objects(v) if k in ("items", "additionalItems", "additionalProperties") else v
           for k, v in schema.items()}  # fmt: skip
    if isinstance(schema.get("items"), list):
        out["items"] = [close_objects(s) for s in schema["items"]]
    if "properties" in schema:
        out["properties"] = {k: close_objects(v) for k, v in schema["properties"].items()}
        out.setdefault("additionalProperties", False)
    return out


@given(st.text(max_size=12), st.integers(0, 3), st.integers(0, 3))
@settings(max_examples=150, deadline=None, derandomize=True)
def test_length_counts_code_points(text, lo, extra):
    compiled = compile_json_schema({"type": "string", "minLength": lo, "maxLength": lo + extra})
    for data in (json.dumps(text, ensure_ascii=False), json.dumps(text, ensure_ascii=True)):
        assert accepts(compiled, data.encode("utf-8", "surrogatepass")) == (lo <= len(text) <= lo + extra)


# ------------------------------------------------------------ the whitespace budget closes documents

BUDGET_SCHEMAS = [
    {**OBJ, "properties": {**OBJ["properties"], "b": {"type": "string", "maxLength": 5}}},
    {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}, "maxItems": 3}},
     "required": ["xs"]},
    {"type": "array", "items": {"type": "string", "maxLength": 2}, "maxItems": 2},
]  # fmt: skip


def _space_lover_closes(vocab, schema):
    scorer = ScriptedScorer(vocab, prefer=b" \t\n\r")
    bounded = generate(Matcher(compile_json_schema(schema), vocab), scorer, max_tokens=400)
    assert bounded.finished, bounded.text[:200]
    assert sum(bounded.text.count(c) for c in b" \t\n\r") >= 64  # it did use its whole budget
    json.loads(bounded.text)
    unbounded = generate(Matcher(compile_json_schema(schema, whitespace_budget=None), vocab), scorer, max_tokens=400)
    assert not unbounded.finished  # the runaway the budget exists for


@pytest.mark.parametrize("schema", BUDGET_SCHEMAS)
def test_space_loving_model_still_closes_the_document_bytes(schema):
    _space_lover_closes(BYTE_VOCAB, schema)


@pytest.mark.parametrize("schema", BUDGET_SCHEMAS)
def test_space_loving_model_still_closes_the_document_smollm2(schema, smollm2_vocab):
    _space_lover_closes(smollm2_vocab, schema)


# gemma-3-270m, asked for this, wrote "y": 1000000000000... until max_tokens ran out
POINTS = {"type": "array", "items": {"type": "object", "properties": {"x": NUMBER, "y": NUMBER},
                                     "required": ["x", "y"]}, "minItems": 1, "maxItems": 2}  # fmt: skip


def _digit_lover_closes(vocab):
    scorer = ScriptedScorer(vocab, prefer=b"1")
    capped = generate(Matcher(compile_json_schema(POINTS), vocab), scorer, max_tokens=800)
    assert capped.finished, capped.text[:200]
    points = json.loads(capped.text, parse_int=str, parse_float=str)
    assert {len(p["x"].partition(".")[0]) for p in points} == {16}  # it did write its 16 digits
    unbounded = generate(Matcher(compile_json_schema(POINTS, number_digits=None), vocab), scorer, max_tokens=800)
    assert not unbounded.finished  # the runaway the caps exist for


def test_digit_loving_model_still_closes_the_document_bytes():
    _digit_lover_closes(BYTE_VOCAB)


def test_digit_loving_model_still_closes_the_document_smollm2(smollm2_vocab):
    _digit_lover_closes(smollm2_vocab)


def test_scripted_scorer_is_deterministic():
    scorer = ScriptedScorer(BYTE_VOCAB, prefer=b" ")
    mask = allocate_bitmask(BYTE_VOCAB.size)
    assert scorer.pick(mask) == 0x20
    mask[:] = 0
    mask[2] = 1 << 3 | 1 << 9  # tokens 67 and 73
    assert scorer.pick(mask) == 67
