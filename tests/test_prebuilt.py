"""The format regexes' prebuilt IR (llamay.grammars.jsonschema.prebuilt): current, equal to the
IR built from the regex's text, used only where that IR would be built without bounds."""

from __future__ import annotations

import pytest

from llamay import ir
from llamay.grammars.jsonschema import prebuilt
from llamay.grammars.jsonschema.formats import FORMATS
from llamay.grammars.jsonschema.regex import pattern_string, string_from_text


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_regex_has_a_line_equal_to_the_ir_built_from_its_text(fmt):
    table = prebuilt.lookup(FORMATS[fmt])
    assert table is not None, "formats.py or the regex compiler changed: run ci/refresh-prebuilt"
    built, exact = string_from_text(FORMATS[fmt], 0, None, False)
    assert exact
    assert table == built
    # encode lists each distinct node object once
    assert len(prebuilt.encode(table)) == len(prebuilt.encode(built)), "the IR's shared nodes are no longer shared"


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_an_unbounded_format_reads_the_table(fmt):
    expr, exact = pattern_string(FORMATS[fmt], search=False)
    assert exact
    assert expr is prebuilt.lookup(FORMATS[fmt])


@pytest.mark.parametrize(
    "source, lo, hi, search",
    [
        (FORMATS["email"], 0, 254, False),  # a bound: the count is fitted on the regex's tree
        (FORMATS["date"], 10, None, False),
        (FORMATS["uuid"], 0, None, True),  # a search, not a whole value
        ("a|bc", 0, None, False),  # no line
    ],
    ids=["max-length", "min-length", "search", "not-a-format"],
)
def test_bounds_searches_and_other_regexes_are_built_from_their_text(source, lo, hi, search):
    got = pattern_string(source, lo, hi, search=search)
    assert got == string_from_text(source, lo, hi, search)
    table = prebuilt.lookup(source)
    assert table is None or got[0] is not table


def test_a_regex_whose_text_changed_has_no_line():
    assert prebuilt.lookup(FORMATS["date"] + "|x") is None


@pytest.mark.parametrize("where", ["absent.jsonl", "."], ids=["absent", "unreadable"])
def test_without_a_readable_table_formats_are_built_from_their_text(where, tmp_path, monkeypatch):
    monkeypatch.setattr(prebuilt, "TABLE", tmp_path / where)
    prebuilt._lines.cache_clear()
    try:
        assert prebuilt._lines() == {}
        assert prebuilt.lookup.__wrapped__(FORMATS["uuid"]) is None  # past the cache of earlier lookups
    finally:
        prebuilt._lines.cache_clear()


@pytest.mark.parametrize(
    "expr",
    [
        ir.literal("ab"),
        ir.alt(ir.repeat(ir.byte_range(0x30, 0x39), 1, None), ir.whitespace(), ir.EMPTY),
        ir.seq(ir.optional(ir.literal("x")), ir.repeat(ir.literal("yz"), 2, 4)),
    ],
    ids=["literal", "alternatives", "repeats"],
)
def test_decode_gives_back_what_encode_read(expr):
    assert prebuilt.decode(prebuilt.encode(expr)) == expr
