"""Compile options reach every entry point: a bound set on one is the bound it enforces, by name,
and tuning changes the automaton's layout, never its language."""

from __future__ import annotations

import pytest

from llamay import (
    GrammarError,
    Limits,
    LlamayError,
    Matcher,
    SchemaError,
    Tuning,
    any_json,
    compile_gbnf,
    compile_json_schema,
    compile_lexicon,
)
from llamay.chat.tool_grammar import compile_tool_calls


def nested(levels: int) -> dict:
    node: dict = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"a": node}}
    return node


def limit_named(exc: LlamayError) -> str:
    """The bound an error names: a schema error's keyword, or a grammar error's ``(limit X)``."""
    if isinstance(exc, SchemaError):
        return exc.keyword
    return str(exc).split("(limit ")[1].split(")")[0]


ENTRY_POINTS = {
    "schema-depth": (lambda limits: compile_json_schema(nested(10), limits=limits), Limits(max_depth=6), "MAX_DEPTH"),
    "schema-size": (lambda limits: compile_json_schema({"description": "x" * 200}, limits=limits),
                    Limits(max_source_bytes=100), "MAX_SOURCE_BYTES"),
    "schema-branches": (lambda limits: compile_json_schema(
        {"allOf": [{"anyOf": [{"minimum": i} for i in range(3)]}, {"anyOf": [{"maximum": i} for i in range(3)]}]},
        limits=limits), Limits(max_branches=4), "MAX_BRANCHES"),
    "schema-states": (lambda limits: compile_json_schema({"type": "string", "pattern": "^[a-z]{1,9}$"}, limits=limits),
                      Limits(max_states=5), "MAX_STATES"),
    "gbnf-depth": (lambda limits: compile_gbnf('root ::= ((((("a")))))', limits=limits), Limits(max_depth=3),
                   "MAX_DEPTH"),
    "gbnf-size": (lambda limits: compile_gbnf('root ::= "' + "a" * 100 + '"', limits=limits),
                  Limits(max_source_bytes=50), "MAX_SOURCE_BYTES"),
    "gbnf-states": (lambda limits: compile_gbnf('root ::= [a-z] [a-z] [a-z] [a-z] [a-z] [a-z]', limits=limits),
                    Limits(max_states=4), "MAX_STATES"),
    "lexicon-bytes": (lambda limits: compile_lexicon(["alpha", "beta"], limits=limits), Limits(max_lexicon_bytes=8),
                      "MAX_LEXICON_BYTES"),
    "tools-depth": (lambda limits: compile_tool_calls([{"name": "f", "parameters": nested(10)}], "required",
                                                      limits=limits), Limits(max_depth=6), "MAX_DEPTH"),
    "any-json-states": (lambda limits: any_json(limits=limits), Limits(max_states=10), "MAX_STATES"),
    "compile-seconds": (lambda limits: compile_json_schema(nested(3), limits=limits), Limits(compile_seconds=-1.0),
                        "COMPILE_SECONDS"),
}


@pytest.mark.parametrize("case", ENTRY_POINTS, ids=list(ENTRY_POINTS))
def test_a_bound_set_on_an_entry_point_is_the_one_it_enforces(case):
    build, tight, name = ENTRY_POINTS[case]
    build(Limits())  # within the default bounds
    with pytest.raises((SchemaError, GrammarError)) as exc:
        build(tight)
    assert limit_named(exc.value) == name


def test_a_grammar_keeps_its_configuration_bound_for_its_matchers():
    """``a*`` twice over: the configurations an ``a`` run keeps alive grow with it, past a bound of 2."""
    text = 'root ::= x x\nx ::= "a"*'
    assert Matcher(compile_gbnf(text)).accept_bytes(b"aaaa")
    with pytest.raises(LlamayError, match="MAX_CONFIGURATIONS"):
        Matcher(compile_gbnf(text, limits=Limits(max_configurations=2))).accept_bytes(b"aaaa")


SCHEMA = {"type": "object", "properties": {
    "id": {"type": "string", "pattern": "^[a-f0-9]{4,12}$"},
    "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "maxItems": 3},
    "owner": {"$ref": "#/$defs/tag"}}, "required": ["id"],
    "$defs": {"tag": {"type": "string", "maxLength": 70}}}
DOCUMENTS = [b'{"id":"abcd"}', b'{"id":"abcd12","tags":["x","yz"],"owner":"q"}', b'{"id":"abc"}',
             b'{"id":"abcd","tags":["a","b","c","d"]}', b'{"id":"ABCD"}', b'{"owner":"q"}',
             b'{"id":"abcd","owner":"' + b"o" * 70 + b'"}', b'{"id":"abcd","owner":"' + b"o" * 71 + b'"}']


def test_tuning_changes_the_layout_not_the_language():
    default = compile_json_schema(SCHEMA)
    tuned = compile_json_schema(SCHEMA, tuning=Tuning(unroll_states=2, inline_states=8, share_states=2))
    assert tuned.n_states != default.n_states

    def verdicts(grammar):
        out = []
        for document in DOCUMENTS:
            m = Matcher(grammar)
            out.append(m.accept_bytes(document) and m.is_accepting())
        return out

    assert verdicts(tuned) == verdicts(default) == [True, True, False, False, False, False, True, False]
