# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The fast walk: a position's context-independent mask from its start set, by the set machine and the slices.

A walk over the set machine (``setmachine``) is one load per trie node (``mwalk``, its loop
in C); at a node with many children it follows only those whose byte lives (``_sparse``).

Inside a JSON string nearly every token is allowed, so even a one-load walk of 270k nodes is
too slow; the vocabulary's string slices (``slices``) answer most of it at once.
``entry_walk`` follows the sets after 1, 2, ... safe characters from a position's start set
(``SetMachine.slice_step``) for up to 16 characters: when one set follows another (a string,
bounded or not), up to ``r`` characters live and more die, so the mask is ``cum[r]`` plus
the rests of group ``k <= r`` walked from the set after ``k`` characters: a few thousand
nodes instead of the whole trie. When the sets branch (the key of an open object, matched
against the declared names), the other tokens are walked by their whole bytes (``owalk``),
and any subtree below a set that every safe character leads back to is decided from that
set's verdicts on the rests (``fixed_verdicts``). Sets that hold an immortal state
(``SetMachine.set_immortal``) need no further levels.

Classes. When only some safe characters live (a ``pattern`` such as ``^[A-Za-z0-9_-]{1,64}$``)
but those that do form the same class at every level and all lead to one set
(``SetMachine.class_step``), a short token lives exactly when all its bytes are in the class
and it is short enough: ``cum[r]`` less the tokens holding a byte outside the class, from
per-byte token bitmasks (``class_walk``); the other tokens are walked. Any other position is
walked whole.
"""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy

from .automaton cimport resize
from .bits cimport ctz64, popcount64
from .safechars cimport GROUP, GROUP_BITS, N_GROUPS, U8
from .setmachine cimport (CL_NO, CL_NONE, D_DEAD, D_DEAD_CTX, D_FULL, D_OVERFLOW, D_UNKNOWN, FIX_NONE, SN_DEAD,
                          SN_FAIL, SN_MAX_TARGETS, WIDE_LIVE, WIDE_MIXED, SetMachine, row_of)
from .slices cimport SLICE_LEVELS, SliceTables
from .trie cimport NODE_DEPTH, TrieTables
from .walk cimport IntVec, intvec_push_range

cdef enum:
    _MAX_VERDICTS = 1 << 24     # ints of fixed-point verdict records (past it: those subtrees are walked)
    _CLASS_MIN_PAIRS = 4096     # short tokens starting with two class characters, below which a class is walked


# -- walks over the machine's rows ------------------------------------------------------------

cdef enum:
    _DENSE = 1  # _sparse declined: walk the children one by one


cdef extern from *:
    """
    /* The walk's inner loop, in plain C so that the compiler keeps it in registers. It stops at
       an event for the Cython driver (mwalk) to handle, leaving the state so that it resumes. */
    typedef struct {
        const int32_t* ndb; const int32_t* nsize; const int32_t* ntok; const int32_t* tids; const int32_t* fan;
        int32_t* st; uint32_t* out; int32_t* acc_data; int32_t acc_len; int32_t acc_cap;
        int32_t i; int32_t last; int32_t doff; int32_t cd_on; int64_t visited;
    } llamay_wk;
    enum { LLAMAY_WK_DONE = 0, LLAMAY_WK_UNKNOWN = 1, LLAMAY_WK_CD = 2, LLAMAY_WK_ACC = 3, LLAMAY_WK_FAN = 4 };
    #define LLAMAY_NODE_FAN (1 << 30)
    /* One body, two instances: tokens into a bitmask (DENSE 1) or onto a list. Few live values,
       so that the loop runs from registers: st is offset by the depth base, the fan flag rides
       in node_db, blocks gives a set's row in two loads. */
    #define LLAMAY_WK_BODY(DENSE)                                                                  \
        const int32_t* ndb = w->ndb; const int32_t* nsize = w->nsize; const int32_t* ntok = w->ntok;  \
        const int32_t* tids = w->tids; int32_t* st = w->st - w->doff;                                  \
        int32_t i = w->i; const int32_t last = w->last; int64_t vis = 0; int ev = LLAMAY_WK_DONE;     \
        uint32_t* out = w->out; int32_t* acc = w->acc_data + w->acc_len;                              \
        int32_t* const acc_end = w->acc_data + w->acc_cap;                                              \
        while (i < last) {                                                                             \
            const int32_t x = ndb[i];                                                                  \
            const int32_t d = (x >> 8) & ((1 << 22) - 1);                                              \
            const int32_t p = st[d - 1];                                                               \
            const int32_t e = blocks[p >> 8][((p >> 1) & 127) << 8 | (x & 255)];                       \
            if (e < 0) {                                                                               \
                if (e == -1) { ev = LLAMAY_WK_UNKNOWN; break; }                                        \
                vis++;                                                                                 \
                if (w->cd_on && ((p & 1) || e == -3)) { ev = LLAMAY_WK_CD; break; }                    \
                i += nsize[i];                                                                         \
                continue;                                                                              \
            }                                                                                          \
            const int32_t lo = ntok[i], hi = ntok[i + 1];                                              \
            if (lo != hi) {                                                                            \
                if (DENSE) {                                                                           \
                    for (int32_t j = lo; j < hi; j++) { int32_t t = tids[j]; out[t >> 5] |= (uint32_t)1 << (t & 31); } \
                } else {                                                                               \
                    if (acc + (hi - lo) > acc_end) { ev = LLAMAY_WK_ACC; break; }                      \
                    for (int32_t j = lo; j < hi; j++) *acc++ = tids[j];                                \
                }                                                                                      \
            }                                                                                          \
            vis++;                                                                                     \
            st[d] = e | (p & 1);                                                                       \
            if ((x & LLAMAY_NODE_FAN) && !((e | p) & 1)) { ev = LLAMAY_WK_FAN; break; }                \
            i++;                                                                                       \
        }                                                                                              \
        w->i = i; w->acc_len = (int32_t)(acc - w->acc_data); w->visited += vis;                        \
        return ev;
    __attribute__((noinline)) static int llamay_wk_dense(llamay_wk* w, int32_t* const* blocks) { LLAMAY_WK_BODY(1) }
    __attribute__((noinline)) static int llamay_wk_list(llamay_wk* w, int32_t* const* blocks) { LLAMAY_WK_BODY(0) }
    static int llamay_wk_run(llamay_wk* w, int32_t* const* blocks) {
        return w->out ? llamay_wk_dense(w, blocks) : llamay_wk_list(w, blocks);
    }
    """
    ctypedef struct llamay_wk:
        const int32_t* ndb
        const int32_t* nsize
        const int32_t* ntok
        const int32_t* tids
        const int32_t* fan
        int32_t* st
        uint32_t* out
        int32_t* acc_data
        int32_t acc_len
        int32_t acc_cap
        int32_t i
        int32_t last
        int32_t doff
        int32_t cd_on
        int64_t visited
    enum:
        LLAMAY_WK_DONE
        LLAMAY_WK_UNKNOWN
        LLAMAY_WK_CD
        LLAMAY_WK_ACC
        LLAMAY_WK_FAN
    int llamay_wk_run(llamay_wk* w, int32_t** blocks) noexcept nogil


cdef int mwalk(SetMachine m, const TrieTables* tr, int32_t first, int32_t last, int32_t depth_off, int32_t start,
               uint32_t* out, IntVec* acc, IntVec* cd, int32_t* st) noexcept nogil:
    """Walk trie nodes ``first:last`` (depths less ``depth_off`` start at 1) from set ``start``.

    Accepted tokens go to the bitmask ``out``, or (``out`` NULL) to the list ``acc``; tokens
    under a dead node that some path left for the context go to ``cd``. ``st[d]`` holds the
    set at depth ``d`` as a row entry (twice the id, plus the flag of a path left for the
    context on the way). Returns 0, or D_OVERFLOW / D_FULL.

    The loop itself is ``llamay_wk_run``; this driver handles what it stops for: a row entry
    to compute, a dead subtree whose tokens the context decides, a full token list, a node
    with many children (``_sparse``).
    """
    cdef llamay_wk w
    cdef int ev, rc = 0
    cdef int32_t i, x, d, p, e, lo, hi, need, cap
    w.ndb = tr.node_db
    w.nsize = tr.node_size
    w.ntok = tr.node_tok
    w.tids = tr.tok_ids
    w.fan = tr.fan_off
    w.st = st
    w.out = out
    w.acc_data = acc.data if acc != NULL else NULL
    w.acc_len = acc.len if acc != NULL else 0
    w.acc_cap = acc.cap if acc != NULL else 0
    w.i = first
    w.last = last
    w.doff = depth_off
    w.cd_on = cd != NULL
    w.visited = 0
    st[0] = 2 * start
    while True:
        ev = llamay_wk_run(&w, m.blocks)
        if ev == LLAMAY_WK_DONE:
            break
        i = w.i
        x = tr.node_db[i]
        d = ((x >> 8) & NODE_DEPTH) - depth_off
        p = st[d - 1]
        if ev == LLAMAY_WK_UNKNOWN:
            e = m.compute(p >> 1, <uint8_t> (x & 255))
            if e <= D_OVERFLOW:
                rc = e
                break
        elif ev == LLAMAY_WK_CD:
            lo = tr.node_tok[i]
            hi = tr.node_tok[i + tr.node_size[i]]
            if intvec_push_range(cd, &tr.tok_ids[lo], hi - lo) < 0:
                rc = D_OVERFLOW
                break
            w.i = i + tr.node_size[i]
        elif ev == LLAMAY_WK_ACC:
            need = w.acc_len + tr.node_tok[i + 1] - tr.node_tok[i]
            cap = max(64, 2 * w.acc_cap)
            while cap < need:
                cap *= 2
            if not resize(<void**> &w.acc_data, cap * sizeof(int32_t)):
                rc = D_OVERFLOW
                break
            w.acc_cap = cap
        else:  # LLAMAY_WK_FAN: node i is live, its tokens taken; maybe walk only the children that live
            if acc != NULL:
                acc.data = w.acc_data
                acc.len = w.acc_len
                acc.cap = w.acc_cap
            rc = _sparse(m, tr, &tr.fan_pool[tr.fan_off[i]], st[d] >> 1, out, acc, cd, &st[d])
            if acc != NULL:
                w.acc_data = acc.data
                w.acc_len = acc.len
                w.acc_cap = acc.cap
            if rc == _DENSE:
                rc = 0
                w.i = i + 1
            elif rc == 0:
                w.i = i + tr.node_size[i]
            else:
                break
    if acc != NULL:
        acc.data = w.acc_data
        acc.len = w.acc_len
        acc.cap = w.acc_cap
    m.visited += w.visited
    return rc


cdef int _sparse(SetMachine m, const TrieTables* tr, const int32_t* rec, int32_t s, uint32_t* out, IntVec* acc,
                 IntVec* cd, int32_t* st) noexcept nogil:
    """Walk only the children (of the node with record ``rec``) whose byte set ``s`` follows.

    Declines (_DENSE) when those are over half the children: then the plain walk is cheaper.
    ``st`` is the walk's slot of the parent's depth. Returns 0, _DENSE, or a D_* failure.
    """
    cdef int32_t n_live = m.live_count(s), w, b, c, rank, rc, fan = 0, hits = 0
    cdef uint64_t live[4]
    cdef uint64_t have[4]
    cdef uint64_t x
    if n_live < 0:
        return n_live
    memcpy(live, &m.s_live[<int64_t> s * 4], sizeof(live))  # a copy: walking below may move s_live
    for w in range(4):
        have[w] = (<uint64_t> <uint32_t> rec[2 * w]) | ((<uint64_t> <uint32_t> rec[2 * w + 1]) << 32)
        fan += popcount64(have[w])
        hits += popcount64(have[w] & live[w])
    if hits * 2 > fan:
        return _DENSE
    rank = 0
    for w in range(4):
        x = have[w] & live[w]
        while x:
            b = ctz64(x)
            x &= x - 1
            c = rec[8 + rank + popcount64(have[w] & (((<uint64_t> 1) << b) - 1))]
            rc = mwalk(m, tr, c, c + tr.node_size[c], ((tr.node_db[c] >> 8) & NODE_DEPTH) - 1, s, out, acc, cd, st)
            if rc:
                return rc
        rank += popcount64(have[w])
    return 0


cdef int walk_below(SetMachine m, const TrieTables* tr, int32_t parent, int32_t start, uint32_t* out, IntVec* acc,
                    IntVec* cd, int32_t* st) noexcept nogil:
    """Walk the subtrees below ``parent`` (-1: the whole trie) from set ``start``, sparsely when few bytes live."""
    cdef int32_t rec = tr.root_fan if parent < 0 else tr.fan_off[parent], rc, first, last
    st[0] = 2 * start
    if rec >= 0:
        rc = _sparse(m, tr, &tr.fan_pool[rec], start, out, acc, cd, st)
        if rc != _DENSE:
            return rc
    first = parent + 1
    last = tr.n_nodes if parent < 0 else parent + tr.node_size[parent]
    return mwalk(m, tr, first, last, 0 if parent < 0 else (tr.node_db[parent] >> 8) & NODE_DEPTH, start, out, acc, cd,
                 st)


# -- verdicts of the sets that every safe character leads back to -----------------------------

cdef uint8_t[3] _PROBES = [0x61, 0x30, 0x20]  # 'a', '0', ' ': safe characters a fixed point must lead back with


cdef void _list_bits(const uint64_t* bits, int32_t nw, int32_t* pos, int32_t* toks, const int32_t* tids) noexcept nogil:
    """The set bits of ``bits[0:nw]``, ascending, into ``pos``, and ``tids`` at them into ``toks``."""
    cdef int32_t w, k = 0, j
    cdef uint64_t x
    for w in range(nw):
        x = bits[w]
        while x:
            j = w * 64 + ctz64(x)
            x &= x - 1
            pos[k] = j
            toks[k] = tids[j]
            k += 1


cdef const int32_t* fixed_verdicts(SetMachine m, int32_t s, const SliceTables* sl) noexcept nogil:
    """For a set that every safe character leads back to: which tokens of ``other`` it accepts, else NULL.

    From such a set, a token made of safe characters and then a rest is decided by its rest
    alone, so the rests are walked once (``sl.rests``). The record: ``n_acc``, ``n_und``,
    then the accepted tokens' positions in ``other`` (ascending) and their ids, then the
    same for the undecided ones; a subtree's tokens are a slice of each list.
    """
    cdef int64_t off = m.s_fix[s], cap, need
    cdef int32_t c, rc, i, j, n_acc = 0, n_und = 0, nw = sl.other_words
    cdef IntVec acc, cd
    cdef int32_t* st
    cdef int32_t* rec
    cdef uint64_t* wa
    if off >= 0:
        return &m.fix_pool[off]
    if off == FIX_NONE:
        return NULL
    for c in range(3):  # a few safe characters first: most sets fail here, without a whole slice step
        j = row_of(m, s)[_PROBES[c]]
        if j == D_UNKNOWN:
            j = m.compute(s, _PROBES[c])
        if j != 2 * s:
            if j > D_OVERFLOW:
                m.s_fix[s] = FIX_NONE
            return NULL
    c = m.slice_step(s)
    if c != 1 or m.sn_pool[m.sn_off[s]] != s:
        if c != SN_FAIL:
            m.s_fix[s] = FIX_NONE
        return NULL
    acc.data = NULL
    acc.len = acc.cap = 0
    cd.data = NULL
    cd.len = cd.cap = 0
    st = <int32_t*> malloc(2 * (sl.rests.max_depth + 2) * sizeof(int32_t))
    wa = <uint64_t*> calloc(2 * nw, sizeof(uint64_t))  # accepted, then undecided positions of ``other``
    if st == NULL or wa == NULL:
        free(st)
        free(wa)
        return NULL
    rc = walk_below(m, sl.rests, -1, s, NULL, &acc, &cd, st)
    free(st)
    memcpy(wa, sl.other_plain, nw * sizeof(uint64_t))  # tokens without a rest: accepted from a fixed point
    for i in range(acc.len):
        j = sl.rest_pos[acc.data[i]]
        wa[j >> 6] |= (<uint64_t> 1) << (j & 63)
    for i in range(cd.len):
        j = sl.rest_pos[cd.data[i]]
        wa[nw + (j >> 6)] |= (<uint64_t> 1) << (j & 63)
    free(acc.data)
    free(cd.data)
    for i in range(nw):
        n_acc += popcount64(wa[i])
        n_und += popcount64(wa[nw + i])
    need = 2 + 2 * (<int64_t> n_acc + n_und)
    if m.fix_len + need > _MAX_VERDICTS:
        rc = D_OVERFLOW
    if rc == 0 and m.fix_len + need > m.fix_cap:
        cap = max(m.fix_cap * 2, m.fix_len + need, 4096)
        if resize(<void**> &m.fix_pool, cap * sizeof(int32_t)):
            m.fix_cap = cap
        else:
            rc = D_OVERFLOW
    if rc != 0:  # walk those subtrees instead, from now on
        free(wa)
        m.s_fix[s] = FIX_NONE
        return NULL
    off = m.fix_len
    rec = &m.fix_pool[off]
    rec[0] = n_acc
    rec[1] = n_und
    _list_bits(wa, nw, &rec[2], &rec[2 + n_acc], sl.other.tok_ids)
    _list_bits(&wa[nw], nw, &rec[2 + 2 * n_acc], &rec[2 + 2 * n_acc + n_und], sl.other.tok_ids)
    free(wa)
    m.fix_len += need
    m.s_fix[s] = off
    return rec


cdef inline int32_t _lower_bound(const int32_t* a, int32_t n, int32_t x) noexcept nogil:
    """The first index of ascending ``a[0:n]`` holding a value >= ``x``."""
    cdef int32_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef int _take_verdicts(const int32_t* rec, int32_t lo, int32_t hi, IntVec* acc, IntVec* cd) noexcept nogil:
    """The tokens at positions ``lo:hi`` of ``other`` that a verdict record accepts (to ``acc``) or leaves undecided."""
    cdef int32_t a = _lower_bound(&rec[2], rec[0], lo), b = _lower_bound(&rec[2], rec[0], hi)
    if b > a and intvec_push_range(acc, &rec[2 + rec[0] + a], b - a) < 0:
        return D_OVERFLOW
    if rec[1]:
        a = _lower_bound(&rec[2 + 2 * rec[0]], rec[1], lo)
        b = _lower_bound(&rec[2 + 2 * rec[0]], rec[1], hi)
        if b > a and intvec_push_range(cd, &rec[2 + 2 * rec[0] + rec[1] + a], b - a) < 0:
            return D_OVERFLOW
    return 0


# -- the entry walk -------------------------------------------------------------------------

cdef int owalk(SetMachine m, const SliceTables* sl, int32_t start, IntVec* acc, IntVec* cd, int32_t* st,
               int8_t* uu) noexcept nogil:
    """Walk the ``other`` trie from ``start`` into ``acc`` / ``cd``, like ``mwalk``, but by subtrees where it can.

    ``uu[d]`` follows the safe-character automaton along the path (-1 once a byte is not
    part of a safe character). A node's subtree is decided by the verdicts of a set ``F``
    that every safe character leads back to (``fixed_verdicts``): one lookup per token
    instead of a walk of its bytes. That holds when no path was left for the context, the
    path up to the node is safe characters, and either the node's set is ``F`` or its byte
    leads the parent's set where it leads ``F`` (``F`` is the last such set met: the
    closing quote of an open object's first key goes where any key's does). Consecutive
    subtrees decided by one ``F`` are looked up as one range.
    """
    cdef const TrieTables* tr = sl.other
    cdef const int32_t* ndb = tr.node_db
    cdef const int32_t* nsize = tr.node_size
    cdef const int32_t* ntok = tr.node_tok
    cdef const int32_t* tids = tr.tok_ids
    cdef const int32_t* rec
    cdef const int32_t* fix_rec = NULL   # the last fixed set's verdicts
    cdef const int32_t* run_rec = NULL   # a range of positions decided by one record, not yet looked up
    cdef int32_t i = 0, last = tr.n_nodes, d, e, f, lo, hi, x, p, q, u, fix = -1, run_lo = 0, run_hi = 0
    cdef int64_t n_vis = 0
    st[0] = 2 * start
    uu[0] = 0
    while i < last:
        n_vis += 1
        x = ndb[i]
        d = (x >> 8) & NODE_DEPTH
        p = st[d - 1]
        e = row_of(m, p >> 1)[x & 255]
        if e == D_UNKNOWN:
            e = m.compute(p >> 1, <uint8_t> (x & 255))
        if e < 0:
            if e <= D_OVERFLOW:
                m.visited += n_vis
                return e
            if (p & 1) or e == D_DEAD_CTX:
                lo = ntok[i]
                hi = ntok[i + nsize[i]]
                if intvec_push_range(cd, &tids[lo], hi - lo) < 0:
                    return D_OVERFLOW
            i += nsize[i]
            continue
        q = e | (p & 1)
        st[d] = q
        u = uu[d - 1]
        if u >= 0:
            u = U8[u * 256 + (x & 255)]
        uu[d] = <int8_t> u
        rec = NULL
        if not (q & 1):
            if u == 0:
                rec = fixed_verdicts(m, q >> 1, sl)
                if rec != NULL:
                    fix = q >> 1
                    fix_rec = rec
            if rec == NULL and fix >= 0 and uu[d - 1] == 0:
                f = row_of(m, fix)[x & 255]
                if f == D_UNKNOWN:
                    f = m.compute(fix, <uint8_t> (x & 255))
                if f == e:
                    rec = fix_rec
        if rec != NULL:
            lo = ntok[i]
            hi = ntok[i + nsize[i]]
            if rec != run_rec or lo != run_hi:
                if run_rec != NULL and _take_verdicts(run_rec, run_lo, run_hi, acc, cd) < 0:
                    return D_OVERFLOW
                run_rec = rec
                run_lo = lo
            run_hi = hi
            i += nsize[i]
            continue
        lo = ntok[i]
        hi = ntok[i + 1]
        if lo < hi:
            if hi - lo == 1 and acc.len < acc.cap:
                acc.data[acc.len] = tids[lo]
                acc.len += 1
            elif intvec_push_range(acc, &tids[lo], hi - lo) < 0:
                return D_OVERFLOW
        i += 1
    m.visited += n_vis
    if run_rec != NULL and _take_verdicts(run_rec, run_lo, run_hi, acc, cd) < 0:
        return D_OVERFLOW
    return 0


cdef extern from *:
    """
    /* out = keep & ~(src[0] | ... | src[k - 1]), four sources a pass: one store per word and pass */
    static void llamay_keep_unless(uint32_t* __restrict out, const uint32_t* __restrict keep,
                                   const uint32_t* const* src, int k, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) out[i] = 0;
        for (int j = 0; j < k; j += 4) {
            const uint32_t* __restrict a = src[j];
            const uint32_t* __restrict b = j + 1 < k ? src[j + 1] : a;
            const uint32_t* __restrict c = j + 2 < k ? src[j + 2] : a;
            const uint32_t* __restrict d = j + 3 < k ? src[j + 3] : a;
            for (Py_ssize_t i = 0; i < n; i++) out[i] |= a[i] | b[i] | c[i] | d[i];
        }
        for (Py_ssize_t i = 0; i < n; i++) out[i] = keep[i] & ~out[i];
    }
    """
    void keep_unless "llamay_keep_unless" (uint32_t* out, const uint32_t* keep, const uint32_t** src, int k,
                                           Py_ssize_t n) noexcept nogil


cdef int class_walk(SetMachine m, const SliceTables* sl, int32_t start, uint32_t* dense, IntVec* cd,
                    int32_t* st) noexcept nogil:
    """A position's mask when the safe characters that live form one class at every level (``class_step``).

    A string of ``[A-Za-z0-9_-]`` (bounded or not) lets a token of at most ``r`` such
    characters through and kills any other: that is ``cum[r]`` less the tokens holding a byte
    outside the class (``has``, ``grp`` and ``wide``: a few bitmask passes instead of a walk
    of every token made of the class). Tokens with an unsafe byte or past ``levels``
    characters (``other``), and those with a character past ASCII when only some of those
    live, are walked by their bytes. ``dense`` comes in cleared. Returns 0, CL_NO when the
    position is not such a string (nothing written), or D_OVERFLOW / D_FULL.
    """
    cdef uint64_t c0[2]
    cdef uint64_t c1[2]
    cdef const uint32_t* src[N_GROUPS + 129]
    cdef int32_t w0, w1, t, cur = start, r = sl.levels, k, b, g, rc, n_src = 0
    cdef int64_t pairs = 0
    cdef Py_ssize_t n = sl.n_words
    t = m.class_step(start, c0, &w0)
    if t < 0:
        return t if t == D_OVERFLOW or t == D_FULL else CL_NO
    for b in range(128):  # few tokens of two class characters: a walk is cheaper than the bitmask passes
        if (c0[b >> 6] >> (b & 63)) & 1:
            for g in range(128):
                if (c0[g >> 6] >> (g & 63)) & 1:
                    pairs += sl.pairs[b * 128 + g]
    if pairs < _CLASS_MIN_PAIRS and w0 != WIDE_LIVE:
        return CL_NO
    for k in range(1, sl.levels + 1):
        if k > 1:
            t = m.class_step(cur, c1, &w1)
            if t == CL_NONE:
                r = k - 1
                break
            if t < 0:
                return t if t == D_OVERFLOW or t == D_FULL else CL_NO
            if c1[0] != c0[0] or c1[1] != c0[1] or w1 != w0:
                return CL_NO
        if t == cur:  # a fixed point: every length lives
            break
        cur = t
    if r < 2:  # one character at most: a walk is short
        return CL_NO
    for g in range(N_GROUPS):  # the short tokens with an ASCII byte that dies: by group, or byte by byte
        if not (GROUP_BITS[2 * g] & c0[0]) and not (GROUP_BITS[2 * g + 1] & c0[1]):
            src[n_src] = &sl.grp[g * n]
            n_src += 1
        elif (GROUP_BITS[2 * g] & ~c0[0]) or (GROUP_BITS[2 * g + 1] & ~c0[1]):
            for b in range(128):
                if GROUP[b] == g and not (c0[b >> 6] >> (b & 63)) & 1:
                    src[n_src] = &sl.has[b * n]
                    n_src += 1
    if w0 != WIDE_LIVE:
        src[n_src] = sl.wide
        n_src += 1
    keep_unless(dense, &sl.cum[r * n], src, n_src, n)
    rc = walk_below(m, sl.other, -1, start, dense, NULL, cd, st)
    if rc == 0 and w0 == WIDE_MIXED:
        rc = walk_below(m, sl.wide_trie, -1, start, dense, NULL, cd, st)
    return rc


cdef int entry_walk(SetMachine m, const TrieTables* tr, const SliceTables* sl, int32_t start, uint32_t* dense,
                    IntVec* acc, IntVec* cd, int32_t* base, int32_t* st) noexcept nogil:
    """A position's context-independent mask, from its start set.

    With slices (``base`` >= 0 on return) the mask is ``cum[base]`` plus the tokens in ``acc``;
    without, the tokens are set in ``dense``. Undecided tokens go to ``cd`` either way.
    Returns 0, or D_OVERFLOW / D_FULL.

    The slice check follows the sets after 1, 2, ... safe characters (``level``) up to
    ``sl.levels``: it gives up (whole-trie walk) as soon as a level mixes living and dying
    characters; it stops when all die (``r`` characters live) or the level repeats (any number
    live). When every level is one set ``chain[k]``, tokens with an unsafe byte after ``k``
    safe characters are walked from ``chain[k]`` by their rest alone; otherwise by their whole
    bytes (the ``other`` trie).
    """
    cdef int32_t chain[SLICE_LEVELS + 1]
    cdef int32_t lev_a[SN_MAX_TARGETS]
    cdef int32_t lev_b[SN_MAX_TARGETS]
    cdef int32_t* cur = lev_a
    cdef int32_t* nxt = lev_b
    cdef int32_t* tmp
    cdef int32_t n_cur = 1, n_nxt, k, j, i, c, x, g, rc, r = -1, fixed = -1, levels
    cdef bint single = True, mixed = False, capped = True, dead, alive, dropped = False
    cdef int64_t v0
    cdef const TrieTables* rest
    base[0] = -1
    if sl == NULL:
        return walk_below(m, tr, -1, start, dense, NULL, cd, st)
    levels = sl.levels
    cdef int64_t computed0 = m.computed
    chain[0] = start
    cur[0] = start
    for k in range(1, levels + 1):
        n_nxt = 0
        dead = False
        alive = dropped  # a set dropped as immortal lives on at every level
        for i in range(n_cur):
            # alive now and at every later level: not followed (a start that branches is checked too)
            if (n_cur > 1 or (k == 1 and m.slice_step(start) > 1)) and m.set_immortal(cur[i]):
                alive = True
                dropped = True
                continue
            c = m.slice_step(cur[i])
            if c == SN_DEAD:
                dead = True
                continue
            if c < 0:  # mixed or failed
                mixed = True
                break
            alive = True
            for j in range(c):
                x = m.sn_pool[m.sn_off[cur[i]] + j]
                for g in range(n_nxt):
                    if nxt[g] == x:
                        break
                else:
                    if n_nxt >= SN_MAX_TARGETS:
                        mixed = True
                        break
                    nxt[n_nxt] = x
                    n_nxt += 1
            if mixed:
                break
        if mixed or (dead and alive):
            mixed = True
            capped = False
            break
        if dead:
            r = k - 1
            capped = False
            break
        if dropped:
            single = False
            if n_nxt == 0:  # every set immortal: all safe strings live
                capped = False
                break
        # a level that repeats the last one repeats forever
        elif n_nxt == n_cur:
            for i in range(n_nxt):
                for g in range(n_cur):
                    if cur[g] == nxt[i]:
                        break
                else:
                    break
            else:
                fixed = k
                capped = False
                break
        if n_nxt > 1:
            single = False
        chain[k] = nxt[0]
        tmp = cur
        cur = nxt
        nxt = tmp
        n_cur = n_nxt
    m.checked += m.computed - computed0
    if mixed and k == 1:  # some safe characters die at once: maybe a class
        v0 = m.visited
        rc = class_walk(m, sl, start, dense, cd, st)
        if rc != CL_NO:
            m.v_kind[4] += m.visited - v0
            m.n_kind[4] += 1
            return rc
    if mixed:
        v0 = m.visited
        rc = walk_below(m, tr, -1, start, dense, NULL, cd, st)
        m.v_kind[0] += m.visited - v0
        m.n_kind[0] += 1
        return rc
    if not single:
        # r characters live (all of them when the levels repeat or run out): the rest by whole bytes
        base[0] = r if r >= 0 else levels
        v0 = m.visited
        rc = owalk(m, sl, start, acc, cd, st, <int8_t*> &st[sl.other.max_depth + 2])
        m.v_kind[1] += m.visited - v0
        m.n_kind[1] += 1
        return rc
    rest = sl.rest
    if r >= 0:
        base[0] = r
    elif fixed >= 0:
        base[0] = sl.kmax
        r = sl.kmax
        for k in range(fixed, sl.kmax + 1):
            if k <= levels:
                chain[k] = chain[fixed - 1]
    else:
        base[0] = levels
        r = levels - 1
    v0 = m.visited
    m.n_kind[2] += 1
    for k in range(r + 1):
        g = sl.group_node[k]
        if g >= 0:
            rc = walk_below(m, rest, g, chain[k if k <= levels else levels], NULL, acc, cd, st)
            if rc:
                return rc
    m.v_kind[2] += m.visited - v0
    if capped:  # ran out of levels: the tokens past them, by their bytes past them
        v0 = m.visited
        rc = walk_below(m, sl.long, -1, chain[levels], NULL, acc, cd, st)
        m.v_kind[3] += m.visited - v0
        m.n_kind[3] += 1
        return rc
    return 0
