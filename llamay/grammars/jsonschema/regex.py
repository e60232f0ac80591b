"""JSON Schema ``pattern`` regexes (ECMA-262 syntax) compiled to IR for JSON string tokens.

A hand-written parser reads the pattern into a small tree; the tree is lowered twice, to IR
(what the automaton enforces) and to a Python ``re`` pattern (``python_regex``, for checks
done in Python and for tests). Both come from the same tree, so they agree by construction.

Semantics are those of ``new RegExp(source, "u").test(value)`` on the *decoded* string:

- the value is a sequence of code points (the ``u`` flag): ``.`` and ``[^a]`` match one
  code point, astral ones included; ``\\uD83D\\uDE00`` written as a pair is one code point;
- ``^`` and ``$`` match only at the very start and end (no ``m`` flag, ``$`` does not match
  before a final newline); without them the match may start and end anywhere (a search);
- ``.`` is any code point but ``\\n \\r \\u2028 \\u2029``; ``\\d`` is ``[0-9]``; ``\\w`` is
  ``[A-Za-z0-9_]``; ``\\s`` is ECMA's white space and line terminators;
- lone surrogates are never matched (a valid JSON string decodes to none here).

The subset:

- literals; escapes ``\\\\ \\/ \\. \\* \\+ \\? \\( \\) \\[ \\] \\{ \\} \\| \\^ \\$ \\-``, ``\\n \\r \\t
  \\f \\v``, ``\\0`` (not before a digit), ``\\xHH``, ``\\uHHHH``, ``\\u{H...}``, and the classes
  ``\\d \\D \\w \\W \\s \\S``; any other ASCII punctuation escaped stands for itself;
- classes ``[...]`` and ``[^...]`` with ranges, escapes (``\\b`` is U+0008 there) and the class
  escapes; ``[]`` matches nothing, ``[^]`` any code point;
- groups ``(...)``, ``(?:...)``, ``(?<name>...)`` (the name is ignored), alternation ``|``;
- quantifiers ``* + ? {n} {n,} {n,m}`` and their lazy forms (the same language), counts up to
  ``ir.MAX_REPEAT``;
- ``^`` and ``$`` anywhere: ``^(a|b)$``, ``(?:^|,)x``, ``^([^,]+(,|$))+$``. Each path through the
  pattern is sorted by the anchors it passes (``_by_anchors``) into at most four anchor-free
  branches: free, starting at the value's start, ending at its end, or both. A path whose
  anchor cannot hold (``a^b``) is dropped, so such a pattern may match nothing.

Following ECMA-262 Annex B (what browsers, Node and most validators accept without the ``u``
flag), a ``]``, ``}``, or a ``{`` that starts no quantifier is a literal, and a class escape
next to ``-`` in a class makes the ``-`` literal (``[\\w-.]``). ``{,n}`` is refused: ECMA reads
it as literal text, other dialects as ``{0,n}``.

Refused with ``RegexError`` naming the construct and its 0-based position: lookahead and
lookbehind, backreferences (``\\1``, ``\\k<name>``), ``\\b \\B``, ``\\p{..} \\P{..}``, ``\\c``,
octal escapes, inline flags and other ``(?`` groups, other letter escapes, and syntax errors.
Groups nest at most a quarter of the default ``Limits.max_depth`` deep, so that the IR (a few
levels per group) stays within it; the lowering checks the request's own depth and size bounds
(``Limits.max_depth``, ``Limits.max_states``) where it builds the automaton.

A search is the branch between a free prefix and suffix (any code point at all, not ECMA's
``.``), one shared expression. Under a free prefix a leading optional item is dropped and a
leading ``x{n,m}`` becomes ``x{n}`` (``.*x?y{2,5}`` matches what ``.*y{2}`` matches), and the
same at the end; a class counted right after the prefix counts from the start of a run only
(``_pin_runs``). Fewer ways to match a string means fewer configurations for the automaton:
``[a-z]{3000}`` unpinned would run 3000 counters side by side.

Encoding. The automaton reads JSON bytes: each code point is accepted in its canonical
spelling only (what ``json.dumps(..., ensure_ascii=False)`` writes: raw UTF-8 except ``\\"``,
``\\\\``, the short escapes ``\\b \\f \\n \\r \\t`` and ``\\u00xx`` for other controls).
Other spellings of the same value (``\\u0041``, ``\\/``, escaped surrogate pairs) are not
accepted. That is sound: every accepted string matches, and generation writes canonical forms.

Length bounds. ``pattern_string`` takes ``minLength``/``maxLength`` too. They are enforced
exactly when every match already fits, when no match can fit (the branch is dropped), or
when a branch is fixed-length pieces around one repetition of a fixed-length item (``^\\d+$``,
``^abc`` whose free tail is that repetition): the repetition's count is narrowed.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache
from typing import Union

from ... import ir
from ...options import DEFAULT
from ..json_lexical import canonical_class, counted
from ..utf8 import MAX_CODE_POINT, negate
from . import prebuilt

__all__ = ["RegexError", "pattern_string", "python_regex"]

Ranges = tuple[tuple[int, int], ...]


class RegexError(ValueError):
    """A pattern outside the subset, or malformed: the message names the construct and where it is."""

    def __init__(self, what: str, position: int) -> None:
        super().__init__(f"{what} - at position {position}")
        self.position = position


# -- the tree -------------------------------------------------------------------------------


_UNSET = object()


class _Tree:
    """A node: immutable, compared by identity. Trees share subtrees (``_by_anchors`` reuses
    them), so what is derived from a node is computed once, on the node. (Plain classes, not
    frozen dataclasses with ``cached_property``: the module is compiled, and their generated
    ``__init__`` and locked ``__get__`` would run in the interpreter.)"""

    _span = _anchored = _expr = _UNSET

    @property
    def span(self) -> tuple[int, int | None]:
        """The fewest and most code points matched (None: unbounded); anchors match none."""
        if self._span is _UNSET:
            self._span = _span(self)
        return self._span

    @property
    def anchored(self) -> bool:
        """Whether a ``^`` or ``$`` occurs in the node."""
        if self._anchored is _UNSET:
            if isinstance(self, (_Chars, _Anchor)):
                self._anchored = isinstance(self, _Anchor)
            else:
                self._anchored = self.item.anchored if isinstance(self, _Rep) else any(x.anchored for x in self.items)
        return self._anchored

    @property
    def expr(self) -> ir.Expr | None:
        """The canonical JSON spelling of the matches of an anchor-free node; None when it matches nothing."""
        if self._expr is _UNSET:
            self._expr = _ir(self)
        return self._expr


class _Chars(_Tree):
    """One code point from ``ranges`` (merged, surrogates removed); no ranges: nothing matches."""

    def __init__(self, ranges: Ranges) -> None:
        self.ranges = ranges


class _Cat(_Tree):
    def __init__(self, items: tuple[_Node, ...]) -> None:
        self.items = items


class _Or(_Tree):
    def __init__(self, items: tuple[_Node, ...]) -> None:
        self.items = items


class _Rep(_Tree):
    def __init__(self, item: _Node, lo: int, hi: int | None) -> None:
        self.item, self.lo, self.hi = item, lo, hi


class _Anchor(_Tree):
    def __init__(self, end: bool) -> None:
        self.end = end  # False: ``^``, True: ``$``


_Node = Union[_Chars, _Cat, _Or, _Rep, _Anchor]


@lru_cache(maxsize=4096)
def _chars(ranges: Ranges) -> _Chars:
    """The node of a set of code points, surrogates removed; one node per set, so that a run of
    one class (``\\d\\d\\d``) is a run of one object."""
    out = []
    for lo, hi in ir.merge_ranges(ranges):
        if lo < 0xD800:
            out.append((lo, min(hi, 0xD7FF)))
        if hi > 0xDFFF:
            out.append((max(lo, 0xE000), hi))
    return _Chars(tuple(out))


_DIGIT = ((0x30, 0x39),)
_WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE = (
    (0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
    (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF),
)  # fmt: skip
_CLASS_ESCAPES = {
    "d": _DIGIT, "D": negate(_DIGIT), "w": _WORD, "W": negate(_WORD), "s": _SPACE, "S": negate(_SPACE),
}  # fmt: skip
_CONTROL_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B}
_ANY = ((0, MAX_CODE_POINT),)
_DOT = _chars(negate(((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))))
_ANY_STAR = _Rep(_chars(_ANY), 0, None)  # the free prefix and suffix of a search


# -- the parser -----------------------------------------------------------------------------

_BRACES = re.compile(r"\{(\d+)(,(\d*))?\}")
_OPEN_MIN_BRACES = re.compile(r"\{,\d+\}")
_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
_SIMPLE_QUANTIFIERS = {"*": (0, None), "+": (1, None), "?": (0, 1)}
_GROUP_REFUSALS = (("(?<=", "lookbehind"), ("(?<!", "lookbehind"), ("(?=", "lookahead"), ("(?!", "lookahead"))
_GROUP_NAME = re.compile(r"[A-Za-z_$][\w$]*", re.ASCII)
_LITERALS = re.compile(r"[^\\^$.|?*+()\[\]{}]{2,}")  # two or more characters that are only themselves
_MAX_GROUP_DEPTH = DEFAULT.limits.max_depth // 4


class _Parser:
    """Recursive descent over ECMA-262's pattern grammar; ``pos`` indexes the source."""

    def __init__(self, source: str) -> None:
        self.src = source
        self.pos = 0

    def peek(self, ahead: int = 0) -> str:
        i = self.pos + ahead
        return self.src[i] if i < len(self.src) else ""

    def parse(self) -> _Node:
        node = self.disjunction(0)
        if self.pos < len(self.src):  # only a ')' stops the top level early
            raise RegexError("unbalanced parenthesis ')'", self.pos)
        return node

    def disjunction(self, depth: int) -> _Node:
        options = [self.alternative(depth)]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.alternative(depth))
        return options[0] if len(options) == 1 else _Or(tuple(options))

    def alternative(self, depth: int) -> _Node:
        items: list[_Node] = []
        while self.peek() not in ("", "|", ")"):
            run = _LITERALS.match(self.src, self.pos)
            if run is not None:  # all but the last of a run of literals: no quantifier can follow them
                end = run.end() - 1
                items.extend(_chars(((ord(c), ord(c)),)) for c in self.src[self.pos : end])
                self.pos = end
            term = self.term(depth)
            items.extend(term.items if isinstance(term, _Cat) else (term,))
        return items[0] if len(items) == 1 else _Cat(tuple(items))

    def term(self, depth: int) -> _Node:
        c = self.peek()
        if c in "^$":
            self.pos += 1
            if self.quantifier_ahead():
                raise RegexError(f"quantifier after the anchor {c} (nothing to repeat)", self.pos)
            return _Anchor(c == "$")
        atom = self.atom(depth)
        bounds = self.quantifier()
        if bounds is None:
            return atom
        if self.quantifier_ahead():
            raise RegexError("quantifier after a quantifier (nothing to repeat)", self.pos)
        return _Rep(atom, *bounds)

    def quantifier_ahead(self) -> bool:
        c = self.peek()
        return c in _SIMPLE_QUANTIFIERS or (c == "{" and _BRACES.match(self.src, self.pos) is not None)

    def quantifier(self) -> tuple[int, int | None] | None:
        """The bounds of the quantifier at the cursor, consumed; None when there is none."""
        start, c = self.pos, self.peek()
        if c in _SIMPLE_QUANTIFIERS:
            self.pos += 1
            bounds = _SIMPLE_QUANTIFIERS[c]
        elif c == "{" and (m := _BRACES.match(self.src, self.pos)):
            self.pos = m.end()
            lo = int(m[1])
            hi = lo if m[2] is None else int(m[3]) if m[3] else None
            if max(lo, hi or 0) > ir.MAX_REPEAT:
                raise RegexError(f"repetition count above {ir.MAX_REPEAT} (limit MAX_REPEAT)", start)
            if hi is not None and hi < lo:
                raise RegexError(f"numbers out of order in the quantifier {m[0]}", start)
            bounds = (lo, hi)
        else:
            if c == "{":
                self.refuse_open_min_braces()
            return None
        if self.peek() == "?":  # lazy: the same language
            self.pos += 1
        return bounds

    def refuse_open_min_braces(self) -> None:
        if _OPEN_MIN_BRACES.match(self.src, self.pos):
            raise RegexError("quantifier {,n} (ECMA-262 reads it as text, other dialects as {0,n})", self.pos)

    def atom(self, depth: int) -> _Node:
        c = self.peek()
        if c == "(":
            return self.group(depth)
        if c == "[":
            return self.char_class()
        if c == ".":
            self.pos += 1
            return _DOT
        if c == "\\":
            got = self.escape(in_class=False)
            return _chars(_as_ranges(got))
        if self.quantifier_ahead():
            raise RegexError(f"quantifier {c} with nothing to repeat", self.pos)
        if c == "{":
            self.refuse_open_min_braces()
        self.pos += 1  # a literal; Annex B: also ']', '}', and a '{' that starts no quantifier
        return _chars(((ord(c), ord(c)),))

    def group(self, depth: int) -> _Node:
        start = self.pos
        if depth >= _MAX_GROUP_DEPTH:
            raise RegexError(f"groups nested deeper than {_MAX_GROUP_DEPTH} (limit MAX_DEPTH)", start)
        self.pos += 1
        if self.peek() == "?":
            self.group_prefix(start)
        node = self.disjunction(depth + 1)
        if self.peek() != ")":
            raise RegexError("missing ')' for the group opened", start)
        self.pos += 1
        return node

    def group_prefix(self, start: int) -> None:
        """Consume ``?:`` or ``?<name>`` after a group's ``(``; refuse every other ``(?`` form."""
        src = self.src
        for prefix, what in _GROUP_REFUSALS:
            if src.startswith(prefix, start):
                raise RegexError(f"{what} {prefix} is not supported", start)
        if src.startswith("(?:", start):
            self.pos += 2
            return
        if src.startswith("(?<", start):
            name = _GROUP_NAME.match(src, start + 3)
            if name is None or not src.startswith(">", name.end()):
                raise RegexError("malformed group name in (?<name>...)", start)
            self.pos = name.end() + 1
            return
        what = "inline flags" if self.peek(1).isalpha() and self.peek(1) != "P" else "group syntax"
        raise RegexError(f"{what} {src[start : start + 3]} is not supported", start)

    def char_class(self) -> _Chars:
        start = self.pos
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while self.peek() != "]":
            if not self.peek():
                raise RegexError("unterminated character class '['", start)
            first = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                dash = self.pos
                self.pos += 1
                last = self.class_atom()
                if isinstance(first, int) and isinstance(last, int):
                    if last < first:
                        raise RegexError("range out of order in character class", dash)
                    ranges.append((first, last))
                    continue
                ranges.append((0x2D, 0x2D))  # Annex B: next to a class escape, '-' is itself
                ranges.extend(_as_ranges(last))
            ranges.extend(_as_ranges(first))
        self.pos += 1
        return _chars(negate(ranges) if negated else tuple(ranges))

    def class_atom(self) -> int | Ranges:
        if self.peek() == "\\":
            return self.escape(in_class=True)
        self.pos += 1
        return ord(self.src[self.pos - 1])

    def escape(self, in_class: bool) -> int | Ranges:
        """The code point or class escape at the cursor (a backslash), consumed."""
        start = self.pos
        c = self.peek(1)
        self.pos += 2
        if not c:
            raise RegexError("\\ at the end of the pattern", start)
        if c in _CLASS_ESCAPES:
            return _CLASS_ESCAPES[c]
        if c in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[c]
        if c == "b" and in_class:
            return 0x08
        if c in "bB":
            raise RegexError(f"word boundary \\{c} is not supported", start)
        if c == "0" and self.peek() not in _DIGITS:
            return 0
        if c in _DIGITS:
            what = "octal escape" if in_class or c == "0" else "backreference"
            raise RegexError(f"{what} \\{c} is not supported", start)
        if c == "k":
            raise RegexError("backreference \\k is not supported", start)
        if c in "pP":
            raise RegexError(f"Unicode property escape \\{c} is not supported", start)
        if c == "c":
            raise RegexError("control escape \\c is not supported", start)
        if c == "x":
            return self.hex_digits(2, start, "\\xHH")
        if c == "u":
            return self.unicode_escape(start)
        if c.isascii() and c.isalnum():
            raise RegexError(f"escape \\{c} is not supported", start)
        return ord(c)  # an identity escape: the character itself

    def hex_digits(self, n: int, start: int, form: str) -> int:
        digits = self.src[self.pos : self.pos + n]
        if len(digits) < n or not _HEX.issuperset(digits):
            raise RegexError(f"malformed escape (expected {form})", start)
        self.pos += n
        return int(digits, 16)

    def unicode_escape(self, start: int) -> int:
        """``\\uHHHH`` (a surrogate pair of them is one code point) or ``\\u{H...}``."""
        if self.peek() == "{":
            end = self.src.find("}", self.pos)
            digits = self.src[self.pos + 1 : end] if end > 0 else ""
            if not digits or not _HEX.issuperset(digits) or int(digits, 16) > MAX_CODE_POINT:
                raise RegexError("malformed escape (expected \\u{H...} up to 10FFFF)", start)
            self.pos = end + 1
            return int(digits, 16)
        cp = self.hex_digits(4, start, "\\uHHHH")
        rest = self.src[self.pos : self.pos + 6]
        if 0xD800 <= cp <= 0xDBFF and rest[:2] == "\\u" and _HEX.issuperset(rest[2:]) and len(rest) == 6:
            low = int(rest[2:], 16)
            if 0xDC00 <= low <= 0xDFFF:
                self.pos += 6
                return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
        return cp


