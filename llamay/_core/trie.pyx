# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Build the flat pre-order byte trie of a vocabulary.

Node i stands for a byte string (the bytes on the path from the root); its subtree is
nodes ``i .. i + node_size[i] - 1``. Tokens are sorted by bytes, so each token adds only
the nodes past its common prefix with the previous one. The bytes are the vocabulary's
``grammar_bytes``: special tokens are there as their edges (0xFF and the id), under one
subtree that a grammar without ``ir.token`` never enters. Tokens with no bytes (EOS,
padding, text holding 0xFF) are not in the trie: no grammar byte matches them.
"""

from libc.stdint cimport int32_t, uint8_t, uint32_t

import numpy as np


cdef class TokenTrie:
    """Cost: one sort of the vocabulary plus a linear pass (about 0.3 s for 262k tokens)."""

    def __init__(self, list tokens, int32_t size, tuple eos_ids):
        cdef Py_ssize_t n_tok = len(tokens), i, k, lcp, j
        cdef bytes b, prev = b""
        cdef const uint8_t[::1] view
        lengths = np.fromiter((len(x) for x in tokens), np.int64, n_tok)
        bytes_off = np.zeros(n_tok + 1, np.int32)
        np.cumsum(lengths, out=bytes_off[1:])
        tok_bytes = np.frombuffer(b"".join(tokens) or b"\0", np.uint8).copy()
        order = sorted((t, idx) for idx, t in enumerate(tokens) if t)
        total = int(lengths.sum())
        node_byte = np.zeros(max(total, 1), np.uint8)
        node_depth = np.zeros(max(total, 1), np.int32)
        node_first_tok = np.zeros(max(total, 1) + 1, np.int32)
        tok_ids = np.zeros(max(len(order), 1), np.int32)
        cdef uint8_t[::1] nb = node_byte
        cdef int32_t[::1] nd = node_depth
        cdef int32_t[::1] nft = node_first_tok
        cdef int32_t[::1] tid = tok_ids
        cdef Py_ssize_t n_nodes = 0, max_depth = 0
        for k, (b, idx) in enumerate(order):
            lcp = 0
            j = min(len(b), len(prev))
            while lcp < j and b[lcp] == prev[lcp]:
                lcp += 1
            view = b
            for i in range(lcp, len(b)):
                nb[n_nodes] = view[i]
                nd[n_nodes] = i + 1
                nft[n_nodes] = k
                n_nodes += 1
            # token k ends at the last node created (or at an existing node for a duplicate)
            nft[n_nodes] = k + 1
            tid[k] = idx
            if len(b) > max_depth:
                max_depth = len(b)
            prev = b
        node_tok = np.zeros(n_nodes + 1, np.int32)
        node_size = np.zeros(max(n_nodes, 1), np.int32)
        _finish(nd, nft, node_tok, node_size, n_nodes, len(order))
        fan_off = np.full(max(n_nodes, 1), -1, np.int32)
        fan_pool, root_fan = _fan_index(node_byte, node_depth, node_size, fan_off, n_nodes)
        self._arrays = {
            "fan_off": fan_off,
            "fan_pool": fan_pool,
            "node_byte": node_byte[: max(n_nodes, 1)].copy(),
            "node_depth": node_depth[: max(n_nodes, 1)].copy(),
            "node_db": ((node_depth[: max(n_nodes, 1)] << 8) | node_byte[: max(n_nodes, 1)]
                        | np.where(fan_off >= 0, np.int32(NODE_FAN), np.int32(0))).astype(np.int32),
            "node_size": node_size,
            "node_tok": node_tok,
            "tok_ids": tok_ids,
            "bytes_off": bytes_off,
            "tok_bytes": tok_bytes,
        }
        a = self._arrays
        self.tr.n_nodes = n_nodes
        self.tr.max_depth = max_depth
        self.tr.n_tokens = n_tok
        self.tr.node_byte = <const uint8_t*> <size_t> a["node_byte"].ctypes.data
        self.tr.node_depth = <const int32_t*> <size_t> a["node_depth"].ctypes.data
        self.tr.node_db = <const int32_t*> <size_t> a["node_db"].ctypes.data
        self.tr.fan_off = <const int32_t*> <size_t> a["fan_off"].ctypes.data
        self.tr.fan_pool = <const int32_t*> <size_t> a["fan_pool"].ctypes.data
        self.tr.root_fan = root_fan
        self.tr.node_size = <const int32_t*> <size_t> a["node_size"].ctypes.data
        self.tr.node_tok = <const int32_t*> <size_t> a["node_tok"].ctypes.data
        self.tr.tok_ids = <const int32_t*> <size_t> a["tok_ids"].ctypes.data
        self.tr.bytes_off = <const int32_t*> <size_t> a["bytes_off"].ctypes.data
        self.tr.tok_bytes = <const uint8_t*> <size_t> a["tok_bytes"].ctypes.data
        self.size = size
        self.eos_ids = eos_ids

    @property
    def n_nodes(self):
        return self.tr.n_nodes

    @property
    def max_depth(self):
        return self.tr.max_depth

    def extends(self, bytes prefix):
        """Whether some token's bytes start with ``prefix`` and go on past it.

        A token that ends with such bytes may be merged into a longer one once more text
        follows, so the jump ahead leaves it to be sampled (``llamay.jump_ahead``).
        """
        cdef const uint8_t* p = prefix
        cdef Py_ssize_t k, length = len(prefix)
        cdef int32_t node = -1, c, end = self.tr.n_nodes
        for k in range(length):
            c = node + 1
            while c < end and self.tr.node_byte[c] != p[k]:
                c += self.tr.node_size[c]
            if c >= end:
                return False
            node, end = c, c + self.tr.node_size[c]
        return end > node + 1

    def arrays(self):
        """The trie's arrays (read-only views), for tests and tools."""
        return dict(self._arrays)


