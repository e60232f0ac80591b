"""Exact numeric bounds as digit automata: ``minimum``, ``maximum``, their exclusive forms, ``multipleOf``.

A number is read one byte at a time, so a bound on its value must be decided digit by digit.
The admitted spellings are the exponent-free ones, ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?`` (no
fraction for integers). A bound is never decided by an exponent form: admitting ``1e2`` under
``maximum: 150`` would couple the exponent to the digit count. Refusing those spellings is
sound (nothing out of range gets through) and costs nothing, because generation writes plain
decimals.

How. The sign is split off: a value is ``-``/nothing and a magnitude, and each half is a range of
magnitudes. A magnitude range is cut by the length of the integer part into at most three *pieces*:
the lower bound's length, the lengths strictly between, the upper bound's length. In a piece of
fixed length the integer digits compare with the bound's digits position by position; where the
integer part equals the bound's, the fraction compares the same way (padded with zeros, so ``1.50``
is ``1.5``). Without ``multipleOf``, or with ``10**-k`` (``1``, ``0.01``: only zeros after ``k``
fraction digits), that comparison is written straight as IR, a ladder of digits
(``digit_ladders``). Another ``multipleOf`` adds the residue automaton of its modulus, whose states
a ladder has no place for: then each piece is a small explicit DFA, found by exploring its states
from a step function, minimized (Hopcroft), then written as IR: a chain of states that read one
byte class becomes a ``Repeat`` (``[1-9][0-9]{0,307}``, ``1 0{308}``), acyclic states stay plain
expressions, and named rules appear only where the DFA shares a large state (the residue product),
cycles (an unbounded residue loop) or would nest too deep (a long ladder). The IR is linear in the
digits of the bounds, times the residue states for ``multipleOf``; the ``[0-9]{k}`` tails of a
ladder are copied per branch, so a 19-digit bound lowers to about 200 automaton states.

Caps on the digits (``json_lexical.NumberDigits``, so that a number cannot run away) end the
lengths of an unbounded range's last piece, and the fraction counts its digits up to its cap.

Where exact would be too large, ``NotExact`` names the keyword to drop (and warn about): a bound
with more than ``MAX_DIGITS`` digits or one whose ladder nests too deep for the lowering, a
``multipleOf`` whose product with the bounds passes the state or rule limits. Nothing here is
ever approximated silently.
"""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache
from typing import NamedTuple

from ...ir import EMPTY, Bytes, Expr, Grammar, Ref, Repeat, alt, byte_set, literal, optional, seq
from .digit_ladders import Ladders
from .nesting import MAX_HEIGHT, MAX_NESTING, TooDeep, measure

#: Largest ``multipleOf`` modulus compiled exactly. Its minimized residue DFA has at most this many
#: states (``1000`` needs 4: the last three digits; ``7`` needs 7), and exploring a range times
#: that DFA stays within ``MAX_DFA_STATES`` for the usual bounds. Every step seen in practice (2,
#: 5, 15, 60, 100, 1000; 0.01, 0.25 as numbers) is far below it. A modulus with a large factor
#: prime to 10 (97, 997) has as many residue states as that factor, which ``_MAX_RULES`` can refuse.
MAX_MODULUS = 1000

#: Digits of a bound's plain spelling (integer and fraction digits) compiled exactly: every double
#: (1.7976931348623157e308 has 309, 5e-324 has 324) fits. A DFA needs a state per digit position.
MAX_DIGITS = 400

#: States of the explored DFAs of one range (before minimization) before ``NotExact``: the bound on
#: compile time. Only a range stepped by a residue automaton is explored (a ladder is not); its
#: states are the bounds' digit positions times the residue states, so a large modulus over
#: many-digit bounds can pass it.
MAX_DFA_STATES = 4096

#: Named rules of one range before ``NotExact``. The lowering builds recursive rules depth first
#: (a few hundred overflow Python's stack) and copies shared rules into each frame that uses them,
#: at a millisecond or two per rule. A ladder names a handful; a residue product names about
#: one rule per (digit position, residue state), and an unbounded range one per residue state
#: (``1000`` has 4, ``7`` has 7, ``99`` and ``997`` too many): ``[0, 10**9]`` by 7 names 45.
_MAX_RULES = 96

