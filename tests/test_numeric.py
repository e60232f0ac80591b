"""Exact numeric bounds (``llamay.grammars.jsonschema.numeric``): every spelling against Python's own comparison.

The oracle admits a spelling exactly when it is a plain JSON number (canonical integer part, an
optional fraction for numbers, no exponent) whose value, compared as a ``Fraction``, lies in the
range and is a multiple of the step. Ranges are checked exhaustively over every integer in
[-1000, 1000] and a grid of decimals, with hypothesis over bounds and spellings, at huge bounds
by their edges and by the size of the automaton, and on a real vocabulary through the token mask.
"""

from __future__ import annotations

import re
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamay import Matcher as VocabMatcher
from llamay import allocate_bitmask, ir
from llamay._core.matcher import Matcher
from llamay.grammars.jsonschema import numeric
from llamay.grammars.jsonschema.numeric import NotExact, integer_range, number_range, supported_multiple

D = Decimal
PLAIN_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
PLAIN_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")

#: Spellings no range admits: JSON's refusals, and exponents, which a bound never admits.
NEVER = ["", "-", "+1", "01", "-01", "00", "1.", ".5", "-.5", "1e1", "1E1", "1e+1", "10e0", "1.0e1", " 1", "1 ", "0x1"]


def compile_range(build):
    """``(compiled, grammar)`` for the expression ``build(grammar)`` returns, as the root."""
    g = ir.Grammar()
    expr = build(g)
    assert expr is not None
    g.define("root", expr)
    return g.compile("root"), g


class Checker:
    """One matcher, reset per spelling: ``admits(text)`` is all of the bytes taken, then accepting."""

    def __init__(self, compiled) -> None:
        self.m = Matcher(compiled)

    def admits(self, text: str) -> bool:
        self.m.reset()
        return self.m.accept_bytes(text.encode()) and self.m.is_accepting()


def integer_oracle(text: str, lo, hi, step: int) -> bool:
    if not PLAIN_INTEGER.fullmatch(text):
        return False
    n = int(text)
    return (lo is None or lo <= n) and (hi is None or n <= hi) and n % step == 0


def number_oracle(text: str, lo, lo_ex, hi, hi_ex, step) -> bool:
    if not PLAIN_NUMBER.fullmatch(text):
        return False
    x = Fraction(Decimal(text))
    if lo is not None and (x < lo or (lo_ex and x == lo)):
        return False
    if hi is not None and (x > hi or (hi_ex and x == hi)):
        return False
    return step is None or x % Fraction(step) == 0


# ---------------------------------------------------------------------------------------
# Integers: every integer in [-1000, 1000], longer ones, and the refused spellings
# ---------------------------------------------------------------------------------------

INTEGER_RANGES = {
    "unbounded-is-every-json-integer": (None, None, 1),
    "inside-positive": (0, 100, 1),
    "crossing-zero": (-37, 504, 1),
    "negative-only": (-999, -10, 1),
    "single-value": (42, 42, 1),
    "only-zero": (0, 0, 1),
    "lower-bound-only": (-5, None, 1),
    "upper-bound-only": (None, 10, 1),
    "bounds-with-equal-lengths": (123, 456, 1),
    "unbounded-multiples-of-7": (None, None, 7),
    "multiples-of-7-in-a-symmetric-range": (-100, 100, 7),
    "multiples-of-60-crossing-zero": (-990, 721, 60),
    "multiples-of-1000-from-zero": (0, None, 1000),
    "multiples-of-13-below-a-bound": (None, 500, 13),
    "bounds-that-are-not-multiples": (-101, 99, 4),
}
LONG_INTEGERS = [s * (10**k + d) for k in range(3, 9) for d in (-1, 0, 1) for s in (1, -1)]