def _as_ranges(atom: int | Ranges) -> Ranges:
    return ((atom, atom),) if isinstance(atom, int) else atom


@lru_cache(maxsize=1024)
def _parse(source: str) -> _Node:
    return _Parser(source).parse()


# -- anchors --------------------------------------------------------------------------------

_EMPTY = _Cat(())
_Classes = tuple[Union[_Node, None], ...]  # (no anchor, ^ only, $ only, both): see _by_anchors
_HEAD, _TAIL = 1, 2


def _cat(*items: _Node | None) -> _Node | None:
    if any(x is None for x in items):
        return None
    flat = tuple(y for x in items for y in (x.items if isinstance(x, _Cat) else (x,)))
    return flat[0] if len(flat) == 1 else _Cat(flat)


def _or(*items: _Node | None) -> _Node | None:
    flat = tuple(y for x in items if x is not None for y in (x.items if isinstance(x, _Or) else (x,)))
    if not flat:
        return None
    return flat[0] if len(flat) == 1 else _Or(flat)


def _rep(item: _Node | None, lo: int, hi: int | None) -> _Node | None:
    if item is None:
        return _EMPTY if lo == 0 else None
    return _Rep(item, lo, hi)


def _nullable(node: _Node | None) -> bool:
    return node is not None and node.span[0] == 0


