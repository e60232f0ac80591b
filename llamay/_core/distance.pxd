# cython: language_level=3
"""Fewest tokens to complete the document, per automaton state, over one vocabulary."""

from libc.stdint cimport int32_t, int64_t

from .automaton cimport ACCEPT, Config, Frame, Tables
from .trie cimport TokenTrie

cdef enum:
    DINF = 1 << 28   # no completion this vocabulary can spell (saturating: sums stay at it)


cdef inline int32_t sat(int64_t x) noexcept nogil:
    """``x`` clamped to [-DINF, DINF]."""
    return DINF if x >= DINF else (-DINF if x <= -DINF else <int32_t> x)


cdef class Distances:
    cdef int32_t n_states
    cdef int32_t* dl          # per state: fewest tokens to the end of its frame (see the module doc)
    cdef int32_t* per_iter    # per rule: an iteration's fewest tokens (counted repetitions; else 0)
    cdef int32_t* order       # tokens by growth bound, largest first
    cdef int32_t* bound       # their bounds
    cdef int32_t* tok_bound   # per token id, its bound (-DINF: no bytes)
    cdef object kb            # per byte, its bound (a token's is the sum over its bytes)
    cdef TokenTrie trie       # the vocabulary the tokens' bounds are summed over (``order_tokens``)
    cdef int32_t n_order      # 0 until ``order_tokens``: then ``order``, ``bound`` and ``tok_bound`` hold
    cdef int32_t n_tokens
    cdef readonly bint ordered  # whether the tokens are in order (``order_tokens``)
    cdef readonly int32_t upper  # no token's bound exceeds it (the longest token times the largest
                                 # byte bound; once ordered, the largest bound)
    cdef readonly double build_seconds  # the build's, and the order's added once ordered

    cdef int order_tokens(self) except -1

    cdef inline int32_t config_cost(self, const Tables* t, const Frame* frames, Config c) noexcept nogil:
        return config_cost(self.dl, self.per_iter, t, frames, c)


cdef inline int32_t state_cost(const int32_t* dl, const int32_t* per_iter, const Tables* t, int32_t s,
                               int32_t counter) noexcept nogil:
    """Fewest tokens from state ``s`` to its frame's end, with ``counter`` iterations started."""
    cdef int32_t r = t.state_rule[s]
    if t.rule_max[r] > 0 and counter < t.rule_min[r]:
        return sat(<int64_t> dl[s] + <int64_t> (t.rule_min[r] - counter) * per_iter[r])
    return dl[s]


cdef inline int32_t config_cost(const int32_t* dl, const int32_t* per_iter, const Tables* t, const Frame* frames,
                                Config c) noexcept nogil:
    """Fewest tokens from configuration ``c`` to the end of the document: its frame's, then each caller's
    (``Distances.dl`` and ``per_iter``, raw, for code that holds no Python object)."""
    cdef int64_t d
    cdef int32_t f = c.parent
    if c.state == ACCEPT:
        return 0
    d = state_cost(dl, per_iter, t, c.state, c.counter)
    while f >= 0 and d < DINF:
        d += state_cost(dl, per_iter, t, frames[f].ret, frames[f].counter)
        f = frames[f].parent
    return sat(d)
