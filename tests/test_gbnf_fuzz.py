"""GBNF fuzzing. The invariants, as h11's fuzzers state theirs:

1. Any text given to ``compile_gbnf`` compiles or raises ``GrammarError`` (whose line and
   column, when given, lie inside the text), in bounded time; nothing else escapes.
2. A grammar without recursion accepts exactly the strings that a reference interpreter of
   the same expression accepts (sets of end positions: slow, but simple and never
   exponential, unlike Python's backtracking ``re`` on nested quantifiers).

Hypothesis prints the failing example and the seed to reproduce it.
"""

from __future__ import annotations

import time

import pytest
from conftest import corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay.errors import GrammarError, LlamayError
from llamay.grammars.gbnf import compile_gbnf, parse_gbnf
from llamay.options import DEFAULT

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Characters that mean something to GBNF, and a few that must be refused or are multi-byte.
ALPHABET = 'root::=|()[]^-"\\ \n\r\t#*+?{},.<>!_abxuU0179FéぁǄ😀\x00\u00a0'


def core():
    return pytest.importorskip("llamay._core.matcher", reason="the Cython core is not built")


def compile_or_refuse(text: str) -> None:
    """Invariant 1, and a matcher that starts and steps on whatever compiled."""
    target = compile_gbnf if core_built() else parse_gbnf
    start = time.monotonic()
    try:
        grammar = target(text)
    except GrammarError as err:
        lines = text.split("\n")
        if err.line is not None:
            assert 1 <= err.line <= len(lines), err
            assert err.column is not None and 1 <= err.column <= len(lines[err.line - 1]) + 1, err
        assert err.rule is None or isinstance(err.rule, str)
    else:
        if target is compile_gbnf:
            matcher = core().Matcher(grammar)
            try:
                assert matcher.accept_bytes(text.encode("utf-8", "replace")[:64]) in (True, False)
            except LlamayError as err:  # the matcher's own bound on ambiguity, named as such
                assert "MAX_CONFIGURATIONS" in str(err)
    assert time.monotonic() - start < 3 * DEFAULT.limits.compile_seconds


def core_built() -> bool:
    try:
        import llamay._core.matcher  # noqa: F401
    except ImportError:
        return False
    return True


@FUZZ
@given(st.text(alphabet=ALPHABET, max_size=120))
def test_random_text_compiles_or_is_refused(text):
    compile_or_refuse(text)


@FUZZ
@given(st.text(alphabet=ALPHABET, max_size=120))
def test_random_rule_body_compiles_or_is_refused(body):
    compile_or_refuse("root ::= " + body)


@pytest.fixture(scope="module")
def corpus_texts() -> list[str]:
    return [p.read_text(encoding="utf-8") for p in sorted(corpus("gbnf", "llama.cpp").glob("*.gbnf"))]


@st.composite
def mutations(draw, texts: list[str]) -> str:
    """A corpus grammar with a few spans deleted, duplicated or replaced by GBNF characters."""
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        kind = draw(st.sampled_from(["delete", "duplicate", "replace"]))
        if kind == "delete":
            text = text[:i] + text[j:]
        elif kind == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i] + draw(st.text(alphabet=ALPHABET, min_size=1, max_size=4)) + text[j:]
    return text


@FUZZ
@given(data=st.data())
def test_mutated_corpus_grammar_compiles_or_is_refused(corpus_texts, data):
    compile_or_refuse(data.draw(mutations(corpus_texts)))


# --- invariant 2: GBNF against a reference interpreter, on grammars without recursion ----------

CHARS = "abé"
# Expressions are tuples: ("lit", text), ("class", members, negated), ("dot",), ("ref", name),
# ("seq", items), ("alt", items), ("rep", item, min, max). HELPERS are rules a leaf may use.
HELPERS = {"h": ("alt", (("lit", "ab"), ("lit", "é"))), "n": ("rep", ("lit", "b"), 0, 1)}


def gbnf(e) -> str:
    kind = e[0]
    if kind == "lit":
        return '"' + e[1] + '"'
    if kind == "class":
        return "[" + "^" * e[2] + "".join(e[1]) + "]"
    if kind == "dot":
        return "."
    if kind == "ref":
        return e[1]
    if kind in ("seq", "alt"):
        return "(" + (" " if kind == "seq" else " | ").join(map(gbnf, e[1])) + ")"
    op = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((e[2], e[3]))
    if op is None:
        op = f"{{{e[2]},}}" if e[3] is None else f"{{{e[2]},{e[3]}}}"
    return "(" + gbnf(e[1]) + ")" + op


