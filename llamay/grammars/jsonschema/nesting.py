"""How deep a numeric range's expression may nest, and how to measure it.

The lowering walks an expression recursively and stops at its ``MAX_DEPTH`` (128); it also
measures a rule expanded in place recursively (two Python frames a level). A range's digit
automaton is a ladder that nests two levels per digit that branches, so the numeric compilers
cut it into named rules past ``MAX_HEIGHT`` and give up past ``MAX_NESTING``.
"""

from __future__ import annotations

from ...ir import Expr, Ref, Repeat

#: An inlined expression may nest this deep before it becomes a named rule, so that the lowering's
#: ``MAX_DEPTH`` (128) is never reached.
MAX_HEIGHT = 32

#: Nesting of a range's expression with every rule it names expanded in place, before ``NotExact``.
#: Each bound digit that branches nests two levels (int64 bounds 40, ``DECIMAL(38, s)`` about 80);
#: runs of equal digits that do not branch (the zeros of ``maximum: 1e308``) fold into one
#: ``Repeat``, but an exclusive ``1e308`` as a lower bound branches at each of its 308 zeros.
MAX_NESTING = 120


class TooDeep(Exception):
    """The range's expression would nest past ``MAX_NESTING``."""


def measure(expr: Expr, memo: dict, depths: dict[str, int]) -> tuple[int, int, int]:
    """(IR nodes, nesting height, nesting with named rules expanded; ``depths`` holds theirs).

    A ``Ref`` is one node and one level; expanded, it is as deep as its rule (recursive rules are
    frames, which the lowering does not expand: they are absent from ``depths``).
    """
    got = memo.get(expr)
    if got is None:
        if isinstance(expr, Ref):
            got = (1, 1, 1 + depths.get(expr.name, 0))
        else:
            children = getattr(expr, "items", None) or ((expr.item,) if isinstance(expr, Repeat) else ())
            parts = [measure(c, memo, depths) for c in children]
            got = (1 + sum(p[0] for p in parts), 1 + max((p[1] for p in parts), default=0),
                   1 + max((p[2] for p in parts), default=0))  # fmt: skip
        memo[expr] = got
    return got