@pytest.mark.parametrize("case", INTEGER_RANGES, ids=list(INTEGER_RANGES))
def test_integer_range_admits_exactly_the_integers_in_range(case):
    lo, hi, step = INTEGER_RANGES[case]
    check = Checker(compile_range(lambda g: integer_range(g, lo, hi, step))[0])
    texts = [str(n) for n in [*range(-1000, 1001), *LONG_INTEGERS]] + ["-0", "1.0", "0.0", *NEVER]
    wrong = [t for t in texts if check.admits(t) != integer_oracle(t, lo, hi, step)]
    assert not wrong


# ---------------------------------------------------------------------------------------
# Numbers: a grid of spellings (trailing zeros, -0, fractions near the bounds)
# ---------------------------------------------------------------------------------------

NUMBER_RANGES = {
    "open-interval-above-zero": ("0", True, None, False, None),
    "fractional-bounds-half-open": ("0.5", False, "2.25", True, None),
    "exclusive-both-around-zero": ("-1.5", True, "1.5", True, None),
    "point-interval-bound-with-trailing-zeros": ("1.50", False, "1.5", False, None),
    "negative-fractional-bounds": ("-3.125", False, "-0.5", False, None),
    "exclusive-upper-zero": (None, False, "0", True, None),
    "bounds-with-equal-integer-parts": ("7.25", True, "7.5", False, None),
    "whole-numbers-as-numbers": ("-3.5", False, "12", True, "1"),
    "tenths-above-an-exclusive-bound": ("0.25", True, None, False, "0.1"),
    "upper-fraction-after-zeros": ("0", False, "0.0005", False, None),
    "exclusive-lower-fraction-after-zeros": ("0.001", True, "3", False, None),
    "cents-with-bounds": ("0", False, "10", False, "0.01"),
    "quarters-crossing-zero": ("-2", True, "2", False, "0.25"),
    "multiples-of-1.5-above-a-bound": ("-3", False, None, False, "1.5"),
    "multiples-of-7-as-numbers": ("-50", False, "50", False, "7"),
    "thousandths-unbounded": (None, False, None, False, "0.001"),
}
INTEGER_PARTS = ["0", "1", "2", "3", "7", "10", "49", "50", "51", "1000"]
FRACTIONS = ["", ".0", ".00", ".1", ".10", ".125", ".1250", ".2", ".25", ".250", ".3", ".5", ".50", ".75", ".01",
             ".49", ".499", ".51", ".001", ".0001", ".999", ".3333"]  # fmt: skip
NUMBER_GRID = [s + i + f for s in ("", "-") for i in INTEGER_PARTS for f in FRACTIONS]


@pytest.mark.parametrize("case", NUMBER_RANGES, ids=list(NUMBER_RANGES))
def test_number_range_admits_exactly_the_values_in_range(case):
    lo, lo_ex, hi, hi_ex, step = NUMBER_RANGES[case]
    lo, hi, step = (None if v is None else D(v) for v in (lo, hi, step))
    check = Checker(compile_range(lambda g: number_range(g, lo, lo_ex, hi, hi_ex, step))[0])
    wrong = [t for t in NUMBER_GRID + NEVER if check.admits(t) != number_oracle(t, lo, lo_ex, hi, hi_ex, step)]
    assert not wrong


# ---------------------------------------------------------------------------------------
# Hypothesis: bounds, steps and spellings drawn at random
# ---------------------------------------------------------------------------------------

STEPS = [1, 2, 3, 5, 7, 10, 12, 13, 25, 60, 100, 125, 1000]


