"""Hypothesis strategies for random IR grammars, and their translation to Python regexes."""

from __future__ import annotations

import re

from hypothesis import strategies as st

from llamay import ir

ALPHABET = b'ab{}" :,\n'
_byte = st.sampled_from(list(ALPHABET))


def _bytes_expr():
    return st.one_of(
        st.builds(lambda bs: ir.byte_set(bytes(bs)), st.lists(_byte, min_size=1, max_size=3)),
        st.builds(lambda bs: ir.literal(bytes(bs)), st.lists(_byte, min_size=1, max_size=3)),
        st.just(ir.literal("é")),  # a multi-byte character
        st.just(ir.whitespace(b" \n")),
    )


_BOUNDS = st.sampled_from([(0, 1), (0, None), (1, None), (2, 3), (0, 5), (3, None), (1, 40), (0, 80), (2, 90)])


def exprs(*, refs: bool):
    leaves = _bytes_expr() | st.just(ir.EMPTY)
    if refs:
        leaves = leaves | st.just(ir.Ref("r"))
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.builds(lambda xs: ir.seq(*xs), st.lists(inner, min_size=1, max_size=4)),
            st.builds(lambda xs: ir.alt(*xs), st.lists(inner, min_size=1, max_size=3)),
            st.builds(lambda x, b: ir.Repeat(x, b[0], b[1]), inner, _BOUNDS),
        ),
        max_leaves=8,
    )


@st.composite
def grammars(draw, *, recursive: bool = True) -> ir.Grammar:
    """A root rule and (when ``recursive``) a rule ``r`` that may refer to itself."""
    g = ir.Grammar()
    g.define("root", draw(exprs(refs=recursive)))
    if recursive:
        g.define("r", ir.alt(draw(exprs(refs=True)), draw(_bytes_expr())))
    return g


def to_regex(expr: ir.Expr) -> bytes:
    """A Python regex for a non-recursive IR expression (the oracle for acceptance)."""
    if isinstance(expr, ir.Bytes):
        return b"[" + b"".join(re.escape(bytes([lo])) + b"-" + re.escape(bytes([hi])) for lo, hi in expr.ranges) + b"]"
    if isinstance(expr, ir.Seq):
        return b"".join(b"(?:" + to_regex(x) + b")" for x in expr.items)
    if isinstance(expr, ir.Alt):
        return b"(?:" + b"|".join(to_regex(x) for x in expr.items) + b")"
    if isinstance(expr, ir.Repeat):
        hi = b"" if expr.max is None else str(expr.max).encode()
        return b"(?:" + to_regex(expr.item) + b"){" + str(expr.min).encode() + b"," + hi + b"}"
    raise TypeError(expr)