#: A state reached from ``k`` others is copied into each while the copies add at most this many IR
#: nodes (``(k - 1) * size``), and shared through a named rule otherwise: the tails ``[0-9]{j}``
#: of a digit ladder are copied, the states of a residue product shared.
_COPY_NODES = 8

_DOT = 10  # the symbol for "."; 0..9 are the digits
_SYMBOLS = range(11)
_FREE = -1  # a fraction tracker whose comparison is already decided in the bound's favour


class NotExact(ValueError):
    """The exact automaton would be too large; the caller drops ``keyword`` and warns.

    ``keyword`` is ``"minimum"`` (the lower bound, exclusive or not), ``"maximum"`` or ``"multipleOf"``.
    """

    def __init__(self, keyword: str, reason: str) -> None:
        super().__init__(f"{keyword} not compiled exactly: {reason}")
        self.keyword = keyword
        self.reason = reason


def integer_range(
    grammar: Grammar, lo: int | None, hi: int | None, multiple_of: int = 1, integer_digits: int | None = None
) -> Expr | None:
    """JSON integers ``n`` with ``lo <= n <= hi`` (``None``: unbounded) and ``n % multiple_of == 0``.

    Spelled canonically (``-?(0|[1-9][0-9]*)``, as ``json_lexical.integer``); ``-0`` is admitted
    exactly when 0 is. ``None`` when no integer qualifies. ``1 <= multiple_of <= MAX_MODULUS``.
    ``integer_digits`` caps the digits (``json_lexical.NumberDigits``), raised as ``_caps`` says.
    Raises ``NotExact`` naming the keyword to drop when the exact automaton passes a limit: a
    bound of more than ``MAX_DIGITS`` digits or nesting past ``MAX_NESTING``, a modulus whose
    product with the bounds (or the cap) passes ``MAX_DFA_STATES`` or ``_MAX_RULES``. Retry
    without it (or without the cap).
    """
    if not 1 <= multiple_of <= MAX_MODULUS:
        raise ValueError(f"multiple_of {multiple_of} is outside 1..{MAX_MODULUS}")
    low = None if lo is None else _exact(Decimal(_checked_int(lo, "minimum")), "minimum")
    high = None if hi is None else _exact(Decimal(_checked_int(hi, "maximum")), "maximum")
    multiple = _Multiple(multiple_of, 0) if multiple_of > 1 else None
    return _signed(grammar, low, False, high, False, False, multiple, _caps(integer_digits, None, low, high, multiple))


def number_range(
    grammar: Grammar,
    lo: Decimal | None,
    lo_exclusive: bool,
    hi: Decimal | None,
    hi_exclusive: bool,
    multiple_of: Decimal | None = None,
    integer_digits: int | None = None,
    fraction_digits: int | None = None,
) -> Expr | None:
    """JSON numbers whose value lies in the range (and is a multiple of ``multiple_of``), exactly.

    Spellings: ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?``, trailing fraction zeros allowed (``1.50`` is 1.5),
    ``-0`` (and ``-0.0``) exactly when 0 is in range. Exponent forms are not admitted: sound, and
    generation writes plain decimals. ``multiple_of`` must pass ``supported_multiple``. ``None``
    when no number qualifies. ``integer_digits`` and ``fraction_digits`` cap the digits before
    and after the point (``json_lexical.NumberDigits``), raised as ``_caps`` says. Raises
    ``NotExact`` as ``integer_range`` does.
    """
    low = None if lo is None else _exact(lo, "minimum")
    high = None if hi is None else _exact(hi, "maximum")
    multiple = None
    if multiple_of is not None:
        multiple = _scaled(multiple_of)
        if multiple is None:
            raise NotExact("multipleOf", f"{multiple_of} is not m * 10**-s with m <= {MAX_MODULUS}")
    caps = _caps(integer_digits, fraction_digits, low, high, multiple)
    return _signed(grammar, low, lo_exclusive, high, hi_exclusive, True, multiple, caps)