def spellings(n: int) -> list[str]:
    """The canonical spelling of ``n`` and the near misses a model could write."""
    text = str(n)
    digits = text.lstrip("-")
    sign = text[: len(text) - len(digits)]
    return [text, f"{sign}0{digits}", f"+{digits}", f"{text}.0", f"{text}e0", f"{text}.", "-0" if n == 0 else text]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_integer_range_matches_python_on_random_bounds(data):
    step = data.draw(st.sampled_from(STEPS))
    bound = st.integers(-(10**4), 10**4) if step > 1 else st.integers(-(2**70), 2**70)
    lo, hi = data.draw(st.none() | bound), data.draw(st.none() | bound)
    if lo is not None and hi is not None and lo > hi and data.draw(st.booleans()):
        lo, hi = hi, lo
    g = ir.Grammar()
    expr = integer_range(g, lo, hi, step)
    if expr is None:  # exactly when no multiple of the step lies between the bounds
        assert lo is not None and hi is not None and hi // step * step < lo
        return
    g.define("root", expr)
    check = Checker(g.compile("root"))
    near = [b + d for b in (lo, hi) if b is not None for d in range(-step - 1, step + 2)]
    values = near + data.draw(st.lists(bound, max_size=20)) + [0, 1, -1]
    texts = [t for n in values for t in spellings(n)]
    assert not [t for t in texts if check.admits(t) != integer_oracle(t, lo, hi, step)]


def decimals():
    """Bounds such as 0.5, -12.250 (trailing zeros kept in the spelling), 300."""
    return st.builds(lambda n, e: D(n).scaleb(-e), st.integers(-(10**5), 10**5), st.integers(0, 4))


def number_spellings(x: Decimal, pad: int) -> list[str]:
    """Plain spellings of ``x`` (with ``pad`` trailing zeros), its exponent form and near misses."""
    text = format(x, "f")
    point = "" if "." in text else "."
    out = [text, text + point + "0" * pad if pad else text, format(x, "e"), f"+{text.lstrip('-')}", text + point]
    if text.lstrip("-").startswith("0."):
        out.append(text.replace("0.", ".", 1))
    return out + (["-" + text.lstrip("-"), "-0.0"] if x == 0 else [])


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_number_range_matches_python_on_random_bounds(data):
    lo, hi = data.draw(st.none() | decimals()), data.draw(st.none() | decimals())
    lo_ex, hi_ex = data.draw(st.booleans()), data.draw(st.booleans())
    step = data.draw(st.sampled_from([None, "0.01", "0.25", "0.5", "1.5", "2", "0.001", "7", "0.3", "0.125"]))
    step = None if step is None else D(step)
    g = ir.Grammar()
    expr = number_range(g, lo, lo_ex, hi, hi_ex, step)
    tiny = [D(10) ** -k for k in range(0, 6)]
    values = [b + s * t for b in (lo, hi) if b is not None for t in tiny for s in (-1, 0, 1)]
    values += [*data.draw(st.lists(decimals(), max_size=15)), D(0), D("0.5"), D(-1)]
    if step is not None:
        values += [step * k for k in data.draw(st.lists(st.integers(-(10**4), 10**4), max_size=10))]
    texts = [t for x in values for t in number_spellings(x, data.draw(st.integers(0, 3)))]
    expected = {t: number_oracle(t, lo, lo_ex, hi, hi_ex, step) for t in texts}
    if expr is None:  # no number qualifies: not even the bounds' neighbourhood holds one
        assert lo is not None and hi is not None and not any(expected.values())
        return
    g.define("root", expr)
    check = Checker(g.compile("root"))
    assert not [t for t in texts if check.admits(t) != expected[t]]


# ---------------------------------------------------------------------------------------
# Digit caps: an unbounded side and the fraction end at the cap, which the bounds raise
# ---------------------------------------------------------------------------------------


def raised_caps(integer: int, fraction: int | None, bounds, step) -> tuple[int, int | None]:
    """The caps promised: one digit more than a bound spells on each side of the point, the step's fraction."""
    parts = [format(b.copy_abs(), "f").partition(".") for b in bounds if b is not None]  # abs() would round
    integer = max([integer] + [len(whole) + 1 for whole, _, _ in parts])
    if fraction is not None:
        scale = 0 if step is None else max(0, -step.normalize().as_tuple().exponent)
        fraction = max([fraction, scale] + [len(tail.rstrip("0")) + 1 for _, _, tail in parts])
    return integer, fraction


