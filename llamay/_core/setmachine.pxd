# cython: language_level=3
"""The set machine: a grammar's lazily built DFA over configuration sets."""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint64_t
from cpython.pythread cimport PyThread_type_lock

from .automaton cimport Arena, CompiledGrammar, Config, Tables

cdef enum:
    D_UNKNOWN = -1     # a row entry not computed yet
    D_DEAD = -2        # no configuration survives the byte
    D_DEAD_CTX = -3    # none survives, but a path popped into CTX or ran past the whitespace window
    D_OVERFLOW = -4    # too many configurations (MAX_CONFIGURATIONS) or out of memory
    D_FULL = -5        # the machine holds its maximum of sets: walk without it
    SN_UNKNOWN = -1    # slice step of a set: not computed yet
    SN_MIXED = -2      # some safe characters live and some die, or a path needs the context
    SN_DEAD = -3       # every safe character dies, and no path needs the context
    SN_FAIL = -4       # the machine failed (overflow or full): no slice
    SN_MAX_TARGETS = 32  # distinct sets one safe character may lead to (more: SN_MIXED)
    FIX_UNKNOWN = -1   # s_fix: not known yet whether the set is a fixed point of the safe characters
    FIX_NONE = -2      # not one (or its verdicts could not be computed)
    ROW_SHIFT = 7      # a block of rows holds 1 << ROW_SHIFT sets
    CL_NONE = -8       # class step: no safe character lives
    CL_NO = -9         # ... the living ones part, or some path needs the context: no class
    WIDE_DEAD = 0      # class step, characters past ASCII: all die
    WIDE_LIVE = 1      # ... all live, to the set the ASCII class leads to
    WIDE_MIXED = 2     # ... anything else (their tokens are walked)

cdef class SetMachine:
    cdef CompiledGrammar g
    cdef const Tables* t
    cdef int32_t horizon        # bytes a walk from any set may read at most (the trie's depth): counters fold
    cdef Arena a                # a.frames[0:n_fr] are the interned frames; a.cfg is scratch
    cdef int32_t n_fr
    cdef int32_t* fh            # frame hash table: frame index + 1, 0 = empty
    cdef int32_t fh_mask
    cdef int32_t* remap
    cdef int32_t remap_cap
    cdef Config* pool           # the configurations of every set, set after set
    cdef int64_t pool_len
    cdef int64_t pool_cap
    cdef int64_t* s_off
    cdef int32_t* s_len
    cdef int32_t* s_ws          # the whitespace window the set's walk runs under
    cdef int32_t n_sets
    cdef int32_t s_cap
    cdef int32_t* sh            # set hash table: set id + 1, 0 = empty
    cdef int32_t sh_mask
    cdef int32_t** blocks       # rows of 1 << ROW_SHIFT sets each: never moved, so growing copies nothing
    cdef int32_t n_blocks
    cdef uint64_t* s_bnd        # per set, 256 bits: where a piece of bytes its edges treat alike starts
    cdef uint8_t* s_bnd_ok
    cdef uint64_t* s_live       # per set, 256 bits: bytes a walk must follow (live, or left for the context)
    cdef int32_t* s_live_n      # their count, -1 until computed
    cdef int64_t* s_fix         # per set: offset of its verdict record in fix_pool, or FIX_UNKNOWN / FIX_NONE
    cdef int32_t* fix_pool      # verdict records (see ``entrywalk.fixed_verdicts``)
    cdef int64_t fix_len
    cdef int64_t fix_cap
    cdef int32_t* sn_cnt        # slice step per set: how many sets a safe character leads to, or an SN_* code
    cdef int64_t* sn_off        # ... listed at sn_pool[sn_off[s]:]
    cdef int32_t* sn_pool
    cdef int64_t sn_len
    cdef int64_t sn_cap
    cdef int32_t max_sets
    cdef PyThread_type_lock lock
    cdef int8_t* st_imm         # per NFA state and safe-character automaton state: immortal? (-1 unknown, 0, 1; 2 pending)
    cdef int32_t* st_pidx       # scratch of state_immortal: a pair's index among those it collected
    cdef int32_t* su_off        # per NFA state: its successors within the frame in su_pool (-1 unknown)
    cdef int32_t* su_len
    cdef int32_t* su_pool
    cdef int32_t su_n
    cdef int32_t su_cap
    cdef int8_t* s_imm          # per set: lives through any safe string? (-1 unknown)
    cdef int32_t* cm_key        # memo of one configuration's step: (target, ws edge, counter, parent, ws, window)
    cdef int32_t* cm_val
    cdef int32_t cm_mask
    cdef int32_t cm_len
    cdef readonly int64_t computed   # row pieces computed so far
    cdef readonly int64_t stepped    # ``step`` calls they took (the rest came from the memo)
    cdef readonly int64_t visited    # trie nodes walked so far
    cdef int64_t v_kind[5]           # ... by kind of walk (see ``kinds``)
    cdef int64_t n_kind[5]
    cdef readonly int64_t imm_pairs  # (state, character position) pairs the immortality analysis looked at
    cdef readonly int64_t checked    # transitions computed by slice checks (part of ``computed``)

    cdef int32_t intern_frame(self, int32_t ret, int32_t counter, int32_t parent) noexcept nogil
    cdef int32_t intern_set(self, Config* cfg, int32_t n, int32_t ws_cap) noexcept nogil
    cdef int32_t compute(self, int32_t s, uint8_t byte) noexcept nogil
    cdef int32_t cfg_step(self, Config c, uint8_t byte, int32_t ws_cap) noexcept nogil
    cdef bint cm_room(self) noexcept nogil
    cdef int32_t step_cfgs(self, const Config* src, int32_t n, uint8_t byte, int32_t ws_cap) noexcept nogil
    cdef int32_t union_sets(self, const int32_t* ids, int32_t m, int32_t ws_cap) noexcept nogil
    cdef int32_t piece_end(self, int32_t s, int32_t byte) noexcept nogil
    cdef int32_t live_count(self, int32_t s) noexcept nogil
    cdef int32_t slice_step(self, int32_t s) noexcept nogil
    cdef int32_t class_step(self, int32_t s, uint64_t* live, int32_t* wide) noexcept nogil
    cdef int successors(self, int32_t t) noexcept nogil
    cdef int state_immortal(self, int32_t s0) noexcept nogil
    cdef bint _pair_ok(self, int32_t pair, bint ws_free) noexcept nogil
    cdef int set_immortal(self, int32_t s) noexcept nogil


cdef inline int32_t* row_of(SetMachine m, int32_t s) noexcept nogil:
    """The row of set ``s``: entry ``b`` is where byte ``b`` leads (2 * target + flag, or a D_* code)."""
    return m.blocks[s >> ROW_SHIFT] + ((s & ((1 << ROW_SHIFT) - 1)) << 8)
