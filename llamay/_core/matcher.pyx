# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Per-request state: the configuration set after each accepted step, and token masks.

The committed history is a stack of configuration sets in the arena (``h_*`` arrays give
each step's set and frame count), so ``rollback(n)`` is a truncation and a rejected token
or byte string leaves everything as it was. A mask for the current set is one cached
context-independent entry for the positions of all its configurations (keyed by their
packed positions), plus those undecided tokens that the real set accepts. First visits
compute the entry with the grammar's set machine (``setmachine``) and the vocabulary's string slices
(``slices``), by the fast walk (``entrywalk``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.pythread cimport WAIT_LOCK, PyThread_acquire_lock, PyThread_release_lock
from libc.stdint cimport int32_t, uint8_t, uint32_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy, memmove, memset

import numpy as np

cimport numpy as cnp


cnp.import_array()


cdef extern from *:
    """
    static inline void llamay_or_words(uint32_t* __restrict out, const uint32_t* __restrict src, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) out[i] |= src[i];
    }
    """
    void or_words "llamay_or_words" (uint32_t* out, const uint32_t* src, Py_ssize_t n) noexcept nogil
    int __builtin_popcount(unsigned int x) noexcept nogil
    int __builtin_ctz(unsigned int x) noexcept nogil
from ..errors import LlamayError, UsageError
from ..ir import EDGE_BYTE, EDGE_ID_BYTES
from .automaton cimport (ACCEPT, BOTTOM, CTX, CTX_FRAMES, F_OVERFLOW, WS_WINDOW, Arena, CompiledGrammar, Config, Tables,
                         arena_free, arena_init, closure, fold_counter, push_frame, resize)
from .distance cimport DINF, Distances, config_cost
from .entrywalk cimport entry_walk
from .lexicon cimport LEX_REJECT, LEX_SEP, CompiledLexicon, LexiconMasks
from .lexicon import masks_for
from .maskcache import cache_for
from .setmachine cimport D_FULL, SetMachine
from .slices cimport StringSlices
from .slices import slices_for
from .trie cimport TokenTrie, TrieTables
from .walk cimport IntVec, Levels, advance, intvec_push_range, levels_free, levels_reserve, push_config, walk


cdef enum:
    WALK_CANDIDATES = 256   # tokens to check past which one trie walk checks them all (cheaper than stepping each)
    RECORD_BYTES = 64       # a kept record's overhead beyond its token ids: the bytes object and its dict slot


ctypedef struct PosRec:                # a position, as its cache key holds it
    int32_t state
    int32_t counter
    int32_t ws                         # whitespace budget left, up to WS_WINDOW (0 when unbounded)
    int32_t bottom                     # the frames below are the whole stack
    int32_t depth                      # frames below (at most CTX_FRAMES)
    int32_t frames[2 * CTX_FRAMES]     # their return states and (folded) counters, top first


cdef int32_t* _copy_ints(const int32_t* src, int32_t n) noexcept:
    cdef int32_t* p
    if n == 0:
        return NULL
    p = <int32_t*> malloc(n * sizeof(int32_t))
    if p != NULL:
        memcpy(p, src, n * sizeof(int32_t))
    return p


cdef class Entry:
    """A position's cached mask: ``cum[base]`` of the string slices, or ``dense``; plus ``extra``
    tokens; and the ``und``ecided tokens the real stack decides."""

    cdef int32_t base
    cdef uint32_t* dense
    cdef int32_t* extra
    cdef int32_t n_extra
    cdef int32_t* und
    cdef int32_t n_und
    # What the budget's checks found, for a position set whose key holds whole stacks (the key
    # then decides every distance): ``checked``, every allowed token whose rise bound exceeds
    # ``done`` leads at most ``done_worst`` from completion (``done`` -DINF: every token, by a
    # trie walk), and no configuration of the set is further than ``dmax`` from completion.
    # While those fit the tokens left, the check is these few reads.
    cdef bint checked
    cdef int32_t done
    cdef int32_t done_worst
    cdef int32_t dmax
    # For a set whose key holds whole stacks, the undecided tokens are those whose whitespace
    # outruns the window the key records, so the real budget left decides them: per budget
    # left (shared by the set's configurations), the ones it accepts, as int32 bytes.
    cdef dict und_by_ws

    def __dealloc__(self):
        free(self.dense)
        free(self.extra)
        free(self.und)

    cdef Py_ssize_t nbytes(self, int32_t n_words):
        return 80 + (n_words * 4 if self.dense != NULL else 0) + 4 * (self.n_extra + self.n_und)

    @property
    def summary(self):
        """(slice level, dense?, extra tokens, undecided tokens): for tests and tools."""
        return (self.base, self.dense != NULL, self.n_extra, self.n_und)


ctypedef struct Within:                # the budget's test of a token's set: at most ``limit`` from completion
    const int32_t* dl                  # the Distances' arrays (the matcher holds the object)
    const int32_t* per_iter
    const Tables* t
    int32_t limit
    int32_t worst                      # the largest distance a token led to


cdef bint _within(void* ctx, const Arena* a, int32_t off, int32_t n) noexcept nogil:
    cdef Within* w = <Within*> ctx
    cdef int32_t i, d = DINF
    for i in range(off, off + n):
        d = min(d, config_cost(w.dl, w.per_iter, w.t, a.frames, a.cfg[i]))
    w.worst = max(w.worst, d)
    return d <= w.limit


cdef inline int32_t _first_at_most(const int32_t* bound, int32_t lo, int32_t hi, int32_t x) noexcept nogil:
    """The first index in ``[lo, hi)`` whose bound is at most ``x`` (``hi`` if none): ``bound`` falls."""
    cdef int32_t mid
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if bound[mid] <= x:
            hi = mid
        else:
            lo = mid + 1
    return lo


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
    cdef PosRec* recs                  # scratch: the positions of the current set's configurations
    cdef int32_t rec_cap
    cdef dict entries                  # the mask cache's entries (read directly; added through the cache)
    cdef Config* start_cfg             # scratch: their start configurations on the set machine
    cdef int32_t start_cap
    cdef Distances dist                # the pair's distances to completion (through the mask cache), on first use
    cdef readonly bint closed_by_budget
    cdef uint32_t* budget_mask         # scratch: the closing check's mask
    cdef Entry set_entry               # the last filled set's entry, where its key holds whole stacks (else None)
    cdef int32_t* _eos_ids             # the vocabulary's end tokens, for code without the interpreter
    cdef int32_t n_eos

    def __cinit__(self, CompiledGrammar grammar, vocab=None):
        if arena_init(&self.a, grammar.limits.max_configurations) < 0:
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
                self.entries = self.cache.entries
                if self.cache.machine is None:
                    self.cache.machine = SetMachine(grammar, self.trie.tr.max_depth)
                self.machine = self.cache.machine
                self.slices = slices_for(self.trie)
            self.n_words = (vocab.size + 31) // 32
            if self.slices is not None:
                self.scratch = <uint32_t*> malloc(self.n_words * sizeof(uint32_t))
                self.w_set = <int32_t*> malloc(2 * (self.trie.tr.max_depth + 2) * sizeof(int32_t))  # sets, then owalk bytes
                if self.scratch == NULL or self.w_set == NULL:
                    raise MemoryError("matcher scratch")
            self._eos = frozenset(vocab.eos_ids)
            self.n_eos = len(self._eos)
            self._eos_ids = <int32_t*> malloc(max(self.n_eos, 1) * sizeof(int32_t))
            if self._eos_ids == NULL:
                raise MemoryError("matcher end tokens")
            for i, e in enumerate(sorted(self._eos)):
                self._eos_ids[i] = e
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
        free(self.budget_mask)
        free(self._eos_ids)
        free(self.w_set)
        free(self.recs)
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
            if not (resize(<void**> &self.h_off, cap * sizeof(int32_t))
                    and resize(<void**> &self.h_len, cap * sizeof(int32_t))
                    and resize(<void**> &self.h_frames, cap * sizeof(int32_t))
                    and resize(<void**> &self.h_term, cap * sizeof(uint8_t))):
                raise MemoryError("matcher history")  # the arrays already grown stay valid: h_cap says how much
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
        self.closed_by_budget = False
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
        """Advance by ``data`` if every byte is accepted; otherwise change nothing and return False.

        The bytes are those the grammar matches, so a token edge's reserved bytes pass where
        ``ir.token`` stands: ``accept_bytes(vocab.grammar_bytes(t))`` is ``accept_token(t)``
        for a token other than EOS, so that a generation replays by bytes, on a matcher with
        or without a vocabulary.
        """
        cdef bytes b = bytes(data)
        if self.is_terminated():
            return False
        if len(b) == 0:
            return True
        return self._advance(<const unsigned char*> PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))

    def accept_token(self, int token) -> bool:
        """Advance by one token (by its ``grammar_bytes``: a special token by its edge); False
        (and no change) when the grammar does not allow it."""
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

    def forced_bytes(self, int limit=256):
        """The bytes every continuation starts with: up to ``limit``, while the grammar allows exactly one next byte.

        They stop where two bytes are allowed, or where the document could end (EOS allowed),
        so a caller may append them without sampling (``llamay.jump_ahead``). A token edge's
        reserved bytes (``ir.token``) come whole or not at all. The matcher is left as it was.
        Lexicon grammars give ``b""``: their states keep no per-byte sets to read this from.
        """
        cdef uint32_t words[8]
        cdef int32_t i, w, off, n, count = 0, bits
        cdef unsigned char byte = 0
        cdef bytearray out = bytearray()
        if self.lex is not None or self.is_terminated():
            return b""
        while count < limit:
            off = self.h_off[self.n_steps - 1]
            n = self.h_len[self.n_steps - 1]
            memset(words, 0, sizeof(words))
            for i in range(off, off + n):
                if self.a.cfg[i].state == ACCEPT:
                    n = -1
                    break
                for w in range(8):
                    words[w] |= self.g.t.byteset[self.a.cfg[i].state * 8 + w]
            if n < 0:
                break
            bits = 0
            for w in range(8):
                if words[w]:
                    bits += __builtin_popcount(words[w])
                    byte = <unsigned char> (32 * w + __builtin_ctz(words[w]))
            if bits != 1 or not self._advance(&byte, 1):
                break
            out.append(byte)
            count += 1
        if count:
            self.rollback(count)
        i = 0
        while i < count:  # an edge cut short (by ``limit``, or by two edges sharing a start) is dropped
            if out[i] == EDGE_BYTE:  # no text holds it: an edge starts here, whatever its id bytes hold
                if i + 1 + EDGE_ID_BYTES > count:
                    del out[i:]
                    break
                i += 1 + EDGE_ID_BYTES
            else:
                i += 1
        return bytes(out)

    # -- masks ------------------------------------------------------------------------------
    def fill_next_token_bitmask(self, bitmask, int index=0, tokens_left=None):
        """Write the allowed tokens into ``bitmask`` (int32, ``ceil(V/32)`` words; or row ``index`` of a 2-D batch).

        With ``tokens_left`` (this token included), the mask also closes the document within
        that budget: once it comes down to the fewest tokens that complete the document
        (``completion_distance``), only tokens after which it can still be completed in what is
        left stay allowed. The mask is never empty; where no completion fits, tokens that bring
        the end nearer stay. Returns whether the budget removed any token (``closed_by_budget``
        then stays true until ``reset``). Lexicon grammars have no distances: there the budget
        changes nothing and this returns False.
        """
        cdef uint32_t* out = self._mask_row(bitmask, index)
        cdef int32_t off, n, left = 0
        if tokens_left is not None:
            left = tokens_left
            if left < 1:
                raise UsageError(f"tokens_left must be at least 1 (the token this mask is for), got {tokens_left}")
        with nogil:
            memset(out, 0, self.n_words * sizeof(uint32_t))
        if self.is_terminated():
            return False
        off = self.h_off[self.n_steps - 1]
        n = self.h_len[self.n_steps - 1]
        if self.lex is not None:
            if self.is_accepting():
                for e in self._eos:
                    out[<int32_t> e >> 5] |= (<uint32_t> 1) << (<int32_t> e & 31)
            with nogil:
                self.lexmasks.fill(self.a.cfg[off].state, out)
            return False
        self._fill_set(off, n, out)
        if tokens_left is None or not self._close(off, n, out, left):
            return False
        self.closed_by_budget = True
        return True

    def completion_distance(self):
        """The fewest tokens that complete the document from here, over this matcher's vocabulary.

        An upper bound that some token sequence meets (tokens are counted along the grammar's
        paths, not across its rules); 0 when complete; None where this vocabulary spells no
        completion, or for a lexicon grammar, which has no distances.
        """
        cdef int32_t i, d, best = DINF, off = self.h_off[self.n_steps - 1]
        cdef Distances dist
        if self.vocab is None:
            raise UsageError("this matcher has no vocabulary: distances count its tokens")
        if self.lex is not None:
            return None
        if self.is_terminated():
            return 0
        dist = self._distances()
        for i in range(off, off + self.h_len[self.n_steps - 1]):
            d = dist.config_cost(&self.g.t, self.a.frames, self.a.cfg[i])
            if d < best:
                best = d
        return None if best >= DINF else best

    cdef Distances _distances(self):
        if self.dist is None:
            if self.cache.distances is None:
                self.cache.distances = Distances(self.g, self.trie)
            self.dist = self.cache.distances
        return self.dist

    cdef bint _close(self, int32_t off, int32_t n, uint32_t* out, int32_t tokens_left) except -1:
        """Clear from ``out`` the tokens after which the set ``cfg[off:off+n]`` cannot complete in
        ``tokens_left - 1`` more tokens (or, when no completion fits, that do not bring it nearer).

        Only the set's live configurations count (those that can still complete in time): a
        token only dead ones allow is cleared. Of the rest, only tokens whose bound on the rise
        of the distance exceeds the slack are checked (see ``distance``); in a generation that
        does not come near its budget, none is. A few are stepped one by one; many (free text
        in a string near the budget, or a grammar whose bounds are loose) are checked by one
        walk of the vocabulary's trie, which shares their prefixes.
        """
        cdef Entry memo = self.set_entry
        cdef Distances dist
        cdef const Tables* t = &self.g.t
        cdef const TrieTables* tr = &self.trie.tr
        cdef int32_t i, k, d, tok, m, dmin = DINF, dmax = 0, dall = 0, limit, thr, candidates = 0, live = 0
        cdef int32_t frames0 = self.a.n_frames, base0 = self.a.cfg_len, base, src = off
        cdef int flags = 0
        cdef bint removed = False
        cdef Within within
        cdef int32_t done = DINF, done_worst = 0, stepped = 0, first = 0, last, n_order, n_tokens
        cdef const int32_t* order
        cdef const int32_t* bound
        cdef const int32_t* tok_bound
        cdef uint32_t bits
        cdef bint oom = False
        if memo is not None and memo.checked and memo.dmax <= tokens_left and memo.done_worst < tokens_left and (
                memo.done == -DINF or memo.done <= tokens_left - 1 - memo.dmax):
            return False  # far from the budget, as this set was when checked: no token to check
        dist = self._distances()
        within.worst = 0
        with nogil:
            for i in range(off, off + n):
                d = dist.config_cost(t, self.a.frames, self.a.cfg[i])
                dmin = min(dmin, d)
                dall = max(dall, d)
            limit = max(tokens_left, dmin) - 1
            for i in range(off, off + n):  # live: complete in this token and ``limit`` more
                d = dist.config_cost(t, self.a.frames, self.a.cfg[i])
                if d <= limit + 1:
                    dmax = max(dmax, d)
                    live += 1
        if dmin >= DINF:
            return False
        # What earlier checks of this set found (see ``Entry``)
        thr = limit - dmax
        if memo is not None and memo.checked:
            done, done_worst = memo.done, memo.done_worst
            if done_worst > limit or (done > -DINF and live < n):
                done = DINF  # no help: check as if for the first time
            elif done == -DINF or done <= thr:
                return False  # no token this set allows leads further than the tokens left
        if thr < dist.upper:  # some token's bound may exceed the slack: the tokens must be in order
            dist.order_tokens()
        # read with the GIL held, as ``order_tokens`` writes them: 0 tokens in order until it ran
        n_order, order, bound, tok_bound, n_tokens = dist.n_order, dist.order, dist.bound, dist.tok_bound, dist.n_tokens
        if live < n:  # the live configurations, copied past the set
            src = base0
            for i in range(off, off + n):
                d = dist.config_cost(t, self.a.frames, self.a.cfg[i])
                if d <= limit + 1 and not push_config(&self.a, self.a.cfg[i]):
                    self.a.cfg_len = base0
                    raise MemoryError("matcher configurations")
        if self.budget_mask == NULL:
            self.budget_mask = <uint32_t*> malloc(self.n_words * sizeof(uint32_t))
            if self.budget_mask == NULL:
                self.a.cfg_len = base0
                raise MemoryError("matcher budget mask")
        try:
            if live < n:
                memset(self.budget_mask, 0, self.n_words * sizeof(uint32_t))
                self._fill_set(src, live, self.budget_mask)
                for i in range(self.n_words):
                    removed = removed or out[i] != (out[i] & self.budget_mask[i])
                    out[i] &= self.budget_mask[i]
            base = self.a.cfg_len
            with nogil:
                # the allowed tokens whose bound is in (thr, done]: those above ``done`` were stepped before,
                # and fine; the bounds are sorted, largest first
                first = _first_at_most(bound, 0, n_order, done)
                last = _first_at_most(bound, first, n_order, thr)
                self.cd.len = 0
                if last - first <= 4 * self.n_words:  # the range, if shorter than the mask's words
                    for k in range(first, last):
                        tok = order[k]
                        if (out[tok >> 5] >> (tok & 31)) & 1:
                            if intvec_push_range(&self.cd, &tok, 1) < 0:
                                oom = True
                            if self.cd.len >= WALK_CANDIDATES or oom:
                                break
                else:  # else the allowed tokens, by their bits (few beside a large range: digits, EOS)
                    for i in range(self.n_words):
                        bits = out[i]
                        while bits and not oom:
                            tok = (i << 5) + __builtin_ctz(bits)
                            bits &= bits - 1
                            if tok < n_tokens and thr < tok_bound[tok] <= done:
                                oom = intvec_push_range(&self.cd, &tok, 1) < 0
                        if self.cd.len >= WALK_CANDIDATES or oom:
                            break
                candidates = self.cd.len
                if candidates >= WALK_CANDIDATES and not oom:
                    memset(self.budget_mask, 0, self.n_words * sizeof(uint32_t))
                    for i in range(self.n_eos):  # no bytes, no trie node: allowed only when complete
                        self.budget_mask[self._eos_ids[i] >> 5] |= (<uint32_t> 1) << (self._eos_ids[i] & 31)
                    within.dl, within.per_iter, within.t, within.limit, within.worst = dist.dl, dist.per_iter, t, limit, 0
                    if memo is not None:  # the whole set, so that what the walk finds holds for its key
                        src, live = off, n
                    flags = walk(t, &self.a, tr, src, live, False, t.ws_budget, self.budget_mask, NULL, &self.lv,
                                 _within, &within) & F_OVERFLOW
                    for i in range(self.n_words):
                        removed = removed or out[i] != (out[i] & self.budget_mask[i])
                        out[i] &= self.budget_mask[i]
                    candidates = 0
                    done, stepped = -DINF, within.worst
                for k in range(candidates if not oom else 0):
                    tok = self.cd.data[k]
                    m = advance(t, &self.a, src, live, &tr.tok_bytes[tr.bytes_off[tok]],
                                tr.bytes_off[tok + 1] - tr.bytes_off[tok], &flags)
                    d = DINF
                    for i in range(base, base + m):
                        d = min(d, dist.config_cost(t, self.a.frames, self.a.cfg[i]))
                    stepped = max(stepped, d)
                    if d > limit:
                        out[tok >> 5] &= ~((<uint32_t> 1) << (tok & 31))
                        removed = True
                    self.a.cfg_len = base
                    self.a.n_frames = frames0
        finally:
            self.a.cfg_len = base0
            self.a.n_frames = frames0
        if oom:
            raise MemoryError("matcher budget candidates")
        if flags & F_OVERFLOW:
            raise LlamayError("input is too ambiguous for this grammar (limit MAX_CONFIGURATIONS)")
        if memo is not None and src == off and live == n:
            memo.done, memo.done_worst, memo.dmax = done if done == -DINF else thr, max(done_worst, stepped), dall
            memo.checked = True
        return removed

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

    cdef void _position(self, Config c, PosRec* rec) noexcept:
        """``c``'s position: what of it the cache key holds and its entry is computed from.

        A position is the top frame's state and counter, the budget left up to WS_WINDOW,
        and the return states and counters of up to CTX_FRAMES frames below (then CTX, or
        BOTTOM when that is the whole stack); states by their bisimulation class, counters
        folded. With the frames below known, a walk that leaves the top frame can usually go
        on. Unused fields are zero, so that equal positions are equal bytes.
        """
        cdef const Tables* t = &self.g.t
        cdef int32_t f = c.parent, depth = 0, horizon = self.trie.tr.max_depth
        memset(rec, 0, sizeof(PosRec))
        while f >= 0 and depth < CTX_FRAMES:
            rec.frames[2 * depth] = t.canon[self.a.frames[f].ret]
            rec.frames[2 * depth + 1] = fold_counter(t, self.a.frames[f].ret, self.a.frames[f].counter, horizon)
            f = self.a.frames[f].parent
            depth += 1
        rec.state = t.canon[c.state]
        rec.counter = fold_counter(t, c.state, c.counter, horizon)
        rec.ws = 0 if t.ws_budget < 0 else min(t.ws_budget - c.ws, WS_WINDOW)
        rec.bottom = f == BOTTOM
        rec.depth = depth

    cdef int _fill_set(self, int32_t off, int32_t n, uint32_t* out) except -1:
        """OR the mask of the set ``cfg[off:off+n]`` into ``out``: one cache entry for the whole set.

        The entry's key is the positions of the set's configurations, sorted (so that the
        same set reached another way finds it) and packed as bytes. Undecided tokens are
        checked by stepping the real set.
        """
        cdef int32_t i, j, m = 0
        cdef Config c
        cdef PosRec x
        cdef PosRec* recs
        cdef PyObject* got
        cdef Entry entry
        cdef bint whole = True
        if n > self.rec_cap:
            if not resize(<void**> &self.recs, n * sizeof(PosRec)):
                raise MemoryError("matcher positions")
            self.rec_cap = n
        recs = self.recs
        for i in range(n):
            c = self.a.cfg[off + i]
            if c.state == ACCEPT:
                for e in self._eos:
                    out[<int32_t> e >> 5] |= (<uint32_t> 1) << (<int32_t> e & 31)
                continue
            self._position(c, &x)
            j = m - 1  # insertion sort; equal positions kept once
            while j >= 0 and memcmp(&recs[j], &x, sizeof(PosRec)) > 0:
                j -= 1
            if j >= 0 and memcmp(&recs[j], &x, sizeof(PosRec)) == 0:
                continue
            memmove(&recs[j + 2], &recs[j + 1], (m - j - 1) * sizeof(PosRec))
            recs[j + 1] = x
            m += 1
        self.set_entry = None
        if m == 0:
            return 0
        key = PyBytes_FromStringAndSize(<char*> recs, m * sizeof(PosRec))
        got = PyDict_GetItem(self.entries, key)
        if got == NULL:
            entry = self._build_entry(m, key)
        else:
            entry = <Entry> <object> got
        for i in range(m):
            whole = whole and recs[i].bottom
        if whole:
            self.set_entry = entry
        if entry is None:  # cache full: walk this set in full
            for i in range(n):
                c = self.a.cfg[off + i]
                if c.state != ACCEPT:
                    self._walk_into(c, False, self.g.t.ws_budget, out)
            return 0
        return self._apply(entry, off, n, out, whole)

    cdef int32_t _ws_left(self, int32_t off, int32_t n) noexcept:
        """The whitespace budget left, where every configuration of ``cfg[off:off+n]`` has the same; else -1."""
        cdef int32_t i, left = -1, w
        if self.g.t.ws_budget < 0:
            return -1
        for i in range(off, off + n):
            if self.a.cfg[i].state == ACCEPT:
                continue
            w = self.g.t.ws_budget - self.a.cfg[i].ws
            if left >= 0 and w != left:
                return -1
            left = w
        return left

    cdef int _apply(self, Entry entry, int32_t off, int32_t n, uint32_t* out, bint whole) except -1:
        """OR a cache entry into ``out``; its undecided tokens are checked by stepping the set ``cfg[off:off+n]``.

        ``whole``: the entry's key holds whole stacks, so what decides its undecided tokens is the
        whitespace budget left; what stepping them finds is kept per budget left (``und_by_ws``).
        """
        cdef int32_t i, tok, frames0 = self.a.n_frames, base_cfg = self.a.cfg_len, k, left = -1
        cdef int flags = 0
        cdef const TrieTables* tr = &self.trie.tr
        cdef const int32_t* ids = NULL
        cdef int32_t n_ids = -1        # tokens of the record for this budget left (-1: none yet)
        cdef bytes found = None
        if whole and entry.n_und:
            left = self._ws_left(off, n)
            if left >= 0 and entry.und_by_ws is not None:
                found = entry.und_by_ws.get(left)
                if found is not None:
                    ids = <const int32_t*> PyBytes_AS_STRING(found)
                    n_ids = <int32_t> (PyBytes_GET_SIZE(found) // sizeof(int32_t))
        self.acc.len = 0
        with nogil:
            if entry.base > 0:
                or_words(out, &self.slices.s.cum[<Py_ssize_t> entry.base * self.slices.s.n_words], self.n_words)
            if entry.dense != NULL:
                or_words(out, entry.dense, self.n_words)
            for i in range(entry.n_extra):
                tok = entry.extra[i]
                out[tok >> 5] |= (<uint32_t> 1) << (tok & 31)
            if n_ids >= 0:
                for i in range(n_ids):
                    out[ids[i] >> 5] |= (<uint32_t> 1) << (ids[i] & 31)
            else:
                for i in range(entry.n_und):
                    tok = entry.und[i]
                    self.a.cfg_len = base_cfg
                    k = advance(&self.g.t, &self.a, off, n, &tr.tok_bytes[tr.bytes_off[tok]],
                                tr.bytes_off[tok + 1] - tr.bytes_off[tok], &flags)
                    if k:
                        out[tok >> 5] |= (<uint32_t> 1) << (tok & 31)
                        if left >= 0 and intvec_push_range(&self.acc, &tok, 1) < 0:
                            left = -1  # out of memory for the record: step them again next time
                    self.a.n_frames = frames0
                self.a.cfg_len = base_cfg
        if flags & F_OVERFLOW:
            raise LlamayError("input is too ambiguous for this grammar (limit MAX_CONFIGURATIONS)")
        if found is None and left >= 0:
            self._keep_und(entry, left)
        return 0

    cdef int _keep_und(self, Entry entry, int32_t left) except -1:
        """Keep the undecided tokens the budget ``left`` accepted (``self.acc``), within the cache's bound."""
        cdef Py_ssize_t size = self.acc.len * sizeof(int32_t)
        if not self.cache.charge(size + RECORD_BYTES):
            return 0
        if entry.und_by_ws is None:
            entry.und_by_ws = {}
        entry.und_by_ws[left] = PyBytes_FromStringAndSize(<char*> self.acc.data, size)
        return 0

    cdef Entry _build_entry(self, int32_t m, key):
        """Compute and cache the entry of positions ``recs[0:m]``.

        The positions become one start set of the machine: configurations with their frames
        interned, under one whitespace window (the widest; a configuration with less starts
        that much into it).
        """
        cdef int32_t ws_cap = 0, start = -1, base = -1, i, j, parent
        cdef int rc = 0
        cdef bint ok = True
        cdef SetMachine mach = self.machine
        cdef Config* start_cfg
        cdef PosRec* r
        cdef Entry entry
        if self.g.t.ws_budget >= 0:
            for i in range(m):
                ws_cap = max(ws_cap, self.recs[i].ws)
        if m > self.start_cap:
            if not resize(<void**> &self.start_cfg, m * sizeof(Config)):
                raise MemoryError("matcher positions")
            self.start_cap = m
        start_cfg = self.start_cfg
        self.cd.len = 0
        self.acc.len = 0
        with nogil:
            PyThread_acquire_lock(mach.lock, WAIT_LOCK)
            for j in range(m):
                r = &self.recs[j]
                parent = BOTTOM if r.bottom else CTX
                for i in range(r.depth - 1, -1, -1):
                    parent = mach.intern_frame(r.frames[2 * i], r.frames[2 * i + 1], parent)
                    if parent < 0:
                        ok = False
                        break
                if not ok:
                    break
                start_cfg[j].state = r.state
                start_cfg[j].counter = r.counter
                start_cfg[j].parent = parent
                start_cfg[j].ws = 0 if self.g.t.ws_budget < 0 else ws_cap - r.ws
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
            return self._build_entry_plain(m, key)
        if rc != 0:
            raise LlamayError("input is too ambiguous for this grammar (limit MAX_CONFIGURATIONS)")
        entry = Entry()
        entry.und = _copy_ints(self.cd.data, self.cd.len)
        entry.n_und = self.cd.len
        if base >= 0 and self.acc.len <= self.n_words // 8:
            entry.base = base
            entry.extra = _copy_ints(self.acc.data, self.acc.len)
            entry.n_extra = self.acc.len
        else:  # a bitmask (a slice with many extra tokens too: one pass over the words beats scattered bits)
            if base >= 0:
                with nogil:
                    if base > 0:
                        memcpy(self.scratch, &self.slices.s.cum[<Py_ssize_t> base * self.slices.s.n_words],
                               self.n_words * sizeof(uint32_t))
                    for i in range(self.acc.len):
                        self.scratch[self.acc.data[i] >> 5] |= (<uint32_t> 1) << (self.acc.data[i] & 31)
            entry.dense = <uint32_t*> malloc(self.n_words * sizeof(uint32_t))
            if entry.dense == NULL:
                raise MemoryError("mask cache entry")
            memcpy(entry.dense, self.scratch, self.n_words * sizeof(uint32_t))
        if (entry.n_und and entry.und == NULL) or (entry.n_extra and entry.extra == NULL):
            raise MemoryError("mask cache entry")
        if not self.cache.put(key, entry, entry.nbytes(self.n_words)):
            return None
        return entry

    cdef Entry _build_entry_plain(self, int32_t m, key):
        """The entry by the plain walk, one position after another (when the set machine is full)."""
        cdef int32_t i, k, parent, frames0 = self.a.n_frames
        cdef Config pos
        cdef PosRec* r
        cdef Entry entry = Entry()
        entry.dense = <uint32_t*> calloc(self.n_words, sizeof(uint32_t))
        if entry.dense == NULL:
            raise MemoryError("mask cache entry")
        self.cd.len = 0
        for i in range(m):
            r = &self.recs[i]
            parent = BOTTOM if r.bottom else CTX
            for k in range(r.depth - 1, -1, -1):
                parent = push_frame(&self.a, r.frames[2 * k], r.frames[2 * k + 1], parent)
                if parent < 0:
                    raise MemoryError("matcher frames")
            pos.state = r.state
            pos.counter = r.counter
            pos.parent = parent
            pos.ws = 0
            self._walk_into(pos, True, r.ws, entry.dense)
            self.a.n_frames = frames0
        entry.und = _copy_ints(self.cd.data, self.cd.len)
        entry.n_und = self.cd.len
        if entry.n_und and entry.und == NULL:
            raise MemoryError("mask cache entry")
        if not self.cache.put(key, entry, entry.nbytes(self.n_words)):
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
