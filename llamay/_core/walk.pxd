# cython: language_level=3
"""Where the automaton meets the trie: the mask walk and the single-token check."""

from libc.stdint cimport int32_t, uint32_t

from .automaton cimport Arena, Config, Tables
from .trie cimport TrieTables

ctypedef struct IntVec:
    int32_t* data
    int32_t len
    int32_t cap

ctypedef struct Levels:        # one set of configurations per trie depth
    int32_t* off
    int32_t* len
    int32_t* frames
    int* flag
    int32_t cap

cdef int intvec_push_range(IntVec* v, const int32_t* src, int32_t n) noexcept nogil
cdef int levels_reserve(Levels* lv, int32_t depth) noexcept nogil
cdef void levels_free(Levels* lv) noexcept nogil
ctypedef bint (*TokenTest)(void* ctx, const Arena* a, int32_t off, int32_t n) noexcept nogil  # a token's set kept?

cdef int walk(const Tables* t, Arena* a, const TrieTables* tr, int32_t src, int32_t n, bint ci, int32_t ws_cap,
              uint32_t* out, IntVec* cd, Levels* lv, TokenTest test=*, void* ctx=*) noexcept nogil
cdef int32_t advance(const Tables* t, Arena* a, int32_t src, int32_t n, const unsigned char* data,
                     Py_ssize_t length, int* flags) noexcept nogil
cdef bint push_config(Arena* a, Config c) noexcept nogil