def _by_anchors(node: _Node) -> _Classes:
    """``node``'s matches as anchor-free trees, split by the anchors their paths pass.

    Entry ``c`` holds the paths through ``^`` if ``c & _HEAD`` and through ``$`` if ``c & _TAIL``
    (None: no such path). A ``^`` holds only where nothing was consumed before it, a ``$`` only
    where nothing is consumed after it; the caller then requires the match to start at the
    start of the value (``_HEAD``) or to end at its end (``_TAIL``). ``(^|x)a`` is ``a`` at the
    start or ``xa`` anywhere; ``^a$`` is ``a``, anchored at both ends.
    """
    if not node.anchored:
        return node, None, None, None
    if isinstance(node, _Anchor):
        return (None, None, _EMPTY, None) if node.end else (None, _EMPTY, None, None)
    if isinstance(node, _Rep):
        return _repeat_by_anchors(_by_anchors(node.item), node.lo, node.hi)
    if isinstance(node, _Or):
        parts = [_by_anchors(x) for x in node.items]
        return tuple(_or(*(p[c] for p in parts)) for c in range(4))
    runs = itertools.groupby(node.items, lambda x: x.anchored)  # anchor-free runs go whole
    parts = [_by_anchors(x) for anchored, run in runs for x in (run if anchored else [_cat(*run)])]
    out = parts[0]
    for part in parts[1:]:
        out = _cat_by_anchors(out, part)
    return out


