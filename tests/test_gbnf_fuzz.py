"""GBNF fuzzing. The invariants, as h11's fuzzers state theirs:

1. Any text given to ``compile_gbnf`` compiles or raises ``GrammarError`` (whose line and
   column, when given, lie inside the text), in bounded time; nothing else escapes.
2. A grammar without recursion means what the same expression means to Python's ``re``:
   the compiled automaton accepts exactly the strings ``re.fullmatch`` does.

Hypothesis prints the failing example and the seed to reproduce it.
"""

from __future__ import annotations

import re
import time

import pytest
from conftest import corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay import limits
from llamay.errors import GrammarError, LlamayError
from llamay.gbnf import compile_gbnf, parse_gbnf

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
    assert time.monotonic() - start < 3 * limits.COMPILE_SECONDS


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


# --- invariant 2: GBNF against Python's re, on grammars without recursion --------------------

CHARS = "abé"
# Helper rules a leaf may reference (one nullable), with the regex each one means.
HELPERS = 'h ::= "ab" | "é"\nn ::= "b"?'
HELPER_REFS = [("h", "(?:ab|é)"), ("n", "(?:b)?")]


def leaves():
    literal = st.text(alphabet=CHARS, max_size=3).map(lambda s: ('"' + s + '"', re.escape(s)))
    members = st.sets(st.sampled_from("abcé"), min_size=1, max_size=3).map(sorted)
    klass = st.tuples(members, st.booleans()).map(
        lambda c: ("[" + "^" * c[1] + "".join(c[0]) + "]", "[" + "^" * c[1] + "".join(map(re.escape, c[0])) + "]")
    )
    return st.one_of(literal, klass, st.just((".", ".")), st.sampled_from(HELPER_REFS))


def compounds(children):
    def group(parts, sep_gbnf, sep_re):
        return "(" + sep_gbnf.join(g for g, _ in parts) + ")", "(?:" + sep_re.join(r for _, r in parts) + ")"

    # small counts are unrolled into states, large ones run on frame counters
    bounds = st.one_of(st.integers(0, 3), st.integers(30, 70))
    counts = st.tuples(bounds, bounds).flatmap(
        lambda b: st.sampled_from([f"{{{min(b)}}}", f"{{{min(b)},}}", f"{{{min(b)},{max(b)}}}"])
    )
    op = st.one_of(st.sampled_from(["*", "+", "?"]), counts)
    return st.one_of(
        st.lists(children, min_size=1, max_size=3).map(lambda p: group(p, " ", "")),
        st.lists(children, min_size=2, max_size=3).map(lambda p: group(p, " | ", "|")),
        st.tuples(children, op).map(lambda x: ("(" + x[0][0] + ")" + x[1], "(?:" + x[0][1] + ")" + x[1])),
    )


short = st.text(alphabet=CHARS, max_size=7)
runs = st.tuples(st.text(alphabet=CHARS, min_size=1, max_size=3), st.integers(0, 80)).map(lambda r: r[0] * r[1])


@FUZZ
@given(st.recursive(leaves(), compounds, max_leaves=8), st.lists(st.one_of(short, runs), min_size=1, max_size=12))
def test_grammar_without_recursion_accepts_what_re_accepts(expr, samples):
    matcher_cls = core().Matcher
    gbnf, regex = expr
    grammar = compile_gbnf(f"root ::= {gbnf}\n{HELPERS}")
    for s in samples:
        m = matcher_cls(grammar)
        got = m.accept_bytes(s.encode()) and m.is_accepting()
        assert got == bool(re.fullmatch(regex, s, re.DOTALL)), (gbnf, regex, s)