def supported_multiple(d: Decimal) -> bool:
    """Whether ``multipleOf: d`` compiles exactly: ``d = m * 10**-s``, ``m <= MAX_MODULUS``, ``s <= MAX_DIGITS``.

    Then ``x`` is a multiple of ``d`` exactly when ``x * 10**s`` is an integer divisible by ``m``:
    a residue automaton over the integer digits and the first ``s`` fraction digits.
    """
    return _scaled(d) is not None


# --------------------------------------------------------------------------- bounds and signs


class _Bound(NamedTuple):
    """A magnitude bound: canonical integer digits, fraction digits without trailing zeros."""

    digits: str
    fraction: str
    exclusive: bool


class _Caps(NamedTuple):
    """The most digits a magnitude has before and after the point (``None``: any number)."""

    integer: int | None
    fraction: int | None


def _caps(integer: int | None, fraction: int | None, low, high, multiple: _Multiple | None) -> _Caps:
    """The caps, raised to one digit more than either bound spells, before and after the point,
    and to the multiple's fraction digits: an explicit bound outranks a cap that is there for
    unbounded numbers. The digit more leaves room for a value past an exclusive bound, or for the
    next multiple past a bound, so a range with values keeps some."""
    spelled = [_bound(b.copy_abs(), False) for b in (low, high) if b is not None]
    if integer is not None:
        integer = max([integer] + [len(b.digits) + 1 for b in spelled])
    if fraction is not None:
        fraction = max([fraction, 0 if multiple is None else multiple.scale] + [len(b.fraction) + 1 for b in spelled])
    return _Caps(integer, fraction)


class _Multiple(NamedTuple):
    """``x`` is a multiple when ``x * 10**scale`` is an integer divisible by ``modulus``."""

    modulus: int
    scale: int


def _scaled(d: Decimal) -> _Multiple | None:
    if not d.is_finite() or d <= 0:
        return None
    mantissa, exponent = _canonical(d)
    if exponent > len(str(MAX_MODULUS)) or -exponent > MAX_DIGITS:  # before building a huge int
        return None
    modulus = int(mantissa) * 10 ** max(exponent, 0)
    return _Multiple(modulus, max(-exponent, 0)) if modulus <= MAX_MODULUS else None


def _checked_int(value: int, keyword: str) -> int:
    if abs(value).bit_length() > 4 * MAX_DIGITS:  # before str(): huge ints are slow to print
        raise NotExact(keyword, f"the bound has more than {MAX_DIGITS} digits")
    return value


def _canonical(d: Decimal) -> tuple[str, int]:
    """``|d|`` as mantissa digits without leading or trailing zeros and an exponent; ("", 0) for 0.

    Read from ``as_tuple`` because ``normalize()`` and unary minus round to the context precision.
    """
    _, digits, exponent = d.as_tuple()
    text = "".join(map(str, digits)).lstrip("0")
    stripped = text.rstrip("0")
    return (stripped, exponent + len(text) - len(stripped)) if stripped else ("", 0)


def _exact(d: Decimal, keyword: str) -> Decimal:
    """``d``, refused with ``NotExact`` when its plain spelling has more than ``MAX_DIGITS`` digits."""
    if not d.is_finite():
        raise ValueError(f"bound {d} is not a finite number")
    mantissa, exponent = _canonical(d)
    if max(len(mantissa) + exponent, 1) + max(-exponent, 0) > MAX_DIGITS:
        raise NotExact(keyword, f"{d} has more than {MAX_DIGITS} digits")
    return d


_MIRRORED = {"minimum": "maximum", "maximum": "minimum"}


