"""Code-point classes as UTF-8 automata: exactly the encodings of their code points, continuation states shared."""

from __future__ import annotations

from itertools import pairwise

from feed import accepts
from hypothesis import given, settings
from hypothesis import strategies as st

from llamay import ir
from llamay.grammars.json_lexical import CHAR
from llamay.grammars.utf8 import ANY_CHAR, MAX_CODE_POINT, char_class

_CODE_POINTS = st.integers(0, MAX_CODE_POINT)


def _compiled(expr):
    g = ir.Grammar()
    g.define("root", expr)
    return g.compile()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(_CODE_POINTS, _CODE_POINTS).map(sorted), min_size=1, max_size=4),
    st.booleans(),
    st.lists(_CODE_POINTS, min_size=1, max_size=20),
)
def test_a_class_accepts_exactly_the_utf8_of_its_code_points(ranges, negated, probes):
    expr = char_class(ranges, negated=negated)
    if expr == ir.alt():  # no character at all (every code point negated, or surrogates only)
        assert all(0xD800 <= cp <= 0xDFFF or (any(lo <= cp <= hi for lo, hi in ranges) == negated) for cp in probes)
        return
    compiled = _compiled(expr)
    for cp in probes + [lo for lo, _ in ranges] + [hi for _, hi in ranges]:
        inside = any(lo <= cp <= hi for lo, hi in ranges) != negated
        encoded = chr(cp).encode("utf-8", "surrogatepass")
        assert accepts(compiled, encoded) == (inside and not 0xD800 <= cp <= 0xDFFF), hex(cp)
        assert not accepts(compiled, encoded[:-1])  # a character cut short is no character


def test_sequences_share_their_continuation_bytes():
    """No two states of "any character" (or a JSON string's character) behave alike: the
    branches of different lead bytes meet on shared continuation states instead of copies."""
    for expr in (ANY_CHAR, char_class(((0x20, 0x21), (0x23, 0x5B), (0x5D, MAX_CODE_POINT)))):
        compiled = _compiled(expr)
        assert len(set(compiled.state_classes.tolist())) == compiled.n_states
    assert _compiled(CHAR).n_states <= 25


def test_a_lead_byte_that_starts_two_sequences_keeps_one_edge():
    """``[U+1234-U+5678]`` starts two sequences with ``E1`` (and two with ``E5``): grouped by
    their last bytes they would leave two ``E1`` edges, two configurations after one byte."""
    compiled = _compiled(char_class(((0x1234, 0x5678),)))
    t = compiled.tables
    start = int(t["rule_start"][0])
    edges = range(t["b_start"][start], t["b_start"][start + 1])
    leads = [(int(t["b_lo"][e]), int(t["b_hi"][e])) for e in edges]
    assert all(a[1] < b[0] for a, b in pairwise(sorted(leads))), leads