def _cat_by_anchors(xs: _Classes, ys: _Classes) -> _Classes:
    """Paths through ``x`` then ``y``: a ``^`` in ``y`` needs ``x`` empty, a ``$`` in ``x`` needs ``y`` empty."""
    out: list[_Node | None] = [None] * 4
    for p, x in enumerate(xs):
        for q, y in enumerate(ys):
            first = (_EMPTY if _nullable(x) else None) if q & _HEAD else x
            then = (_EMPTY if _nullable(y) else None) if p & _TAIL else y
            out[p | q] = _or(out[p | q], _cat(first, then))
    return tuple(out)


def _repeat_by_anchors(xs: _Classes, lo: int, hi: int | None) -> _Classes:
    """Paths through ``lo`` to ``hi`` iterations of ``x``.

    Iterations before the last one through ``^`` must match empty, and so must those after
    the first one through ``$``. So a path is: empty iterations, one ``^`` iteration, plain
    iterations, one ``$`` iteration (or one through both), empty iterations; or all empty.
    """
    none, head, tail, both = xs
    before = _nullable(none) or _nullable(head)  # empty iterations may come first
    after = _nullable(none) or _nullable(tail)  # and last

    def middle(fixed: int, padded: bool) -> _Node | None:
        """The plain iterations between ``fixed`` anchored ones, empty ones padding the count if ``padded``."""
        if hi is not None and hi < fixed:
            return None
        return _rep(none, 0 if padded else max(0, lo - fixed), None if hi is None else hi - fixed)

    alone = (hi is None or hi >= 1) and (before or after or lo <= 1)  # one iteration through both, padded
    all_empty = (_nullable(both) and (hi is None or hi >= 1)) or (
        _nullable(head) and _nullable(tail) and (hi is None or hi >= 2)
    )
    return (
        _rep(none, lo, hi),
        _cat(head, middle(1, before)),
        _cat(middle(1, after), tail),
        _or(
            _cat(head, middle(2, before or after), tail),
            both if alone else None,
            _EMPTY if all_empty else None,
        ),
    )


