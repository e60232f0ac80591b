"""The ``format`` regexes' IR, built ahead of time and shipped beside the package.

A process parses a regex and builds its IR the first time a schema uses it. For the format
regexes that first time is most of a small schema's compile: ``date-time`` spells out its
leap seconds in a 4 kB regex, and costs 8-10 ms to parse and build (``iri-reference`` more),
against about 1 ms to rebuild the same IR from this table. Every ``format`` is met for the
first time in every fresh process: a CLI run, a worker, a serverless call.

The table (``prebuilt_formats.jsonl``) holds one line per regex: its SHA-256, then its IR as
JSON, the nodes in post-order with children by index, so that the IR's shared nodes stay
shared. A regex whose text has changed has no line: it is built from its text as before.
A change to the regex compiler alone keeps the digests, so the old IR would still be read:
``tests/test_prebuilt.py`` compares every line with the IR built from its text, and fails
until the table is written again (``ci/refresh-prebuilt``).
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from ... import ir

__all__ = ["TABLE", "decode", "encode", "lookup", "write"]

TABLE = Path(__file__).with_name("prebuilt_formats.jsonl")
_DIGEST_LENGTH = 64  # hex characters of a SHA-256


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def encode(expr: ir.Expr) -> list:
    """``expr`` as JSON-ready nodes: ``["b", ranges, whitespace]``, ``["s", items]``, ``["a", items]``,
    ``["r", item, min, max]``, children by their index in the list, the root last."""
    nodes: list = []
    index: dict[int, int] = {}

    def visit(x) -> int:
        at = index.get(id(x))
        if at is not None:
            return at
        kind = type(x)
        if kind is ir.Bytes:
            node = ["b", [list(r) for r in x.ranges], x.whitespace]
        elif kind is ir.Seq or kind is ir.Alt:
            node = ["s" if kind is ir.Seq else "a", [visit(y) for y in x.items]]
        elif kind is ir.Repeat:
            node = ["r", visit(x.item), x.min, x.max]
        else:
            raise TypeError(f"a regex's IR holds no {kind.__name__}")
        index[id(x)] = len(nodes)
        nodes.append(node)
        return index[id(x)]

    visit(expr)
    return nodes


def decode(nodes: list) -> ir.Expr:
    """The IR ``encode`` wrote, built with the node classes themselves: the same tree, not renormalized."""
    built: list = []
    add, at = built.append, built.__getitem__
    for node in nodes:
        kind = node[0]
        if kind == "b":
            add(ir.Bytes(tuple(map(tuple, node[1])), node[2]))
        elif kind == "s":
            add(ir.Seq(tuple(map(at, node[1]))))
        elif kind == "a":
            add(ir.Alt(tuple(map(at, node[1]))))
        else:
            add(ir.Repeat(at(node[1]), node[2], node[3]))
    return built[-1]


@lru_cache(maxsize=1)
def _lines() -> dict[str, str]:
    """The table's lines by digest, their JSON not yet parsed (only the formats used are).

    A table left out of an install, or unreadable, is no table: every regex is built from its text.
    """
    try:
        text = TABLE.read_text(encoding="utf-8")
    except OSError:
        return {}
    return {line[:_DIGEST_LENGTH]: line[_DIGEST_LENGTH + 1 :] for line in text.splitlines() if line}


@lru_cache(maxsize=64)
def lookup(source: str) -> ir.Expr | None:
    """The prebuilt IR of ``pattern_string(source, search=False)``; None when the table has no such regex."""
    line = _lines().get(_digest(source))
    return None if line is None else decode(json.loads(line))


def write(path: Path = TABLE) -> int:
    """Build every format regex from its text and write the table; the number of lines written."""
    from .formats import FORMATS
    from .regex import string_from_text

    lines = []
    for source in dict.fromkeys(FORMATS.values()):
        expr, _ = string_from_text(source, 0, None, False)
        lines.append(f"{_digest(source)} {json.dumps(encode(expr), separators=(',', ':'))}\n")
    path.write_text("".join(lines), encoding="utf-8")
    return len(lines)
