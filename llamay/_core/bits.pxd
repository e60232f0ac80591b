# cython: language_level=3
"""Bit counts of 64-bit words, as the compiler's builtins (one instruction each where the CPU has it)."""

from libc.stdint cimport uint64_t

cdef extern from *:
    """
    static inline int llamay_clz64(unsigned long long x) { return __builtin_clzll(x); }
    static inline int llamay_ctz64(unsigned long long x) { return __builtin_ctzll(x); }
    static inline int llamay_popcount64(unsigned long long x) { return __builtin_popcountll(x); }
    """
    int clz64 "llamay_clz64" (uint64_t x) noexcept nogil
    int ctz64 "llamay_ctz64" (uint64_t x) noexcept nogil
    int popcount64 "llamay_popcount64" (uint64_t x) noexcept nogil
