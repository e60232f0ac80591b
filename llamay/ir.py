"""The grammar IR every compiler targets: JSON Schema, GBNF, lexicon, any-JSON.

A grammar is a set of named rules. A rule is an expression built from:

- ``Bytes``: one byte from a set of ranges. ``whitespace=True`` marks structural
  whitespace, which is charged against the document's whitespace budget;
- ``Seq`` and ``Alt``: sequence and alternation (``Alt()`` is refused: it matches nothing);
- ``Ref``: a reference to a named rule (recursion is what makes it a pushdown automaton);
- ``Repeat``: ``item{min,max}``. Small bounds are unrolled into states; large ones run on a
  counter held in the rule's stack frame, so ``[0-9]{1,4096}`` costs a handful of states;
- ``Except``: a finite-state ``item`` less some byte strings (an additional key is any string
  but the declared names). Lowering builds the names' trie over the item's DFA in C: spelled
  out in ``Alt``/``Seq`` nodes it would cost more than the rest of the schema.

A *token edge* (``token``) matches one token of the vocabulary and no text: tool-call dialects
open a call with a control token that has no text (Llama 3's ``<|python_tag|>``), or with a
token whose text the constraint must not accept spelled in pieces (Qwen2.5's ``<tool_call>``).
It is the reserved byte path ``edge_bytes(id)``: byte 0xFF, which UTF-8 never holds, then the id
in ``EDGE_ID_BYTES`` bytes, so no text spells it and no edge is a prefix of another. The
vocabulary's trie spells special tokens that way (``Vocabulary.grammar_bytes``), so the byte
automaton, the token masks and their cache need nothing of their own for them. Byte 0xFF is
therefore reserved: a ``Bytes`` range that holds it admits every special token, so free text
must stop at 0xFE.

Expressions are immutable values; build them with the helpers below.
``Grammar.compile`` lowers the rules onto the core's flat automaton (``llamay._core.lowering``).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Union

from .errors import UsageError
from .options import CompileOptions

if TYPE_CHECKING:
    from ._core.automaton import CompiledGrammar

#: What ``Grammar.compile`` lowers with unless told otherwise.
UNBUDGETED = CompileOptions(whitespace_budget=None)

#: Largest count a ``Repeat`` states. A count can reach it in a frame's counter; a longer one is
#: built of blocks of it (``json_lexical.counted``), and a grammar that states one is refused.
MAX_REPEAT = 4096


# Nodes are extension types once compiled (``ir.pxd``): lowering reads their fields as C struct
# members, not through the type's attribute lookup and a descriptor, as it would read a
# dataclass's. Equality is a dataclass's (same type, equal fields); the hash is cached per node:
# expressions are trees shared as DAGs, and hashing one should not walk its whole tree per lookup.


class Bytes:
    """One byte in any of ``ranges`` (inclusive ``(lo, hi)`` pairs)."""

    def __init__(self, ranges: tuple[tuple[int, int], ...], whitespace: bool = False) -> None:
        self.ranges = ranges
        self.whitespace = whitespace
        self._hash = None

    def __eq__(self, other):
        if type(other) is not Bytes:
            return NotImplemented
        return self.ranges == other.ranges and self.whitespace == other.whitespace

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(("Bytes", self.ranges, self.whitespace))
        return self._hash

    def __repr__(self) -> str:
        return f"Bytes(ranges={self.ranges!r}, whitespace={self.whitespace!r})"


class _Items:
    """A node of ``items``: a sequence or an alternation (the type tells which)."""

    def __init__(self, items: tuple[Expr, ...]) -> None:
        self.items = items
        self._hash = None

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self.items == other.items

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((type(self).__name__, self.items))
        return self._hash

    def __repr__(self) -> str:
        return f"{type(self).__name__}(items={self.items!r})"


class Seq(_Items):
    """``items`` one after the other."""


class Alt(_Items):
    """Any one of ``items``."""


class Ref:
    def __init__(self, name: str) -> None:
        self.name = name
        self._hash = None

    def __eq__(self, other):
        if type(other) is not Ref:
            return NotImplemented
        return self.name == other.name

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(("Ref", self.name))
        return self._hash

    def __repr__(self) -> str:
        return f"Ref(name={self.name!r})"


class Repeat:
    """``item`` at least ``min`` and at most ``max`` times (``None``: unbounded)."""

    def __init__(self, item: Expr, min: int, max: int | None) -> None:
        self.item = item
        self.min = min
        self.max = max
        self._hash = None

    def __eq__(self, other):
        if type(other) is not Repeat:
            return NotImplemented
        return self.min == other.min and self.max == other.max and self.item == other.item

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(("Repeat", self.item, self.min, self.max))
        return self._hash

    def __repr__(self) -> str:
        return f"Repeat(item={self.item!r}, min={self.min!r}, max={self.max!r})"


class Except:
    """What ``item`` matches, but none of ``words``; ``item`` holds no ``Ref`` and no whitespace byte."""

    def __init__(self, item: Expr, words: tuple[bytes, ...]) -> None:
        self.item = item
        self.words = words
        self._hash = None

    def __eq__(self, other):
        if type(other) is not Except:
            return NotImplemented
        return self.words == other.words and self.item == other.item

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(("Except", self.item, self.words))
        return self._hash

    def __repr__(self) -> str:
        return f"Except(item={self.item!r}, words={self.words!r})"


Expr = Union[Bytes, Seq, Alt, Ref, Repeat, Except]

EMPTY = Seq(())
JSON_WHITESPACE = b" \t\n\r"


def byte_range(lo: int, hi: int | None = None) -> Bytes:
    return Bytes(((lo, lo if hi is None else hi),))


def byte_set(values: bytes | list[int], *, whitespace: bool = False) -> Bytes:
    """The bytes in ``values`` as a merged range set."""
    return Bytes(merge_ranges((v, v) for v in values), whitespace)


def merge_ranges(ranges) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


_SINGLE_BYTES = tuple(Bytes(((b, b),)) for b in range(256))


def literal(text: bytes | str) -> Expr:
    data = text.encode() if isinstance(text, str) else text
    return seq(*(_SINGLE_BYTES[b] for b in data))


#: The byte a token edge starts with: no UTF-8 text holds it.
EDGE_BYTE = 0xFF
#: Bytes of the token id after it (big-endian): fixed, so that no edge is a prefix of another.
EDGE_ID_BYTES = 3


def edge_bytes(token_id: int) -> bytes:
    """The reserved bytes of token ``token_id``'s edge: ``EDGE_BYTE``, then the id."""
    try:
        i = operator.index(token_id)
    except TypeError:
        i = -1
    if not 0 <= i < 1 << (8 * EDGE_ID_BYTES):
        raise UsageError(f"token id {token_id!r} is not an integer in 0..{(1 << (8 * EDGE_ID_BYTES)) - 1}")
    return bytes((EDGE_BYTE,)) + i.to_bytes(EDGE_ID_BYTES, "big")


