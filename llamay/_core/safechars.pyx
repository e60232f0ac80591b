# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The safe characters as a byte automaton, and the groups of the safe ASCII bytes (declared in the .pxd).

Well-formed UTF-8 only: no overlong forms, surrogates or code points past U+10FFFF.
"""

from libc.stdint cimport int8_t, int32_t, uint8_t, uint64_t

cdef int32_t[9] U_START = [0, 11, 12, 13, 14, 15, 16, 17, 18]
cdef int32_t[18] U_LO = [0x20, 0x23, 0x5D, 0xC2, 0xE0, 0xE1, 0xED, 0xEE, 0xF0, 0xF1, 0xF4,
                         0x80, 0x80, 0xA0, 0x80, 0x80, 0x90, 0x80]
cdef int32_t[18] U_HI = [0x21, 0x5B, 0x7F, 0xDF, 0xE0, 0xEC, 0xED, 0xEF, 0xF0, 0xF3, 0xF4,
                         0xBF, 0xBF, 0xBF, 0x9F, 0xBF, 0xBF, 0x8F]
cdef int32_t[18] U_NEXT = [0, 0, 0, 1, 3, 2, 4, 2, 6, 5, 7,
                           0, 1, 1, 1, 2, 2, 2]


def _fill_u8():
    cdef int32_t u, q, b
    for u in range(9 * 256):
        U8[u] = -1
    for u in range(8):
        for q in range(U_START[u], U_START[u + 1]):
            for b in range(U_LO[q], U_HI[q] + 1):
                U8[u * 256 + b] = <int8_t> U_NEXT[q]
        for b in range(256):
            q = U_START[u]
            while q < U_START[u + 1] and U_HI[q] < b:
                q += 1
            U_FROM[u * 256 + b] = q


_fill_u8()


def _fill_groups():
    cdef int32_t b, g
    for b in range(128):
        if b < 0x20 or b == 0x22 or b == 0x5C:
            g = -1
        elif 0x30 <= b <= 0x39:
            g = 0
        elif 0x41 <= b <= 0x5A:
            g = 1
        elif 0x61 <= b <= 0x7A:
            g = 2
        else:
            g = 3
        GROUP[b] = g
        if g >= 0:
            GROUP_BITS[2 * g + (b >> 6)] |= (<uint64_t> 1) << (b & 63)


_fill_groups()


cdef int32_t safe_prefix(const uint8_t* b, int32_t n, int32_t* chars, int32_t limit) noexcept nogil:
    """How many bytes of ``b[0:n]`` are whole safe characters, up to ``limit`` of them (their count in ``chars``)."""
    cdef int32_t i = 0, k = 0, u, q, j, step_u
    cdef uint8_t x
    while i < n and k < limit:
        u = 0
        j = i
        while True:
            x = b[j]
            step_u = -1
            for q in range(U_START[u], U_START[u + 1]):
                if U_LO[q] <= x <= U_HI[q]:
                    step_u = U_NEXT[q]
                    break
            if step_u < 0:
                chars[0] = k
                return i
            j += 1
            if step_u == 0:
                break
            if j >= n:
                chars[0] = k
                return i
            u = step_u
        i = j
        k += 1
    chars[0] = k
    return i