cdef void _finish(int32_t[::1] depth, int32_t[::1] first_tok, int32_t[::1] node_tok, int32_t[::1] node_size,
                  Py_ssize_t n, Py_ssize_t n_tok) noexcept:
    """Token ranges per node and subtree sizes, from depths (pre-order) and token counters."""
    cdef Py_ssize_t i, top = 0
    cdef int32_t[::1] stack = np.zeros(max(n, 1), np.int32)
    # first_tok[i] = tokens completed before node i was created; node i owns the tokens completed
    # between its creation and the creation of node i + 1 only if they end exactly there, which
    # holds because a token is completed right after its last node is created (or, for a
    # duplicate byte string, right after the previous identical one).
    for i in range(n):
        node_tok[i] = first_tok[i]
    node_tok[n] = n_tok
    for i in range(n):
        while top > 0 and depth[stack[top - 1]] >= depth[i]:
            top -= 1
            node_size[stack[top]] = <int32_t> (i - stack[top])
        stack[top] = <int32_t> i
        top += 1
    while top > 0:
        top -= 1
        node_size[stack[top]] = <int32_t> (n - stack[top])


def _fan_index(uint8_t[::1] byte, int32_t[::1] depth, int32_t[::1] size, int32_t[::1] fan_off, Py_ssize_t n):
    """Records of the nodes (and the root) with FAN_MIN children or more: which bytes, and where each child is."""
    cdef Py_ssize_t i, c, k, n_rec = 0, need = 0
    cdef int32_t fan
    cdef list parents = []
    # children of node i: i + 1, then each next sibling (past the previous one's subtree)
    for i in range(-1, n):
        fan = 0
        c = i + 1
        while c < (n if i < 0 else i + size[i]):
            fan += 1
            c += size[c]
        if fan >= FAN_MIN:
            parents.append(i)
            need += 8 + fan
    pool = np.zeros(max(need, 1), np.int32)
    cdef int32_t[::1] pv = pool
    cdef int32_t root = -1
    k = 0
    for i in parents:
        if i < 0:
            root = <int32_t> k
        else:
            fan_off[i] = <int32_t> k
        c = i + 1
        fan = 0
        while c < (n if i < 0 else i + size[i]):
            pv[k + (byte[c] >> 5)] |= <int32_t> ((<uint32_t> 1) << (byte[c] & 31))
            pv[k + 8 + fan] = <int32_t> c
            fan += 1
            c += size[c]
        k += 8 + fan
    return pool, root