def _signed(grammar, lo, lo_ex, hi, hi_ex, fraction, multiple, caps: _Caps) -> Expr | None:
    """``-``? magnitude: the values ``>= 0`` spelled plainly, the others (and ``-0``) after a minus.

    A minus with magnitude 0 is the value 0, so the negative half includes magnitude 0 exactly
    when 0 is in range; ``|x|`` is a multiple exactly when ``x`` is.
    """
    zero = Decimal(0)
    pos = neg = None
    if hi is None or hi >= 0:
        low, low_ex = (lo, lo_ex) if lo is not None and lo >= 0 else (zero, False)
        pos = _magnitude(grammar, low, low_ex, hi, hi_ex, fraction, multiple, caps)
    if lo is None or lo <= 0:
        low, low_ex = (hi.copy_negate(), hi_ex) if hi is not None and hi <= 0 else (zero, False)
        high = None if lo is None else lo.copy_negate()
        try:
            neg = _magnitude(grammar, low, low_ex, high, lo_ex, fraction, multiple, caps)
        except NotExact as exc:  # the negative magnitudes' lower bound is the schema's maximum
            raise NotExact(_MIRRORED.get(exc.keyword, exc.keyword), exc.reason) from None
    if neg is None:
        return pos
    if pos is None:
        return seq(literal("-"), neg)
    return seq(optional(literal("-")), pos) if pos == neg else alt(pos, seq(literal("-"), neg))


def _magnitude(grammar, low, low_ex, high, high_ex, fraction, multiple, caps: _Caps) -> Ref | None:
    """The rule for magnitudes in the range, defined in ``grammar`` once per distinct range."""
    if high is not None and (low > high or (low == high and (low_ex or high_ex))):
        return None
    # only an unbounded range needs the integer cap, and only numbers have a fraction to cap
    caps = _Caps(caps.integer if high is None else None, caps.fraction if fraction else None)
    rules = _magnitude_rules(_bound(low, low_ex), None if high is None else _bound(high, high_ex), fraction, multiple,
                             caps)
    if rules is None:
        return None
    for name, expr in rules:
        if name not in grammar.rules:
            grammar.define(name, expr)
    return Ref(rules[0][0])


def _bound(d: Decimal, exclusive: bool) -> _Bound:
    mantissa, exponent = _canonical(d)
    if exponent >= 0:
        return _Bound((mantissa + "0" * exponent) or "0", "", exclusive)
    point = len(mantissa) + exponent
    if point > 0:
        return _Bound(mantissa[:point], mantissa[point:], exclusive)
    return _Bound("0", "0" * -point + mantissa, exclusive)


def _name(low: _Bound, high: _Bound | None, fraction: bool, multiple: _Multiple | None, caps: _Caps) -> str:
    """A rule name that is the range itself, so equal ranges share rules and others never collide."""

    def value(b: _Bound) -> str:
        text = b.digits + ("." + b.fraction if b.fraction else "")
        if len(text) <= 24:
            return text
        full = b.digits + b.fraction
        trailing = len(full) - len(full.rstrip("0"))
        return f"{full.strip('0')}e{trailing - len(b.fraction)}"

    kind = "dec" if fraction else "int"
    upper = "inf)" if high is None else value(high) + (")" if high.exclusive else "]")
    step = "" if multiple is None else f"*{multiple.modulus}e-{multiple.scale}"
    capped = "" if caps == (None, None) else f"/{caps.integer or ''}.{caps.fraction or ''}"
    return f"num:{kind}{'(' if low.exclusive else '['}{value(low)},{upper}{step}{capped}"


# --------------------------------------------------------------------------- pieces and their DFAs


class _Piece(NamedTuple):
    """Magnitudes whose integer part has ``min_len..max_len`` digits (``None``: unbounded).

    At a fixed length the integer digits are compared with ``low`` / ``high`` (when given);
    otherwise the length alone places the integer part strictly inside the range.
    """

    min_len: int
    max_len: int | None
    low: str | None
    high: str | None


def _pieces(low: str, high: str | None, cap: int | None) -> list[_Piece]:
    """The lower bound's length, the lengths strictly between, the upper bound's length (or ``cap``)."""
    if high is None:
        longer = [_Piece(len(low) + 1, cap, None, None)] if cap is None or cap > len(low) else []
        return [_Piece(len(low), len(low), low, None), *longer]
    if len(low) == len(high):
        return [_Piece(len(low), len(low), low, high)]
    middle = [_Piece(len(low) + 1, len(high) - 1, None, None)] if len(high) - len(low) > 1 else []
    return [_Piece(len(low), len(low), low, None), *middle, _Piece(len(high), len(high), None, high)]


