"""A magnitude range without ``multipleOf`` (or stepped by ``10**-k``), written straight as IR.

``numeric`` cuts a range of magnitudes into pieces by the length of the integer part. In a piece
of fixed length the integer digits are compared with a bound's digits one position at a time:
while they equal the bound's the comparison stays *tight*; the first digit past it settles it,
and what follows is free (``[0-9]{k}`` and any fraction). Where the integer part ends tight, its
fraction is compared with the bound's fraction the same way, padded with zeros (``1.50`` is 1.5).
Written out, every tight position is a rung: the digits that settle the comparison, each followed
by its free tail, and the digit that keeps it tight, followed by the next rung. That is the shape
of the range's minimal DFA, so nothing is explored or minimized: a new range costs a few dozen
microseconds, where exploring its DFA cost a fraction of a millisecond (a ``multipleOf`` other
than ``10**-k`` still goes that way in ``numeric``: its residues are states that a ladder has no
place for; ``10**-k`` only lets zeros follow the first ``k`` fraction digits).

Runs of forced digits (the zeros of ``maximum: 1e308``) are one ``Repeat``; a rung that nests past
``nesting.MAX_HEIGHT`` becomes a named rule, and a ladder past ``nesting.MAX_NESTING`` raises
``TooDeep``, as the DFA route does.
"""

from __future__ import annotations

from ...ir import EMPTY, Expr, Ref, Repeat, alt, byte_range, literal, seq
from .nesting import MAX_HEIGHT, MAX_NESTING, TooDeep, measure

_DIGITS = tuple(byte_range(0x30 + d) for d in range(10))
_ANY_DIGIT = byte_range(0x30, 0x39)
_NONZERO = byte_range(0x31, 0x39)
_POINT = literal(".")

# A fraction tracker: ``None`` once the comparison with the bound's fraction is settled in the
# range's favour, else ``(digits of the bound's fraction still to match, exclusive)``. The
# trackers ``("", True)`` (a lower bound matched exactly: some later digit must be nonzero) and
# ``("", False)`` (an upper bound matched exactly: every later digit must be zero) stay put.
_NONZERO_LEFT = ("", True)
_ZEROS_LEFT = ("", False)
_OPEN = object()  # no closed form: the state is a rung