def within(text: str, caps: tuple[int, int | None]) -> bool:
    whole, _, tail = text.lstrip("-").partition(".")
    return len(whole) <= caps[0] and (caps[1] is None or len(tail) <= caps[1])


def assert_admits_exactly(g: ir.Grammar, expr, expected: dict[str, bool]) -> None:
    """The range admits exactly the texts ``expected`` marks; it is ``None`` only where none is marked."""
    if expr is None:
        assert not any(expected.values())
        return
    g.define("root", expr)
    check = Checker(g.compile("root"))
    assert not [t for t, admitted in expected.items() if check.admits(t) != admitted]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_capped_integer_range_matches_python_within_the_raised_cap(data):
    step = data.draw(st.sampled_from([1, 2, 3, 5, 10, 25, 1000]))
    bound = st.integers(-(10**4), 10**4)
    lo, hi = data.draw(st.none() | bound), data.draw(st.none() | bound)
    cap = data.draw(st.integers(1, 6))
    g = ir.Grammar()
    expr = integer_range(g, lo, hi, step, cap)
    caps = raised_caps(cap, None, [None if b is None else D(b) for b in (lo, hi)], None)
    near = [b + d for b in (lo, hi) if b is not None for d in range(-step - 1, step + 2)]
    powers = [s * (10**k + d) for k in range(9) for d in (-1, 0, step) for s in (1, -1)]
    texts = [t for n in near + powers + data.draw(st.lists(bound, max_size=20)) + [0, 1, -1] for t in spellings(n)]
    expected = {t: integer_oracle(t, lo, hi, step) and within(t, caps) for t in texts}
    assert_admits_exactly(g, expr, expected)


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_capped_number_range_matches_python_within_the_raised_caps(data):
    lo, hi = data.draw(st.none() | decimals()), data.draw(st.none() | decimals())
    lo_ex, hi_ex = data.draw(st.booleans()), data.draw(st.booleans())
    step = data.draw(st.sampled_from([None, "0.01", "0.25", "0.5", "1.5", "2", "0.001", "0.125"]))
    step = None if step is None else D(step)
    integer, fraction = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3))
    g = ir.Grammar()
    expr = number_range(g, lo, lo_ex, hi, hi_ex, step, integer, fraction)
    caps = raised_caps(integer, fraction, (lo, hi), step)
    tiny = [D(10) ** -k for k in range(0, 7)]
    values = [b + s * t for b in (lo, hi) if b is not None for t in tiny for s in (-1, 0, 1)]
    values += [*data.draw(st.lists(decimals(), max_size=15)), D(0), D("0.5"), D(-1)]
    values += [x.scaleb(k) for x in values[:6] for k in (-5, -2, 2, 5)]
    texts = [t for x in values for t in number_spellings(x, data.draw(st.integers(0, 3)))]
    expected = {t: number_oracle(t, lo, lo_ex, hi, hi_ex, step) and within(t, caps) for t in texts}
    assert_admits_exactly(g, expr, expected)