class _Dfa(NamedTuple):
    """States ``0..n-1`` (0 starts); ``trans[q]`` maps a symbol to a state, a missing one rejects."""

    trans: tuple[dict[int, int], ...]
    accept: tuple[bool, ...]


class _OverBudget(Exception):
    pass


@lru_cache(maxsize=256)
def _magnitude_rules(low: _Bound, high: _Bound | None, fraction: bool, multiple: _Multiple | None, caps: _Caps):
    """``(name, expr)`` pairs, the range's own rule first; ``None`` when no magnitude qualifies."""
    name = _name(low, high, fraction, multiple, caps)
    if multiple is None or multiple.modulus == 1:  # no step, or 10**-scale: a ladder
        builder = Ladders(name, low, high, fraction, caps.fraction, None if multiple is None else multiple.scale)
    else:
        builder = _Residues(name, low, high, fraction, multiple, caps.fraction)
    pieces: list[Expr] = []
    for i, piece in enumerate(_pieces(low.digits, None if high is None else high.digits, caps.integer)):
        try:
            expr = builder.piece(piece, i)
        except (_OverBudget, TooDeep):
            keyword = "multipleOf" if multiple else "maximum" if piece.high else "minimum"
            limits = f"{MAX_DFA_STATES} states, {_MAX_RULES} rules or nesting {MAX_NESTING}"
            raise NotExact(keyword, f"the automaton would pass {limits}") from None
        if expr is not None:
            pieces.append(expr)
    return ((name, alt(*pieces)), *builder.rules) if pieces else None


class _Residues:
    """The pieces of a range stepped by a ``multipleOf`` other than ``10**-k``: each a DFA explored,
    minimized and written as IR.

    Raises ``_OverBudget`` past ``MAX_DFA_STATES`` explored over the range, or ``_MAX_RULES``.
    """

    def __init__(self, name: str, low: _Bound, high: _Bound | None, fraction: bool, multiple: _Multiple,
                 max_fraction: int | None):
        self.name = name
        self.bounds = (low, high)
        self.fraction = fraction
        self.multiple = multiple
        self.max_fraction = max_fraction
        self.budget = MAX_DFA_STATES
        self.rules: list[tuple[str, Expr]] = []

    def piece(self, piece: _Piece, index: int) -> Expr | None:
        reader = _Reader(piece, *self.bounds, self.fraction, self.multiple, self.max_fraction)
        explored = _explore(reader, self.budget)
        self.budget -= len(explored.accept)
        dfa = _minimize(explored)
        if dfa is None:
            return None
        expr, named = _emit(dfa, f"{self.name}/{index}")
        self.rules.extend(named)
        if len(self.rules) > _MAX_RULES:
            raise _OverBudget
        return expr


