"""Code-point ranges as UTF-8 byte automata.

A class like ``[а-я]`` or "any character but ``"`` and ``\\``" must match complete UTF-8
characters byte by byte. Each code-point range is split until every piece encodes as one
sequence of per-byte ranges (the classic construction of RE2 and regex-automata).
Surrogates (U+D800..U+DFFF) are never produced.
"""

from __future__ import annotations

from itertools import pairwise

from ..ir import Bytes, Expr, alt, merge_ranges, seq

MAX_CODE_POINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
_LENGTH_LIMITS = (0x7F, 0x7FF, 0xFFFF, MAX_CODE_POINT)


def negate(ranges) -> tuple[tuple[int, int], ...]:
    """The code points outside ``ranges``."""
    out, nxt = [], 0
    for lo, hi in merge_ranges(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return tuple(out)


def _encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8", "surrogatepass")


def _split(lo: int, hi: int, out: list[list[tuple[int, int]]]) -> None:
    if lo > hi:
        return
    if lo <= _SURROGATES[1] and hi >= _SURROGATES[0]:
        _split(lo, _SURROGATES[0] - 1, out)
        _split(_SURROGATES[1] + 1, hi, out)
        return
    for limit in _LENGTH_LIMITS[:-1]:
        if lo <= limit < hi:
            _split(lo, limit, out)
            _split(limit + 1, hi, out)
            return
    if hi <= 0x7F:
        out.append([(lo, hi)])
        return
    n = len(_encode(lo))
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m:
                _split(lo, lo | m, out)
                _split((lo | m) + 1, hi, out)
                return
            if hi & m != m:
                _split(lo, (hi & ~m) - 1, out)
                _split(hi & ~m, hi, out)
                return
    a, b = _encode(lo), _encode(hi)
    out.append([(a[k], b[k]) for k in range(n)])


def byte_sequences(ranges) -> list[list[tuple[int, int]]]:
    """Each code-point range as sequences of inclusive byte ranges."""
    out: list[list[tuple[int, int]]] = []
    for lo, hi in merge_ranges(ranges):
        _split(max(lo, 0), min(hi, MAX_CODE_POINT), out)
    return out


def char_class(ranges, *, negated: bool = False) -> Expr:
    """One complete UTF-8 character in (or, ``negated``, outside) the code-point ``ranges``."""
    if negated:
        ranges = negate(ranges)
    seqs = byte_sequences(ranges)
    leads = sorted(s[0] for s in seqs)
    return _branches(seqs, share_tails=all(a[1] < b[0] for a, b in pairwise(leads)))


def _branches(seqs: list[list[tuple[int, int]]], share_tails: bool) -> Expr:
    """Byte-range sequences as one alternative; with ``share_tails``, branches share their common last bytes.

    ``E1-EC 80-BF 80-BF | EE-EF 80-BF 80-BF | ...`` becomes ``(E1-EC | EE-EF | ...) 80-BF 80-BF``:
    lowering shares prefixes, not suffixes, so written flat every branch would get its own
    continuation states (20 for a JSON string's raw character instead of 9). Same language;
    only where no two sequences share a lead byte, so that the branches stay deterministic
    (``E1 88 B4-BF | E1 89-BF 80-BF`` grouped apart would leave two ``E1`` edges).
    """
    single = [s[0] for s in seqs if len(s) == 1]
    parts: list[Expr] = [Bytes(merge_ranges(single))] if single else []
    longer = [s for s in seqs if len(s) > 1]
    if share_tails:
        by_last: dict[tuple[int, int], list[list[tuple[int, int]]]] = {}
        for s in longer:
            by_last.setdefault(s[-1], []).append(s[:-1])
        parts.extend(seq(_branches(heads, True), Bytes((last,))) for last, heads in by_last.items())
    else:
        parts.extend(seq(*(Bytes((r,)) for r in s)) for s in longer)
    return alt(*parts) if parts else alt()


ANY_CHAR = char_class(((0, MAX_CODE_POINT),))
