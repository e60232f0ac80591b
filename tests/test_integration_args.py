"""What the vLLM and SGLang integrations share, without either engine: the per-request arguments that carry a
constraint (both directions) and the row a constrained request keeps inside an engine."""

from __future__ import annotations

import json

import numpy as np
import pytest

from llamay import Matcher, allocate_bitmask, compile_json_schema
from llamay.errors import LlamayError
from llamay.integrations.row import Row
from llamay.integrations.xargs import constraint_args, to_xargs

PERSON = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": PERSON}},
         {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]


@pytest.mark.parametrize(("fields", "dialect"), [
    ({"schema": PERSON}, None),
    ({"grammar": 'root ::= "yes" | "no"'}, None),
    ({"json": True}, None),
    ({"json": "object"}, None),
    ({"lexicon": True}, None),
    ({"lexicon": ["alpha", "beta"]}, None),
    ({"tools": TOOLS, "mode": "auto", "name": None, "parallel": None}, "hermes"),
    ({"tools": TOOLS, "mode": "required", "name": None, "parallel": False}, "llama3"),
    ({"tools": TOOLS, "mode": "named", "name": "get_time", "parallel": True}, "mistral"),
    ({"tools": TOOLS, "mode": "none", "name": None, "parallel": None}, None),
    ({"tools": TOOLS, "mode": "required", "name": None, "parallel": None, "schema": PERSON}, "hermes"),
])
def test_constraint_fields_survive_the_trip_through_engine_arguments(fields, dialect):
    xargs = to_xargs(fields, dialect)
    assert all(isinstance(v, str | int | float | list) for v in xargs.values())  # what vllm_xargs can hold
    back = constraint_args(json.loads(json.dumps(xargs)))
    assert back.fields == fields
    assert back.dialect == dialect


def test_arguments_without_llamays_names_carry_no_constraint():
    assert constraint_args({"other_processor": 1}) is None
    assert constraint_args(None) is None


@pytest.mark.parametrize(("xargs", "says"), [
    ({"llamay_scheme": "{}"}, "unknown argument llamay_scheme"),
    ({"llamay_schema": 5}, "llamay_schema must be a JSON string"),
    ({"llamay_schema": "{oops"}, "llamay_schema is not valid JSON"),
    ({"llamay_json": 2}, "llamay_json must be 1"),
    ({"llamay_lexicon": []}, "llamay_lexicon must be 1"),
    ({"llamay_grammar": 3}, "llamay_grammar must be GBNF text"),
    ({"llamay_tools": json.dumps(TOOLS), "llamay_parallel_tool_calls": 2}, "must be 0 or 1"),
    ({"llamay_tools": json.dumps(TOOLS), "llamay_tool_choice": "get_date"}, "get_date"),
    ({"llamay_tools": json.dumps([{"function": {}}])}, "a tool has no name"),
    ({"llamay_tool_choice": "required"}, "need llamay_tools"),
    ({"llamay_tools": json.dumps(TOOLS), "llamay_dialect": "klingon"}, "llamay_dialect 'klingon'"),
    ({"llamay_dialect": "hermes"}, "it needs llamay_tools"),
])
def test_malformed_arguments_are_refused_by_name(xargs, says):
    with pytest.raises(LlamayError, match=says):
        constraint_args(xargs)


@pytest.fixture
def row(byte_vocab):
    return Row(Matcher(compile_json_schema({"enum": ["yes", "no"]}), byte_vocab), stops=(270,), max_tokens=None)


def allowed(row: Row, width: int = 288) -> set[int]:
    mask = allocate_bitmask(width, 1)
    row.fill(mask, 0)
    bits = np.unpackbits(mask[0].view(np.uint8), bitorder="little")
    return set(np.flatnonzero(bits[:width]).tolist())


def test_a_row_allows_the_engines_stop_tokens_only_where_the_document_may_end(row):
    assert allowed(row) == {ord('"')}
    row.accept(list(b'"yes"'))
    assert allowed(row) == {256, 270}  # the vocabulary's EOS, and the engine's own stop token


def test_a_refused_token_breaks_the_row_which_then_allows_only_stop_tokens(row):
    row.accept([ord('"'), ord("x")])
    assert row.broken and (row.seen, row.taken) == (2, 1)
    assert allowed(row) == {270}


def test_a_token_id_outside_the_vocabulary_breaks_the_row_instead_of_raising(row):
    row.accept([100_000])
    assert row.broken and allowed(row) == {270}


def test_rollback_takes_back_refused_and_taken_tokens_alike(row):
    row.accept(list(b'"n'))
    before = allowed(row)
    row.accept([ord("x"), ord("y")])  # refused, then looked at after the break
    row.rollback(2)
    assert not row.broken and (row.seen, row.taken) == (2, 2)
    assert allowed(row) == before
    row.rollback(1)
    assert allowed(row) == {ord("y"), ord("n")}


def test_a_row_without_a_constraint_allows_only_stop_tokens(byte_vocab):
    broken = Row(None, stops=(256,), max_tokens=10, broken=True)
    assert allowed(broken) == {256}
    broken.accept([1, 2, 3])
    assert allowed(broken) == {256}