class _Reader:
    """The meaning of one piece as a step function; its DFA is whatever the exploration reaches.

    Keys: ``("i", digits read, low tight, high tight, residue)`` in the integer part,
    ``("z", low tight, high tight, residue)`` after an integer part ``0``, ``("p", ...)`` right
    after the point and ``("f", low, high, residue, fraction digits)`` in the fraction, where a
    fraction tracker is the position matched so far in the bound's fraction, or ``_FREE``. The
    fraction digits are counted up to the multiple's scale, or to the cap ``max_fraction``.
    """

    def __init__(self, piece: _Piece, low: _Bound, high: _Bound | None, fraction: bool, multiple: _Multiple,
                 max_fraction: int | None):
        self.piece = piece
        self.low_digits = None if piece.low is None else [int(c) for c in piece.low]
        self.high_digits = None if piece.high is None else [int(c) for c in piece.high]
        self.low_fraction = [int(c) for c in low.fraction]
        self.low_exclusive = low.exclusive
        self.high_fraction = [] if high is None else [int(c) for c in high.fraction]
        self.high_exclusive = high is not None and high.exclusive
        self.fraction = fraction
        self.residues = _residue_dfa(multiple.modulus)
        self.scale = multiple.scale
        self.max_fraction = max_fraction
        self.padded: dict[tuple[int, int], bool] = {}

    def start(self) -> tuple:
        return ("i", 0, self.low_digits is not None, self.high_digits is not None, 0)

    def step(self, key: tuple, symbol: int) -> tuple | None:
        kind = key[0]
        if kind == "i" and symbol != _DOT:
            return self.integer_digit(key, symbol)
        if kind in "iz":
            return self.point(key) if symbol == _DOT and self.fraction and self.integer_done(key) else None
        return None if symbol == _DOT else self.fraction_digit(key, symbol)

    def accepting(self, key: tuple) -> bool:
        if key[0] in "iz":
            return self.integer_done(key) and self.final(*self.trackers(key), key[-1], 0)
        return key[0] == "f" and self.final(*key[1:])

    def integer_done(self, key: tuple) -> bool:
        return key[0] == "z" or key[1] >= self.piece.min_len

    def integer_digit(self, key: tuple, d: int) -> tuple | None:
        _, pos, low_tight, high_tight, residue = key
        piece = self.piece
        if (piece.max_len is not None and pos >= piece.max_len) or (pos == 0 and d == 0 and piece.min_len > 1):
            return None
        if low_tight:
            if d < self.low_digits[pos]:
                return None
            low_tight = d == self.low_digits[pos]
        if high_tight:
            if d > self.high_digits[pos]:
                return None
            high_tight = d == self.high_digits[pos]
        residue = self.residues.trans[residue][d]
        if pos == 0 and d == 0:
            return ("z", low_tight, high_tight, residue)
        pos = pos + 1 if piece.max_len is not None else min(pos + 1, piece.min_len)
        return ("i", pos, low_tight, high_tight, residue)

    def trackers(self, key: tuple) -> tuple[int, int]:
        """The fraction trackers when the integer part ends: compared from position 0 where it equals a bound."""
        low_tight, high_tight = key[-3], key[-2]
        return self.low_tracker(0 if low_tight else _FREE), 0 if high_tight else _FREE

    def low_tracker(self, p: int) -> int:
        # matched the whole lower fraction, inclusive: every continuation is >= the bound
        return _FREE if p == len(self.low_fraction) and not self.low_exclusive else p

    def point(self, key: tuple) -> tuple:
        return ("p", *self.trackers(key), key[-1], 0)

    def fraction_digit(self, key: tuple, d: int) -> tuple | None:
        _, low, high, residue, used = key
        if used == self.max_fraction:
            return None
        if low != _FREE:
            bound = self.low_fraction
            if low < len(bound) and d < bound[low]:
                return None
            low = self.low_tracker(low + 1) if low < len(bound) and d == bound[low] else (low if d == 0 else _FREE)
        if high != _FREE:
            bound = self.high_fraction
            if (d > bound[high]) if high < len(bound) else d:
                return None
            high = high + 1 if high < len(bound) and d == bound[high] else (high if high == len(bound) else _FREE)
        if used < self.scale:
            residue = self.residues.trans[residue][d]
        elif d:
            return None  # past the multiple's scale only zeros keep x * 10**scale an integer
        # uncapped, the count stops at the scale: the states stay finite
        used = used + 1 if self.max_fraction is not None else min(used + 1, self.scale)
        return ("f", low, high, residue, used)

    def final(self, low: int, high: int, residue: int, used: int) -> bool:
        if low != _FREE:  # short of the lower fraction, or equal to an exclusive bound
            return False
        if high == len(self.high_fraction) and self.high_exclusive:
            return False
        return self.residue_ok(residue, max(self.scale - used, 0))

    def residue_ok(self, residue: int, zeros: int) -> bool:
        """Whether the residue state accepts once the fraction is padded to the scale with zeros."""
        key = (residue, zeros)
        if key not in self.padded:
            for _ in range(zeros):
                residue = self.residues.trans[residue][0]
            self.padded[key] = self.residues.accept[residue]
        return self.padded[key]


