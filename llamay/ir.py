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
  out in ``Alt``/``Seq`` nodes it cost more than the rest of the schema.

Expressions are immutable values; build them with the helpers below.
``Grammar.compile`` lowers the rules onto the core's flat automaton (``llamay._core.lowering``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from ._core.automaton import CompiledGrammar


class _CachedHash:
    """Expressions are trees shared as DAGs: hash each node once, not its whole tree per lookup."""

    __slots__ = ()

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash((type(self).__name__, *(getattr(self, f) for f in self.__dataclass_fields__ if f != "_hash")))
            object.__setattr__(self, "_hash", h)
        return h


# Constructors written out (``init=False``, so defaults live in them): the dataclass's own is
# interpreted code, 0.42 µs a node; these compile with the module and take about half that.
_set = object.__setattr__


@dataclass(frozen=True, slots=True, eq=True, init=False)
class Bytes(_CachedHash):
    """One byte in any of ``ranges`` (inclusive ``(lo, hi)`` pairs)."""

    ranges: tuple[tuple[int, int], ...]
    whitespace: bool
    _hash: int | None = field(compare=False, repr=False)

    def __init__(self, ranges: tuple[tuple[int, int], ...], whitespace: bool = False) -> None:
        _set(self, "ranges", ranges)
        _set(self, "whitespace", whitespace)
        _set(self, "_hash", None)


@dataclass(frozen=True, slots=True, eq=True, init=False)
class Seq(_CachedHash):
    items: tuple[Expr, ...]
    _hash: int | None = field(compare=False, repr=False)

    def __init__(self, items: tuple[Expr, ...]) -> None:
        _set(self, "items", items)
        _set(self, "_hash", None)


@dataclass(frozen=True, slots=True, eq=True, init=False)
class Alt(_CachedHash):
    items: tuple[Expr, ...]
    _hash: int | None = field(compare=False, repr=False)

    def __init__(self, items: tuple[Expr, ...]) -> None:
        _set(self, "items", items)
        _set(self, "_hash", None)


@dataclass(frozen=True, slots=True, eq=True, init=False)
class Ref(_CachedHash):
    name: str
    _hash: int | None = field(compare=False, repr=False)

    def __init__(self, name: str) -> None:
        _set(self, "name", name)
        _set(self, "_hash", None)


@dataclass(frozen=True, slots=True, eq=True, init=False)
class Repeat(_CachedHash):
    """``item`` at least ``min`` and at most ``max`` times (``None``: unbounded)."""

    item: Expr
    min: int
    max: int | None
    _hash: int | None = field(compare=False, repr=False)

    def __init__(self, item: Expr, min: int, max: int | None) -> None:
        _set(self, "item", item)
        _set(self, "min", min)
        _set(self, "max", max)
        _set(self, "_hash", None)


@dataclass(frozen=True, slots=True, eq=True, init=False)
class Except(_CachedHash):
    """What ``item`` matches, but none of ``words``; ``item`` holds no ``Ref`` and no whitespace byte."""

    item: Expr
    words: tuple[bytes, ...]
    _hash: int | None = field(compare=False, repr=False)

    def __init__(self, item: Expr, words: tuple[bytes, ...]) -> None:
        _set(self, "item", item)
        _set(self, "words", words)
        _set(self, "_hash", None)


Expr = Union[Bytes, Seq, Alt, Ref, Repeat, Except]
for _cls in (Bytes, Seq, Alt, Ref, Repeat, Except):  # the dataclass wrote a whole-tree hash: use the cached one
    _cls.__hash__ = _CachedHash.__hash__

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
    """``expr``, marked as built once for the process: lowering keeps its frame across compiles.

    The any-JSON value rules are in every schema with an open object; walking their IR again
    in each compile was about a fifth of a small schema's compile.
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
        self, root: str = "root", *, whitespace_budget: int | None = None, warnings: list[str] | None = None
    ) -> CompiledGrammar:
        """Lower onto the core automaton; raises ``GrammarError`` naming the rule at fault."""
        from ._core.lowering import lower

        return lower(self.rules, root, whitespace_budget=whitespace_budget, warnings=warnings or [])