def ends(e, s: str, i: int, memo: dict) -> frozenset[int]:
    """Every position where a match of ``e`` that starts at ``i`` can end."""
    key = (id(e), i)
    if key not in memo:
        memo[key] = frozenset(_ends(e, s, i, memo))
    return memo[key]


def _ends(e, s: str, i: int, memo: dict) -> set[int]:
    kind = e[0]
    if kind == "lit":
        return {i + len(e[1])} if s.startswith(e[1], i) else set()
    if kind == "class":
        return {i + 1} if i < len(s) and (s[i] in e[1]) != e[2] else set()
    if kind == "dot":
        return {i + 1} if i < len(s) else set()
    if kind == "ref":
        return set(ends(HELPERS[e[1]], s, i, memo))
    if kind == "alt":
        return set().union(*(ends(x, s, i, memo) for x in e[1]))
    if kind == "seq":
        cur = {i}
        for x in e[1]:
            cur = set().union(*(ends(x, s, p, memo) for p in cur))
        return cur
    item, lo, hi = e[1], e[2], e[3]
    cur = {i}
    for _ in range(lo):  # the mandatory copies
        cur = set().union(*(ends(item, s, p, memo) for p in cur))
    # Then the optional ones. A position already reached was reached with fewer copies, so
    # more remain from it: only new positions need another step, and the loop ends.
    out, frontier, extra = cur, cur, 0
    while frontier and (hi is None or extra < hi - lo):
        frontier = set().union(*(ends(item, s, p, memo) for p in frontier)) - out
        out = out | frontier
        extra += 1
    return out


def leaves():
    literal = st.text(alphabet=CHARS, max_size=3).map(lambda t: ("lit", t))
    members = st.sets(st.sampled_from("abcé"), min_size=1, max_size=3).map(lambda m: tuple(sorted(m)))
    return st.one_of(
        literal,
        st.tuples(st.just("class"), members, st.booleans()),
        st.just(("dot",)),
        st.sampled_from([("ref", name) for name in HELPERS]),
    )


def compounds(children):
    # small counts are unrolled into states, large ones run on frame counters
    bound = st.one_of(st.integers(0, 3), st.integers(30, 70))
    bounds = st.tuples(bound, bound).flatmap(
        lambda b: st.sampled_from([(min(b), min(b)), (min(b), None), (min(b), max(b)), (0, None), (1, None), (0, 1)])
    )
    return st.one_of(
        st.lists(children, min_size=1, max_size=3).map(lambda x: ("seq", tuple(x))),
        st.lists(children, min_size=2, max_size=3).map(lambda x: ("alt", tuple(x))),
        st.tuples(children, bounds).map(lambda x: ("rep", x[0], *x[1])),
    )


short = st.text(alphabet=CHARS, max_size=7)
runs = st.tuples(st.text(alphabet=CHARS, min_size=1, max_size=3), st.integers(0, 80)).map(lambda r: r[0] * r[1])


@FUZZ
@given(st.recursive(leaves(), compounds, max_leaves=8), st.lists(st.one_of(short, runs), min_size=1, max_size=12))
def test_grammar_without_recursion_accepts_what_it_means(expr, samples):
    matcher_cls = core().Matcher
    text = "\n".join(f"{name} ::= {gbnf(e)}" for name, e in {"root": expr, **HELPERS}.items())
    grammar = compile_gbnf(text)
    for s in samples:
        m = matcher_cls(grammar)
        try:
            got = m.accept_bytes(s.encode()) and m.is_accepting()
        except LlamayError as err:
            # the matcher's bound on ambiguity, named: only nested repetitions hold that many
            # configurations (``(.{0,68}){0,63}`` reading 120 bytes: one per pair of counters)
            assert "MAX_CONFIGURATIONS" in str(err) and nests_repetition(expr, False), (text, s)
            continue
        assert got == (len(s) in ends(expr, s, 0, {})), (text, s)


def nests_repetition(e, inside: bool) -> bool:
    """Whether a repetition holds another (``inside``: ``e`` is within one)."""
    if e[0] == "rep":
        return inside or nests_repetition(e[1], True)
    if e[0] in ("seq", "alt"):
        return any(nests_repetition(x, inside) for x in e[1])
    return inside and e[0] == "ref" and e[1] == "n"  # HELPERS["n"] is a repetition
