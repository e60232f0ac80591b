# cython: language_level=3
"""Lexicon mode: words of a list, separated by spaces, newlines and punctuation.

The automaton's state is one int: 0 between words (at the start, or after a separator),
``k > 0`` inside a word at node ``k - 1`` of the case-folded word trie.
"""

from libc.stdint cimport int32_t, uint8_t, uint32_t

from .automaton cimport CompiledGrammar
from .trie cimport TokenTrie, TrieTables

cdef enum:
    LEX_SEP = 0          # between words
    LEX_REJECT = -1

cdef class CompiledLexicon(CompiledGrammar):
    cdef TokenTrie words
    cdef readonly int32_t n_words
    cdef int32_t step(self, int32_t state, uint8_t byte) noexcept nogil
    cdef bint accepting(self, int32_t state) noexcept nogil
    cdef int32_t child(self, int32_t node, uint8_t byte) noexcept nogil

cdef class SkeletonIndex:
    cdef TokenTrie skeletons
    cdef dict _arrays
    cdef const int32_t* group_start   # 4 groups per skeleton: (leading separator?, trailing separator?)
    cdef const int32_t* group_tokens
    cdef const int32_t* pure_sep      # tokens made only of separators
    cdef int32_t n_pure_sep
    cdef const int32_t* complex_tok   # letters, separators, letters: checked byte by byte
    cdef int32_t n_complex

cdef class LexiconMasks:
    cdef CompiledLexicon lex
    cdef SkeletonIndex index
    cdef TokenTrie trie
    cdef TrieTables* tr
    cdef object _root_plain        # tokens allowed between words (no leading separator)
    cdef object _root_lead         # tokens with a leading separator, allowed wherever a word may end
    cdef const uint32_t* plain
    cdef const uint32_t* lead
    cdef int32_t n_words
    cdef int32_t* stack
    cdef void _walk(self, int32_t node, int32_t variant, uint32_t* out) noexcept nogil
    cdef void fill(self, int32_t state, uint32_t* out) noexcept nogil