class Ladders:
    """The pieces of one range, as IR; rules named ``<name>/...`` where a ladder nests too deep.

    ``low`` and ``high`` are ``numeric``'s bounds (canonical integer digits, fraction digits
    without trailing zeros, exclusive). ``max_fraction`` caps the fraction's digits (``None``:
    any number). ``scale``, for ``multipleOf: 10**-scale``, lets only zeros follow the first
    ``scale`` fraction digits. ``rules`` collects the named rules of every piece built.
    """

    def __init__(self, name: str, low, high, fraction: bool, max_fraction: int | None, scale: int | None = None):
        self.name = name
        self.fraction = fraction
        self.max_fraction = max_fraction
        self.scale = scale
        low_fraction = (low.fraction, low.exclusive)
        self.low_fraction = None if low_fraction == _ZEROS_LEFT else low_fraction
        self.high_fraction = None if high is None else (high.fraction, high.exclusive)
        self.rules: list[tuple[str, Expr]] = []
        self.measures: dict = {}
        self.depths: dict[str, int] = {}
        self.fractions: dict[tuple, Expr | None] = {}
        self.tails: dict[tuple[bool, bool], Expr | None] = {}
        # A bound whose fraction constrains nothing (an inclusive integer lower bound; an upper
        # bound where no fraction can be written): past its digits, its trailing zeros (or nines)
        # settle nothing, and the comparison is free as soon as they are all that is left.
        self.low_loose = self.low_fraction is None
        self.high_loose = self.high_fraction in (None, _ZEROS_LEFT) and not (fraction and max_fraction != 0)

    def piece(self, piece, index: int) -> Expr | None:
        """``numeric._Piece`` as IR; ``None`` when no magnitude of it is in range."""
        if piece.low is None and piece.high is None:  # the length alone puts it inside
            least, most = piece.min_len - 1, None if piece.max_len is None else piece.max_len - 1
            return seq(_NONZERO, _repeat(_ANY_DIGIT, least, most), self.tail(False, False))
        expr = self.integer(piece.low, piece.high, f"{self.name}/{index}", 0, piece.low is not None,
                            piece.high is not None, 0)  # fmt: skip
        if expr is not None and measure(expr, self.measures, self.depths)[2] > MAX_NESTING:
            raise TooDeep
        return expr

    def integer(self, low: str | None, high: str | None, prefix: str, pos: int, lo: bool, hi: bool, depth: int):
        """The integer digits from ``pos`` on, tight on ``low`` and/or ``high`` as ``lo``, ``hi`` say."""
        n = len(low or high)
        run = []
        while True:
            if pos == n:
                body = self.tail(lo, hi)
                break
            if not lo and not hi:
                body = seq(_repeat(_ANY_DIGIT, n - pos, n - pos), self.tail(False, False))
                break
            options = []
            for d in range(1 if pos == 0 and n > 1 else 0, 10):
                state = self.integer_step(low, high, pos, lo, hi, d)
                if state is not None:
                    _add(options, d, state)
            if len(options) == 1 and options[0][0] == options[0][1]:  # forced
                run.append((options[0][0], False))
                lo, hi = options[0][2]
                pos += 1
                continue
            if depth > MAX_NESTING:
                raise TooDeep
            parts = []
            for first, last, state in options:
                rest = self.integer(low, high, prefix, pos + 1, *state, depth + 1)
                if rest is not None:
                    parts.append(seq(byte_range(0x30 + first, 0x30 + last), rest))
            body = self.cut(alt(*parts), f"{prefix}:{pos}{'l' * lo}{'h' * hi}") if parts else None
            break
        return _steps(run, body)

    def integer_step(self, low: str | None, high: str | None, pos: int, lo: bool, hi: bool, d: int):
        if lo:
            bound = ord(low[pos]) - 0x30
            if d < bound:
                return None
            lo = d == bound and not (self.low_loose and not low[pos + 1 :].strip("0"))
        if hi:
            bound = ord(high[pos]) - 0x30
            if d > bound:
                return None
            hi = d == bound and not (self.high_loose and not high[pos + 1 :].strip("9"))
        return lo, hi

    def tail(self, lo: bool, hi: bool) -> Expr | None:
        """What follows an integer part tight on the bounds as ``lo``, ``hi`` say: no fraction, or one."""
        if (lo, hi) not in self.tails:
            low = self.low_fraction if lo else None
            high = self.high_fraction if hi else None
            parts = [EMPTY] if low is None else []
            if high == _NONZERO_LEFT:  # the integer part equals an exclusive upper bound
                parts = []
            elif self.fraction:
                digits = self.fraction_digits(low, high, 1, self.max_fraction, self.scale, 0)
                if digits is not None:
                    parts.append(seq(_POINT, digits))
            tail = alt(*parts) if parts else None
            if not lo and not hi and self.fraction:
                # every rung's free branch ends in it: as a rule, the lowering builds it once for all
                self.rules.append((f"{self.name}/any", tail))
                tail = Ref(f"{self.name}/any")
            self.tails[lo, hi] = tail
        return self.tails[lo, hi]

    def fraction_digits(self, low, high, need: int, most: int | None, left: int | None, depth: int):
        """Fraction digits, at least ``need`` and at most ``most``, within the trackers ``low``, ``high``;
        after ``left`` more of them only zeros (``None``: any digits)."""
        key = (low, high, need, most, left)
        if key not in self.fractions:
            run = []  # digits that are the only way on, and whether the fraction may end before each
            while True:
                body = _closed(low, high, need, most, left)
                if body is not _OPEN:
                    break
                options = []
                for d in range(10):
                    state = _fraction_step(low, high, d)
                    if state is not None:
                        _add(options, d, state)
                if len(options) == 1 and options[0][0] == options[0][1]:
                    run.append((options[0][0], need == 0 and low is None))
                    low, high = options[0][2]
                    need, most, left = 0, _less(most), _less(left)
                    continue
                body = self.fraction_rung(low, high, need, most, left, options, depth)
                break
            self.fractions[key] = _steps(run, body)
        return self.fractions[key]

    def fraction_rung(self, low, high, need: int, most: int | None, left: int | None, options, depth: int):
        key = ("rung", low, high, need, most, left)  # forced runs from different states can meet here
        if key not in self.fractions:
            if depth > MAX_NESTING:
                raise TooDeep
            parts = [EMPTY] if need == 0 and low is None else []
            for first, last, state in options:
                rest = self.fraction_digits(*state, 0, _less(most), _less(left), depth + 1)
                if rest is not None:
                    parts.append(seq(byte_range(0x30 + first, 0x30 + last), rest))
            name = f"{self.name}/f:{_tracker(low)},{_tracker(high)},{need},{most},{left}"
            self.fractions[key] = self.cut(alt(*parts), name) if parts else None
        return self.fractions[key]

    def cut(self, expr: Expr, name: str) -> Expr:
        """``expr``, or a rule named ``name`` holding it when it nests past ``MAX_HEIGHT``."""
        _, height, depth = measure(expr, self.measures, self.depths)
        if height <= MAX_HEIGHT:
            return expr
        self.rules.append((name, expr))
        self.depths[name] = depth
        return Ref(name)