def _explore(reader: _Reader, budget: int) -> _Dfa:
    """Breadth-first over the reader's keys; raises ``_OverBudget`` past ``budget`` states."""
    start = reader.start()
    index = {start: 0}
    keys = [start]
    trans = []
    for key in keys:
        out = {}
        for symbol in _SYMBOLS:
            nxt = reader.step(key, symbol)
            if nxt is None:
                continue
            target = index.get(nxt)
            if target is None:
                if len(keys) >= budget:
                    raise _OverBudget
                target = index[nxt] = len(keys)
                keys.append(nxt)
            out[symbol] = target
        trans.append(out)
    return _Dfa(tuple(trans), tuple(map(reader.accepting, keys)))


@lru_cache(maxsize=64)
def _residue_dfa(modulus: int) -> _Dfa:
    """Divisibility by ``modulus`` read left to right, minimized: 1000 needs 4 states, 7 needs 7."""
    trans = tuple({d: (10 * r + d) % modulus for d in range(10)} for r in range(modulus))
    dfa = _minimize(_Dfa(trans, tuple(r == 0 for r in range(modulus))))
    return _Dfa(tuple(tuple(out[d] for d in range(10)) for out in dfa.trans), dfa.accept)


def _minimize(dfa: _Dfa) -> _Dfa | None:
    """Hopcroft's partition refinement; states that cannot accept go; ``None`` when none can.

    A sink stands for every missing transition. It is never used as a splitter (Hopcroft needs
    only one half of each split processed), so only real transitions are inverted. States are
    renumbered breadth-first from the start: the result, and every rule name built on it,
    depends only on the language.
    """
    n = len(dfa.accept)
    sink = n
    inverse: list[dict[int, list[int]]] = [{} for _ in _SYMBOLS]
    for q, out in enumerate(dfa.trans):
        for symbol, t in out.items():
            inverse[symbol].setdefault(t, []).append(q)
    accepting = {q for q in range(n) if dfa.accept[q]}
    if not accepting:
        return None
    blocks = [accepting, set(range(n + 1)) - accepting]
    block_of = [0 if q in accepting else 1 for q in range(n + 1)]
    pending = {0}
    inverse = [inv for inv in inverse if inv]
    while pending:
        splitter = tuple(blocks[pending.pop()])
        for inv in inverse:
            touched: dict[int, list[int]] = {}
            for t in splitter:
                for q in inv.get(t, ()):
                    touched.setdefault(block_of[q], []).append(q)
            for b, members in touched.items():
                if len(members) == len(blocks[b]):
                    continue
                new = set(members)
                blocks[b] -= new
                blocks.append(new)
                for q in members:
                    block_of[q] = len(blocks) - 1
                if b in pending or sink in blocks[b] or len(new) <= len(blocks[b]):  # new never holds the sink
                    pending.add(len(blocks) - 1)
                else:
                    pending.add(b)
    dead = block_of[sink]
    if block_of[0] == dead:
        return None
    order, index, trans = [block_of[0]], {block_of[0]: 0}, []
    for b in order:
        out = {}
        for symbol, t in sorted(dfa.trans[min(blocks[b])].items()):
            if block_of[t] != dead:
                out[symbol] = index.setdefault(block_of[t], len(order))
                if out[symbol] == len(order):
                    order.append(block_of[t])
        trans.append(out)
    return _Dfa(tuple(trans), tuple(dfa.accept[min(blocks[b])] for b in order))


# --------------------------------------------------------------------------- DFA to IR

# An expression under construction: ``b{lo,hi} rest`` (``b`` None: just ``rest``), so that a state
# that reads ``b`` into another can fold into its repetition instead of nesting a level.
_Shape = tuple  # (Bytes | None, int, int | None, Expr)


