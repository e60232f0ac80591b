# cython: language_level=3
"""The vocabulary's string slices: its tokens of safe characters by length, and tries of the others."""

from libc.stdint cimport int32_t, uint32_t, uint64_t

from .trie cimport TokenTrie, TrieTables

cdef enum:
    SLICE_LEVELS = 16  # characters the slice check looks ahead (longer tokens: the ``long`` trie)

ctypedef struct SliceTables:
    int32_t kmax               # most characters before the first unsafe byte, over all tokens
    int32_t levels             # min(SLICE_LEVELS, kmax)
    int32_t n_words
    const uint32_t* cum        # cum[r * n_words:]: tokens of 1..r safe characters and nothing else
    const TrieTables* rest     # tokens with an unsafe byte after k safe characters: bytes([k]) + the rest
    const int32_t* group_node  # per k: the node of byte k at depth 1 of ``rest`` (-1: none)
    const TrieTables* long     # tokens past ``levels`` safe characters: their bytes after those
    const TrieTables* other    # every token but the slice tokens of at most ``levels`` characters
    const int32_t* other_rest  # per token of ``other`` (in trie order): its index in ``rests``, -1: none
    const TrieTables* rests    # the rests alone (token ids: rest indices)
    const uint32_t* has        # has[b * n_words:]: tokens of 1..levels safe characters with ASCII byte b
    const uint32_t* grp        # grp[g * n_words:]: ... with a byte of ASCII group g (``safechars.GROUP``)
    const uint32_t* wide       # ... with a byte past ASCII
    const TrieTables* wide_trie  # those tokens
    const int32_t* pairs       # pairs[b1 * 128 + b2]: how many short slice tokens start with ASCII bytes b1 b2
    const int32_t* rest_pos    # per rest index: the position of its token in ``other``
    const uint64_t* other_plain  # bitmap over positions in ``other``: tokens without a rest
    int32_t other_words        # words of that bitmap
    int32_t n_rests


cdef class StringSlices:
    cdef SliceTables s
    cdef TokenTrie rest_trie
    cdef TokenTrie long_trie
    cdef TokenTrie other_trie
    cdef TokenTrie rests_trie
    cdef TokenTrie wide_trie
    cdef dict _arrays