def token(token_id: int) -> Expr:
    """Exactly the token ``token_id``, as one whole token and never its text (see the module doc).

    Matched where the vocabulary gives the token an edge: every special token but EOS, and the
    ids of ``Vocabulary.with_token_edges``. Elsewhere (an EOS id, a token with text in the
    default vocabulary) nothing matches it.
    """
    return literal(edge_bytes(token_id))


def seq(*items: Expr) -> Expr:
    flat: list[Expr] = []
    for item in items:
        if type(item) is Seq:
            flat.extend(item.items)
        else:
            flat.append(item)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*items: Expr) -> Expr:
    if len(items) == 1 and not isinstance(items[0], Alt):
        return items[0]  # nothing to deduplicate: hashing it would walk its whole tree
    flat: dict[Expr, None] = {}  # ordered, duplicates dropped in linear time
    for item in items:
        for x in item.items if isinstance(item, Alt) else (item,):
            flat[x] = None
    return next(iter(flat)) if len(flat) == 1 else Alt(tuple(flat))


def alt_distinct(*items: Expr) -> Expr:
    """``alt`` for items distinct by construction: flattened, never hashed.

    Hashing an expression walks every node not hashed before, and lowering keys expressions by
    identity: the duplicates ``alt`` looks for are all the hashes would serve.
    """
    flat: list[Expr] = []
    for item in items:
        if type(item) is Alt:
            flat.extend(item.items)
        else:
            flat.append(item)
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def optional(item: Expr) -> Expr:
    return Repeat(item, 0, 1)


def star(item: Expr) -> Expr:
    return Repeat(item, 0, None)


def plus(item: Expr) -> Expr:
    return Repeat(item, 1, None)


def repeat(item: Expr, lo: int, hi: int | None) -> Expr:
    return Repeat(item, lo, hi)


def whitespace(chars: bytes = JSON_WHITESPACE) -> Bytes:
    """One byte of structural whitespace, charged against the whitespace budget."""
    return byte_set(chars, whitespace=True)


#: Rule bodies built once for the process, by id (the object is held, so the id stays its own).
PERMANENT: dict[int, Expr] = {}


def permanent(expr: Expr) -> Expr:
    """``expr``, marked as built once for the process: lowering keeps its frame across compiles,
    or, where it is inlined, its fragment.

    The any-JSON value rules are in every schema with an open object; walking their IR again
    in each compile would be a large share of a small schema's compile. A JSON string's character
    and a number are in most schemas, and their IR is most of a string's or a number's.
    """
    PERMANENT[id(expr)] = expr
    return expr


class Grammar:
    """A set of named rules under construction."""

    def __init__(self) -> None:
        self.rules: dict[str, Expr] = {}

    def define(self, name: str, expr: Expr) -> Ref:
        self.rules[name] = expr
        return Ref(name)

    def compile(
        self, root: str = "root", *, options: CompileOptions = UNBUDGETED, warnings: list[str] | None = None
    ) -> CompiledGrammar:
        """Lower onto the core automaton; raises ``GrammarError`` naming the rule at fault.

        An IR grammar's whitespace is unbudgeted unless ``options`` sets a budget.
        """
        from ._core.lowering import lower

        return lower(self.rules, root, options, warnings=warnings or [])