@lru_cache(maxsize=1024)
def _branches(source: str) -> tuple[tuple[bool, _Node, bool], ...]:
    """The pattern as anchor-free branches: (starts at the value's start, tree, ends at its end)."""
    classes = _by_anchors(_parse(source))
    return tuple((bool(c & _HEAD), node, bool(c & _TAIL)) for c, node in enumerate(classes) if node is not None)


def _span(node: _Node) -> tuple[int, int | None]:
    if isinstance(node, _Chars):
        return 1, 1
    if isinstance(node, _Anchor):
        return 0, 0
    if isinstance(node, _Rep):
        lo, hi = node.item.span
        if hi == 0 or node.hi == 0:
            return 0, 0
        return lo * node.lo, None if hi is None or node.hi is None else hi * node.hi
    spans = [x.span for x in node.items]
    if isinstance(node, _Cat):
        most = [hi for _, hi in spans]
        return sum(lo for lo, _ in spans), None if None in most else sum(most)
    if not spans:
        return 0, 0
    most = [hi for _, hi in spans]
    return min(lo for lo, _ in spans), None if None in most else max(most)


def _trim_front(items: tuple[_Node, ...]) -> tuple[_Node, ...]:
    """``items`` after a free prefix, simplified: ``.*(x?)y{2,5}z`` is ``.*y{2}z``.

    The prefix absorbs a leading nullable item and a leading repetition's optional part.
    Fewer ways to match means fewer automaton configurations (counters run side by side).
    """
    i = 0
    while i < len(items) and items[i].span[0] == 0:
        i += 1
    items = items[i:]
    if items and isinstance(items[0], _Rep) and items[0].hi != items[0].lo:
        first = items[0]
        items = (_Rep(first.item, first.lo, first.lo), *items[1:])
    return items


