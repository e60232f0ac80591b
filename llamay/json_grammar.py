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

from .ir import (
    EMPTY,
    Expr,
    Grammar,
    Ref,
    alt,
    byte_range,
    byte_set,
    literal,
    optional,
    plus,
    repeat,
    seq,
    star,
    whitespace,
)
from .utf8 import MAX_CODE_POINT, char_class

#: Optional structural whitespace; every byte is charged to the document's budget.
WS = star(whitespace())

_DIGIT = byte_range(0x30, 0x39)
_DIGIT19 = byte_range(0x31, 0x39)
_HEX = byte_set(b"0123456789abcdefABCDEF")

# "-"? ("0" | [1-9][0-9]*): no leading zero, no "+", never a bare "-".
INTEGER = seq(optional(literal("-")), alt(literal("0"), seq(_DIGIT19, star(_DIGIT))))
_FRACTION = seq(literal("."), plus(_DIGIT))
_EXPONENT = seq(byte_set(b"eE"), optional(byte_set(b"+-")), plus(_DIGIT))
NUMBER = seq(INTEGER, optional(_FRACTION), optional(_EXPONENT))

# Characters that may appear raw inside a JSON string: everything but '"', '\' and C0 controls.
_RAW_RANGES = ((0x20, 0x21), (0x23, 0x5B), (0x5D, MAX_CODE_POINT))
_RAW_CHAR = char_class(_RAW_RANGES)

# "\u" escapes name one code point: a non-surrogate, or a high surrogate followed by a low one
# (a surrogate pair is one character for minLength/maxLength; a lone surrogate is refused).
_HEX_NOT_D = byte_set(b"0123456789abcABCefEF")
_NON_SURROGATE = alt(
    seq(_HEX_NOT_D, _HEX, _HEX, _HEX),
    seq(byte_set(b"dD"), byte_range(0x30, 0x37), _HEX, _HEX),
)
_HIGH = seq(byte_set(b"dD"), byte_set(b"89abAB"), _HEX, _HEX)
_LOW = seq(byte_set(b"dD"), byte_set(b"cdefCDEF"), _HEX, _HEX)
_ESCAPE = seq(
    literal("\\"),
    alt(byte_set(b'"\\/bfnrt'), seq(literal("u"), alt(_NON_SURROGATE, seq(_HIGH, literal("\\u"), _LOW)))),
)

#: One code point of a JSON string value, raw or escaped.
CHAR = alt(_RAW_CHAR, _ESCAPE)

# json.dumps escapes: the short forms, and \u00xx (lower-case hex) for the other C0 controls.
_SHORT_ESCAPES = {0x22: '"', 0x5C: "\\", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
_ESCAPED = tuple(sorted(set(range(0x20)) | set(_SHORT_ESCAPES)))


def string(lo: int = 0, hi: int | None = None) -> Expr:
    """A JSON string value of ``lo`` to ``hi`` code points ("minLength"/"maxLength")."""
    return seq(literal('"'), repeat(CHAR, lo, hi), literal('"'))


def canonical_escape(cp: int) -> bytes:
    """The one spelling ``json.dumps`` gives a character that must be escaped."""
    short = _SHORT_ESCAPES.get(cp)
    return ("\\" + short if short else f"\\u{cp:04x}").encode()


def canonical_char(excluded: frozenset[int] = frozenset()) -> Expr:
    """One code point in canonical spelling, except the code points in ``excluded``."""
    raw = [(cp, cp) for cp in sorted(excluded) if cp >= 0x20]
    pieces = [char_class(_subtract(_RAW_RANGES, raw))]
    pieces.extend(literal(canonical_escape(cp)) for cp in _ESCAPED if cp not in excluded)
    return alt(*pieces)


def _subtract(ranges, holes) -> list[tuple[int, int]]:
    """``ranges`` minus the sorted single code points ``holes``."""
    out = []
    for lo, hi in ranges:
        for h, _ in holes:
            if lo <= h <= hi:
                if lo < h:
                    out.append((lo, h - 1))
                lo = h + 1
        if lo <= hi:
            out.append((lo, hi))
    return out


CANONICAL_CHAR = canonical_char()


def key_excluding(names, any_tail: Expr) -> Expr:
    """A canonical string (quotes included) equal to none of ``names``.

    The names form a trie over code points. At each node the key may end (unless a name
    ends there), continue into a child, or leave the trie with any other character and
    then anything (``any_tail``, a star of canonical characters). Size is linear in the
    total length of the names; the alternatives at each node start with distinct characters.
    """
    trie: dict = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ord(ch), {})
        node[None] = True
    return seq(literal('"'), _outside(trie, any_tail), literal('"'))


def _outside(node: dict, any_tail: Expr) -> Expr:
    children = [cp for cp in node if cp is not None]
    parts = [] if None in node else [EMPTY]
    for cp in children:
        parts.append(seq(literal(encode_char(cp)), _outside(node[cp], any_tail)))
    parts.append(seq(canonical_char(frozenset(children)), any_tail))
    return alt(*parts)


def encode_char(cp: int) -> bytes:
    """The canonical spelling of one code point inside a JSON string."""
    if cp in _SHORT_ESCAPES or cp < 0x20:
        return canonical_escape(cp)
    return chr(cp).encode("utf-8", "surrogatepass")


def dumps(value) -> str:
    """The compact serialization every literal and test instance uses."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def number_literal(value: int | float, *, integer_only: bool = False) -> list:
    """The spellings of ``value`` as literal tokens: bytes (ints) and ``Expr`` pieces.

    JSON Schema compares numbers by value, so ``const: 2`` admits ``2.0``. The exponent-free
    spellings of one value form a regular language (only trailing zeros, and the sign of
    zero, vary), so they are matched exactly: ``2(.0+)?``, ``2.50*``, ``-?0(.0+)?``. Spellings
    with an exponent are left out except the canonical one, because matching all of them would
    couple the exponent to the digit count. ``integer_only`` keeps integer values free of a
    fraction (the canonical form for ``type: integer``). Fixed bytes stay separate tokens so
    that enum literals can share a byte trie.
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
        tail = star(literal("0"))
    else:
        tail = EMPTY if integer_only else optional(seq(literal("."), plus(literal("0"))))
    sign = [optional(literal("-"))] if digits == "0" else list(b"-" if text.startswith("-") else b"")
    tokens = [*sign, *digits.encode(), tail]
    if "e" not in canonical:
        return tokens
    return [alt(seq(*(t if not isinstance(t, int) else byte_range(t) for t in tokens)), literal(canonical))]


#: Values with longer exponent-free spellings (``1e300``) keep only their canonical one.
_MAX_PLAIN_DIGITS = 400


def define_any_value(grammar: Grammar, *, prefix: str = "json") -> Ref:
    """Define (once per grammar) the recursive rules of any JSON value; return its reference."""
    name = f"{prefix}_value"
    if name in grammar.rules:
        return Ref(name)
    value = Ref(name)
    member = seq(string(), WS, literal(":"), WS, value, WS)
    obj = grammar.define(f"{prefix}_object", container("{", "}", member))
    arr = grammar.define(f"{prefix}_array", container("[", "]", seq(value, WS)))
    grammar.define(name, alt(obj, arr, string(), NUMBER, literal("true"), literal("false"), literal("null")))
    return value


def container(open_: str, close: str, element: Expr) -> Expr:
    """``open_ WS (element ("," WS element)*)? close``: elements carry their trailing whitespace."""
    return seq(literal(open_), WS, optional(seq(element, star(seq(literal(","), WS, element)))), literal(close))