def long_decimals():
    """Bounds with up to 14 integer and 9 fraction digits, runs of zeros and nines among them."""
    digits = st.text("0123456789", min_size=1, max_size=14).map(lambda t: t.lstrip("0") or "0")
    runs = st.sampled_from(["", "0" * 6, "9" * 6, "0" * 20 + "1"])
    tails = st.text("0123456789", max_size=9)
    signs = st.sampled_from(["", "-"])
    return st.builds(lambda sign, whole, tail, run: D(f"{sign}{whole}.{tail}{run}0"), signs, digits, tails, runs)


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_ranges_stepped_by_a_power_of_ten_or_not_match_python_on_long_random_bounds(data):
    """Such a range is a ladder of digits, capped or not: long bounds, both sides exclusive or not."""
    lo, hi = data.draw(st.none() | long_decimals()), data.draw(st.none() | long_decimals())
    lo_ex, hi_ex = data.draw(st.booleans()), data.draw(st.booleans())
    step = data.draw(st.sampled_from([None, None, D("1"), D("0.1"), D("0.01"), D("0.001")]))
    capped = data.draw(st.booleans())
    integer, fraction = (data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4))) if capped else (None, None)
    g = ir.Grammar()
    expr = number_range(g, lo, lo_ex, hi, hi_ex, step, integer, fraction)
    caps = raised_caps(integer, fraction, (lo, hi), step) if capped else (10**6, None)
    tiny = [D(10) ** -k for k in (0, 1, 2, 3, 6, 9, 12, 25)]
    with localcontext(prec=80):  # a bound's neighbours, not rounded to the default 28 digits
        values = [b + s * t for b in (lo, hi) if b is not None for t in tiny for s in (-1, 0, 1)]
    values += [*data.draw(st.lists(long_decimals(), max_size=15)), D(0), D("0.5"), D(-1)]
    if step is not None:
        values += [step * k for k in data.draw(st.lists(st.integers(-(10**6), 10**6), max_size=10))]
    texts = [t for x in values for t in number_spellings(x, data.draw(st.integers(0, 3)))]
    expected = {t: number_oracle(t, lo, lo_ex, hi, hi_ex, step) and within(t, caps) for t in texts}
    assert_admits_exactly(g, expr, expected)


def test_a_capped_range_is_a_rule_of_its_own():
    g = ir.Grammar()
    capped, uncapped = integer_range(g, 0, None, 1, 3), integer_range(g, 0, None)
    assert capped != uncapped
    g.define("root", ir.alt(ir.seq(ir.literal("c"), capped), ir.seq(ir.literal("u"), uncapped)))
    check = Checker(g.compile("root"))
    assert check.admits("c999") and not check.admits("c1000") and check.admits("u" + "9" * 40)


# ---------------------------------------------------------------------------------------
# Empty ranges, huge bounds, what is refused
# ---------------------------------------------------------------------------------------

EMPTY_INTEGER_RANGES = {
    "crossed-bounds": (5, 4, 1),
    "no-multiple-of-7-in-1-to-6": (1, 6, 7),
    "no-multiple-of-7-in-negative-gap": (-6, -1, 7),
    "no-multiple-of-1000-between-thousands": (1001, 1999, 1000),
}


@pytest.mark.parametrize("case", EMPTY_INTEGER_RANGES, ids=list(EMPTY_INTEGER_RANGES))
def test_empty_integer_range_is_none(case):
    lo, hi, step = EMPTY_INTEGER_RANGES[case]
    assert integer_range(ir.Grammar(), lo, hi, step) is None


EMPTY_NUMBER_RANGES = {
    "open-point": ("0", True, "0", False, None),
    "half-open-point": ("1.5", False, "1.50", True, None),
    "crossed-bounds": ("2", False, "1.999", False, None),
    "no-cent-strictly-between-adjacent-cents": ("0.01", True, "0.02", True, "0.01"),
    "no-half-in-a-gap": ("0.1", False, "0.4", False, "0.5"),
    "no-multiple-of-7-between-0-and-7": ("0", True, "7", True, "7"),
}


@pytest.mark.parametrize("case", EMPTY_NUMBER_RANGES, ids=list(EMPTY_NUMBER_RANGES))
def test_empty_number_range_is_none(case):
    lo, lo_ex, hi, hi_ex, step = EMPTY_NUMBER_RANGES[case]
    step = None if step is None else D(step)
    assert number_range(ir.Grammar(), D(lo), lo_ex, D(hi), hi_ex, step) is None


INT64 = (-(2**63), 2**63 - 1)