def _wrap(items: tuple[_Node, ...], head: bool, tail: bool) -> tuple[_Node, ...]:
    """The items of one branch with the free prefix and suffix of a search where it is unanchored."""
    if not head:
        items = _trim_front(items)
    if not tail:
        items = _trim_front(items[::-1])[::-1]
    prefix = () if head else (_ANY_STAR,)
    suffix = () if tail or (prefix and not items) else (_ANY_STAR,)
    return prefix + items + suffix


def _fit(items: tuple[_Node, ...], lo: int, hi: int | None) -> tuple[tuple[_Node, ...] | None, bool]:
    """``items`` restricted to ``lo``..``hi`` code points: (items or None if none fit, whether exactly).

    Exact when every match fits, when none can, or when all items but one repetition are of
    fixed length: that repetition's count is narrowed.
    """
    if hi is not None and hi < lo:
        return None, True
    spans = [x.span for x in items]
    least = sum(a for a, _ in spans)
    most = None if any(b is None for _, b in spans) else sum(b for _, b in spans)
    if (hi is not None and least > hi) or (most is not None and most < lo):
        return None, True
    if least >= lo and (hi is None or (most is not None and most <= hi)):
        return items, True
    variable = [i for i, (a, b) in enumerate(spans) if a != b]
    rep = items[variable[0]] if len(variable) == 1 else None
    if not isinstance(rep, _Rep):
        return items, False
    i = variable[0]
    width, fixed = rep.item.span, least - spans[i][0]
    if width[0] != width[1] or width[0] == 0:
        return items, False
    k = width[0]
    count_lo = max(rep.lo, -((fixed - lo) // k))  # ceil((lo - fixed) / k)
    room = None if hi is None else (hi - fixed) // k
    count_hi = rep.hi if room is None else room if rep.hi is None else min(rep.hi, room)
    if count_hi is not None and count_lo > count_hi:
        return None, True
    return (*items[:i], _Rep(rep.item, count_lo, count_hi), *items[i + 1 :]), True


# -- IR -------------------------------------------------------------------------------------

_QUOTE = ir.literal('"')


@lru_cache(maxsize=4096)
def _class_ir(ranges: Ranges) -> ir.Expr | None:
    return canonical_class(ranges)


def _ir(node: _Node) -> ir.Expr | None:
    if isinstance(node, _Chars):
        return _class_ir(node.ranges) if node.ranges else None
    if isinstance(node, _Rep):
        if node.span[1] == 0:  # x{0}, (){3}: only the empty string
            return ir.EMPTY
        return _repeat_ir(node.item.expr, node.lo, node.hi)
    if isinstance(node, _Or):
        present = [x.expr for x in node.items if x.expr is not None]
        return ir.alt(*present) if present else None
    # a run of one item (``....``, ``\d\d\d``) is a repetition: a counter, not a copy each
    parts = [_repeat_ir(x.expr, n, n) for x, n in ((x, len(list(run))) for x, run in itertools.groupby(node.items))]
    return None if None in parts else ir.seq(*parts)


def _repeat_ir(item: ir.Expr | None, lo: int, hi: int | None) -> ir.Expr | None:
    if item is None:
        return ir.EMPTY if lo == 0 else None
    if lo == hi == 1:
        return item
    if max(lo, hi or 0) <= ir.MAX_REPEAT:
        return ir.repeat(item, lo, hi)
    return counted(item, lo, hi)  # a count narrowed by a length above MAX_REPEAT


@lru_cache(maxsize=1024)
def pattern_string(
    source: str, lo: int = 0, hi: int | None = None, *, search: bool = True
) -> tuple[ir.Expr | None, bool]:
    """IR for a whole JSON string token (quotes included) whose decoded value matches ``source``.

    ``search``: JSON Schema ``pattern`` semantics (ECMA-262 ``RegExp.test``: unanchored unless
    ``^``/``$`` anchor it); False: the whole value must match (``format`` regexes).
    ``lo``/``hi``: minLength/maxLength in code points. Returns ``(expr, length_enforced)``:
    ``length_enforced`` says every accepted value has a length in range (else the caller warns);
    ``expr`` is None when no value matches within the bounds. A whole-value regex without
    bounds may come prebuilt (the ``format`` regexes: ``prebuilt``), the same IR read from a table.
    """
    if not search and lo <= 0 and hi is None:
        expr = prebuilt.lookup(source)
        if expr is not None:
            return expr, True
    return string_from_text(source, lo, hi, search)


def string_from_text(source: str, lo: int, hi: int | None, search: bool) -> tuple[ir.Expr | None, bool]:
    """``pattern_string`` built from the pattern's text: parsed, split at anchors, fitted to the bounds."""
    parts, exact = [], True
    for head, node, tail in _branches(source):
        fitted, fits_exactly = _fit_branch(node, head or not search, tail or not search, max(lo, 0), hi)
        exact = exact and fits_exactly
        parts.extend(x.expr for x in fitted if x.expr is not None)
    if not parts:
        return None, True
    return ir.seq(_QUOTE, ir.alt(*parts), _QUOTE), exact


def _fit_branch(node: _Node, head: bool, tail: bool, lo: int, hi: int | None) -> tuple[list[_Node], bool]:
    """One branch, wrapped for a search and fitted to the length bounds: (alternatives, whether exactly).

    An alternation that does not fit exactly as a whole is fitted alternative by alternative
    (``^(a+|b{2})$``), at the cost of a prefix and suffix per alternative.
    """
    whole = _fit_node(node, head, tail, lo, hi)
    if whole[1] or not isinstance(node, _Or):
        return whole
    results = [_fit_node(option, head, tail, lo, hi) for option in node.items]
    return [x for fitted, _ in results for x in fitted], all(exact for _, exact in results)


def _fit_node(node: _Node, head: bool, tail: bool, lo: int, hi: int | None) -> tuple[list[_Node], bool]:
    fitted, exact = _fit(_wrap(node.items if isinstance(node, _Cat) else (node,), head, tail), lo, hi)
    return ([] if fitted is None else [_Cat(_pin_runs(fitted))]), exact


def _pin_runs(items: tuple[_Node, ...]) -> tuple[_Node, ...]:
    """A class counted right after a free prefix counts from the first character of a run only.

    ``.* C{n} rest`` is ``(ε | .* [^C]) C{n} C* rest``: the same strings, but where any ``C`` of
    a run could start the count (``n`` counters side by side), one count runs.
    """
    if len(items) < 2 or items[0] is not _ANY_STAR or not isinstance(items[1], _Rep):
        return items
    count, rest = items[1], items[2:]
    if not isinstance(count.item, _Chars) or count.lo != count.hi or count.lo < 2:
        return items
    free = _Or((_EMPTY, _Cat((_ANY_STAR, _chars(negate(count.item.ranges))))))
    more = () if rest[:1] == (_ANY_STAR,) else (_Rep(count.item, 0, None),)  # C* .* is .*
    return (free, count, *more, *rest)


# -- Python ---------------------------------------------------------------------------------


def _py_char(cp: int) -> str:
    if 0x20 < cp < 0x7F:
        return re.escape(chr(cp))
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def _py_ranges(ranges) -> str:
    return "".join(_py_char(a) + ("" if a == b else "-" + _py_char(b)) for a, b in ranges)


def _bmp_size(ranges) -> int:
    return sum(max(min(b, 0xFFFF) - a + 1, 0) for a, b in ranges)


def _py(node: _Node) -> str:
    if isinstance(node, _Chars):
        if not node.ranges:
            return "(?!)"
        if len(node.ranges) == 1 and node.ranges[0][0] == node.ranges[0][1]:
            return _py_char(node.ranges[0][0])
        # ``re`` compiles a class by setting a flag per code point of it below U+10000 (one
        # loop step each: tens of thousands for ``.``): the complement is written where it holds fewer
        outside = negate(node.ranges)
        if not outside:
            return "(?s:.)"
        if _bmp_size(outside) < _bmp_size(node.ranges):
            return "[^" + _py_ranges(outside) + "]"
        return "[" + _py_ranges(node.ranges) + "]"
    if isinstance(node, _Anchor):
        return r"\Z" if node.end else r"\A"
    if isinstance(node, _Rep):
        return f"(?:{_py(node.item)}){{{node.lo},{'' if node.hi is None else node.hi}}}"
    if isinstance(node, _Cat):
        return "".join(map(_py, node.items))
    return "(?:" + "|".join(map(_py, node.items)) + ")"


@lru_cache(maxsize=1024)
def python_regex(source: str) -> re.Pattern:
    """A Python ``re`` pattern with the automaton's semantics, for ``.search()`` on a decoded value.

    Raises ``RegexError`` for exactly the patterns ``pattern_string`` refuses. Python's
    backtracking matcher can be slow on nested quantifiers: use it on short strings.
    """
    return re.compile(_py(_parse(source)))
