"""JSON's lexical pieces as grammar IR: whitespace, numbers, strings, literals, any value.

Every piece here is built so that the automaton can only produce complete JSON tokens:
a number cannot stop after ``-``, ``1.`` or ``1e`` because the digits that must follow
are not optional in the grammar, and a string cannot hold a raw control character, an
invalid escape, a lone surrogate escape or an incomplete UTF-8 sequence.

Two string grammars exist on purpose. Values accept every valid JSON escape. Keys of
additional properties use the *canonical* encoding (the one ``json.dumps`` writes: raw
characters except ``"``, ``\\`` and control characters, which have exactly one escape each),
so that every key has exactly one spelling and a declared name can be excluded exactly.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from functools import cache, lru_cache

from ..ir import (
    EMPTY,
    MAX_REPEAT,
    Alt,
    Bytes,
    Except,
    Expr,
    Grammar,
    Ref,
    alt,
    byte_range,
    byte_set,
    literal,
    merge_ranges,
    optional,
    permanent,
    repeat,
    seq,
    star,
    whitespace,
)
from ..options import NUMBER_DIGITS, NumberDigits
from .utf8 import MAX_CODE_POINT, char_class

#: Optional structural whitespace; every byte is charged to the document's budget.
WS = star(whitespace())

_DIGIT = byte_range(0x30, 0x39)
_DIGIT19 = byte_range(0x31, 0x39)
_HEX = byte_set(b"0123456789abcdefABCDEF")


# The numbers are built once per cap for the process (as ``ir.permanent`` keeps them anyway).


@cache
def integer(cap: int | None) -> Expr:
    """``-?(0|[1-9][0-9]*)``, at most ``cap`` digits: no leading zero, no ``+``, never a bare ``-``."""
    rest = None if cap is None else cap - 1
    return permanent(seq(optional(literal("-")), alt(literal("0"), seq(_DIGIT19, counted(_DIGIT, 0, rest)))))


@cache
def number(caps: NumberDigits) -> Expr:
    """A JSON number within ``caps``: an integer part, an optional fraction, an optional exponent."""
    fraction = seq(literal("."), counted(_DIGIT, 1, caps.fraction))
    exponent = seq(byte_set(b"eE"), optional(byte_set(b"+-")), counted(_DIGIT, 1, caps.exponent))
    return permanent(seq(integer(caps.integer), optional(fraction), optional(exponent)))


# Characters that may appear raw inside a JSON string: everything but '"', '\' and C0 controls.
_RAW_RANGES = ((0x20, 0x21), (0x23, 0x5B), (0x5D, MAX_CODE_POINT))
_RAW_CHAR = char_class(_RAW_RANGES)

# "\u" escapes name one code point: a non-surrogate, or a high surrogate followed by a low one
# (a surrogate pair is one character for minLength/maxLength; a lone surrogate is refused).
# Every form ends in two hex digits, written once: each branch holding its own would add four
# states to every string of a schema, states that only behave alike.
_D = byte_set(b"dD")
_U_ESCAPE = seq(
    literal("u"),
    alt(
        seq(byte_set(b"0123456789abcABCefEF"), _HEX),  # not a surrogate: 0000-CFFF, E000-FFFF
        seq(_D, byte_range(0x30, 0x37)),  # not a surrogate: D000-D7FF
        seq(_D, byte_set(b"89abAB"), _HEX, _HEX, literal("\\u"), _D, byte_set(b"cdefCDEF")),  # high, low
    ),
    _HEX,
    _HEX,
)
_ESCAPE = seq(literal("\\"), alt(byte_set(b'"\\/bfnrt'), _U_ESCAPE))

#: One code point of a JSON string value, raw or escaped.
CHAR = permanent(alt(_RAW_CHAR, _ESCAPE))

# json.dumps escapes: the short forms, and \u00xx (lower-case hex) for the other C0 controls.
_SHORT_ESCAPES = {0x22: '"', 0x5C: "\\", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
_HEX_LOWER = b"0123456789abcdef"


@lru_cache(maxsize=1024)
def string(lo: int = 0, hi: int | None = None) -> Expr:
    """A JSON string value of ``lo`` to ``hi`` code points ("minLength"/"maxLength").

    Cached: most string schemas share a handful of bounds, and a shared expression is also
    hashed only once.
    """
    return seq(literal('"'), counted(CHAR, lo, hi), literal('"'))


def counted(item: Expr, lo: int, hi: int | None) -> Expr:
    """``item`` ``lo`` to ``hi`` times, exactly, within the IR's repetition bound ``MAX_REPEAT``.

    Counts above the bound are built from blocks of ``MAX_REPEAT`` items. A range of ``n``
    optional items beyond the minimum is either ``q`` whole blocks and up to ``n mod MAX_REPEAT``
    more, or fewer blocks and up to one block less one: two branches with disjoint lengths.
    ``lo`` must be at most ``MAX_REPEAT ** 2`` (the schema checker refuses larger minimums);
    a range wider than that is narrowed to it, which only refuses values no model writes.
    """
    block = repeat(item, MAX_REPEAT, MAX_REPEAT)
    blocks, rest = divmod(lo, MAX_REPEAT)
    fixed = [repeat(block, blocks, blocks)] if blocks else []
    extra = None if hi is None else min(hi - lo, MAX_REPEAT * MAX_REPEAT)
    if extra is None or rest + extra <= MAX_REPEAT:
        return seq(*fixed, repeat(item, rest, None if extra is None else rest + extra))
    if extra <= MAX_REPEAT:
        return seq(*fixed, repeat(item, rest, rest), repeat(item, 0, extra))
    q, r = divmod(extra, MAX_REPEAT)
    ranged = alt(
        seq(repeat(block, q, q), repeat(item, 0, r)),
        seq(repeat(block, 0, q - 1), repeat(item, 0, MAX_REPEAT - 1)),
    )
    return seq(*fixed, repeat(item, rest, rest), ranged)


# Pieces of a canonical character, cached by the code points they leave out: ``canonical_class``
# asks for them with the ASCII complement of each regex class.


@lru_cache(maxsize=4096)
def _ascii_raw(excluded) -> Expr | None:
    ranges = _subtract(((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7F)), sorted(cp for cp in excluded if cp < 0x80))
    return Bytes(tuple(ranges)) if ranges else None


@lru_cache(maxsize=1024)
def _escape(excluded) -> Expr | None:
    """The escapes json.dumps writes, factored by their common bytes (``\\u00`` then two hex digits)."""
    short = bytes(ord(_SHORT_ESCAPES[cp]) for cp in sorted(_SHORT_ESCAPES) if cp not in excluded)
    hexes = []
    for high in (0, 1):
        lows = [d for d in range(16) if 16 * high + d not in _SHORT_ESCAPES and 16 * high + d not in excluded]
        if lows:
            hexes.append(seq(literal(str(high)), byte_set(bytes(_HEX_LOWER[d] for d in lows))))
    escapes = ([byte_set(short)] if short else []) + ([seq(literal("u00"), alt(*hexes))] if hexes else [])
    return seq(literal("\\"), alt(*escapes)) if escapes else None


def _subtract(ranges, holes: list[int]) -> list[tuple[int, int]]:
    """``ranges`` minus the sorted code points ``holes``."""
    out = []
    for lo, hi in ranges:
        for h in holes:
            if lo <= h <= hi:
                if lo < h:
                    out.append((lo, h - 1))
                lo = h + 1
        if lo <= hi:
            out.append((lo, hi))
    return out


_ASCII = frozenset(range(0x80))


def canonical_class(ranges) -> Expr | None:
    """One code point in ``ranges`` (inclusive pairs), canonically spelled; None when they hold none.

    A regex class (``[^a-z]``, ``\\S``, ``.``) is a set of ranges, mostly beyond ASCII.
    Surrogates are never produced.
    """
    ranges = merge_ranges(ranges)
    outside = _ASCII.difference(cp for lo, hi in ranges if lo < 0x80 for cp in range(lo, min(hi, 0x7F) + 1))
    wide = char_class([(max(lo, 0x80), hi) for lo, hi in ranges if hi >= 0x80])
    pieces = [_ascii_raw(outside), None if wide == Alt(()) else wide, _escape(outside)]
    present = [p for p in pieces if p is not None]
    return alt(*present) if present else None


#: One code point in its canonical spelling.
CANONICAL_CHAR = alt(_ascii_raw(frozenset()), char_class(((0x80, MAX_CODE_POINT),)), _escape(frozenset()))

#: Any string in its canonical spelling, quotes included: the key of an additional property.
_KEY = seq(literal('"'), star(CANONICAL_CHAR), literal('"'))


def key_excluding(names) -> Expr:
    """A canonical string (quotes included) equal to none of ``names``.

    Lowering walks the names' trie over the string's DFA (``ir.Except``), in C: the size is
    linear in the total length of the names, and a name of any length is told apart.
    """
    words = []
    for name in names:
        try:
            words.append(dumps(name).encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate: no key spells it
            continue
    return Except(_KEY, tuple(words))


def choice(parts: list[Expr]) -> Expr:
    """The alternation of ``parts`` that are distinct by construction.

    ``ir.alt`` drops duplicates by hashing every part, and hashing an expression walks all of
    it: over a trie that costs the size times the depth. Trie branches never repeat.
    """
    return parts[0] if len(parts) == 1 else Alt(tuple(parts))


# No circular-reference check: it keeps a dict of every container's id while encoding (a large
# share of the time on a large schema), and a value that contains itself nests without end, so
# the encoder's recursion bound reports it (``jsonschema.compiler._source``: "MAX_DEPTH").
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False)


def dumps(value) -> str:
    """The compact serialization every literal and test instance uses.

    One encoder for all calls: ``json.dumps`` with options builds a new one each time, which
    costs more than encoding a property name.
    """
    return _ENCODER.encode(value)


def number_literal(value: int | float, *, integer_only: bool = False, fraction_digits: int | None = None) -> list:
    """The spellings of ``value`` as literal tokens: bytes (ints) and ``Expr`` pieces.

    JSON Schema compares numbers by value, so ``const: 2`` admits ``2.0``. The exponent-free
    spellings of one value form a regular language (only trailing zeros, and the sign of
    zero, vary), so they are matched exactly: ``2(.0+)?``, ``2.50*``, ``-?0(.0+)?``. Spellings
    with an exponent are left out except the canonical one, because matching all of them would
    couple the exponent to the digit count. ``integer_only`` keeps integer values free of a
    fraction (the canonical form for ``type: integer``). ``fraction_digits`` caps the trailing
    zeros (``NumberDigits.fraction``; a value that needs more fraction digits has none added).
    Fixed bytes stay separate tokens so that enum literals can share a byte trie.
    """
    canonical = dumps(value)
    try:
        text = format(Decimal(repr(value) if isinstance(value, float) else value).normalize(), "f")
    except (InvalidOperation, ValueError):
        return list(canonical.encode())
    if len(text) > _MAX_PLAIN_DIGITS:
        return list(canonical.encode())
    digits = text.lstrip("-")
    if "." in digits:
        used = len(digits) - digits.index(".") - 1
        tail = counted(literal("0"), 0, None if fraction_digits is None else max(fraction_digits - used, 0))
    else:
        tail = EMPTY if integer_only else optional(seq(literal("."), counted(literal("0"), 1, fraction_digits)))
    sign = [optional(literal("-"))] if digits == "0" else list(b"-" if text.startswith("-") else b"")
    tokens = [*sign, *digits.encode(), tail]
    if "e" not in canonical:
        return tokens
    return [alt(seq(*(t if not isinstance(t, int) else byte_range(t) for t in tokens)), literal(canonical))]


#: Values with longer exponent-free spellings (``1e300``) keep only their canonical one.
_MAX_PLAIN_DIGITS = 400


def define_any_value(grammar: Grammar, caps: NumberDigits = NUMBER_DIGITS) -> Ref:
    """Define (once per grammar) the recursive rules ``json_value``, ``json_object`` and ``json_array``.

    Their numbers are within ``caps``: one grammar has one setting of the caps.
    """
    if _ANY_VALUE.name not in grammar.rules:
        grammar.define("json_object", _ANY_OBJECT)
        grammar.define("json_array", _ANY_ARRAY)
        grammar.define(_ANY_VALUE.name, _any_value(caps))
    return _ANY_VALUE


def container(open_: str, close: str, element: Expr) -> Expr:
    """``open_ WS (element ("," WS element)*)? close``: elements carry their trailing whitespace."""
    return seq(literal(open_), WS, optional(seq(element, star(seq(literal(","), WS, element)))), literal(close))


# The any-JSON rules' bodies, built once (the value's once per caps): the same objects in every
# grammar, so lowering reuses their frames (``ir.permanent``).
_ANY_VALUE = Ref("json_value")
_ANY_OBJECT = permanent(container("{", "}", seq(string(), WS, literal(":"), WS, _ANY_VALUE, WS)))
_ANY_ARRAY = permanent(container("[", "]", seq(_ANY_VALUE, WS)))


@cache
def _any_value(caps: NumberDigits) -> Expr:
    return permanent(alt(Ref("json_object"), Ref("json_array"), string(), number(caps), literal("true"),
                         literal("false"), literal("null")))