def test_int64_bounds_are_exact_at_their_edges_and_stay_small():
    compiled, g = compile_range(lambda g: integer_range(g, *INT64))
    check = Checker(compiled)
    inside = [INT64[0], INT64[1], INT64[1] - 1, INT64[0] + 1, 0, 10**18, -(10**18), 9223372036854775799]
    outside = [INT64[1] + 1, INT64[0] - 1, 10**19, -(10**19), 9223372036854775810, 99999999999999999999]
    assert all(check.admits(str(n)) for n in inside)
    assert not any(check.admits(str(n)) for n in outside)
    assert compiled.n_states < 500 and len(g.rules) <= 6


Z = "0"


HUGE = {
    # (lo, lo exclusive, hi, hi exclusive), admitted spellings, refused spellings, most automaton states
    "plus-minus-1e308": (
        ("-1e308", False, "1e308", False),
        ["1" + Z * 308, "-" + "9" * 308 + ".5", "1" + Z * 308 + ".000"],
        ["1" + Z * 307 + "1", "1" + Z * 308 + ".0001", "1" + Z * 309],
        40,
    ),
    "float-max": (
        ("-1.7976931348623157e308", False, "1.7976931348623157e308", False),
        ["17976931348623157" + Z * 292, "-17976931348623156" + "9" * 292 + ".99"],
        ["17976931348623158" + Z * 292, "17976931348623157" + Z * 291 + "1"],
        400,
    ),
    "above-1e307": (
        ("1e307", False, None, False),
        ["1" + Z * 307, "5" * 400 + ".5"],
        ["9" * 307, "9" * 307 + ".9"],
        30,
    ),
    "up-to-the-smallest-double": (
        ("0", True, "5e-324", False),
        ["0." + Z * 323 + "5", "0." + Z * 323 + "4999"],
        ["0", "0." + Z * 323 + "51", "-0." + Z * 323 + "1"],
        40,
    ),
}


@pytest.mark.parametrize("case", HUGE, ids=list(HUGE))
def test_huge_bounds_are_exact_with_a_small_automaton(case):
    (lo, lo_ex, hi, hi_ex), admitted, refused, most = HUGE[case]
    lo, hi = D(lo), None if hi is None else D(hi)
    compiled, g = compile_range(lambda g: number_range(g, lo, lo_ex, hi, hi_ex))
    check = Checker(compiled)
    assert [t for t in admitted if not check.admits(t)] == []
    assert [t for t in refused if check.admits(t)] == []
    assert compiled.n_states <= most and len(g.rules) <= 8


def test_unbounded_multiple_is_a_residue_loop_of_a_few_rules():
    compiled, g = compile_range(lambda g: integer_range(g, None, None, 7))
    check = Checker(compiled)
    assert check.admits("7" * 100) and check.admits("-" + "7" * 99 + "0")  # 777...7 = 7 * 111...1
    assert not check.admits("7" * 99 + "1")
    assert len(g.rules) <= 12 and compiled.n_states < 120


NOT_EXACT = {
    "integer-bound-past-max-digits": (lambda g: integer_range(g, 10**401, None), "minimum"),
    "negative-integer-bound-past-max-digits": (lambda g: integer_range(g, None, -(10**401)), "maximum"),
    "fraction-bound-past-max-digits": (lambda g: number_range(g, D("1e-401"), False, None, False), "minimum"),
    "exclusive-1e308-branches-at-every-zero": (lambda g: number_range(g, D("1e308"), True, None, False), "minimum"),
    "the-same-below-minus-1e308-is-the-maximum": (lambda g: number_range(g, None, False, D("-1e308"), True), "maximum"),
    "unbounded-modulus-with-a-large-prime-factor": (lambda g: integer_range(g, None, None, 997), "multipleOf"),
    "int64-times-a-prime-modulus": (lambda g: integer_range(g, *INT64, 7), "multipleOf"),
    "unsupported-number-step": (lambda g: number_range(g, None, False, None, False, D("1001")), "multipleOf"),
}


