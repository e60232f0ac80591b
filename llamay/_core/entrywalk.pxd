# cython: language_level=3
"""The fast walk: a position's context-independent mask from its start set, by the set machine and the slices."""

from libc.stdint cimport int32_t, uint32_t

from .setmachine cimport SetMachine
from .slices cimport SliceTables
from .trie cimport TrieTables
from .walk cimport IntVec

cdef int entry_walk(SetMachine m, const TrieTables* tr, const SliceTables* sl, int32_t start, uint32_t* dense,
                    IntVec* acc, IntVec* cd, int32_t* base, int32_t* st) noexcept nogil
