# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Fewest tokens that complete the document, per automaton state, over what a vocabulary spells.

Why: a generation whose token budget runs out mid-document returns half a document. With the
distance to completion known at every configuration, a mask can keep, once the tokens left come
down to that distance, only tokens after which the document still closes in what is left.

Theory of operation. ``dl[s]`` is the fewest tokens from state ``s`` to the end of its frame: to
a final state or, inside a counted repetition, to a state where the iteration may end (one
with the repetition's EXIT edge). Tokens are counted over what the vocabulary can spell along the automaton's edges:

- runs of single-byte edges (literals, keys, the reserved bytes of a token edge) by a walk of the
  vocabulary's trie along them from each state: one per token that spells a piece of the run;
- a byte range (string content, digits) costs one where a single-byte token falls in it;
- a call costs its rule's fewest tokens; budgeted whitespace is never needed, so it costs nothing
  here and is never counted on.

A token spanning a call or a return is not counted, so the distance is an upper bound that some
token sequence meets: from a configuration at distance d > 0 an allowed token leads to distance
d - 1 or less (the first token of the counted path). A configuration's distance adds its
frames': its state's cost, then each frame's return state's, where a counted repetition short of
its minimum adds the iterations it still owes.

Which tokens to check. A token can raise the distance (an opening bracket owes its closing one).
``bound[t]`` bounds that rise from the configurations of a set: a byte's bound is the most by
which the configurations reached after it (through calls, repetitions and returns, ``_reach``)
can exceed the distance of the configuration that read it; a token's is the sum over its bytes.
Over the set's live configurations (those that can still complete in the tokens left), the
largest distance plus that bound is at least the distance after the token, so a step checks only
the allowed tokens whose bound exceeds the slack. The bound is a maximum over alternatives, so it
is loose where they differ much (a value that may be ``null`` or a large object; a string past
``ir.MAX_REPEAT`` characters, built of blocks that owe thousands); there the check steps many
tokens (``matcher``: by one walk of the trie).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memset

import time

import numpy as np

cimport numpy as cnp

from .automaton cimport EDGE_CALL, EDGE_EXIT, EDGE_INC, CompiledGrammar, resize
from .trie cimport NODE_FAN, TokenTrie, TrieTables
from .walk cimport IntVec, intvec_push_range

cnp.import_array()

cdef enum:
    WALK_VISITS = 4096   # trie nodes a state's walk may visit: past it, longer tokens go uncounted
    NONE = -DINF         # "no configuration": the unit of max
    RELAX_PASSES = 64    # relaxation passes over the closure graph's cycles before giving up (all unbounded)


cdef extern from *:
    int __builtin_popcount(unsigned int x) nogil


cdef inline int32_t _child(const TrieTables* tr, int32_t node, uint8_t b) noexcept nogil:
    """The child of ``node`` (-1: the root) on byte ``b``, or -1."""
    cdef int32_t k, j, end, i, n = 0
    cdef const int32_t* rec
    k = tr.root_fan if node < 0 else (tr.fan_off[node] if tr.node_db[node] & NODE_FAN else -1)
    if k >= 0:
        rec = &tr.fan_pool[k]
        if not (<unsigned int> rec[b >> 5] >> (b & 31)) & 1:
            return -1
        for i in range(b >> 5):
            n += __builtin_popcount(<unsigned int> rec[i])
        n += __builtin_popcount((<unsigned int> rec[b >> 5]) & (((<unsigned int> 1) << (b & 31)) - 1))
        return rec[8 + n]
    j = node + 1
    end = tr.n_nodes if node < 0 else node + tr.node_size[node]
    while j < end:
        if tr.node_byte[j] == b:
            return j
        j += tr.node_size[j]
    return -1


cdef class Distances:
    """The distances of one (grammar, vocabulary) pair; built on first use, shared through the mask cache."""

    def __cinit__(self):
        self.dl = NULL
        self.per_iter = NULL
        self.order = NULL
        self.bound = NULL
        self.tok_bound = NULL

    def __dealloc__(self):
        free(self.dl)
        free(self.per_iter)
        free(self.order)
        free(self.bound)
        free(self.tok_bound)

    def __init__(self, CompiledGrammar grammar, TokenTrie trie):
        cdef const Tables* t = &grammar.t
        cdef const TrieTables* tr = &trie.tr
        cdef int32_t n = t.n_states, n_rules = len(grammar.rule_names)
        started = time.perf_counter()
        self.n_states = n
        self.trie = trie
        self.dl = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
        self.per_iter = <int32_t*> calloc(max(n_rules, 1), sizeof(int32_t))
        if self.dl == NULL or self.per_iter == NULL:
            raise MemoryError("distances")
        if _distances(t, tr, n_rules, self.dl, self.per_iter) < 0:
            raise MemoryError("distances")
        kb = np.empty(256, np.int32)
        if _byte_bounds(t, n_rules, self.dl, self.per_iter, <int32_t*> cnp.PyArray_DATA(kb)) < 0:
            raise MemoryError("distance bounds")
        self.kb = kb
        self.upper = sat(<int64_t> max(0, int(kb.max())) * tr.max_depth)
        self.build_seconds = time.perf_counter() - started

    cdef int order_tokens(self) except -1:
        """Sum and sort the tokens' bounds, once: only a check whose slack is under ``upper`` needs them.

        A generation far from its budget never does, and for a small grammar this pass over the
        whole vocabulary is most of the build. (Narrowing ``upper`` to the largest bound first
        costs a pass as long as the sums themselves.) It runs holding the GIL, and ``n_order`` is
        set last: a matcher reads it, then the arrays, with the GIL held.
        """
        if not self.ordered:
            started = time.perf_counter()
            try:
                _token_bounds(self, &self.trie.tr, self.trie.size, self.kb)
            except MemoryError:  # nothing half built is kept: the next check tries again
                free(self.tok_bound)
                free(self.order)
                free(self.bound)
                self.tok_bound = self.order = self.bound = NULL
                raise
            self.ordered = True
            self.upper = self.bound[0] if self.n_order else NONE
            self.build_seconds += time.perf_counter() - started
        return 0

    def state_distances(self):
        """Per state, the fewest tokens to the end of its frame (``DINF``: none the vocabulary spells); for tests."""
        return np.array(<int32_t[:max(self.n_states, 1)]> self.dl)[: self.n_states].copy()

    def token_bounds(self):
        """Per token, the bound on the rise of the distance a step by it can cause (-``DINF``: a token
        with no bytes, never checked); for tests and benchmarks."""
        self.order_tokens()
        return np.array(<int32_t[:max(self.n_tokens, 1)]> self.tok_bound)[: self.n_tokens].copy()

    def byte_bounds(self):
        """Per byte, the most by which the configurations reached after it can exceed the distance of
        the configuration that read it; for tests."""
        return self.kb.copy()

    def token_order(self):
        """The tokens the checks consider, by bound, largest first, ties by token id (ordering them
        if no check has); for tests and benchmarks."""
        self.order_tokens()
        return np.array(<int32_t[:max(self.n_order, 1)]> self.order)[: self.n_order].copy()


INF = DINF


cdef int _sums(const TrieTables* tr, int32_t size, const int32_t* k, int32_t* b, int32_t* top) noexcept nogil:
    """Each token's bound (the sum of its bytes') into ``b``, and the largest into ``top`` (``NONE``
    where no token has bytes); -1 when out of memory.

    The sums are taken along the trie, in its pre-order: a node's is its parent's plus its byte's,
    so a prefix that many tokens share is summed once.
    """
    cdef int32_t j, d, p, v
    cdef int64_t* along = <int64_t*> malloc((tr.max_depth + 1) * sizeof(int64_t))  # per depth, the path's sum
    if along == NULL:
        return -1
    top[0] = NONE
    along[0] = 0
    for j in range(tr.n_nodes):
        d = tr.node_depth[j]
        along[d] = along[d - 1] + k[tr.node_byte[j]]
        for p in range(tr.node_tok[j], tr.node_tok[j + 1]):
            if tr.tok_ids[p] < size:
                v = sat(along[d])
                top[0] = max(top[0], v)
                b[tr.tok_ids[p]] = v
    free(along)
    return 0


cdef _token_bounds(Distances self, const TrieTables* tr, int32_t size, cnp.ndarray kb):
    """Each token's bound (``_sums``), and the tokens sorted by it, largest first."""
    cdef int32_t tok, p, n = 0, top, low = DINF
    cdef int32_t* b = <int32_t*> malloc(max(size, 1) * sizeof(int32_t))
    if b == NULL:
        raise MemoryError("distance bounds")
    self.tok_bound = b
    self.n_tokens = size
    for tok in range(size):
        b[tok] = NONE  # no bytes (end of text, or past the trie's tokens): never raises the distance
    if _sums(tr, size, <const int32_t*> cnp.PyArray_DATA(kb), b, &top) < 0:
        raise MemoryError("distance bounds")
    for tok in range(size):
        if b[tok] > NONE:
            n += 1
            low = min(low, b[tok])
    self.order = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
    self.bound = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
    if self.order == NULL or self.bound == NULL or _by_bound(b, size, n, top, low, self.order) < 0:
        raise MemoryError("distance bounds")
    for p in range(n):
        self.bound[p] = b[self.order[p]]
    self.n_order = n  # last: the arrays are whole


cdef int _by_bound(const int32_t* b, int32_t size, int32_t n, int32_t top, int32_t low,
                   int32_t* order) noexcept nogil:
    """The ``n`` tokens whose bound is above ``NONE`` (from ``low`` to ``top``) into ``order``,
    largest bound first, ties by token id; -1 when out of memory.

    A radix sort of ``top - bound``, 16 bits a pass, each pass stable: a vocabulary of 128k
    tokens spans a few hundred bounds (one pass), and numpy's stable sort (a merge sort) was half
    of the distances' build. Loose bounds may span more (bounds lie in (-DINF, DINF]: two passes).
    """
    cdef int32_t tok, i, key
    cdef bint wide
    cdef int32_t* tmp = NULL
    cdef int32_t* dst
    cdef int32_t* count = <int32_t*> calloc(65536, sizeof(int32_t))
    if count == NULL:
        return -1
    wide = top - low > 0xFFFF
    if wide:
        tmp = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
        if tmp == NULL:
            free(count)
            return -1
    # the low 16 bits, from the token ids in order: into order, or into tmp when a second pass follows
    for tok in range(size):
        if b[tok] > NONE:
            count[(top - b[tok]) & 0xFFFF] += 1
    _starts(count)
    dst = tmp if wide else order
    for tok in range(size):
        if b[tok] > NONE:
            key = (top - b[tok]) & 0xFFFF
            dst[count[key]] = tok
            count[key] += 1
    if wide:  # the high bits, from tmp into order
        memset(count, 0, 65536 * sizeof(int32_t))
        for i in range(n):
            count[(top - b[tmp[i]]) >> 16] += 1
        _starts(count)
        for i in range(n):
            key = (top - b[tmp[i]]) >> 16
            order[count[key]] = tmp[i]
            count[key] += 1
    free(tmp)
    free(count)
    return 0


cdef inline void _starts(int32_t* count) noexcept nogil:
    """Counts per key into each key's first place (an exclusive prefix sum over 65536 keys)."""
    cdef int32_t key, total = 0
    for key in range(65536):
        total += count[key]
        count[key] = total - count[key]


cdef int _distances(const Tables* t, const TrieTables* tr, int32_t n_rules, int32_t* dl, int32_t* per_iter) noexcept:
    """Fill ``dl`` and ``per_iter``: shortest paths back from the ends of frames (a label-correcting
    search, since a call's cost is its rule's own distance, which falls as the search goes on)."""
    cdef int32_t n = t.n_states, s, e, j, r, x, p, q, head = 0, count = 0
    cdef int64_t c
    cdef uint8_t single[256]
    cdef IntVec src, dst
    cdef int rc = 0
    cdef int32_t* rmin = <int32_t*> malloc(max(n_rules, 1) * sizeof(int32_t))
    cdef int32_t* loop_start = <int32_t*> calloc(n_rules + 1, sizeof(int32_t))  # per rule: its INC targets
    cdef int32_t* loop = NULL
    cdef int32_t* key_rule = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
    cdef int32_t* rev_start = <int32_t*> calloc(n + 1, sizeof(int32_t))
    cdef int32_t* rev = NULL
    cdef int32_t* rev_rule = NULL
    cdef int32_t* call_start = <int32_t*> calloc(n_rules + 1, sizeof(int32_t))
    cdef int32_t* call_site = NULL
    cdef int32_t* queue = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
    cdef uint8_t* queued = <uint8_t*> calloc(max(n, 1), sizeof(uint8_t))
    cdef int32_t n_calls = 0
    src.data = dst.data = NULL
    src.len = dst.len = src.cap = dst.cap = 0
    if rmin == NULL or loop_start == NULL or key_rule == NULL or rev_start == NULL or call_start == NULL or queue == NULL \
            or queued == NULL:
        rc = -1
    if rc == 0:
        memset(single, 0, sizeof(single))
        j = 0
        while j < tr.n_nodes:  # the root's children: bytes that are a token on their own
            if tr.node_tok[j + 1] > tr.node_tok[j]:
                single[tr.node_byte[j]] = 1
            j += tr.node_size[j]
        rc = _token_edges(t, tr, single, &src, &dst)
    if rc == 0:
        # the reverse graph: edges of cost one (tokens, ranges) and calls (their rule's cost), by target
        for e in range(src.len):
            rev_start[dst.data[e] + 1] += 1
        for s in range(n):
            for j in range(t.x_start[s], t.x_start[s + 1]):
                if t.x_kind[j] == EDGE_CALL:
                    rev_start[t.x_tgt[j] + 1] += 1
                    call_start[t.x_arg[j] + 1] += 1
                    n_calls += 1
                elif t.x_kind[j] == EDGE_INC:
                    loop_start[t.state_rule[s] + 1] += 1
        for s in range(n):
            rev_start[s + 1] += rev_start[s]
        for r in range(n_rules):
            call_start[r + 1] += call_start[r]
            loop_start[r + 1] += loop_start[r]
        rev = <int32_t*> malloc(max(rev_start[n], 1) * sizeof(int32_t))
        rev_rule = <int32_t*> malloc(max(rev_start[n], 1) * sizeof(int32_t))
        call_site = <int32_t*> malloc(max(2 * n_calls, 1) * sizeof(int32_t))
        loop = <int32_t*> malloc(max(loop_start[n_rules], 1) * sizeof(int32_t))
        if rev == NULL or rev_rule == NULL or call_site == NULL or loop == NULL:
            rc = -1
    if rc == 0:
        for e in range(src.len):
            x = dst.data[e]
            rev[rev_start[x]] = src.data[e]
            rev_rule[rev_start[x]] = -1
            rev_start[x] += 1
        for s in range(n):
            for j in range(t.x_start[s], t.x_start[s + 1]):
                if t.x_kind[j] == EDGE_CALL:
                    x = t.x_tgt[j]
                    rev[rev_start[x]] = s
                    rev_rule[rev_start[x]] = t.x_arg[j]
                    rev_start[x] += 1
                    r = t.x_arg[j]
                    call_site[2 * call_start[r]] = s
                    call_site[2 * call_start[r] + 1] = x
                    call_start[r] += 1
                elif t.x_kind[j] == EDGE_INC:
                    r = t.state_rule[s]
                    loop[loop_start[r]] = t.x_tgt[j]
                    loop_start[r] += 1
        for s in range(n, 0, -1):  # the fill cursors ran one bucket ahead: shift back
            rev_start[s] = rev_start[s - 1]
        rev_start[0] = 0
        for r in range(n_rules, 0, -1):
            call_start[r] = call_start[r - 1]
            loop_start[r] = loop_start[r - 1]
        call_start[0] = loop_start[0] = 0
        # the ends of frames: final states, and in a counted repetition every state that may leave
        # it (lowering copies the start's EXIT and INC onto the ends of the body: an iteration is
        # complete there); and the states that a rule's cost is read from
        for s in range(n):
            dl[s] = DINF
            key_rule[s] = -1
        for r in range(n_rules):
            rmin[r] = DINF
            if t.rule_max[r] == 0:
                key_rule[t.rule_start[r]] = r
            for j in range(loop_start[r], loop_start[r + 1]):
                key_rule[loop[j]] = r
        for s in range(n):
            if t.final[s]:
                dl[s] = 0
            for j in range(t.x_start[s], t.x_start[s + 1]):
                if t.x_kind[j] == EDGE_EXIT:
                    dl[s] = 0
        for s in range(n):
            if dl[s] == 0:
                queue[count] = s
                queued[s] = 1
                count += 1
        for r in range(n_rules):
            _update_rule(t, r, dl, rmin, loop, loop_start, call_start, call_site, queue, queued, &head, &count, n)
        while count > 0:
            x = queue[head]
            head = (head + 1) % n
            count -= 1
            queued[x] = 0
            for e in range(rev_start[x], rev_start[x + 1]):
                p = rev[e]
                c = <int64_t> dl[x] + (1 if rev_rule[e] < 0 else rmin[rev_rule[e]])
                if c < dl[p]:
                    _lower(dl, p, <int32_t> c, queue, queued, &head, &count, n)
            if key_rule[x] >= 0:
                _update_rule(t, key_rule[x], dl, rmin, loop, loop_start, call_start, call_site, queue, queued, &head,
                             &count, n)
        for r in range(n_rules):
            per_iter[r] = _iteration(dl, loop, loop_start, r)
    free(src.data); free(dst.data); free(rmin); free(loop); free(loop_start); free(key_rule); free(rev_start); free(rev)
    free(rev_rule); free(call_start); free(call_site); free(queue); free(queued)
    return rc


cdef inline void _lower(int32_t* dl, int32_t p, int32_t c, int32_t* queue, uint8_t* queued, int32_t* head,
                        int32_t* count, int32_t n) noexcept nogil:
    dl[p] = c
    if not queued[p]:
        queued[p] = 1
        queue[(head[0] + count[0]) % n] = p
        count[0] += 1


cdef inline int32_t _iteration(const int32_t* dl, const int32_t* loop, const int32_t* loop_start,
                               int32_t r) noexcept nogil:
    """An iteration's cost in counted rule ``r``: the most over the states its INC edges enter (one
    bound for every place an iteration may start from)."""
    cdef int32_t j, v = 0
    for j in range(loop_start[r], loop_start[r + 1]):
        if dl[loop[j]] > v:
            v = dl[loop[j]]
    return v if loop_start[r + 1] > loop_start[r] else DINF


cdef void _update_rule(const Tables* t, int32_t r, int32_t* dl, int32_t* rmin, const int32_t* loop,
                       const int32_t* loop_start, const int32_t* call_start, const int32_t* call_site, int32_t* queue, uint8_t* queued,
                       int32_t* head, int32_t* count, int32_t n) noexcept nogil:
    """Rule ``r``'s cost from its key state; if it fell, lower its call sites."""
    cdef int32_t v, k, p
    cdef int64_t c
    if t.rule_max[r] > 0:
        v = 0 if t.rule_min[r] == 0 else sat(<int64_t> t.rule_min[r] * _iteration(dl, loop, loop_start, r))
    else:
        v = dl[t.rule_start[r]]
    if v >= rmin[r]:
        return
    rmin[r] = v
    for k in range(call_start[r], call_start[r + 1]):
        p = call_site[2 * k]
        c = <int64_t> v + dl[call_site[2 * k + 1]]
        if c < dl[p]:
            _lower(dl, p, <int32_t> c, queue, queued, head, count, n)


cdef int _token_edges(const Tables* t, const TrieTables* tr, const uint8_t* single, IntVec* src,
                      IntVec* dst) noexcept:
    """The edges of cost one: from each state, the states each token spelled along its single-byte
    edges reaches (a trie walk), and each byte range that holds a single-byte token."""
    cdef int32_t n = t.n_states, s, e, b, u, node, child, visits, sp, pair[2]
    cdef bint limited = t.ws_budget >= 0
    cdef int32_t* stack = NULL
    cdef int32_t* stamp = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
    cdef int32_t cap = 256
    cdef int rc = 0
    stack = <int32_t*> malloc(2 * cap * sizeof(int32_t))
    if stack == NULL or stamp == NULL:
        free(stack)
        free(stamp)
        return -1
    for s in range(n):
        stamp[s] = -1
    for s in range(n):
        for e in range(t.b_start[s], t.b_start[s + 1]):
            if (limited and t.b_ws[e]) or t.b_lo[e] == t.b_hi[e]:
                continue
            for b in range(t.b_lo[e], t.b_hi[e] + 1):
                if single[b]:
                    pair[0] = s
                    pair[1] = t.b_tgt[e]
                    if intvec_push_range(src, &pair[0], 1) < 0 or intvec_push_range(dst, &pair[1], 1) < 0:
                        rc = -1
                    break
        # the trie walk along single-byte edges: (node, state) pairs, depth first
        sp = 0
        stack[0] = -1
        stack[1] = s
        sp = 1
        visits = 0
        while sp > 0 and visits < WALK_VISITS and rc == 0:
            sp -= 1
            node = stack[2 * sp]
            u = stack[2 * sp + 1]
            for e in range(t.b_start[u], t.b_start[u + 1]):
                if t.b_lo[e] != t.b_hi[e] or (limited and t.b_ws[e]):
                    continue
                child = _child(tr, node, t.b_lo[e])
                if child < 0:
                    continue
                visits += 1
                if tr.node_tok[child + 1] > tr.node_tok[child] and stamp[t.b_tgt[e]] != s:
                    stamp[t.b_tgt[e]] = s
                    pair[0] = s
                    pair[1] = t.b_tgt[e]
                    if intvec_push_range(src, &pair[0], 1) < 0 or intvec_push_range(dst, &pair[1], 1) < 0:
                        rc = -1
                if tr.node_size[child] > 1:
                    if sp >= cap:
                        if not resize(<void**> &stack, 2 * (2 * cap) * sizeof(int32_t)):
                            rc = -1
                            break
                        cap *= 2
                    stack[2 * sp] = child
                    stack[2 * sp + 1] = t.b_tgt[e]
                    sp += 1
        if rc < 0:
            break
    free(stack)
    free(stamp)
    return rc


cdef int _byte_bounds(const Tables* t, int32_t n_rules, const int32_t* dl, const int32_t* per_iter,
                      int32_t* kb) noexcept:
    """Per byte, the most by which the configurations reached after it can exceed the distance of
    the configuration that read it (``DINF`` where unbounded or unknown)."""
    cdef int32_t n = t.n_states, s, e, b, q, j, v
    cdef int32_t pop = 0
    cdef int32_t* reach = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
    cdef uint8_t* ends = <uint8_t*> malloc(max(n, 1))
    if reach == NULL or ends == NULL or _reach(t, dl, per_iter, reach) < 0:
        free(reach)
        free(ends)
        return -1
    _frame_ends(t, ends)
    # a return lands on a caller's return state, whose own calls can raise the distance again
    for s in range(n):
        for j in range(t.x_start[s], t.x_start[s + 1]):
            if t.x_kind[j] != EDGE_CALL or t.tail[t.x_tgt[j]]:
                continue
            q = t.x_tgt[j]
            if dl[q] >= DINF or reach[q] >= DINF:
                pop = DINF
            elif reach[q] > NONE and reach[q] - dl[q] > pop:
                pop = reach[q] - dl[q]
    for b in range(256):
        kb[b] = NONE
    for s in range(n):
        if dl[s] >= DINF:
            continue
        for e in range(t.b_start[s], t.b_start[s + 1]):
            q = t.b_tgt[e]
            v = reach[q] if reach[q] > pop or not ends[q] else pop
            v = DINF if v >= DINF else v - dl[s]
            for b in range(t.b_lo[e], t.b_hi[e] + 1):
                if v > kb[b]:
                    kb[b] = v
    for b in range(256):
        # never read where a completion is known: a live configuration (the only kind the check
        # steps) reaches it only past a byte that entered a state with none, whose bound is DINF
        if kb[b] == NONE:
            kb[b] = 0
    free(reach)
    free(ends)
    return 0


cdef void _frame_ends(const Tables* t, uint8_t* ends) noexcept nogil:
    """Per state, whether its closure may end its frame (a final state, a counted repetition's
    EXIT): only a byte into such a state returns to a caller, whose own calls can raise the
    distance again. Relaxed to a fixpoint: the closure graph is small and mostly acyclic."""
    cdef int32_t n = t.n_states, s, j, q
    cdef bint rising = True
    for s in range(n):
        ends[s] = t.final[s]
        for j in range(t.x_start[s], t.x_start[s + 1]):
            if t.x_kind[j] == EDGE_EXIT:
                ends[s] = 1
    while rising:
        rising = False
        for s in range(n):
            if ends[s]:
                continue
            for j in range(t.x_start[s], t.x_start[s + 1]):
                q = t.x_tgt[j]
                if ends[q] and (t.x_kind[j] != EDGE_CALL or ends[t.rule_start[t.x_arg[j]]]):
                    ends[s] = 1
                    rising = True
                    break


cdef int _reach(const Tables* t, const int32_t* dl, const int32_t* per_iter, int32_t* reach) noexcept:
    """Per state, the largest frame-relative distance among the configurations its closure emits,
    without returning past its frame (NONE: it emits none).

    One depth-first pass, children first, settles every state outside a cycle. The closure graph
    can cycle through a counted repetition's INC edge (a body that may read nothing), where a
    state's successor is still open when it is settled: a few passes of relaxation then raise
    each state to the largest value around its cycle (edges inside such a cycle add nothing, so
    the values stop rising; past ``RELAX_PASSES`` every state is taken as unbounded)."""
    cdef int32_t n = t.n_states, s, u, j, q, c, sp = 0, passes
    cdef int64_t v
    cdef bint rising = True
    cdef uint8_t* color = <uint8_t*> calloc(max(n, 1), sizeof(uint8_t))
    cdef int32_t cap = n + 2 * t.x_start[n] + 1  # every state once, then once per edge into it at most
    cdef int32_t* stack = <int32_t*> malloc(cap * sizeof(int32_t))
    if color == NULL or stack == NULL:
        free(color)
        free(stack)
        return -1
    for s in range(n):
        reach[s] = NONE
    for s in range(n):
        if color[s]:
            continue
        stack[0] = s
        sp = 1
        while sp > 0:
            u = stack[sp - 1]
            if color[u] == 0:
                color[u] = 1
                for j in range(t.x_start[u], t.x_start[u + 1]):
                    for c in range(2):
                        q = t.x_tgt[j] if c == 0 else (t.rule_start[t.x_arg[j]] if t.x_kind[j] == EDGE_CALL else -1)
                        if q >= 0 and color[q] == 0:
                            stack[sp] = q
                            sp += 1
                continue
            sp -= 1
            if color[u] == 2:
                continue
            reach[u] = _closure_value(t, dl, per_iter, reach, u)
            color[u] = 2
    passes = 0
    while rising:
        rising = False
        passes += 1
        for u in range(n):
            v = _closure_value(t, dl, per_iter, reach, u)
            if v > reach[u]:
                reach[u] = <int32_t> v
                rising = True
        if rising and passes == RELAX_PASSES:
            for u in range(n):
                reach[u] = DINF
            break
    free(color)
    free(stack)
    return 0


cdef int32_t _closure_value(const Tables* t, const int32_t* dl, const int32_t* per_iter, const int32_t* reach,
                            int32_t u) noexcept nogil:
    """``reach[u]`` from its own byte edges and its successors' current values."""
    cdef int32_t j, k, r, q
    cdef int64_t v = dl[u] if t.b_start[u + 1] > t.b_start[u] else NONE, w
    for j in range(t.x_start[u], t.x_start[u + 1]):
        q = t.x_tgt[j]
        if reach[q] > v:
            v = reach[q]
        if t.x_kind[j] == EDGE_CALL:  # the callee's configurations sit on a frame returning to q
            r = t.x_arg[j]
            k = t.rule_start[r]
            if reach[k] > NONE:
                w = reach[k]
                if t.rule_max[r] > 0:
                    w += <int64_t> t.rule_min[r] * per_iter[r]
                w += dl[q]
                if w > v:
                    v = w
    return sat(v)