def _add(options: list, d: int, state) -> None:
    """Digits in order, consecutive ones that lead to the same state as one ``[first-last]``."""
    if options and options[-1][2] == state and options[-1][1] == d - 1:
        options[-1] = (options[-1][0], d, state)
    else:
        options.append((d, d, state))


def _fraction_step(low, high, d: int):
    """The trackers after fraction digit ``d``; ``None`` when it leaves the range."""
    if low is not None:
        digits, exclusive = low
        bound = ord(digits[0]) - 0x30 if digits else 0
        if d < bound:
            return None
        low = (digits[1:], exclusive) if d == bound else None
        if low == _ZEROS_LEFT:
            low = None
    if high is not None:
        digits, exclusive = high
        bound = ord(digits[0]) - 0x30 if digits else 0
        if d > bound:
            return None
        high = (digits[1:], exclusive) if d == bound else None
        if high == _NONZERO_LEFT:  # equal to an exclusive upper bound, and nothing is below it
            return None
    return low, high


def _closed(low, high, need: int, most: int | None, left: int | None):
    """The states that repeat themselves, as expressions; ``_OPEN`` for a rung."""
    if most == 0:
        return EMPTY if need == 0 and low is None else None
    if left == 0 or (low is None and high == _ZEROS_LEFT):  # zeros only: worth nothing
        return _repeat(_DIGITS[0], need, most) if low is None else None
    if low is None and high is None:
        if left is None or (most is not None and most <= left):
            return _repeat(_ANY_DIGIT, need, most)
        zeros = _repeat(_DIGITS[0], 1, _less(most, left))
        return alt(_repeat(_ANY_DIGIT, need, left), seq(_repeat(_ANY_DIGIT, left, left), zeros))
    if low == _NONZERO_LEFT and high == _ZEROS_LEFT:
        return None
    if low == _NONZERO_LEFT and high is None and most is None and left is None:
        return seq(Repeat(_DIGITS[0], 0, None), _NONZERO, Repeat(_ANY_DIGIT, 0, None))
    return _OPEN


def _less(count: int | None, by: int = 1) -> int | None:
    """A count of digits still allowed, after ``by`` more (``None``: no limit)."""
    return None if count is None else count - by


def _tracker(t) -> str:
    return "*" if t is None else t[0] + ("<" if t[1] else "=")


def _repeat(b: Expr, least: int, most: int | None) -> Expr:
    """``b{least,most}``; ``b`` itself for one, nothing for none. The lowering builds a ``Repeat``
    of one as a repetition: in a free piece that cost 600 states more on one corpus schema."""
    if most == 0:
        return EMPTY
    return b if least == most == 1 else Repeat(b, least, most)


def _steps(steps: list[tuple[int, bool]], body: Expr | None) -> Expr | None:
    """``steps`` (a digit, and whether the text may end before it), then ``body`` (``None``: nothing).

    A run of one digit is a repetition, not a node per digit: ``0{292}`` where every step is
    forced, ``0{0,k-1} | 0{k} body`` where the text may end before each (the fraction of
    ``maximum: 5e-324`` may stop at any of its 323 zeros). So a long run nests two levels at most.
    """
    expr = body
    end = len(steps)
    while end:
        start = end - 1
        while start and steps[start - 1] == steps[end - 1]:
            start -= 1
        digit, may_end = steps[end - 1]
        b, k = _DIGITS[digit], end - start
        block = _repeat(b, k, k)
        if may_end:
            shorter = _repeat(b, 0, k - 1)
            expr = shorter if expr is None else alt(shorter, seq(block, expr))
        elif expr is not None:
            expr = seq(block, expr)
        end = start
    return expr
