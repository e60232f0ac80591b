# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The first-visit fast path: a lazy DFA over configuration sets, and string slices of the vocabulary.

Theory of operation. A context-independent walk (``walk.walk``) steps a set of configurations
through each trie node's byte: tens of nanoseconds per node, milliseconds per vocabulary. Yet
the sets such walks meet repeat endlessly (inside a string every character leads back to the
same set). ``SetMachine`` interns each set (its configurations sorted, their frames interned
too, so equal sets get one id; states replaced by their bisimulation class and counters far
from their bounds folded, since no walk of a token's length tells them apart) and gives it a
row of 256 entries, filled on demand: the
target set's id (times two, plus the flag "a path popped into CTX or ran past the whitespace
window") or "dead". A row entry is computed once for the whole piece of bytes that the set's
edges treat alike (``[a-z]`` is one step, not 26), configuration by configuration with a memo
on the matching edge (``cfg_step``): a set's step is the union of its configurations' steps.
A walk is then one load per trie node (``mwalk``, its loop in C); at a node with many children
it follows only those whose byte lives (``_sparse``). The machine belongs to one grammar
(through its mask cache) and is shared by its matchers under a lock; it stops growing at
``MAX_SETS`` sets, and walks fall back to ``walk.walk``.

Slices (llguidance's idea, our code). Inside a JSON string nearly every token is allowed,
so even a one-load walk of 270k nodes is too slow. ``StringSlices`` splits a vocabulary once:
a token made only of *safe characters* (complete UTF-8 characters other than ``"``, ``\\``
and C0 controls) is in slice ``n``, its number of characters; any other token has ``k``
safe characters and then a *rest* that starts with an unsafe byte. ``cum[r]`` is the mask of
slice tokens of at most ``r`` characters; the rests sit in a trie keyed by ``k`` (``rest``),
and the tokens past 16 safe characters in another (``long``). ``SetMachine.slice_step(s)``
steps every safe character from set ``s`` and says whether they all live (and to which sets),
all die, or neither. ``entry_walk`` follows that from a position's start set for up to 16
characters: when one set follows another (a string, bounded or not), up to ``r`` characters
live and more die, so the mask is ``cum[r]`` plus the rests of group ``k <= r`` walked from
the set after ``k`` characters: a few thousand nodes instead of the whole trie. When the sets
branch (the key of an open object, matched against the declared names), the other tokens are
walked by their whole bytes (``owalk``), and any subtree below a set that every safe character
leads back to is decided from that set's verdicts on the rests (``fixed_verdicts``). Sets that
hold an *immortal* state (``state_immortal``: every safe string has a path from it, found by a
fixpoint on the grammar's tables) need no further levels.

Classes. When only some safe characters live (a ``pattern`` such as ``^[A-Za-z0-9_-]{1,64}$``)
but those that do form the same class at every level and all lead to one set
(``class_step``), a short token lives exactly when all its bytes are in the class and it is
short enough: ``cum[r]`` less the tokens holding a byte outside the class, from per-byte token
bitmasks (``class_walk``); the other tokens are walked. Any other position is walked whole.
"""

from cpython.pythread cimport (WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock, PyThread_free_lock,
                               PyThread_release_lock)
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset

import numpy as np

from .automaton cimport (EDGE_CALL, F_NEED_CTX, F_OVERFLOW, Arena, CompiledGrammar, Config, Frame, Tables,
                         arena_free, arena_init, fold_counter, step)
from .trie cimport FAN_MIN, NODE_DEPTH, TokenTrie, TrieTables
from .walk cimport IntVec, intvec_push_range


#: Sets one machine may hold (each costs a 1 KiB row): past it, first visits walk the old way.
MAX_SETS = 1 << 16

cdef enum:
    _MAX_MEMO = 1 << 20         # entries of the one-configuration step memo (past it: no more memoizing)
    _MAX_VERDICTS = 1 << 24     # ints of fixed-point verdict records (past it: those subtrees are walked)

cdef extern from *:
    """
    static inline int llamay_clz64(unsigned long long x) { return __builtin_clzll(x); }
    static inline int llamay_ctz64(unsigned long long x) { return __builtin_ctzll(x); }
    static inline int llamay_popcount64(unsigned long long x) { return __builtin_popcountll(x); }
    """
    int clz64 "llamay_clz64" (uint64_t x) noexcept nogil
    int ctz64 "llamay_ctz64" (uint64_t x) noexcept nogil
    int popcount64 "llamay_popcount64" (uint64_t x) noexcept nogil


cdef inline uint32_t _mix(uint32_t h, uint32_t x) noexcept nogil:
    h ^= x
    h *= 0x9E3779B1u
    return (h << 15) | (h >> 17)


cdef inline bint _resize(void** p, size_t size) noexcept nogil:
    """``realloc`` in place: on failure ``*p`` is left as it was, still valid, and False returned."""
    cdef void* q = realloc(p[0], size)
    if q == NULL:
        return False
    p[0] = q
    return True


cdef inline bint _less(Config* x, Config* y) noexcept nogil:
    if x.state != y.state:
        return x.state < y.state
    if x.counter != y.counter:
        return x.counter < y.counter
    if x.parent != y.parent:
        return x.parent < y.parent
    return x.ws < y.ws


cdef inline void _sort_cfgs(Config* cfg, int32_t n) noexcept nogil:
    """Insertion sort: sets are small."""
    cdef int32_t i, k
    cdef Config x
    for i in range(1, n):
        x = cfg[i]
        k = i - 1
        while k >= 0 and _less(&x, &cfg[k]):
            cfg[k + 1] = cfg[k]
            k -= 1
        cfg[k + 1] = x


cdef class SetMachine:
    """The lazily built DFA of one grammar's context-independent walks (see the module doc)."""

    def __cinit__(self, CompiledGrammar grammar, int32_t horizon):
        self.g = grammar
        self.t = &grammar.t
        self.horizon = horizon
        if arena_init(&self.a, grammar.limits.max_configurations) < 0:
            raise MemoryError("set machine arena")
        self.fh_mask = 255
        self.fh = <int32_t*> calloc(self.fh_mask + 1, sizeof(int32_t))
        self.sh_mask = 255
        self.sh = <int32_t*> calloc(self.sh_mask + 1, sizeof(int32_t))
        self.pool_cap = 256
        self.pool = <Config*> malloc(self.pool_cap * sizeof(Config))
        self.s_cap = 64
        self.s_off = <int64_t*> malloc(self.s_cap * sizeof(int64_t))
        self.s_len = <int32_t*> malloc(self.s_cap * sizeof(int32_t))
        self.s_ws = <int32_t*> malloc(self.s_cap * sizeof(int32_t))
        self.sn_cnt = <int32_t*> malloc(self.s_cap * sizeof(int32_t))
        self.sn_off = <int64_t*> malloc(self.s_cap * sizeof(int64_t))
        self.sn_cap = 256
        self.sn_pool = <int32_t*> malloc(self.sn_cap * sizeof(int32_t))
        self.blocks = <int32_t**> calloc(1, sizeof(int32_t*))
        self.n_blocks = 1
        self.s_bnd = <uint64_t*> malloc(self.s_cap * 4 * sizeof(uint64_t))
        self.s_bnd_ok = <uint8_t*> malloc(self.s_cap * sizeof(uint8_t))
        self.s_fix = <int64_t*> malloc(self.s_cap * sizeof(int64_t))
        self.s_live = <uint64_t*> malloc(self.s_cap * 4 * sizeof(uint64_t))
        self.s_live_n = <int32_t*> malloc(self.s_cap * sizeof(int32_t))
        self.remap_cap = 64
        self.remap = <int32_t*> malloc(self.remap_cap * sizeof(int32_t))
        self.max_sets = MAX_SETS
        n = max(grammar.t.n_states, 1)
        self.st_imm = <int8_t*> malloc(n * 8 * sizeof(int8_t))
        self.su_off = <int32_t*> malloc(n * sizeof(int32_t))
        self.su_len = <int32_t*> malloc(n * sizeof(int32_t))
        if self.st_imm != NULL:
            memset(self.st_imm, 0xFF, n * 8)
        if self.su_off != NULL:
            memset(self.su_off, 0xFF, n * sizeof(int32_t))
        self.st_pidx = <int32_t*> malloc(n * 8 * sizeof(int32_t))
        self.su_cap = 256
        self.su_pool = <int32_t*> malloc(self.su_cap * sizeof(int32_t))
        self.s_imm = <int8_t*> malloc(self.s_cap * sizeof(int8_t))
        self.cm_mask = 255
        self.cm_key = <int32_t*> malloc((self.cm_mask + 1) * 6 * sizeof(int32_t))
        self.cm_val = <int32_t*> malloc((self.cm_mask + 1) * sizeof(int32_t))
        if self.cm_key != NULL:
            for i in range(self.cm_mask + 1):
                self.cm_key[i * 6] = -3
        self.lock = PyThread_allocate_lock()
        if (self.fh == NULL or self.sh == NULL or self.pool == NULL or self.s_off == NULL or self.s_len == NULL
                or self.s_ws == NULL or self.sn_cnt == NULL or self.sn_off == NULL or self.sn_pool == NULL
                or self.blocks == NULL or self.s_bnd == NULL or self.s_bnd_ok == NULL or self.s_fix == NULL
                or self.s_live == NULL or self.s_live_n == NULL
                or self.remap == NULL or self.cm_key == NULL or self.cm_val == NULL or self.st_imm == NULL
                or self.su_off == NULL or self.su_len == NULL or self.su_pool == NULL or self.s_imm == NULL
                or self.st_pidx == NULL
                or self.lock == NULL):
            raise MemoryError("set machine")

    def __dealloc__(self):
        arena_free(&self.a)
        free(self.fh)
        free(self.sh)
        free(self.pool)
        free(self.s_off)
        free(self.s_len)
        free(self.s_ws)
        free(self.sn_cnt)
        free(self.sn_off)
        free(self.sn_pool)
        cdef int32_t i
        if self.blocks != NULL:
            for i in range(self.n_blocks):
                free(self.blocks[i])
        free(self.blocks)
        free(self.s_bnd)
        free(self.s_bnd_ok)
        free(self.s_fix)
        free(self.s_live)
        free(self.s_live_n)
        free(self.fix_pool)
        free(self.remap)
        free(self.cm_key)
        free(self.cm_val)
        free(self.st_imm)
        free(self.st_pidx)
        free(self.su_off)
        free(self.su_len)
        free(self.su_pool)
        free(self.s_imm)
        if self.lock != NULL:
            PyThread_free_lock(self.lock)

    @property
    def kinds(self):
        """Walks so far by kind (whole trie, other tokens, rest groups, long tokens, class): (count, nodes)."""
        return [(self.n_kind[i], self.v_kind[i]) for i in range(5)]

    @property
    def n_sets(self):
        return self.n_sets

    @property
    def nbytes(self):
        return self.s_cap * (256 * 4 + 20) + self.pool_cap * sizeof(Config) + (self.sh_mask + self.fh_mask + 2) * 4

    # -- interning --------------------------------------------------------------------------
    cdef int32_t intern_frame(self, int32_t ret, int32_t counter, int32_t parent) noexcept nogil:
        """The interned frame (ret's class, counter folded, parent); appended at ``a.frames[n_fr]`` when new.

        Returns -1 when out of memory.
        """
        cdef uint32_t h, j
        cdef int32_t f, i, cap
        cdef int32_t* table
        cdef void* p
        ret = self.t.canon[ret]
        counter = fold_counter(self.t, ret, counter, self.horizon)
        h = _mix(_mix(_mix(0x811C9DC5u, <uint32_t> ret), <uint32_t> counter), <uint32_t> parent)
        j = h & <uint32_t> self.fh_mask
        while self.fh[j]:
            f = self.fh[j] - 1
            if self.a.frames[f].ret == ret and self.a.frames[f].counter == counter and self.a.frames[f].parent == parent:
                return f
            j = (j + 1) & <uint32_t> self.fh_mask
        f = self.n_fr
        if f >= self.a.frames_cap:
            cap = self.a.frames_cap * 2
            p = realloc(self.a.frames, cap * sizeof(Frame))
            if p == NULL:
                return -1
            self.a.frames = <Frame*> p
            self.a.frames_cap = cap
        self.a.frames[f].ret = ret
        self.a.frames[f].counter = counter
        self.a.frames[f].parent = parent
        self.fh[j] = f + 1
        self.n_fr = f + 1
        if self.n_fr * 2 > self.fh_mask:
            cap = (self.fh_mask + 1) * 2
            table = <int32_t*> calloc(cap, sizeof(int32_t))
            if table == NULL:
                return -1
            for i in range(self.n_fr):
                h = _mix(_mix(_mix(0x811C9DC5u, <uint32_t> self.a.frames[i].ret), <uint32_t> self.a.frames[i].counter),
                         <uint32_t> self.a.frames[i].parent)
                j = h & <uint32_t> (cap - 1)
                while table[j]:
                    j = (j + 1) & <uint32_t> (cap - 1)
                table[j] = i + 1
            free(self.fh)
            self.fh = table
            self.fh_mask = cap - 1
        return f

    cdef int32_t intern_set(self, Config* cfg, int32_t n, int32_t ws_cap) noexcept nogil:
        """The id of the set ``cfg[0:n]``; D_FULL or D_OVERFLOW when it cannot be added.

        The configurations' states become their classes' and their counters are folded
        (``fold_counter``), then they are sorted and deduplicated, in place: equivalent states
        are one set, and so is a bounded repetition far from its bounds, not one per count.
        """
        cdef int32_t i, k, s, cap
        cdef Config x
        cdef uint32_t h = _mix(0x811C9DC5u, <uint32_t> ws_cap), j
        cdef int32_t* table
        cdef void* p
        cdef int64_t pcap
        for i in range(n):
            if cfg[i].state >= 0:
                cfg[i].state = self.t.canon[cfg[i].state]
            cfg[i].counter = fold_counter(self.t, cfg[i].state, cfg[i].counter, self.horizon)
        _sort_cfgs(cfg, n)
        k = 0
        for i in range(n):  # folding may have made two configurations equal
            if k == 0 or memcmp(&cfg[k - 1], &cfg[i], sizeof(Config)) != 0:
                cfg[k] = cfg[i]
                k += 1
        n = k
        for i in range(n):
            h = _mix(_mix(_mix(_mix(h, <uint32_t> cfg[i].state), <uint32_t> cfg[i].counter), <uint32_t> cfg[i].parent),
                     <uint32_t> cfg[i].ws)
        j = h & <uint32_t> self.sh_mask
        while self.sh[j]:
            s = self.sh[j] - 1
            if (self.s_len[s] == n and self.s_ws[s] == ws_cap
                    and memcmp(&self.pool[self.s_off[s]], cfg, n * sizeof(Config)) == 0):
                return s
            j = (j + 1) & <uint32_t> self.sh_mask
        s = self.n_sets
        if s >= self.max_sets:
            return D_FULL
        if s >= self.s_cap:
            cap = self.s_cap * 2
            if not (_resize(<void**> &self.s_off, cap * sizeof(int64_t))
                    and _resize(<void**> &self.s_len, cap * sizeof(int32_t))
                    and _resize(<void**> &self.s_ws, cap * sizeof(int32_t))
                    and _resize(<void**> &self.sn_cnt, cap * sizeof(int32_t))
                    and _resize(<void**> &self.sn_off, cap * sizeof(int64_t))
                    and _resize(<void**> &self.s_bnd, <size_t> cap * 4 * sizeof(uint64_t))
                    and _resize(<void**> &self.s_bnd_ok, cap * sizeof(uint8_t))
                    and _resize(<void**> &self.s_fix, cap * sizeof(int64_t))
                    and _resize(<void**> &self.s_live, <size_t> cap * 4 * sizeof(uint64_t))
                    and _resize(<void**> &self.s_live_n, cap * sizeof(int32_t))
                    and _resize(<void**> &self.s_imm, cap * sizeof(int8_t))):
                return D_OVERFLOW  # the arrays already grown stay valid: only s_cap says how many are
            self.s_cap = cap
        if self.pool_len + n > self.pool_cap:
            pcap = self.pool_cap * 2
            while pcap < self.pool_len + n:
                pcap *= 2
            p = realloc(self.pool, pcap * sizeof(Config))
            if p == NULL:
                return D_OVERFLOW
            self.pool = <Config*> p
            self.pool_cap = pcap
        memcpy(&self.pool[self.pool_len], cfg, n * sizeof(Config))
        self.s_off[s] = self.pool_len
        self.s_len[s] = n
        self.s_ws[s] = ws_cap
        self.sn_cnt[s] = SN_UNKNOWN
        self.s_bnd_ok[s] = 0
        self.s_fix[s] = FIX_UNKNOWN
        self.s_live_n[s] = -1
        self.s_imm[s] = -1
        if (s >> ROW_SHIFT) >= self.n_blocks:
            p = realloc(self.blocks, self.n_blocks * 2 * sizeof(int32_t*))
            if p == NULL:
                return D_OVERFLOW
            self.blocks = <int32_t**> p
            memset(&self.blocks[self.n_blocks], 0, self.n_blocks * sizeof(int32_t*))
            self.n_blocks *= 2
        if self.blocks[s >> ROW_SHIFT] == NULL:
            self.blocks[s >> ROW_SHIFT] = <int32_t*> malloc((256 << ROW_SHIFT) * sizeof(int32_t))
            if self.blocks[s >> ROW_SHIFT] == NULL:
                return D_OVERFLOW
        memset(row_of(self, s), 0xFF, 256 * sizeof(int32_t))  # D_UNKNOWN
        self.pool_len += n
        self.sh[j] = s + 1
        self.n_sets = s + 1
        if self.n_sets * 2 > self.sh_mask:
            cap = (self.sh_mask + 1) * 2
            table = <int32_t*> calloc(cap, sizeof(int32_t))
            if table == NULL:
                return D_OVERFLOW
            for s in range(self.n_sets):
                h = _mix(0x811C9DC5u, <uint32_t> self.s_ws[s])
                for i in range(self.s_len[s]):
                    x = self.pool[self.s_off[s] + i]
                    h = _mix(_mix(_mix(_mix(h, <uint32_t> x.state), <uint32_t> x.counter), <uint32_t> x.parent),
                             <uint32_t> x.ws)
                j = h & <uint32_t> (cap - 1)
                while table[j]:
                    j = (j + 1) & <uint32_t> (cap - 1)
                table[j] = s + 1
            free(self.sh)
            self.sh = table
            self.sh_mask = cap - 1
            s = self.n_sets - 1
        return s

    def _intern_chain(self, int32_t state, int32_t counter, int32_t ws_cap, list frames, bint bottom):
        """Intern a start configuration (Python side, for tests): ``frames`` is [(ret, counter), ...] top first."""
        cdef Config c
        cdef int32_t parent = -1 if bottom else -2, i, s
        for i in range(len(frames) - 1, -1, -1):
            parent = self.intern_frame(frames[i][0], frames[i][1], parent)
            if parent < 0:
                raise MemoryError("set machine frames")
        c.state, c.counter, c.parent, c.ws = state, counter, parent, 0
        s = self.intern_set(&c, 1, ws_cap)
        if s < 0:
            return None
        return s

    # -- transitions ------------------------------------------------------------------------
    cdef int32_t compute(self, int32_t s, uint8_t byte) noexcept nogil:
        """Fill the row entries of set ``s`` for the piece of bytes around ``byte``; returns the entry.

        A set steps configuration by configuration (``cfg_step``, memoized), and the
        results are united: a set's step is the union of its configurations' steps.
        """
        cdef const Tables* t = self.t
        cdef int64_t off = self.s_off[s]
        cdef int32_t n = self.s_len[s], i, j, e, st, lo, hi, r, r1, n_live = 0, flag = 0, ws_cap = self.s_ws[s]
        cdef uint64_t* bnd = &self.s_bnd[<int64_t> s * 4]
        cdef uint64_t x
        cdef int32_t* row
        cdef int32_t live[8]
        cdef Config c
        if not self.s_bnd_ok[s]:
            # where the pieces of bytes start: byte 0, and each edge's first byte and the byte past its last
            bnd[0] = 1
            bnd[1] = 0
            bnd[2] = 0
            bnd[3] = 0
            for i in range(n):
                st = self.pool[off + i].state
                if st < 0:
                    continue
                for e in range(t.b_start[st], t.b_start[st + 1]):
                    bnd[t.b_lo[e] >> 6] |= (<uint64_t> 1) << (t.b_lo[e] & 63)
                    if t.b_hi[e] < 255:
                        bnd[(t.b_hi[e] + 1) >> 6] |= (<uint64_t> 1) << ((t.b_hi[e] + 1) & 63)
            self.s_bnd_ok[s] = 1
        # the piece around ``byte``: from the last start at or below it to the next start above it
        i = byte >> 6
        x = bnd[i] & (((<uint64_t> 2) << (byte & 63)) - 1)
        while x == 0:
            i -= 1
            x = bnd[i]
        lo = i * 64 + 63 - clz64(x)
        hi = self.piece_end(s, byte)
        self.computed += 1
        for i in range(n):
            c = self.pool[off + i]  # a copy: the pool may move while stepping
            r1 = self.cfg_step(c, byte, ws_cap)
            if r1 == D_DEAD:
                continue
            if r1 == D_DEAD_CTX:
                flag = 1
                continue
            if r1 < 0:
                return r1
            flag |= r1 & 1
            for j in range(n_live):
                if live[j] == r1 >> 1:
                    break
            else:
                if n_live == 8:
                    n_live = -1
                    break
                live[n_live] = r1 >> 1
                n_live += 1
        if n_live < 0:  # results of many configurations: step the set at once
            r = self.step_cfgs(&self.pool[off], n, byte, ws_cap)
        elif n_live == 0:
            r = D_DEAD_CTX if flag else D_DEAD
        elif n_live == 1:
            r = 2 * live[0] + flag
        else:
            r = self.union_sets(live, n_live, ws_cap)
            if r >= 0:
                r = 2 * r + flag
        if r <= D_OVERFLOW:
            return r
        row = row_of(self, s)
        for i in range(lo, hi + 1):
            row[i] = r
        return r

    cdef int32_t cfg_step(self, Config c, uint8_t byte, int32_t ws_cap) noexcept nogil:
        """One configuration's step by ``byte`` as a row entry; memoized when one edge matches.

        With one matching edge the result depends only on the edge's target and whitespace
        charge, the counter, frame and whitespace spent, and the window: many states share
        such edges (every node of a key's name trie leaves to the same free tail).
        """
        cdef const Tables* t = self.t
        cdef int32_t st = c.state, e, m = 0, tgt = 0, wsf = 0, r
        cdef uint32_t h, j
        cdef int32_t* k
        if st < 0 or not (t.byteset[st * 8 + (byte >> 5)] >> (byte & 31)) & 1:
            return D_DEAD
        for e in range(t.b_start[st], t.b_start[st + 1]):
            if t.b_lo[e] > byte:
                break
            if byte <= t.b_hi[e]:
                m += 1
                tgt = t.b_tgt[e]
                wsf = t.b_ws[e]
        if m != 1:
            return self.step_cfgs(&c, 1, byte, ws_cap)
        h = _mix(_mix(_mix(_mix(_mix(_mix(0x811C9DC5u, <uint32_t> tgt), <uint32_t> wsf), <uint32_t> c.counter),
                           <uint32_t> c.parent), <uint32_t> c.ws), <uint32_t> ws_cap)
        j = h & <uint32_t> self.cm_mask
        while self.cm_key[j * 6] != -3:
            k = &self.cm_key[j * 6]
            if (k[0] == tgt and k[1] == wsf and k[2] == c.counter and k[3] == c.parent and k[4] == c.ws
                    and k[5] == ws_cap):
                return self.cm_val[j]
            j = (j + 1) & <uint32_t> self.cm_mask
        r = self.step_cfgs(&c, 1, byte, ws_cap)
        if r <= D_OVERFLOW or not self.cm_room():
            return r
        j = h & <uint32_t> self.cm_mask
        while self.cm_key[j * 6] != -3:
            j = (j + 1) & <uint32_t> self.cm_mask
        k = &self.cm_key[j * 6]
        k[0] = tgt
        k[1] = wsf
        k[2] = c.counter
        k[3] = c.parent
        k[4] = c.ws
        k[5] = ws_cap
        self.cm_val[j] = r
        self.cm_len += 1
        return r

    cdef bint cm_room(self) noexcept nogil:
        """Make room for one more memo entry (rehash at half load); False when out of memory."""
        cdef int32_t cap, i, old_cap = self.cm_mask + 1
        cdef int32_t* keys
        cdef int32_t* vals
        cdef uint32_t h, j
        cdef int32_t* k
        if (self.cm_len + 1) * 2 <= old_cap:
            return True
        if self.cm_len >= _MAX_MEMO:
            return False
        cap = old_cap * 2
        keys = <int32_t*> malloc(cap * 6 * sizeof(int32_t))
        vals = <int32_t*> malloc(cap * sizeof(int32_t))
        if keys == NULL or vals == NULL:
            free(keys)
            free(vals)
            return False
        for i in range(cap):
            keys[i * 6] = -3
        for i in range(old_cap):
            k = &self.cm_key[i * 6]
            if k[0] == -3:
                continue
            h = _mix(_mix(_mix(_mix(_mix(_mix(0x811C9DC5u, <uint32_t> k[0]), <uint32_t> k[1]), <uint32_t> k[2]),
                               <uint32_t> k[3]), <uint32_t> k[4]), <uint32_t> k[5])
            j = h & <uint32_t> (cap - 1)
            while keys[j * 6] != -3:
                j = (j + 1) & <uint32_t> (cap - 1)
            memcpy(&keys[j * 6], k, 6 * sizeof(int32_t))
            vals[j] = self.cm_val[i]
        free(self.cm_key)
        free(self.cm_val)
        self.cm_key = keys
        self.cm_val = vals
        self.cm_mask = cap - 1
        return True

    cdef int32_t step_cfgs(self, const Config* src, int32_t n, uint8_t byte, int32_t ws_cap) noexcept nogil:
        """Step ``src[0:n]`` (not inside the pool) by ``byte`` and intern the result: a row entry."""
        cdef const Tables* t = self.t
        cdef int32_t i, k, w, f, par, old_fr, nnew, cap
        cdef int flags = 0
        cdef Arena* a = &self.a
        cdef void* p
        if n > a.cfg_cap:
            cap = a.cfg_cap
            while cap < n:
                cap *= 2
            p = realloc(a.cfg, cap * sizeof(Config))
            if p == NULL:
                return D_OVERFLOW
            a.cfg = <Config*> p
            a.cfg_cap = cap
        memcpy(a.cfg, src, n * sizeof(Config))
        a.cfg_len = n
        old_fr = self.n_fr
        a.n_frames = old_fr
        k = step(t, a, 0, n, byte, True, ws_cap, &flags)
        self.stepped += 1
        if flags & F_OVERFLOW:
            a.n_frames = old_fr
            return D_OVERFLOW
        if k == 0:
            return D_DEAD_CTX if flags & F_NEED_CTX else D_DEAD
        # intern the frames the step created (a frame's parent precedes it), then the set
        nnew = a.n_frames - old_fr
        if nnew > self.remap_cap:
            p = realloc(self.remap, nnew * 2 * sizeof(int32_t))
            if p == NULL:
                a.n_frames = old_fr
                return D_OVERFLOW
            self.remap = <int32_t*> p
            self.remap_cap = nnew * 2
        for i in range(nnew):
            f = old_fr + i
            par = a.frames[f].parent
            if par >= old_fr:
                par = self.remap[par - old_fr]
            # interning may append at n_fr <= f, over a frame already read
            w = self.intern_frame(a.frames[f].ret, a.frames[f].counter, par)
            if w < 0:
                a.n_frames = self.n_fr
                return D_OVERFLOW
            self.remap[i] = w
        a.n_frames = self.n_fr
        for i in range(n, n + k):
            if a.cfg[i].parent >= old_fr:
                a.cfg[i].parent = self.remap[a.cfg[i].parent - old_fr]
        w = self.intern_set(&a.cfg[n], k, ws_cap)
        if w < 0:
            return w
        return 2 * w + (1 if flags & F_NEED_CTX else 0)

    cdef int32_t union_sets(self, const int32_t* ids, int32_t m, int32_t ws_cap) noexcept nogil:
        """The set holding every configuration of sets ``ids[0:m]``: its id, or D_OVERFLOW / D_FULL."""
        cdef int32_t i, j, n = 0, cap, k
        cdef Arena* a = &self.a
        cdef void* p
        for i in range(m):
            n += self.s_len[ids[i]]
        if n > a.cfg_cap:
            cap = a.cfg_cap
            while cap < n:
                cap *= 2
            p = realloc(a.cfg, cap * sizeof(Config))
            if p == NULL:
                return D_OVERFLOW
            a.cfg = <Config*> p
            a.cfg_cap = cap
        n = 0
        for i in range(m):
            memcpy(&a.cfg[n], &self.pool[self.s_off[ids[i]]], self.s_len[ids[i]] * sizeof(Config))
            n += self.s_len[ids[i]]
        _sort_cfgs(a.cfg, n)
        j = 0
        for i in range(n):
            if j == 0 or memcmp(&a.cfg[j - 1], &a.cfg[i], sizeof(Config)) != 0:
                a.cfg[j] = a.cfg[i]
                j += 1
        if j > a.max_configs:
            return D_OVERFLOW
        return self.intern_set(a.cfg, j, ws_cap)

    cdef const int32_t* fixed_verdicts(self, int32_t s, const SliceTables* sl) noexcept nogil:
        """For a set that every safe character leads back to: which tokens of ``other`` it accepts, else NULL.

        From such a set, a token made of safe characters and then a rest is decided by its rest
        alone, so the rests are walked once (``sl.rests``). The record: ``n_acc``, ``n_und``,
        then the accepted tokens' positions in ``other`` (ascending) and their ids, then the
        same for the undecided ones; a subtree's tokens are a slice of each list.
        """
        cdef int64_t off = self.s_fix[s], cap, need
        cdef int32_t c, rc, i, j, n_acc = 0, n_und = 0, nw = sl.other_words
        cdef IntVec acc, cd
        cdef int32_t* st
        cdef int32_t* rec
        cdef uint64_t* wa
        cdef void* p
        if off >= 0:
            return &self.fix_pool[off]
        if off == FIX_NONE:
            return NULL
        for c in range(3):  # a few safe characters first: most sets fail here, without a whole slice step
            j = row_of(self, s)[_PROBES[c]]
            if j == D_UNKNOWN:
                j = self.compute(s, _PROBES[c])
            if j != 2 * s:
                if j > D_OVERFLOW:
                    self.s_fix[s] = FIX_NONE
                return NULL
        c = self.slice_step(s)
        if c != 1 or self.sn_pool[self.sn_off[s]] != s:
            if c != SN_FAIL:
                self.s_fix[s] = FIX_NONE
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
        rc = walk_below(self, sl.rests, -1, s, NULL, &acc, &cd, st)
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
        if self.fix_len + need > _MAX_VERDICTS:
            rc = D_OVERFLOW
        if rc == 0 and self.fix_len + need > self.fix_cap:
            cap = max(self.fix_cap * 2, self.fix_len + need, 4096)
            p = realloc(self.fix_pool, cap * sizeof(int32_t))
            if p == NULL:
                rc = D_OVERFLOW
            else:
                self.fix_pool = <int32_t*> p
                self.fix_cap = cap
        if rc != 0:  # walk those subtrees instead, from now on
            free(wa)
            self.s_fix[s] = FIX_NONE
            return NULL
        off = self.fix_len
        rec = &self.fix_pool[off]
        rec[0] = n_acc
        rec[1] = n_und
        _list_bits(wa, nw, &rec[2], &rec[2 + n_acc], sl.other.tok_ids)
        _list_bits(&wa[nw], nw, &rec[2 + 2 * n_acc], &rec[2 + 2 * n_acc + n_und], sl.other.tok_ids)
        free(wa)
        self.fix_len += need
        self.s_fix[s] = off
        return rec

    # -- immortal states: every safe character string stays alive from them -------------------
    cdef int successors(self, int32_t t) noexcept nogil:
        """Byte-reading states a configuration entering state ``t`` may be at, without popping or counters.

        ``t`` itself if it reads bytes, and the starts of the rules it calls (transitively), each
        by its bisimulation class. Listed at ``su_pool[su_off[t]:][:su_len[t]]``; returns -1 when
        out of memory.
        """
        cdef const Tables* t_ = self.t
        cdef int32_t stack[64]
        cdef int32_t top = 1, x, j, k, n0 = self.su_n, y
        cdef void* p
        if self.su_off[t] >= 0:
            return 0
        stack[0] = t
        while top > 0:
            top -= 1
            x = stack[top]
            for k in range(n0, self.su_n):  # seen already
                if self.su_pool[k] == ~x or self.su_pool[k] == x:
                    break
            else:
                if self.su_n + 1 > self.su_cap:
                    p = realloc(self.su_pool, self.su_cap * 2 * sizeof(int32_t))
                    if p == NULL:
                        self.su_n = n0
                        return -1
                    self.su_pool = <int32_t*> p
                    self.su_cap *= 2
                # a state that reads no bytes is kept as ~x (visited, not a successor)
                self.su_pool[self.su_n] = x if t_.b_start[x + 1] > t_.b_start[x] else ~x
                self.su_n += 1
                for j in range(t_.x_start[x], t_.x_start[x + 1]):
                    if t_.x_kind[j] == EDGE_CALL and top < 64:  # enter the callee
                        y = t_.rule_start[t_.x_arg[j]]
                        if y >= 0:
                            stack[top] = y
                            top += 1
        # keep only the byte-reading ones, as their classes' first states (equivalent states share the analysis)
        j = n0
        for k in range(n0, self.su_n):
            if self.su_pool[k] >= 0:
                self.su_pool[j] = t_.canon[self.su_pool[k]]
                j += 1
        self.su_off[t] = n0
        self.su_len[t] = j - n0
        self.su_n = j
        return 0

    cdef int state_immortal(self, int32_t s0) noexcept nogil:
        """Whether from state ``s0`` (at a character boundary) every string of safe characters has a path.

        Paths may not pop a frame, use a counter or spend a whitespace budget, so the answer
        holds for any configuration at ``s0``. A greatest fixpoint over the (state, safe-character
        automaton state) pairs reachable from (s0, 0): all start immortal; a pair loses it when
        some byte its automaton state allows has no edge to an immortal pair, and then its
        predecessors are looked at again. Returns 1, 0, or -1 when out of memory.
        """
        cdef const Tables* t = self.t
        cdef int8_t* imm = self.st_imm
        cdef IntVec pairs, adj_off, adj, work, radj_off, radj, fails
        cdef uint64_t good[4]
        cdef int32_t i, j, k, e, q, s, u, s2, u2, x, lo, hi, n_p, ok
        cdef int r = -1
        cdef bint ws_free = t.ws_budget < 0
        cdef int32_t* idx
        if imm[s0 * 8] == 0 or imm[s0 * 8] == 1:
            return imm[s0 * 8]
        for q in range(_U_START[0], _U_START[1]):  # a byte that starts a safe character and no edge takes: mortal
            for x in range(_U_LO[q], _U_HI[q] + 1):
                if not (t.byteset[s0 * 8 + (x >> 5)] >> (x & 31)) & 1:
                    imm[s0 * 8] = 0
                    return 0
        memset(&pairs, 0, sizeof(IntVec))
        memset(&adj_off, 0, sizeof(IntVec))
        memset(&adj, 0, sizeof(IntVec))
        memset(&work, 0, sizeof(IntVec))
        memset(&radj_off, 0, sizeof(IntVec))
        memset(&radj, 0, sizeof(IntVec))
        memset(&fails, 0, sizeof(IntVec))
        idx = self.st_pidx
        # 1. the reachable pairs (pending: imm 2) and their successor pairs
        imm[s0 * 8] = 2
        x = s0 * 8
        if intvec_push_range(&pairs, &x, 1) < 0:
            imm[s0 * 8] = -1
            return -1
        idx[x] = 0
        i = 0
        while i < pairs.len:
            s = pairs.data[i] >> 3
            u = pairs.data[i] & 7
            x = adj.len
            if intvec_push_range(&adj_off, &x, 1) < 0:
                break
            good[0] = 0
            good[1] = 0
            good[2] = 0
            good[3] = 0
            for e in range(t.b_start[s], t.b_start[s + 1]):
                if t.b_ws[e] and not ws_free:
                    continue
                q = _U_FROM[u * 256 + t.b_lo[e]]  # the first range of u that ends at or after the edge's first byte
                while q < _U_START[u + 1] and _U_LO[q] <= t.b_hi[e]:
                    u2 = _U_NEXT[q]
                    if self.su_off[t.b_tgt[e]] < 0 and self.successors(t.b_tgt[e]) < 0:
                        i = -1
                        break
                    for k in range(self.su_len[t.b_tgt[e]]):
                        s2 = self.su_pool[self.su_off[t.b_tgt[e]] + k]
                        x = s2 * 8 + u2
                        if imm[x] != 0:  # immortal or pending: a way on, for now
                            _bits_set(good, max(<int32_t> t.b_lo[e], _U_LO[q]), min(<int32_t> t.b_hi[e], _U_HI[q]))
                        if imm[x] == -1:
                            imm[x] = 2
                            idx[x] = pairs.len
                            if intvec_push_range(&pairs, &x, 1) < 0:
                                i = -1
                                break
                        if imm[x] == 2:
                            if adj.len < adj.cap:
                                adj.data[adj.len] = idx[x]
                                adj.len += 1
                            elif intvec_push_range(&adj, &idx[x], 1) < 0:
                                i = -1
                                break
                    if i < 0:
                        break
                    q += 1
                if i < 0:
                    break
            if i < 0:
                break
            for q in range(_U_START[u], _U_START[u + 1]):  # fails already with every pending pair counted in
                if not _bits_all(good, _U_LO[q], _U_HI[q]):
                    if intvec_push_range(&fails, &i, 1) < 0:
                        i = -1
                    break
            if i < 0:
                break
            i += 1
        n_p = pairs.len
        self.imm_pairs += n_p
        if i >= 0 and adj_off.len == n_p:
            x = adj.len
            intvec_push_range(&adj_off, &x, 1)
            # reverse edges, for the worklist
            radj_off.data = <int32_t*> calloc(n_p + 1, sizeof(int32_t))
            radj.data = <int32_t*> malloc(max(adj.len, 1) * sizeof(int32_t))
            if radj_off.data != NULL and radj.data != NULL and adj_off.len == n_p + 1:
                for i in range(n_p):
                    for k in range(adj_off.data[i], adj_off.data[i + 1]):
                        radj_off.data[adj.data[k] + 1] += 1
                for i in range(n_p):
                    radj_off.data[i + 1] += radj_off.data[i]
                work.data = <int32_t*> malloc((n_p + 1) * sizeof(int32_t))  # fill cursors, then the worklist
                if work.data != NULL:
                    memcpy(work.data, radj_off.data, (n_p + 1) * sizeof(int32_t))
                    for i in range(n_p):
                        for k in range(adj_off.data[i], adj_off.data[i + 1]):
                            radj.data[work.data[adj.data[k]]] = i
                            work.data[adj.data[k]] += 1
                    # 2. strike what fails; 3. look again at the predecessors of what was struck
                    work.len = 0
                    for k in range(fails.len):
                        i = fails.data[k]
                        imm[pairs.data[i]] = 0
                        work.data[work.len] = i
                        work.len += 1
                    j = 0
                    while j < work.len:
                        x = work.data[j]
                        j += 1
                        for k in range(radj_off.data[x], radj_off.data[x + 1]):
                            i = radj.data[k]
                            if imm[pairs.data[i]] == 2 and not self._pair_ok(pairs.data[i], ws_free):
                                imm[pairs.data[i]] = 0
                                work.data[work.len] = i
                                work.len += 1
                    r = 0
        for i in range(n_p):
            if imm[pairs.data[i]] == 2:
                imm[pairs.data[i]] = 1 if r == 0 else -1
        if r == 0:
            r = imm[s0 * 8]
        free(pairs.data)
        free(adj_off.data)
        free(adj.data)
        free(work.data)
        free(radj_off.data)
        free(radj.data)
        free(fails.data)
        return r

    cdef bint _pair_ok(self, int32_t pair, bint ws_free) noexcept nogil:
        """Whether every byte the safe-character automaton allows at this pair has an edge to a pair still immortal."""
        cdef const Tables* t = self.t
        cdef int8_t* imm = self.st_imm
        cdef int32_t s = pair >> 3, u = pair & 7, q, e, k, tg, lo, hi
        cdef uint64_t good[4]
        good[0] = 0
        good[1] = 0
        good[2] = 0
        good[3] = 0
        for e in range(t.b_start[s], t.b_start[s + 1]):  # the bytes with a way on, in one pass over the edges
            if t.b_ws[e] and not ws_free:
                continue
            tg = t.b_tgt[e]
            q = _U_FROM[u * 256 + t.b_lo[e]]
            while q < _U_START[u + 1] and _U_LO[q] <= t.b_hi[e]:
                for k in range(self.su_len[tg]):
                    if imm[self.su_pool[self.su_off[tg] + k] * 8 + _U_NEXT[q]] >= 1:
                        lo = max(<int32_t> t.b_lo[e], _U_LO[q])
                        hi = min(<int32_t> t.b_hi[e], _U_HI[q])
                        _bits_set(good, lo, hi)
                        break
                q += 1
        for q in range(_U_START[u], _U_START[u + 1]):
            if not _bits_all(good, _U_LO[q], _U_HI[q]):
                return False
        return True

    cdef int set_immortal(self, int32_t s) noexcept nogil:
        """Whether set ``s`` lives through any safe string: it is a fixed point of the safe characters
        (``slice_step`` leads back to it), or it holds a configuration at an immortal state."""
        cdef int32_t i, r = 0
        cdef int64_t off
        if self.s_imm[s] >= 0:
            return self.s_imm[s]
        if self.slice_step(s) == 1 and self.sn_pool[self.sn_off[s]] == s:  # no analysis needed
            self.s_imm[s] = 1
            return 1
        off = self.s_off[s]
        for i in range(self.s_len[s]):
            if self.pool[off + i].state >= 0:
                r = self.state_immortal(self.pool[off + i].state)
                if r < 0:
                    return 0
                if r:
                    break
        self.s_imm[s] = r
        return r

    cdef int32_t live_count(self, int32_t s) noexcept nogil:
        """How many bytes a walk must follow from ``s`` (``s_live``): every piece of its row computed."""
        cdef int32_t b = 0, e, end, n = 0, k
        cdef uint64_t live[4]
        if self.s_live_n[s] >= 0:
            return self.s_live_n[s]
        live[0] = 0  # built here: computing pieces may move s_live
        live[1] = 0
        live[2] = 0
        live[3] = 0
        while b < 256:
            e = row_of(self, s)[b]
            if e == D_UNKNOWN:
                e = self.compute(s, <uint8_t> b)
                if e <= D_OVERFLOW:
                    return e
            end = self.piece_end(s, b)
            if e >= 0 or e == D_DEAD_CTX:
                for k in range(b, end + 1):
                    live[k >> 6] |= (<uint64_t> 1) << (k & 63)
                n += end + 1 - b
            b = end + 1
        memcpy(&self.s_live[<int64_t> s * 4], live, sizeof(live))
        self.s_live_n[s] = n
        return n

    cdef int32_t piece_end(self, int32_t s, int32_t byte) noexcept nogil:
        """The last byte of the piece of set ``s`` that holds ``byte`` (its bounds must be known)."""
        cdef uint64_t* bnd = &self.s_bnd[<int64_t> s * 4]
        cdef int32_t i = byte >> 6
        cdef uint64_t x = bnd[i] & ~(((<uint64_t> 2) << (byte & 63)) - 1)
        while x == 0:
            i += 1
            if i == 4:
                return 255
            x = bnd[i]
        return i * 64 + ctz64(x) - 1

    cdef int32_t slice_step(self, int32_t s) noexcept nogil:
        """Where one safe character leads from ``s``.

        Returns how many distinct sets (listed at ``sn_pool[sn_off[s]:]``) when every safe
        character lives; SN_DEAD when every one dies; SN_MIXED when some live and some die,
        a path needs the context, or they part into over SN_MAX_TARGETS sets; SN_FAIL.
        """
        cdef int32_t r = self.sn_cnt[s]
        if r != SN_UNKNOWN:
            return r
        # pairs (UTF-8 state, set) to expand; UTF-8 state 0 is a character boundary
        cdef int32_t pu[64]
        cdef int32_t ps[64]
        cdef int32_t tg[SN_MAX_TARGETS]
        cdef int32_t n_pairs = 1, done = 0, u, cur, q, lo, hi, b, e, tgt, nu, j, n_tg = 0, prev
        cdef bint any_dead = False
        cdef void* p
        cdef int64_t cap
        pu[0] = 0
        ps[0] = s
        while done < n_pairs:
            u = pu[done]
            cur = ps[done]
            done += 1
            for q in range(_U_START[u], _U_START[u + 1]):
                lo = _U_LO[q]
                hi = _U_HI[q]
                nu = _U_NEXT[q]
                prev = D_UNKNOWN
                b = lo
                while b <= hi:
                    e = row_of(self, cur)[b]
                    if e == D_UNKNOWN:
                        e = self.compute(cur, <uint8_t> b)
                    if e >= D_DEAD_CTX:  # computed: the rest of the piece is the same
                        b = self.piece_end(cur, b) + 1
                    else:
                        b += 1
                    if e == prev:
                        continue
                    prev = e
                    if e == D_OVERFLOW or e == D_FULL:
                        return SN_FAIL
                    if e == D_DEAD_CTX or (e >= 0 and e & 1):
                        self.sn_cnt[s] = SN_MIXED
                        return SN_MIXED
                    if e == D_DEAD:
                        any_dead = True
                        continue
                    tgt = e >> 1
                    if nu == 0:
                        for j in range(n_tg):
                            if tg[j] == tgt:
                                break
                        else:
                            if n_tg >= SN_MAX_TARGETS:
                                self.sn_cnt[s] = SN_MIXED
                                return SN_MIXED
                            tg[n_tg] = tgt
                            n_tg += 1
                    else:
                        for j in range(n_pairs):
                            if pu[j] == nu and ps[j] == tgt:
                                break
                        else:
                            if n_pairs >= 64:
                                self.sn_cnt[s] = SN_MIXED
                                return SN_MIXED
                            pu[n_pairs] = nu
                            ps[n_pairs] = tgt
                            n_pairs += 1
        if n_tg == 0:
            r = SN_DEAD
        elif any_dead:
            r = SN_MIXED
        else:
            if self.sn_len + n_tg > self.sn_cap:
                cap = self.sn_cap * 2
                while cap < self.sn_len + n_tg:
                    cap *= 2
                p = realloc(self.sn_pool, cap * sizeof(int32_t))
                if p == NULL:
                    return SN_FAIL
                self.sn_pool = <int32_t*> p
                self.sn_cap = cap
            for j in range(1, n_tg):  # sorted, so that equal lists compare equal
                tgt = tg[j]
                q = j - 1
                while q >= 0 and tg[q] > tgt:
                    tg[q + 1] = tg[q]
                    q -= 1
                tg[q + 1] = tgt
            memcpy(&self.sn_pool[self.sn_len], tg, n_tg * sizeof(int32_t))
            self.sn_off[s] = self.sn_len
            self.sn_len += n_tg
            r = n_tg
        self.sn_cnt[s] = r
        return r


    cdef int32_t class_step(self, int32_t s, uint64_t* live, int32_t* wide) noexcept nogil:
        """Where the safe characters lead from ``s`` when those that live form a class: all to one set.

        ``live`` gets the ASCII bytes that live (two words), ``wide`` how the characters past
        ASCII fare (WIDE_DEAD, WIDE_LIVE or WIDE_MIXED). Returns the set the living characters
        lead to, CL_NONE when none lives, CL_NO when they part or a path needs the context
        (for the ASCII ones; or when only characters past ASCII live), or D_OVERFLOW / D_FULL.
        """
        cdef int32_t pu[64]
        cdef int32_t ps[64]
        cdef int32_t b, e, t = -1, wt = -1, n_pairs = 1, done = 0, u, cur, q, nu, prev, j
        cdef bint any_dead = False, any_live = False, mixed = False
        live[0] = 0
        live[1] = 0
        for b in range(0x20, 0x80):
            if b == 0x22 or b == 0x5C:
                continue
            e = row_of(self, s)[b]
            if e == D_UNKNOWN:
                e = self.compute(s, <uint8_t> b)
                if e <= D_OVERFLOW:
                    return e
            if e == D_DEAD:
                continue
            if e < 0 or (e & 1) or (t >= 0 and e >> 1 != t):
                return CL_NO
            t = e >> 1
            live[b >> 6] |= (<uint64_t> 1) << (b & 63)
        # past ASCII: (UTF-8 state, set) pairs from the lead bytes on, as in ``slice_step``
        pu[0] = 0
        ps[0] = s
        while done < n_pairs and not mixed:
            u = pu[done]
            cur = ps[done]
            done += 1
            for q in range(_U_START[u], _U_START[u + 1]):
                if u == 0 and _U_LO[q] < 0xC2:
                    continue
                nu = _U_NEXT[q]
                prev = D_UNKNOWN
                b = _U_LO[q]
                while b <= _U_HI[q]:
                    e = row_of(self, cur)[b]
                    if e == D_UNKNOWN:
                        e = self.compute(cur, <uint8_t> b)
                        if e <= D_OVERFLOW:
                            return e
                    b = self.piece_end(cur, b) + 1
                    if e == prev:
                        continue
                    prev = e
                    if e == D_DEAD:
                        any_dead = True
                    elif e < 0 or (e & 1):
                        mixed = True
                    elif nu == 0:
                        any_live = True
                        mixed = wt >= 0 and wt != e >> 1
                        wt = e >> 1
                    else:
                        for j in range(n_pairs):
                            if pu[j] == nu and ps[j] == e >> 1:
                                break
                        else:
                            mixed = n_pairs == 64
                            if not mixed:
                                pu[n_pairs] = nu
                                ps[n_pairs] = e >> 1
                                n_pairs += 1
                    if mixed:
                        break
                if mixed:
                    break
        if mixed or (any_live and any_dead) or (any_live and t >= 0 and wt != t):
            wide[0] = WIDE_MIXED
        else:
            wide[0] = WIDE_LIVE if any_live else WIDE_DEAD
        if t < 0:
            return CL_NONE if wide[0] == WIDE_DEAD else CL_NO
        return t


# The safe characters as a byte automaton: state 0 is a character boundary; edges (lo, hi, next),
# next 0 completing a character. Well-formed UTF-8 only (no overlong forms, surrogates or > U+10FFFF).
cdef int32_t[9] _U_START = [0, 11, 12, 13, 14, 15, 16, 17, 18]
cdef int32_t[18] _U_LO = [0x20, 0x23, 0x5D, 0xC2, 0xE0, 0xE1, 0xED, 0xEE, 0xF0, 0xF1, 0xF4,
                          0x80, 0x80, 0xA0, 0x80, 0x80, 0x90, 0x80]
cdef int32_t[18] _U_HI = [0x21, 0x5B, 0x7F, 0xDF, 0xE0, 0xEC, 0xED, 0xEF, 0xF0, 0xF3, 0xF4,
                          0xBF, 0xBF, 0xBF, 0x9F, 0xBF, 0xBF, 0x8F]
cdef int32_t[18] _U_NEXT = [0, 0, 0, 1, 3, 2, 4, 2, 6, 5, 7,
                            0, 1, 1, 1, 2, 2, 2]


# The same automaton as a table: _U8[u * 256 + byte] is the next state, -1 for a byte no safe character has there;
# _U_FROM[u * 256 + byte] is the first edge of u whose range ends at or after the byte.
cdef int8_t _U8[9 * 256]
cdef int32_t _U_FROM[8 * 256]


def _fill_u8():
    cdef int32_t u, q, b
    for u in range(9 * 256):
        _U8[u] = -1
    for u in range(8):
        for q in range(_U_START[u], _U_START[u + 1]):
            for b in range(_U_LO[q], _U_HI[q] + 1):
                _U8[u * 256 + b] = <int8_t> _U_NEXT[q]
        for b in range(256):
            q = _U_START[u]
            while q < _U_START[u + 1] and _U_HI[q] < b:
                q += 1
            _U_FROM[u * 256 + b] = q


_fill_u8()


cdef enum:
    _N_GROUPS = 4  # of safe ASCII bytes: digits, upper-case letters, lower-case letters, the others
    _CLASS_MIN_PAIRS = 4096  # short tokens starting with two class characters, below which a class is walked

cdef int8_t _GROUP[128]         # per ASCII byte: its group, -1 when unsafe
cdef uint64_t _GROUP_BITS[8]    # per group, its bytes (two words)


def _fill_groups():
    cdef int32_t b, g
    for b in range(128):
        if b < 0x20 or b == 0x22 or b == 0x5C:
            g = -1
        elif 0x30 <= b <= 0x39:
            g = 0
        elif 0x41 <= b <= 0x5A:
            g = 1
        elif 0x61 <= b <= 0x7A:
            g = 2
        else:
            g = 3
        _GROUP[b] = g
        if g >= 0:
            _GROUP_BITS[2 * g + (b >> 6)] |= (<uint64_t> 1) << (b & 63)


_fill_groups()


cdef int32_t _safe_prefix(const uint8_t* b, int32_t n, int32_t* chars, int32_t limit) noexcept nogil:
    """How many bytes of ``b[0:n]`` are whole safe characters, up to ``limit`` of them (their count in ``chars``)."""
    cdef int32_t i = 0, k = 0, u, q, j, step_u
    cdef uint8_t x
    while i < n and k < limit:
        u = 0
        j = i
        while True:
            x = b[j]
            step_u = -1
            for q in range(_U_START[u], _U_START[u + 1]):
                if _U_LO[q] <= x <= _U_HI[q]:
                    step_u = _U_NEXT[q]
                    break
            if step_u < 0:
                chars[0] = k
                return i
            j += 1
            if step_u == 0:
                break
            if j >= n:
                chars[0] = k
                return i
            u = step_u
        i = j
        k += 1
    chars[0] = k
    return i


# -- walks ------------------------------------------------------------------------------------

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
    cdef void* q
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
            q = realloc(w.acc_data, cap * sizeof(int32_t))
            if q == NULL:
                rc = D_OVERFLOW
                break
            w.acc_data = <int32_t*> q
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


cdef inline uint64_t _span(int32_t w, int32_t lo, int32_t hi) noexcept nogil:
    """The bits of word ``w`` (bytes 64w..64w+63) that lie in [lo, hi]."""
    cdef int32_t a = max(lo - 64 * w, 0), b = min(hi - 64 * w, 63)
    if a > b:
        return 0
    return ((~(<uint64_t> 0)) >> (63 - b + a)) << a


cdef inline void _bits_set(uint64_t* m, int32_t lo, int32_t hi) noexcept nogil:
    cdef int32_t w
    for w in range(lo >> 6, (hi >> 6) + 1):
        m[w] |= _span(w, lo, hi)


cdef inline bint _bits_all(const uint64_t* m, int32_t lo, int32_t hi) noexcept nogil:
    cdef int32_t w
    cdef uint64_t x
    for w in range(lo >> 6, (hi >> 6) + 1):
        x = _span(w, lo, hi)
        if m[w] & x != x:
            return False
    return True


cdef uint8_t[3] _PROBES = [0x61, 0x30, 0x20]  # 'a', '0', ' ': safe characters a fixed point must lead back with


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
            u = _U8[u * 256 + (x & 255)]
        uu[d] = <int8_t> u
        rec = NULL
        if not (q & 1):
            if u == 0:
                rec = m.fixed_verdicts(q >> 1, sl)
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
    cdef const uint32_t* src[_N_GROUPS + 129]
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
    for g in range(_N_GROUPS):  # the short tokens with an ASCII byte that dies: by group, or byte by byte
        if not (_GROUP_BITS[2 * g] & c0[0]) and not (_GROUP_BITS[2 * g + 1] & c0[1]):
            src[n_src] = &sl.grp[g * n]
            n_src += 1
        elif (_GROUP_BITS[2 * g] & ~c0[0]) or (_GROUP_BITS[2 * g + 1] & ~c0[1]):
            for b in range(128):
                if _GROUP[b] == g and not (c0[b >> 6] >> (b & 63)) & 1:
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


# -- the vocabulary's string slices -----------------------------------------------------------

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
            used = _safe_prefix(&tr.tok_bytes[tr.bytes_off[i]], nb, &chars, nb)
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
            used = _safe_prefix(&tr.tok_bytes[tr.bytes_off[i]], tr.bytes_off[i + 1] - tr.bytes_off[i], &chars, levels)
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
        grp = np.zeros((_N_GROUPS, n_words), np.uint32)
        for b in range(128):
            if _GROUP[b] >= 0:
                grp[_GROUP[b]] |= by_byte[b]
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
    """The vocabulary's slices, built once (about 70 ms for 128k tokens) and kept on the trie."""
    got = trie.slices
    if got is None:
        got = trie.slices = StringSlices(trie)
    return got
