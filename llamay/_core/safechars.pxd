# cython: language_level=3
"""The safe characters: complete UTF-8 characters other than ``"``, ``\\`` and C0 controls.

Inside a JSON string they stand for themselves, so the set machine steps them as one
alphabet and the string slices sort tokens by how many of them they start with.
"""

from libc.stdint cimport int8_t, int32_t, uint8_t, uint64_t

# The safe characters as a byte automaton: state 0 is a character boundary; the edges of state u
# are U_START[u]:U_START[u + 1], each (U_LO, U_HI, U_NEXT), next 0 completing a character.
cdef int32_t[9] U_START
cdef int32_t[18] U_LO
cdef int32_t[18] U_HI
cdef int32_t[18] U_NEXT
# The same automaton as a table: U8[u * 256 + byte] is the next state, -1 for a byte no safe character has there;
# U_FROM[u * 256 + byte] is the first edge of u whose range ends at or after the byte.
cdef int8_t[9 * 256] U8
cdef int32_t[8 * 256] U_FROM

cdef enum:
    N_GROUPS = 4  # of safe ASCII bytes: digits, upper-case letters, lower-case letters, the others

cdef int8_t[128] GROUP         # per ASCII byte: its group, -1 when unsafe
cdef uint64_t[8] GROUP_BITS    # per group, its bytes (two words)

cdef int32_t safe_prefix(const uint8_t* b, int32_t n, int32_t* chars, int32_t limit) noexcept nogil
