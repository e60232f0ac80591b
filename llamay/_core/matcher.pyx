# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Per-request state: the configuration set after each accepted step, and token masks.

The committed history is a stack of configuration sets in the arena (``h_*`` arrays give
each step's set and frame count), so ``rollback(n)`` is a truncation and a rejected token
or byte string leaves everything as it was. A mask for the current set is the OR, over its
configurations, of the cached context-independent mask of the configuration's position,
plus those undecided tokens that the real stack accepts. First visits compute the entry with
the grammar's set machine and the vocabulary's string slices (``dfa``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.pythread cimport WAIT_LOCK, PyThread_acquire_lock, PyThread_release_lock
from libc.stdint cimport int32_t, uint8_t, uint32_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

import numpy as np

cimport numpy as cnp

from .. import limits

cnp.import_array()

COMBINE = True

cdef extern from *:
    """
    static inline void llamay_or_words(uint32_t* __restrict out, const uint32_t* __restrict src, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) out[i] |= src[i];
    }
    """
    void or_words "llamay_or_words" (uint32_t* out, const uint32_t* src, Py_ssize_t n) noexcept nogil
from ..errors import LlamayError, UsageError
from .automaton cimport (ACCEPT, BOTTOM, CTX, CTX_FRAMES, F_OVERFLOW, WS_WINDOW, Arena, CompiledGrammar, Config, Tables,
                         arena_free, arena_init, closure, push_frame)
from .dfa cimport D_FULL, SetMachine, StringSlices, entry_walk
from .dfa import slices_for
from .lexicon cimport LEX_REJECT, LEX_SEP, CompiledLexicon, LexiconMasks
from .lexicon import masks_for
from .maskcache import cache_for
from .trie cimport TokenTrie, TrieTables
from .walk cimport IntVec, Levels, advance, intvec_push_range, levels_free, levels_reserve, push_config, walk


cdef class Matcher:
    """Constrains one generation to a compiled grammar over a vocabulary.

    ``Matcher(grammar)`` without a vocabulary works on bytes only (``accept_bytes``).
    Not thread-safe itself; any number of matchers may share a grammar and vocabulary
    across threads. Mask fills release the GIL.
    """

    cdef CompiledGrammar g
    cdef CompiledLexicon lex           # set for lexicon grammars: masks come from the skeleton index
    cdef LexiconMasks lexmasks
    cdef readonly object vocab
    cdef TokenTrie trie
    cdef object cache
    cdef Arena a
    cdef Levels lv
    cdef IntVec cd
    cdef int32_t committed
    cdef int32_t* h_off
    cdef int32_t* h_len
    cdef int32_t* h_frames
    cdef uint8_t* h_term
    cdef int32_t n_steps
    cdef int32_t h_cap
    cdef int32_t n_words
    cdef object _eos
    cdef SetMachine machine            # the grammar's lazy DFA (shared through the mask cache)
    cdef StringSlices slices
    cdef IntVec acc                    # scratch: tokens a slice walk accepts
    cdef uint32_t* scratch             # scratch: a whole-trie walk's bitmask
    cdef int32_t* w_set                # scratch: a walk's set per depth
    cdef Config* pos                   # scratch: the positions of the current set's configurations
    cdef int32_t pos_cap
    cdef Config* start_cfg             # scratch: their start configurations on the set machine
    cdef int32_t start_cap

    def __cinit__(self, CompiledGrammar grammar, vocab=None):
        if arena_init(&self.a, limits.MAX_CONFIGURATIONS) < 0:
            raise MemoryError("matcher arena")
        self.h_cap = 0

    def __init__(self, CompiledGrammar grammar, vocab=None):
        self.g = grammar
        self.vocab = vocab
        if isinstance(grammar, CompiledLexicon):
            self.lex = grammar
        if vocab is not None:
            self.trie = vocab.trie
            if self.lex is not None:
                self.lexmasks = masks_for(self.lex, vocab)
            else:
                self.cache = cache_for(grammar, vocab)
                if self.cache.machine is None:
                    self.cache.machine = SetMachine(grammar)
                self.machine = self.cache.machine
                self.slices = slices_for(self.trie)
            self.n_words = (vocab.size + 31) // 32
            if self.slices is not None:
                self.scratch = <uint32_t*> malloc(self.n_words * sizeof(uint32_t))
                self.w_set = <int32_t*> malloc(2 * (self.trie.tr.max_depth + 2) * sizeof(int32_t))  # sets, then owalk bytes
                if self.scratch == NULL or self.w_set == NULL:
                    raise MemoryError("matcher scratch")
            self._eos = frozenset(vocab.eos_ids)
            if levels_reserve(&self.lv, self.trie.tr.max_depth) < 0:
                raise MemoryError("matcher levels")
        else:
            self._eos = frozenset()
        self.reset()

    def __dealloc__(self):
        arena_free(&self.a)
        levels_free(&self.lv)
        free(self.cd.data)
        free(self.acc.data)
        free(self.scratch)
        free(self.w_set)
        free(self.pos)
        free(self.start_cfg)
        free(self.h_off)
        free(self.h_len)
        free(self.h_frames)
        free(self.h_term)

    # -- history ----------------------------------------------------------------------------
    cdef void _push_step(self, int32_t off, int32_t n, bint term) except *:
        cdef int32_t cap
        if self.n_steps >= self.h_cap:
            cap = max(64, self.h_cap * 2)
            self.h_off = <int32_t*> realloc(self.h_off, cap * sizeof(int32_t))
            self.h_len = <int32_t*> realloc(self.h_len, cap * sizeof(int32_t))
            self.h_frames = <int32_t*> realloc(self.h_frames, cap * sizeof(int32_t))
            self.h_term = <uint8_t*> realloc(self.h_term, cap * sizeof(uint8_t))
            if self.h_off == NULL or self.h_len == NULL or self.h_frames == NULL or self.h_term == NULL:
                raise MemoryError("matcher history")
            self.h_cap = cap
        self.h_off[self.n_steps] = off
        self.h_len[self.n_steps] = n
        self.h_frames[self.n_steps] = self.a.n_frames
        self.h_term[self.n_steps] = term
        self.n_steps += 1
        self.committed = off + n
        self.a.cfg_len = self.committed

    def reset(self):
        """Back to the start of the document."""
        cdef Config c
        cdef int flags = 0
        self.a.cfg_len = 0
        self.a.n_frames = 0
        self.a.step_frames = 0
        self.n_steps = 0
        if self.lex is not None:
            c.state, c.counter, c.parent, c.ws = LEX_SEP, 0, BOTTOM, 0
            push_config(&self.a, c)
            self._push_step(0, 1, False)
            return
        c.state = self.g.t.rule_start[0]
        c.counter = 0
        c.parent = BOTTOM
        c.ws = 0
        closure(&self.g.t, &self.a, c, 0, &flags)
        if flags & F_OVERFLOW:
            raise LlamayError("the grammar's start expands to too many configurations (limit MAX_CONFIGURATIONS)")
        self._push_step(0, self.a.cfg_len, False)

    def rollback(self, int n):
        """Undo the last ``n`` accepted steps (tokens or ``accept_bytes`` calls)."""
        if n < 0 or n > self.n_steps - 1:
            raise UsageError(f"cannot roll back {n} steps: {self.n_steps - 1} were accepted")
        self.n_steps -= n
        self.committed = self.h_off[self.n_steps - 1] + self.h_len[self.n_steps - 1]
        self.a.cfg_len = self.committed
        self.a.n_frames = self.h_frames[self.n_steps - 1]

    def configurations(self):
        """The current set as (state, counter, frame stack, whitespace spent) tuples, for debugging."""
        cdef int32_t i, f, off = self.h_off[self.n_steps - 1]
        out = []
        for i in range(off, off + self.h_len[self.n_steps - 1]):
            c = self.a.cfg[i]
            stack = []
            f = c.parent
            while f >= 0:
                stack.append((self.a.frames[f].ret, self.a.frames[f].counter))
                f = self.a.frames[f].parent
            out.append((c.state, c.counter, tuple(stack), c.ws))
        return out

    @property
    def steps(self):
        """How many steps ``rollback`` can undo."""
        return self.n_steps - 1

    # -- state ------------------------------------------------------------------------------
    cpdef bint is_terminated(self):
        return self.h_term[self.n_steps - 1]

    cpdef bint is_accepting(self):
        """Whether the bytes so far form a complete document (EOS would be allowed)."""
        cdef int32_t i, off = self.h_off[self.n_steps - 1]
        if self.lex is not None:
            return self.lex.accepting(self.a.cfg[off].state)
        for i in range(off, off + self.h_len[self.n_steps - 1]):
            if self.a.cfg[i].state == ACCEPT:
                return True
        return False

    # -- advancing --------------------------------------------------------------------------
    cdef bint _advance(self, const unsigned char* data, Py_ssize_t length) except -1:
        cdef int flags = 0
        cdef int32_t off = self.h_off[self.n_steps - 1], n = self.h_len[self.n_steps - 1], k
        cdef int32_t frames0 = self.a.n_frames
        cdef Config c
        cdef Py_ssize_t p
        if self.lex is not None:
            c = self.a.cfg[off]
            with nogil:
                for p in range(length):
                    c.state = self.lex.step(c.state, data[p])
                    if c.state == LEX_REJECT:
                        break
            if c.state == LEX_REJECT:
                return False
            push_config(&self.a, c)
            self._push_step(self.committed, 1, False)
            return True
        with nogil:
            k = advance(&self.g.t, &self.a, off, n, data, length, &flags)
        if flags & F_OVERFLOW:
            self.a.cfg_len = self.committed
            self.a.n_frames = frames0
            raise LlamayError("input is too ambiguous for this grammar (limit MAX_CONFIGURATIONS)")
        if k == 0:
            self.a.cfg_len = self.committed
            self.a.n_frames = frames0
            return False
        self._push_step(self.committed, k, False)
        return True

    def accept_bytes(self, data) -> bool:
        """Advance by ``data`` if every byte is accepted; otherwise change nothing and return False."""
        cdef bytes b = bytes(data)
        if self.is_terminated():
            return False
        if len(b) == 0:
            return True
        return self._advance(<const unsigned char*> PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))

    def accept_token(self, int token) -> bool:
        """Advance by one token; False (and no change) when the grammar does not allow it."""
        cdef TrieTables* tr
        cdef int32_t start, end
        if self.vocab is None:
            raise UsageError("this matcher has no vocabulary: use accept_bytes, or pass one to Matcher()")
        if not 0 <= token < self.vocab.size:
            raise UsageError(f"token id {token} is outside the vocabulary of {self.vocab.size} tokens")
        if self.is_terminated():
            return False
        if token in self._eos:
            if not self.is_accepting():
                return False
            self._push_step(self.committed, 0, True)
            # the terminated step keeps the set it ended on, so is_accepting stays true
            self.h_off[self.n_steps - 1] = self.h_off[self.n_steps - 2]
            self.h_len[self.n_steps - 1] = self.h_len[self.n_steps - 2]
            return True
        tr = &self.trie.tr
        if token >= tr.n_tokens:
            return False
        start, end = tr.bytes_off[token], tr.bytes_off[token + 1]
        if end == start:
            return False
        return self._advance(&tr.tok_bytes[start], end - start)

    # -- masks ------------------------------------------------------------------------------
    def fill_next_token_bitmask(self, bitmask, int index=0):
        """Write the allowed tokens into ``bitmask`` (int32, ``ceil(V/32)`` words; or row ``index`` of a 2-D batch)."""
        cdef uint32_t* out = self._mask_row(bitmask, index)
        cdef int32_t off, n
        with nogil:
            memset(out, 0, self.n_words * sizeof(uint32_t))
        if self.is_terminated():
            return
        off = self.h_off[self.n_steps - 1]
        n = self.h_len[self.n_steps - 1]
        if self.lex is not None:
            if self.is_accepting():
                for e in self._eos:
                    out[<int32_t> e >> 5] |= (<uint32_t> 1) << (<int32_t> e & 31)
            with nogil:
                self.lexmasks.fill(self.a.cfg[off].state, out)
            return
        self._fill_set(off, n, out)

    cdef uint32_t* _mask_row(self, bitmask, int index) except NULL:
        cdef cnp.ndarray arr
        cdef int nd
        if self.vocab is not None and cnp.PyArray_Check(bitmask):  # the usual case, without Python attribute calls
            arr = <cnp.ndarray> bitmask
            nd = cnp.PyArray_NDIM(arr)
            if (1 <= nd <= 2 and cnp.PyArray_TYPE(arr) == cnp.NPY_INT32 and cnp.PyArray_ISNOTSWAPPED(arr)
                    and cnp.PyArray_IS_C_CONTIGUOUS(arr) and cnp.PyArray_ISWRITEABLE(arr)
                    and cnp.PyArray_DIMS(arr)[nd - 1] == self.n_words):
                if nd == 1:
                    return <uint32_t*> cnp.PyArray_DATA(arr)
                if nd == 2 and 0 <= index < cnp.PyArray_DIMS(arr)[0]:
                    return <uint32_t*> cnp.PyArray_DATA(arr) + <Py_ssize_t> index * self.n_words
        if self.vocab is None:
            raise UsageError("this matcher has no vocabulary: pass one to Matcher() to fill token masks")
        if not isinstance(bitmask, np.ndarray) or bitmask.dtype != np.int32:
            raise UsageError(f"bitmask must be a numpy int32 array (allocate_bitmask), got {_describe(bitmask)}")
        if not bitmask.flags.c_contiguous or not bitmask.flags.writeable:
            raise UsageError("bitmask must be a writeable C-contiguous array")
        if bitmask.ndim == 1:
            row = bitmask
        elif bitmask.ndim == 2:
            if not 0 <= index < bitmask.shape[0]:
                raise UsageError(f"bitmask row {index} is outside the batch of {bitmask.shape[0]}")
            row = bitmask[index]
        else:
            raise UsageError(f"bitmask must be 1-D or 2-D, got {bitmask.ndim} dimensions")
        if row.shape[0] != self.n_words:
            raise UsageError(
                f"bitmask has {row.shape[0]} words; a vocabulary of {self.vocab.size} tokens needs {self.n_words}"
            )
        return <uint32_t*> <size_t> row.ctypes.data

    cdef inline int32_t _fold(self, int32_t state, int32_t counter) noexcept:
        """A counter no token can tell apart from ``min`` (at least ``min``, over a token's length below ``max``)."""
        cdef const Tables* t = &self.g.t
        cdef int32_t r = t.state_rule[state]
        if t.rule_max[r] > 0 and counter >= t.rule_min[r] and t.rule_max[r] - counter > self.trie.tr.max_depth:
            return t.rule_min[r]
        return counter

    cdef object _position(self, Config c, Config* pos):
        """The cache key of ``c``'s position, and (in ``pos``) the configuration its entry is computed from.

        A position is the top frame's state and counter, the budget left up to WS_WINDOW,
        and the return states and counters of up to CTX_FRAMES frames below (copied onto the
        arena as scratch frames, ending in CTX, or BOTTOM when that is the whole stack).
        With the frames below known, a walk that leaves the top frame can usually go on.
        """
        cdef const Tables* t = &self.g.t
        cdef int32_t f = c.parent, depth = 0, parent, i
        cdef int32_t rets[CTX_FRAMES]
        cdef int32_t counters[CTX_FRAMES]
        while f >= 0 and depth < CTX_FRAMES:
            rets[depth] = self.a.frames[f].ret
            counters[depth] = self._fold(rets[depth], self.a.frames[f].counter)
            f = self.a.frames[f].parent
            depth += 1
        parent = BOTTOM if f == BOTTOM else CTX
        for i in range(depth - 1, -1, -1):
            parent = push_frame(&self.a, rets[i], counters[i], parent)
            if parent < 0:
                raise MemoryError("matcher frames")
        pos.state = c.state
        pos.counter = self._fold(c.state, c.counter)
        pos.ws = 0 if t.ws_budget < 0 else min(t.ws_budget - c.ws, WS_WINDOW)
        pos.parent = parent
        return (pos.state, pos.counter, pos.ws, f == BOTTOM) + tuple(
            [x for i in range(depth) for x in (rets[i], counters[i])])

    cdef int _fill_set(self, int32_t off, int32_t n, uint32_t* out) except -1:
        """OR the mask of the set ``cfg[off:off+n]`` into ``out``: one cache entry for the whole set.

        The entry's key lists the positions of the set's configurations (sorted, so that the
        same set reached another way finds it). Undecided tokens are checked by stepping the
        real set.
        """
        cdef int32_t i, m = 0, frames0 = self.a.n_frames
        cdef Config c
        if n > self.pos_cap:
            self.pos = <Config*> realloc(self.pos, n * sizeof(Config))
            if self.pos == NULL:
                self.pos_cap = 0
                raise MemoryError("matcher positions")
            self.pos_cap = n
        keys = {}
        for i in range(n):
            c = self.a.cfg[off + i]
            if c.state == ACCEPT:
                for e in self._eos:
                    out[<int32_t> e >> 5] |= (<uint32_t> 1) << (<int32_t> e & 31)
                continue
            key = self._position(c, &self.pos[m])
            if key not in keys:
                keys[key] = None
                m += 1
        if m == 0:
            self.a.n_frames = frames0
            return 0
        if COMBINE or m == 1:
            key = next(iter(keys)) if m == 1 else tuple(sorted(keys))
            entry = self.cache.get(key)
            if entry is None:
                entry = self._build_entry(0, m, key)
            entries = [entry]
        else:
            entries = []
            for i, key in enumerate(keys):
                entry = self.cache.get(key)
                if entry is None:
                    entry = self._build_entry(i, 1, key)
                entries.append(entry)
        self.a.n_frames = frames0  # drop the scratch frames of the positions
        if None in entries:  # cache full: walk this set in full
            for i in range(n):
                c = self.a.cfg[off + i]
                if c.state != ACCEPT:
                    self._walk_into(c, False, self.g.t.ws_budget, out)
            return 0
        for entry in entries:
            self._apply(entry, off, n, out)
        return 0

    cdef int _apply(self, entry, int32_t off, int32_t n, uint32_t* out) except -1:
        """OR a cache entry into ``out``; its undecided tokens are checked by stepping the set ``cfg[off:off+n]``."""
        cdef const uint32_t[::1] bits
        cdef const int32_t[::1] extra
        cdef const int32_t[::1] undecided
        cdef const uint32_t* base = NULL
        cdef int32_t i, tok, n_und, n_extra = 0, frames0 = self.a.n_frames, base_cfg = self.a.cfg_len, k, r
        cdef bint has_bits = False
        cdef int flags = 0
        cdef const TrieTables* tr = &self.trie.tr
        dense, r, acc, und = entry
        if r > 0:
            base = &self.slices.s.cum[<Py_ssize_t> r * self.slices.s.n_words]
        if dense is not None:
            bits = dense
            has_bits = True
        if acc is not None:
            extra = acc
            n_extra = extra.shape[0]
        undecided = und
        n_und = undecided.shape[0]
        with nogil:
            if base != NULL:
                or_words(out, base, self.n_words)
            if has_bits:
                or_words(out, &bits[0], self.n_words)
            for i in range(n_extra):
                tok = extra[i]
                out[tok >> 5] |= (<uint32_t> 1) << (tok & 31)
            for i in range(n_und):
                tok = undecided[i]
                self.a.cfg_len = base_cfg
                k = advance(&self.g.t, &self.a, off, n, &tr.tok_bytes[tr.bytes_off[tok]],
                            tr.bytes_off[tok + 1] - tr.bytes_off[tok], &flags)
                if k:
                    out[tok >> 5] |= (<uint32_t> 1) << (tok & 31)
                self.a.n_frames = frames0
            self.a.cfg_len = base_cfg
        if flags & F_OVERFLOW:
            raise LlamayError("input is too ambiguous for this grammar (limit MAX_CONFIGURATIONS)")
        return 0

    cdef object _build_entry(self, int32_t j0, int32_t m, key):
        """Compute and cache the entry of positions ``pos[j0:j0+m]``: (bitmask, slice, extra tokens, undecided).

        The positions become one start set of the machine: configurations with their frames
        interned, under one whitespace window (the widest; a configuration with less starts
        that much into it).
        """
        cdef int32_t ws_cap = 0, start = -1, base = -1, depth, f, i, j, parent
        cdef int32_t rets[CTX_FRAMES + 1]
        cdef int32_t counters[CTX_FRAMES + 1]
        cdef int rc = 0
        cdef bint ok = True
        cdef SetMachine mach = self.machine
        cdef Config* start_cfg
        if self.g.t.ws_budget >= 0:
            for i in range(j0, j0 + m):
                ws_cap = max(ws_cap, self.pos[i].ws)
        if m > self.start_cap:
            self.start_cfg = <Config*> realloc(self.start_cfg, m * sizeof(Config))
            if self.start_cfg == NULL:
                self.start_cap = 0
                raise MemoryError("matcher positions")
            self.start_cap = m
        start_cfg = self.start_cfg
        self.cd.len = 0
        self.acc.len = 0
        with nogil:
            PyThread_acquire_lock(mach.lock, WAIT_LOCK)
            for j in range(m):
                # the position's frames (scratch frames on the arena, ending in CTX or BOTTOM), top first
                depth = 0
                f = self.pos[j0 + j].parent
                while f >= 0 and depth <= CTX_FRAMES:
                    rets[depth] = self.a.frames[f].ret
                    counters[depth] = self.a.frames[f].counter
                    f = self.a.frames[f].parent
                    depth += 1
                parent = f
                for i in range(depth - 1, -1, -1):
                    parent = mach.intern_frame(rets[i], counters[i], parent)
                    if parent < 0:
                        ok = False
                        break
                if not ok:
                    break
                start_cfg[j] = self.pos[j0 + j]
                start_cfg[j].parent = parent
                start_cfg[j].ws = 0 if self.g.t.ws_budget < 0 else ws_cap - self.pos[j0 + j].ws
            if ok:
                start = mach.intern_set(start_cfg, m, ws_cap)
            if start >= 0:
                memset(self.scratch, 0, self.n_words * sizeof(uint32_t))
                rc = entry_walk(mach, &self.trie.tr, &self.slices.s, start, self.scratch, &self.acc, &self.cd, &base,
                                self.w_set)
            else:
                rc = start if start < -1 else D_FULL
            PyThread_release_lock(mach.lock)
        if rc == D_FULL:  # the machine is full: the plain walk
            return self._build_entry_plain(j0, m, key)
        if rc != 0:
            raise LlamayError("input is too ambiguous for this grammar (limit MAX_CONFIGURATIONS)")
        undecided = np.array(<int32_t[:self.cd.len]> self.cd.data if self.cd.len else [], np.int32)
        size = undecided.nbytes + 64
        if base >= 0:
            acc = np.array(<int32_t[:self.acc.len]> self.acc.data if self.acc.len else [], np.int32)
            entry = (None, base, acc, undecided)
            size += acc.nbytes
        else:
            dense = np.empty(self.n_words, np.uint32)
            memcpy(<uint32_t*> <size_t> dense.ctypes.data, self.scratch, self.n_words * sizeof(uint32_t))
            entry = (dense, 0, None, undecided)
            size += dense.nbytes
        if not self.cache.put(key, entry, size):
            return None
        return entry

    cdef object _build_entry_plain(self, int32_t j0, int32_t m, key):
        """The entry by the plain walk, one position after another (when the set machine is full)."""
        cdef int32_t ws_cap, i
        cdef Config pos
        mask = np.zeros(self.n_words, np.uint32)
        self.cd.len = 0
        for i in range(j0, j0 + m):
            pos = self.pos[i]
            ws_cap = pos.ws
            pos.ws = 0
            self._walk_into(pos, True, ws_cap, <uint32_t*> <size_t> mask.ctypes.data)
        undecided = np.array(<int32_t[:self.cd.len]> self.cd.data if self.cd.len else [], np.int32)
        entry = (mask, 0, None, undecided)
        if not self.cache.put(key, entry, mask.nbytes + undecided.nbytes + 64):
            return None
        return entry

    cdef int _walk_into(self, Config c, bint ci, int32_t ws_cap, uint32_t* out) except -1:
        cdef int flags
        cdef int32_t base = self.a.cfg_len
        if not push_config(&self.a, c):
            raise MemoryError("matcher arena")
        with nogil:
            flags = walk(&self.g.t, &self.a, &self.trie.tr, base, 1, ci, ws_cap, out, &self.cd if ci else NULL, &self.lv)
        self.a.cfg_len = base
        if flags & F_OVERFLOW:
            raise LlamayError("input is too ambiguous for this grammar (limit MAX_CONFIGURATIONS)")
        return 0


def _describe(x):
    if isinstance(x, np.ndarray):
        return f"a {x.dtype} array"
    return type(x).__name__
