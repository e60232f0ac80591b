# A map from pairs of 64-bit ints to non-negative ints, in C: open addressing, at most half
# full, grown by doubling. Lowering and the rule graph key IR nodes by address with it (with a
# second int: a rule, an item), where a Python dict would box every key.

from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc


ctypedef struct PairMap:
    int64_t* a
    int64_t* b
    int32_t* v  # -1: a free slot
    int32_t cap, n


cdef inline int pair_map_init(PairMap* m, int32_t cap) noexcept nogil:
    """An empty map of ``cap`` slots (a power of two); -1 when out of memory (free it all the same)."""
    cdef int32_t i
    m.cap, m.n = cap, 0
    m.a = <int64_t*> malloc(cap * sizeof(int64_t))
    m.b = <int64_t*> malloc(cap * sizeof(int64_t))
    m.v = <int32_t*> malloc(cap * sizeof(int32_t))
    if m.a == NULL or m.b == NULL or m.v == NULL:
        return -1
    for i in range(cap):
        m.v[i] = -1
    return 0


cdef inline void pair_map_free(PairMap* m) noexcept nogil:
    free(m.a)
    free(m.b)
    free(m.v)
    m.a = m.b = NULL
    m.v = NULL


cdef inline int32_t _pair_slot(const PairMap* m, int64_t a, int64_t b) noexcept nogil:
    cdef uint64_t h = (<uint64_t> a * 0x9E3779B97F4A7C15u) ^ (<uint64_t> b + 0xBF58476D1CE4E5B9u)
    cdef int32_t q
    h = (h ^ (h >> 31)) * 0x94D049BB133111EBu
    q = <int32_t> ((h ^ (h >> 29)) & <uint64_t> (m.cap - 1))
    while m.v[q] >= 0 and (m.a[q] != a or m.b[q] != b):
        q = (q + 1) & (m.cap - 1)
    return q


cdef inline int32_t pair_get(const PairMap* m, int64_t a, int64_t b) noexcept nogil:
    """The value at ``(a, b)``; -1 when there is none."""
    return m.v[_pair_slot(m, a, b)]


cdef inline int32_t pair_get_or_put(PairMap* m, int64_t a, int64_t b, int32_t v) noexcept nogil:
    """The value at ``(a, b)``; when there is none, ``v`` is put there and -1 returned (-2: out of memory)."""
    cdef PairMap old
    cdef int32_t q = _pair_slot(m, a, b), i
    if m.v[q] >= 0:
        return m.v[q]
    if 2 * (m.n + 1) > m.cap:
        old = m[0]
        if pair_map_init(m, 2 * old.cap) < 0:
            pair_map_free(m)
            m[0] = old
            return -2
        for i in range(old.cap):
            if old.v[i] >= 0:
                q = _pair_slot(m, old.a[i], old.b[i])
                m.a[q], m.b[q], m.v[q] = old.a[i], old.b[i], old.v[i]
        m.n = old.n
        pair_map_free(&old)
        q = _pair_slot(m, a, b)
    m.a[q], m.b[q], m.v[q] = a, b, v
    m.n += 1
    return -1