def _emit(dfa: _Dfa, prefix: str) -> tuple[Expr, list[tuple[str, Expr]]]:
    """The DFA as IR: the start's expression and the named rules it uses (``prefix:state``).

    States are visited successors first (ignoring self-loops, which become ``b*``). States on or
    leading into a longer cycle are named rules; so is a state shared by several predecessors
    whose expression is not small, and one whose expression has grown too deep.
    """
    n = len(dfa.accept)
    loops: list[Bytes | None] = []
    edges: list[list[tuple[Bytes, int]]] = []
    for q, out in enumerate(dfa.trans):
        by_target: dict[int, list[int]] = {}
        for symbol, t in out.items():
            by_target.setdefault(t, []).append(symbol)
        loops.append(_bytes(tuple(by_target.pop(q))) if q in by_target else None)
        edges.append([(_bytes(tuple(symbols)), t) for t, symbols in by_target.items()])
    succs = [{t for _, t in e} for e in edges]
    preds: list[set[int]] = [set() for _ in range(n)]
    for q in range(n):
        for t in succs[q]:
            preds[t].add(q)
    order = _peel(range(n), succs, preds)
    upstream = _peel(set(range(n)).difference(order), preds, succs)
    named = set(range(n)).difference(order, upstream)
    shapes: dict[int, _Shape] = {}
    rules = []
    measures: dict[Expr, tuple[int, int, int]] = {}
    depths: dict[str, int] = {}

    def use(t: int) -> _Shape:
        return (None, 0, 0, Ref(f"{prefix}:{t}")) if t in named else shapes[t]

    for q in order + upstream[::-1] + sorted(named):
        shape = _state_shape(loops[q], [(b, use(t)) for b, t in edges[q]], dfa.accept[q])
        if q in named:  # on a cycle: a recursive rule
            rules.append((f"{prefix}:{q}", _expr(shape)))
            continue
        size, height, depth = measure(_expr(shape), measures, depths)
        if (len(preds[q]) - 1) * size > _COPY_NODES or height > MAX_HEIGHT:
            named.add(q)
            rules.append((f"{prefix}:{q}", _expr(shape)))
            depths[f"{prefix}:{q}"] = depth
        else:
            shapes[q] = shape
    start = _expr(use(0))
    if measure(start, measures, depths)[2] > MAX_NESTING:
        raise TooDeep
    return start, rules


def _peel(states, outs: list[set[int]], ins: list[set[int]]) -> list[int]:
    """Kahn's order: repeatedly take a state none of whose ``outs`` (within ``states``) is left.

    With successors as ``outs`` it lists the states that reach no cycle, successors first; run
    again on the rest with the roles swapped, it lists those that merely lead into a cycle.
    """
    left = set(states)
    waiting = {q: len((outs[q] - {q}) & left) for q in left}
    order = [q for q in sorted(left) if not waiting[q]]
    for q in order:
        for p in ins[q]:
            if p in waiting and p != q:
                waiting[p] -= 1
                if not waiting[p]:
                    order.append(p)
    return order


@lru_cache(maxsize=1024)
def _bytes(symbols: tuple[int, ...]) -> Bytes:
    return byte_set(bytes(0x2E if s == _DOT else 0x30 + s for s in symbols))


def _state_shape(loop: Bytes | None, edges: list[tuple[Bytes, _Shape]], accepting: bool) -> _Shape:
    """A state's expression from its successors'. ``b rest | rest`` folds to ``b{0,k} rest``."""
    parts = ([EMPTY] if accepting else []) + [_expr(_prepend(b, s)) for b, s in edges]
    if loop is not None:
        return (loop, 0, None, alt(*parts))
    if len(parts) == 1 and edges:
        return _prepend(*edges[0])
    for i, (b, s) in enumerate(edges):
        merged = _prepend(b, s)
        rest = [p for j, p in enumerate(parts) if j != i + accepting]
        if merged[1] == 1 and merged[3] == alt(*rest):
            return (b, 0, merged[2], merged[3])
    return (None, 0, 0, alt(*parts))


def _prepend(b: Bytes, s: _Shape) -> _Shape:
    """``b`` then ``s``: one more repetition when ``s`` repeats ``b``."""
    rb, lo, hi, rest = s
    if rb is None or lo == hi == 0:
        return (b, 1, 1, rest)
    if rb == b:
        return (b, lo + 1, None if hi is None else hi + 1, rest)
    return (b, 1, 1, _expr(s))


def _expr(shape: _Shape) -> Expr:
    b, lo, hi, rest = shape
    if b is None or lo == hi == 0:
        return rest
    return seq(b if lo == hi == 1 else Repeat(b, lo, hi), rest)