@pytest.mark.parametrize("case", NOT_EXACT, ids=list(NOT_EXACT))
def test_too_large_to_be_exact_names_the_keyword_to_drop(case):
    build, keyword = NOT_EXACT[case]
    with pytest.raises(NotExact) as info:
        build(ir.Grammar())
    assert info.value.keyword == keyword


def test_inexact_for_large_bounds_goes_away_once_the_multiple_is_dropped():
    assert integer_range(ir.Grammar(), *INT64, 1) is not None


SUPPORTED = {
    "0.01": True, "2.5": True, "1000": True, "1E+3": True, "0.0007": True, "0.25": True,
    "1001": False, "2E+3": False, "1e-401": False, "0": False, "-1": False, "Infinity": False,
}  # fmt: skip


@pytest.mark.parametrize("step", SUPPORTED, ids=list(SUPPORTED))
def test_supported_multiple_is_m_times_a_power_of_ten_with_m_at_most_max_modulus(step):
    assert supported_multiple(D(step)) is SUPPORTED[step]


def test_multiple_of_outside_the_contract_is_a_value_error():
    with pytest.raises(ValueError):
        integer_range(ir.Grammar(), 0, 10, numeric.MAX_MODULUS + 1)


# ---------------------------------------------------------------------------------------
# Rules: deterministic, prefixed, shared by equal ranges, never colliding
# ---------------------------------------------------------------------------------------


def test_equal_ranges_share_their_rules_and_names_are_deterministic():
    numeric._magnitude_rules.cache_clear()
    g = ir.Grammar()
    first = integer_range(g, -100, 100, 7)
    names = set(g.rules)
    assert integer_range(g, -100, 100, 7) == first and set(g.rules) == names
    assert all(n.startswith("num:") for n in names)
    numeric._magnitude_rules.cache_clear()
    again = ir.Grammar()
    assert integer_range(again, -100, 100, 7) == first and set(again.rules) == names


def test_different_ranges_in_one_grammar_keep_their_own_meaning():
    g = ir.Grammar()
    parts = [
        ir.seq(ir.literal("a"), integer_range(g, 0, 9)),
        ir.seq(ir.literal("b"), integer_range(g, 10, 99, 3)),
        ir.seq(ir.literal("c"), number_range(g, D("0.5"), True, D(1), False)),
        ir.seq(ir.literal("d"), number_range(g, D("0.5"), False, D(1), False)),
    ]
    g.define("root", ir.alt(*parts))
    check = Checker(g.compile("root"))
    assert [check.admits(t) for t in ["a7", "a10", "b12", "b13", "c0.5", "c0.75", "d0.5", "d1.0", "d1.01"]] == [
        True, False, True, False, False, True, True, True, False,
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------
# The token mask on a real vocabulary
# ---------------------------------------------------------------------------------------

MASK_RANGES = {
    "multiples-of-7-crossing-zero": (lambda g: integer_range(g, -100, 100, 7), ["", "-", "4", "-9"]),
    "quarters-above-one-half": (lambda g: number_range(g, D("0.5"), True, D(10**6), False, D("0.25")),
                                ["", "0", "0.", "0.7", "12", "1000000"]),
}  # fmt: skip


@pytest.mark.parametrize("case", MASK_RANGES, ids=list(MASK_RANGES))
def test_mask_allows_a_token_iff_accept_token_succeeds(smollm2_vocab, case):
    build, prefixes = MASK_RANGES[case]
    compiled = compile_range(build)[0]
    mask = allocate_bitmask(smollm2_vocab.size)
    for prefix in prefixes:
        m = VocabMatcher(compiled, smollm2_vocab)
        assert m.accept_bytes(prefix.encode())
        m.fill_next_token_bitmask(mask)
        bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[: smollm2_vocab.size]
        stepped = np.zeros(smollm2_vocab.size, np.uint8)
        for token in range(smollm2_vocab.size):
            if m.accept_token(token):
                stepped[token] = 1
                m.rollback(1)
        assert stepped.any()
        np.testing.assert_array_equal(bits, stepped)
