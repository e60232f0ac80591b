# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The vocabulary's string slices (after llguidance's): tokens of safe characters by length, tries of the others.

Inside a JSON string nearly every token is allowed. ``StringSlices`` splits a vocabulary
once so that the fast walk (``entrywalk``) can answer such positions from bitmasks: a token
made only of *safe characters* (``safechars``: complete UTF-8 characters other than ``"``,
``\\`` and C0 controls) is in slice ``n``, its number of characters; any other token has
``k`` safe characters and then a *rest* that starts with an unsafe byte. ``cum[r]`` is the
mask of slice tokens of at most ``r`` characters; the rests sit in a trie keyed by ``k``
(``rest``), and the tokens past ``SLICE_LEVELS`` safe characters in another (``long``).
``other`` holds every token but the short slice tokens, ``rests`` the rests alone; per-byte
and per-group bitmasks of the short slice tokens (``has``, ``grp``, ``wide``) serve the
class walk.
"""

from libc.stdint cimport int32_t, uint32_t, uint64_t

import numpy as np

from .safechars cimport GROUP, N_GROUPS, safe_prefix
from .trie cimport TokenTrie, TrieTables


def _subtrie(keys: list, ids: list) -> TokenTrie:
    """A trie of ``keys`` whose token ids are ``ids`` (not the keys' positions)."""
    cdef TokenTrie t = TokenTrie(keys, len(keys), ())
    if ids:
        tok_ids = t._arrays["tok_ids"]
        tok_ids[:] = np.asarray(ids, np.int32)[tok_ids]
    return t


cdef class StringSlices:
    """Per vocabulary: tokens of safe characters only, by length, and tries of the others (see the module doc)."""

    def __init__(self, TokenTrie trie):
        cdef const TrieTables* tr = &trie.tr
        cdef int32_t n_tok = tr.n_tokens, i, nb, used, chars, kmax = 0, n_words = (trie.size + 31) // 32, levels
        cdef int32_t[::1] kind = np.full(max(n_tok, 1), -1, np.int32)   # chars of a slice token, -1: none
        cdef int32_t[::1] rest_k = np.full(max(n_tok, 1), -1, np.int32)  # safe chars before a rest
        cdef int32_t[::1] rest_at = np.zeros(max(n_tok, 1), np.int32)
        for i in range(n_tok):
            nb = tr.bytes_off[i + 1] - tr.bytes_off[i]
            if nb == 0:
                continue
            used = safe_prefix(&tr.tok_bytes[tr.bytes_off[i]], nb, &chars, nb)
            if used == nb:
                kind[i] = chars
            else:
                rest_k[i] = chars
                rest_at[i] = used
            if chars > kmax:
                kmax = chars
        levels = min(SLICE_LEVELS, kmax)
        kinds = np.asarray(kind)[:n_tok]
        rest_ks = np.asarray(rest_k)[:n_tok]
        cum = np.zeros((kmax + 1, n_words), np.uint32)
        cdef uint32_t[:, ::1] cv = cum
        for i in range(n_tok):
            if kind[i] > 0:
                cv[kind[i], i >> 5] |= (<uint32_t> 1) << (i & 31)
        for i in range(1, kmax + 1):
            cum[i] |= cum[i - 1]
        tok_bytes = trie._arrays["tok_bytes"].tobytes()
        offs = trie._arrays["bytes_off"]
        ids = np.flatnonzero(rest_ks >= 0).tolist()
        self.rest_trie = _subtrie([bytes([rest_k[i]]) + tok_bytes[offs[i] + rest_at[i] : offs[i + 1]] for i in ids], ids)
        long_ids = np.flatnonzero((rest_ks >= levels) | (kinds > levels)).tolist()
        long_keys = []
        for i in long_ids:
            used = safe_prefix(&tr.tok_bytes[tr.bytes_off[i]], tr.bytes_off[i + 1] - tr.bytes_off[i], &chars, levels)
            long_keys.append(tok_bytes[offs[i] + used : offs[i + 1]])
        self.long_trie = _subtrie(long_keys, long_ids)
        other_ids = np.flatnonzero((rest_ks >= 0) | (kinds > levels)).tolist()
        self.other_trie = _subtrie([tok_bytes[offs[i] : offs[i + 1]] for i in other_ids], other_ids)
        self.rests_trie = TokenTrie([tok_bytes[offs[i] + rest_at[i] : offs[i + 1]] for i in ids], len(ids), ())
        rest_index = np.full(max(n_tok, 1), -1, np.int32)
        rest_index[ids] = np.arange(len(ids), dtype=np.int32)
        other_rest = rest_index[self.other_trie._arrays["tok_ids"]] if other_ids else np.full(1, -1, np.int32)
        n_other = len(other_ids)
        other_words = (n_other + 63) // 64
        plain = np.zeros(max(other_words, 1) * 64, np.uint8)
        plain[: n_other] = other_rest[: n_other] < 0
        other_plain = np.packbits(plain, bitorder="little").view(np.uint64).copy()
        rest_pos = np.zeros(max(len(ids), 1), np.int32)
        if n_other:
            has = np.flatnonzero(other_rest[: n_other] >= 0)
            rest_pos[other_rest[has]] = has.astype(np.int32)
        # per ASCII byte (and past ASCII), the short slice tokens that hold it: a class's tokens by bitmask algebra
        short = (kinds >= 1) & (kinds <= levels)
        owner = np.repeat(np.arange(n_tok), np.diff(offs)[:n_tok])
        byte = np.frombuffer(tok_bytes, np.uint8)[: len(owner)]
        keep = short[owner]
        holds = np.zeros((129, n_words * 32), bool)
        holds[np.minimum(byte[keep], 128), owner[keep]] = True
        packed = np.packbits(holds, axis=1, bitorder="little").view(np.uint32)
        by_byte = np.ascontiguousarray(packed[:128])
        wide = np.ascontiguousarray(packed[128])
        grp = np.zeros((N_GROUPS, n_words), np.uint32)
        for b in range(128):
            if GROUP[b] >= 0:
                grp[GROUP[b]] |= by_byte[b]
        first2 = np.zeros(128 * 128, np.int32)  # short tokens by their first two bytes, both ASCII
        two = short[:n_tok] & (np.diff(offs)[:n_tok] >= 2)
        lead = offs[:n_tok][two]
        b1, b2 = byte[lead], byte[lead + 1]
        ascii2 = (b1 < 128) & (b2 < 128)
        np.add.at(first2, b1[ascii2].astype(np.int32) * 128 + b2[ascii2], 1)
        wide_ids = np.flatnonzero(holds[128, :n_tok]).tolist()
        self.wide_trie = _subtrie([tok_bytes[offs[i] : offs[i + 1]] for i in wide_ids], wide_ids)
        group = np.full(kmax + 1, -1, np.int32)
        rt = &self.rest_trie.tr
        for i in range(rt.n_nodes):
            if rt.node_depth[i] == 1 and rt.node_byte[i] <= kmax:
                group[rt.node_byte[i]] = i
        self._arrays = {"cum": cum, "group": group, "kinds": kinds, "other_rest": other_rest, "other_plain": other_plain,
                        "rest_pos": rest_pos, "has": by_byte, "grp": grp, "wide": wide, "pairs": first2}
        self.s.kmax = kmax
        self.s.levels = levels
        self.s.n_words = n_words
        self.s.cum = <const uint32_t*> <size_t> cum.ctypes.data
        self.s.rest = &self.rest_trie.tr
        self.s.group_node = <const int32_t*> <size_t> group.ctypes.data
        self.s.long = &self.long_trie.tr
        self.s.other = &self.other_trie.tr
        self.s.other_rest = <const int32_t*> <size_t> other_rest.ctypes.data
        self.s.other_plain = <const uint64_t*> <size_t> other_plain.ctypes.data
        self.s.other_words = other_words
        self.s.rest_pos = <const int32_t*> <size_t> rest_pos.ctypes.data
        self.s.rests = &self.rests_trie.tr
        self.s.n_rests = len(ids)
        self.s.has = <const uint32_t*> <size_t> by_byte.ctypes.data
        self.s.grp = <const uint32_t*> <size_t> grp.ctypes.data
        self.s.wide = <const uint32_t*> <size_t> wide.ctypes.data
        self.s.wide_trie = &self.wide_trie.tr
        self.s.pairs = <const int32_t*> <size_t> first2.ctypes.data

    @property
    def kmax(self):
        return self.s.kmax

    @property
    def levels(self):
        return self.s.levels

    def arrays(self):
        return dict(self._arrays)


def slices_for(TokenTrie trie) -> StringSlices:
    """The vocabulary's slices, built once and kept on the trie: every grammar's matchers share them."""
    got = trie.slices
    if got is None:
        got = trie.slices = StringSlices(trie)
    return got
