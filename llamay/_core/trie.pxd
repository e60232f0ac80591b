# cython: language_level=3
"""The vocabulary as a flat pre-order byte trie (llguidance's layout, our code)."""

from libc.stdint cimport int32_t, uint8_t

ctypedef struct TrieTables:
    int32_t n_nodes
    int32_t max_depth
    int32_t n_tokens           # ids below this may have bytes; the rest never match
    const uint8_t* node_byte
    const int32_t* node_depth  # 1 for children of the (implicit) root
    const int32_t* node_db     # depth << 8 | byte, one load for walks that need both
    const int32_t* node_size   # nodes in the subtree, itself included: a rejected byte skips them
    const int32_t* node_tok    # tokens ending at node i: tok_ids[node_tok[i]:node_tok[i + 1]]
    const int32_t* tok_ids
    const int32_t* bytes_off   # token i's bytes: tok_bytes[bytes_off[i]:bytes_off[i + 1]]
    const uint8_t* tok_bytes

cdef class TokenTrie:
    cdef TrieTables tr
    cdef dict _arrays
    cdef readonly int32_t size
    cdef readonly tuple eos_ids
    cdef public object slices      # string slices of the vocabulary (dfa.slices_for), built on first use
