# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The set machine: a lazily built DFA over the configuration sets of a grammar's context-independent walks.

A context-independent walk (``walk.walk``) steps a set of configurations through each trie
node's byte: tens of nanoseconds per node, milliseconds per vocabulary. Yet the sets such
walks meet repeat endlessly (inside a string every character leads back to the same set).
``SetMachine`` interns each set (its configurations sorted, their frames interned too, so
equal sets get one id; states replaced by their bisimulation class and counters far from
their bounds folded, since no walk of a token's length tells them apart) and gives it a row
of 256 entries, filled on demand: the target set's id (times two, plus the flag "a path
popped into CTX or ran past the whitespace window") or "dead". A row entry is computed once
for the whole piece of bytes that the set's edges treat alike (``[a-z]`` is one step, not
26), configuration by configuration with a memo on the matching edge (``cfg_step``): a set's
step is the union of its configurations' steps. A walk over the machine is then one load per
trie node (``entrywalk``). The machine belongs to one grammar (through its mask cache) and is
shared by its matchers under a lock; it stops growing at ``MAX_SETS`` sets, and walks fall
back to ``walk.walk``.

Over the safe characters (``safechars``) the machine answers for the string slices:
``slice_step`` steps every safe character from a set and says whether they all live (and to
which sets), all die, or neither; ``class_step`` says whether those that live form one class
leading to one set; ``set_immortal`` whether a set lives through any safe string, because
every safe character leads back to it or it holds an *immortal* state (``state_immortal``:
every safe string has a path from it, found by a fixpoint on the grammar's tables).
"""

from cpython.pythread cimport PyThread_allocate_lock, PyThread_free_lock
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy, memset

from .automaton cimport (EDGE_CALL, F_NEED_CTX, F_OVERFLOW, Arena, CompiledGrammar, Config, Frame, Tables,
                         arena_free, arena_init, fold_counter, grow, resize, step)
from .bits cimport clz64, ctz64
from .safechars cimport U_FROM, U_HI, U_LO, U_NEXT, U_START
from .walk cimport IntVec, intvec_push_range


#: Sets one machine may hold (each costs a 1 KiB row): past it, first visits walk without it (``walk.walk``).
MAX_SETS = 1 << 16

cdef enum:
    _MAX_MEMO = 1 << 20         # entries of the one-configuration step memo (past it: no more memoizing)


cdef inline uint32_t _mix(uint32_t h, uint32_t x) noexcept nogil:
    h ^= x
    h *= 0x9E3779B1u
    return (h << 15) | (h >> 17)


cdef inline uint32_t _frame_hash(int32_t ret, int32_t counter, int32_t parent) noexcept nogil:
    return _mix(_mix(_mix(0x811C9DC5u, <uint32_t> ret), <uint32_t> counter), <uint32_t> parent)


cdef inline uint32_t _set_hash(const Config* cfg, int32_t n, int32_t ws_cap) noexcept nogil:
    cdef uint32_t h = _mix(0x811C9DC5u, <uint32_t> ws_cap)
    cdef int32_t i
    for i in range(n):
        h = _mix(_mix(_mix(_mix(h, <uint32_t> cfg[i].state), <uint32_t> cfg[i].counter), <uint32_t> cfg[i].parent),
                 <uint32_t> cfg[i].ws)
    return h


cdef inline void _place(int32_t* table, int32_t mask, uint32_t h, int32_t value) noexcept nogil:
    """Put ``value`` (an index + 1) in the first empty slot of the open-addressing ``table`` from ``h`` on."""
    cdef uint32_t j = h & <uint32_t> mask
    while table[j]:
        j = (j + 1) & <uint32_t> mask
    table[j] = value


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
        cdef Frame* fr
        ret = self.t.canon[ret]
        counter = fold_counter(self.t, ret, counter, self.horizon)
        h = _frame_hash(ret, counter, parent)
        j = h & <uint32_t> self.fh_mask
        while self.fh[j]:
            f = self.fh[j] - 1
            if self.a.frames[f].ret == ret and self.a.frames[f].counter == counter and self.a.frames[f].parent == parent:
                return f
            j = (j + 1) & <uint32_t> self.fh_mask
        f = self.n_fr
        if not grow(<void**> &self.a.frames, &self.a.frames_cap, f + 1, sizeof(Frame)):
            return -1
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
                fr = &self.a.frames[i]
                _place(table, cap - 1, _frame_hash(fr.ret, fr.counter, fr.parent), i + 1)
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
        cdef uint32_t h, j
        cdef int32_t* table
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
        h = _set_hash(cfg, n, ws_cap)
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
            if not (resize(<void**> &self.s_off, cap * sizeof(int64_t))
                    and resize(<void**> &self.s_len, cap * sizeof(int32_t))
                    and resize(<void**> &self.s_ws, cap * sizeof(int32_t))
                    and resize(<void**> &self.sn_cnt, cap * sizeof(int32_t))
                    and resize(<void**> &self.sn_off, cap * sizeof(int64_t))
                    and resize(<void**> &self.s_bnd, <size_t> cap * 4 * sizeof(uint64_t))
                    and resize(<void**> &self.s_bnd_ok, cap * sizeof(uint8_t))
                    and resize(<void**> &self.s_fix, cap * sizeof(int64_t))
                    and resize(<void**> &self.s_live, <size_t> cap * 4 * sizeof(uint64_t))
                    and resize(<void**> &self.s_live_n, cap * sizeof(int32_t))
                    and resize(<void**> &self.s_imm, cap * sizeof(int8_t))):
                return D_OVERFLOW  # the arrays already grown stay valid: only s_cap says how many are
            self.s_cap = cap
        if not grow(<void**> &self.pool, &self.pool_cap, self.pool_len + n, sizeof(Config)):
            return D_OVERFLOW
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
            if not resize(<void**> &self.blocks, self.n_blocks * 2 * sizeof(int32_t*)):
                return D_OVERFLOW
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
                _place(table, cap - 1, _set_hash(&self.pool[self.s_off[s]], self.s_len[s], self.s_ws[s]), s + 1)
            free(self.sh)
            self.sh = table
            self.sh_mask = cap - 1
            s = self.n_sets - 1
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
        cdef int32_t i, k, w, f, par, old_fr, nnew
        cdef int flags = 0
        cdef Arena* a = &self.a
        if not grow(<void**> &a.cfg, &a.cfg_cap, n, sizeof(Config)):
            return D_OVERFLOW
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
            if not resize(<void**> &self.remap, nnew * 2 * sizeof(int32_t)):
                a.n_frames = old_fr
                return D_OVERFLOW
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
        cdef int32_t i, j, n = 0
        cdef Arena* a = &self.a
        for i in range(m):
            n += self.s_len[ids[i]]
        if not grow(<void**> &a.cfg, &a.cfg_cap, n, sizeof(Config)):
            return D_OVERFLOW
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
                if not grow(<void**> &self.su_pool, &self.su_cap, self.su_n + 1, sizeof(int32_t)):
                    self.su_n = n0
                    return -1
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
        for q in range(U_START[0], U_START[1]):  # a byte that starts a safe character and no edge takes: mortal
            for x in range(U_LO[q], U_HI[q] + 1):
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
                q = U_FROM[u * 256 + t.b_lo[e]]  # the first range of u that ends at or after the edge's first byte
                while q < U_START[u + 1] and U_LO[q] <= t.b_hi[e]:
                    u2 = U_NEXT[q]
                    if self.su_off[t.b_tgt[e]] < 0 and self.successors(t.b_tgt[e]) < 0:
                        i = -1
                        break
                    for k in range(self.su_len[t.b_tgt[e]]):
                        s2 = self.su_pool[self.su_off[t.b_tgt[e]] + k]
                        x = s2 * 8 + u2
                        if imm[x] != 0:  # immortal or pending: a way on, for now
                            _bits_set(good, max(<int32_t> t.b_lo[e], U_LO[q]), min(<int32_t> t.b_hi[e], U_HI[q]))
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
            for q in range(U_START[u], U_START[u + 1]):  # fails already with every pending pair counted in
                if not _bits_all(good, U_LO[q], U_HI[q]):
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
            q = U_FROM[u * 256 + t.b_lo[e]]
            while q < U_START[u + 1] and U_LO[q] <= t.b_hi[e]:
                for k in range(self.su_len[tg]):
                    if imm[self.su_pool[self.su_off[tg] + k] * 8 + U_NEXT[q]] >= 1:
                        lo = max(<int32_t> t.b_lo[e], U_LO[q])
                        hi = min(<int32_t> t.b_hi[e], U_HI[q])
                        _bits_set(good, lo, hi)
                        break
                q += 1
        for q in range(U_START[u], U_START[u + 1]):
            if not _bits_all(good, U_LO[q], U_HI[q]):
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
        pu[0] = 0
        ps[0] = s
        while done < n_pairs:
            u = pu[done]
            cur = ps[done]
            done += 1
            for q in range(U_START[u], U_START[u + 1]):
                lo = U_LO[q]
                hi = U_HI[q]
                nu = U_NEXT[q]
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
            if not grow(<void**> &self.sn_pool, &self.sn_cap, self.sn_len + n_tg, sizeof(int32_t)):
                return SN_FAIL
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
            for q in range(U_START[u], U_START[u + 1]):
                if u == 0 and U_LO[q] < 0xC2:
                    continue
                nu = U_NEXT[q]
                prev = D_UNKNOWN
                b = U_LO[q]
                while b <= U_HI[q]:
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
