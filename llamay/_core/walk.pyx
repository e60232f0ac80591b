# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The trie walk: every token whose every byte keeps some configuration alive.

Theory of operation. The trie is visited in pre-order. The configurations reached after
the bytes of node i (depth d) are computed from those of its parent (depth d - 1), kept in
the arena one set per depth; siblings overwrite each other's depth. A node whose set is
empty is skipped with its whole subtree (``node_size``). Every token ending at a live node
is allowed.

In a context-independent walk (``ci``) the start configuration's parent is CTX: a path
that pops into CTX, or spends more whitespace than the key's window, cannot be decided
here and sets F_NEED_CTX. Tokens under such a prefix that no in-frame path accepts are collected in
``cd`` for the caller to check against the real stack; the rest of the result depends only
on the start configuration and is cached (``maskcache``).
"""

from libc.stdint cimport int32_t, uint32_t
from libc.stdlib cimport free
from libc.string cimport memmove

from .automaton cimport ACCEPT, F_NEED_CTX, F_OVERFLOW, Arena, Config, Tables, grow, resize, step
from .trie cimport TrieTables


cdef int intvec_push_range(IntVec* v, const int32_t* src, int32_t n) noexcept nogil:
    cdef int32_t cap = v.cap if v.cap > 0 else 64
    cdef int32_t i
    if v.len + n > v.cap:
        while cap < v.len + n:
            cap *= 2
        if not resize(<void**> &v.data, cap * sizeof(int32_t)):
            return -1
        v.cap = cap
    for i in range(n):
        v.data[v.len + i] = src[i]
    v.len += n
    return 0


cdef int levels_reserve(Levels* lv, int32_t depth) noexcept nogil:
    cdef int32_t cap = depth + 2
    if cap <= lv.cap:
        return 0
    if not (resize(<void**> &lv.off, cap * sizeof(int32_t)) and resize(<void**> &lv.len, cap * sizeof(int32_t))
            and resize(<void**> &lv.frames, cap * sizeof(int32_t)) and resize(<void**> &lv.flag, cap * sizeof(int))):
        return -1  # the arrays already grown stay valid: lv.cap says how much
    lv.cap = cap
    return 0


cdef void levels_free(Levels* lv) noexcept nogil:
    free(lv.off)
    free(lv.len)
    free(lv.frames)
    free(lv.flag)
    lv.off = NULL
    lv.len = NULL
    lv.frames = NULL
    lv.flag = NULL
    lv.cap = 0


cdef int walk(const Tables* t, Arena* a, const TrieTables* tr, int32_t src, int32_t n, bint ci, int32_t ws_cap,
              uint32_t* out, IntVec* cd, Levels* lv, TokenTest test=NULL, void* ctx=NULL) noexcept nogil:
    """Set the bits of accepted tokens in ``out`` (and collect undecided ones in ``cd``); returns flags.

    With ``test``, a token is set only where ``test`` keeps the set it leads to (the budget's
    check: a whole trie walk, prefixes shared). The caller reserved ``lv`` for ``tr.max_depth``.
    Leaves ``cfg_len`` and ``n_frames`` as found.
    """
    cdef int32_t i = 0, d, k, j, size, cfg0 = a.cfg_len, frames0 = a.n_frames
    cdef int flags = 0, f, result = 0
    lv.off[0] = src
    lv.len[0] = n
    lv.frames[0] = frames0
    lv.flag[0] = 0
    while i < tr.n_nodes:
        d = tr.node_depth[i]
        size = tr.node_size[i]
        # a set is placed right after its parent's (depth-1 sets after everything that existed)
        a.cfg_len = cfg0 if d == 1 else lv.off[d - 1] + lv.len[d - 1]
        a.n_frames = lv.frames[d - 1]
        lv.off[d] = a.cfg_len
        flags = 0
        k = step(t, a, lv.off[d - 1], lv.len[d - 1], tr.node_byte[i], ci, ws_cap, &flags)
        if flags & F_OVERFLOW:
            result |= F_OVERFLOW
            break
        f = lv.flag[d - 1] | (flags & F_NEED_CTX)
        if k == 0:
            if f and cd != NULL:
                # no in-frame path survives, but some popped: the whole subtree needs the context
                if intvec_push_range(cd, &tr.tok_ids[tr.node_tok[i]], tr.node_tok[i + size] - tr.node_tok[i]) < 0:
                    result |= F_OVERFLOW
                    break
            i += size
            continue
        lv.len[d] = k
        lv.flag[d] = f
        lv.frames[d] = a.n_frames
        if test == NULL or (tr.node_tok[i + 1] > tr.node_tok[i] and test(ctx, a, lv.off[d], k)):
            for j in range(tr.node_tok[i], tr.node_tok[i + 1]):
                out[tr.tok_ids[j] >> 5] |= (<uint32_t> 1) << (tr.tok_ids[j] & 31)
        i += 1
    a.cfg_len = cfg0
    a.n_frames = frames0
    return result


cdef bint push_config(Arena* a, Config c) noexcept nogil:
    if not grow(<void**> &a.cfg, &a.cfg_cap, a.cfg_len + 1, sizeof(Config)):
        return False
    a.cfg[a.cfg_len] = c
    a.cfg_len += 1
    return True


cdef int32_t advance(const Tables* t, Arena* a, int32_t src, int32_t n, const unsigned char* data,
                     Py_ssize_t length, int* flags) noexcept nogil:
    """Step ``cfg[src:src+n]`` through ``data``; the result lands at the current ``cfg_len``.

    Returns the size of the resulting set (0: rejected). Intermediate sets are compacted
    onto the result's place, so long inputs use constant space; frames persist.
    """
    cdef int32_t base = a.cfg_len, k, out
    cdef Py_ssize_t p
    for p in range(length):
        out = a.cfg_len
        k = step(t, a, src, n, data[p], False, t.ws_budget, flags)
        if k == 0 or flags[0] & F_OVERFLOW:
            a.cfg_len = base
            return 0
        if out != base:
            memmove(&a.cfg[base], &a.cfg[out], k * sizeof(Config))
            a.cfg_len = base + k
        src = base
        n = k
    if length == 0:
        for k in range(n):
            if not push_config(a, a.cfg[src + k]):
                flags[0] |= F_OVERFLOW
                a.cfg_len = base
                return 0
    return n
