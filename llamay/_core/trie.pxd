# cython: language_level=3
"""The vocabulary as a flat pre-order byte trie (llguidance's layout, our code)."""

from libc.stdint cimport int32_t, uint8_t

ctypedef struct TrieTables:
    int32_t n_nodes
    int32_t max_depth
    int32_t n_tokens           # ids below this may have bytes; the rest never match
    const uint8_t* node_byte
    const int32_t* node_depth  # 1 for children of the (implicit) root
    const int32_t* node_db     # NODE_FAN if the node has a fan record | depth << 8 | byte: one load for walks
    const int32_t* fan_off     # per node with FAN_MIN children or more: its record in fan_pool, else -1
    const int32_t* fan_pool    # records: 8 words of child bytes (a 256-bit map), then the children in byte order
    int32_t root_fan           # the implicit root's record (-1 if it has fewer children)
    const int32_t* node_size   # nodes in the subtree, itself included: a rejected byte skips them
    const int32_t* node_tok    # tokens ending at node i: tok_ids[node_tok[i]:node_tok[i + 1]]
    const int32_t* tok_ids
    const int32_t* bytes_off   # token i's bytes: tok_bytes[bytes_off[i]:bytes_off[i + 1]]
    const uint8_t* tok_bytes

cdef enum:
    FAN_MIN = 16               # children from which a node gets a record to reach them by byte
    NODE_FAN = 1 << 30         # node_db flag: fan_off[node] >= 0
    NODE_DEPTH = (1 << 22) - 1 # node_db >> 8 & NODE_DEPTH is the depth

cdef class TokenTrie:
    cdef TrieTables tr
    cdef dict _arrays
    cdef readonly int32_t size
    cdef readonly tuple eos_ids
    cdef public object slices      # string slices of the vocabulary (slices.slices_for), built on first use
