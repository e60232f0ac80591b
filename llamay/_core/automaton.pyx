# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Byte steps over sets of configurations.

Theory of operation. ``step`` takes every configuration of a set through one byte: each
byte edge of its state that matches is followed, then ``closure`` expands the result until
every configuration sits on a state that reads bytes (or is ACCEPT). Closure follows the
three special edges (CALL pushes a frame, INC/EXIT drive the frame counter) and pops a frame
whenever a final state is reached. Results are appended to the arena's configuration
buffer, deduplicated, so a caller keeps several sets side by side (one per trie depth).
Frames are shared within a step when identical, and never freed during one: callers
truncate ``n_frames`` and ``cfg_len`` to undo speculative work.
"""

from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy

import numpy as np

cimport numpy as cnp

cnp.import_array()

CALL = EDGE_CALL
INC = EDGE_INC
EXIT = EDGE_EXIT


cdef int arena_init(Arena* a, int32_t max_configs) noexcept nogil:
    a.cfg_cap = 256
    a.frames_cap = 256
    a.work_cap = 256
    a.cfg = <Config*> malloc(a.cfg_cap * sizeof(Config))
    a.frames = <Frame*> malloc(a.frames_cap * sizeof(Frame))
    a.work = <Config*> malloc(a.work_cap * sizeof(Config))
    a.cfg_len = 0
    a.n_frames = 0
    a.step_frames = 0
    a.max_configs = max_configs
    return 0 if (a.cfg != NULL and a.frames != NULL and a.work != NULL) else -1


cdef void arena_free(Arena* a) noexcept nogil:
    free(a.cfg)
    free(a.frames)
    free(a.work)
    a.cfg = NULL
    a.frames = NULL
    a.work = NULL


cdef inline bint _same(Config x, Config y) noexcept nogil:
    return x.state == y.state and x.counter == y.counter and x.parent == y.parent and x.ws == y.ws


cdef inline int _emit(Arena* a, Config c, int32_t out_start, int* flags) noexcept nogil:
    cdef int32_t i
    for i in range(out_start, a.cfg_len):
        if _same(a.cfg[i], c):
            return 0
    if a.cfg_len - out_start >= a.max_configs or not grow(<void**> &a.cfg, &a.cfg_cap, a.cfg_len + 1, sizeof(Config)):
        flags[0] |= F_OVERFLOW
        return -1
    a.cfg[a.cfg_len] = c
    a.cfg_len += 1
    return 0


cdef int32_t push_frame(Arena* a, int32_t ret, int32_t counter, int32_t parent) noexcept nogil:
    """Append a frame (no sharing); returns its index, or -1 when out of memory."""
    if not grow(<void**> &a.frames, &a.frames_cap, a.n_frames + 1, sizeof(Frame)):
        return -1
    a.frames[a.n_frames].ret = ret
    a.frames[a.n_frames].counter = counter
    a.frames[a.n_frames].parent = parent
    a.n_frames += 1
    return a.n_frames - 1


cdef inline int32_t _frame(Arena* a, int32_t ret, int32_t counter, int32_t parent, int* flags) noexcept nogil:
    cdef int32_t i
    for i in range(a.step_frames, a.n_frames):
        if a.frames[i].ret == ret and a.frames[i].counter == counter and a.frames[i].parent == parent:
            return i
    i = push_frame(a, ret, counter, parent)
    if i < 0:
        flags[0] |= F_OVERFLOW
    return i


cdef inline void _push_seen(Arena* a, Config y, int32_t* seen, int* flags) noexcept nogil:
    cdef int32_t i
    for i in range(seen[0]):
        if _same(a.work[i], y):
            return
    if seen[0] >= a.max_configs or not grow(<void**> &a.work, &a.work_cap, seen[0] + 1, sizeof(Config)):
        flags[0] |= F_OVERFLOW
        return
    a.work[seen[0]] = y
    seen[0] += 1


cdef int32_t closure(const Tables* t, Arena* a, Config c, int32_t out_start, int* flags) noexcept nogil:
    """Expand ``c`` onto byte-reading states, appending to the set that starts at ``out_start``."""
    cdef int32_t seen = 1, done = 0, j, s, k, f, r
    cdef Config x, y
    # work[0:seen] holds every configuration reached; work[done:seen] is still to expand
    a.work[0] = c
    while done < seen:
        x = a.work[done]
        done += 1
        s = x.state
        if t.b_start[s + 1] > t.b_start[s]:
            if _emit(a, x, out_start, flags) < 0:
                return -1
        if t.final[s]:
            if x.parent == BOTTOM:
                y.state = ACCEPT
                y.counter = 0
                y.parent = BOTTOM
                y.ws = 0
                if _emit(a, y, out_start, flags) < 0:
                    return -1
            elif x.parent == CTX:
                flags[0] |= F_NEED_CTX
            else:
                f = x.parent
                y.state = a.frames[f].ret
                y.counter = a.frames[f].counter
                y.parent = a.frames[f].parent
                y.ws = x.ws
                _push_seen(a, y, &seen, flags)
        for j in range(t.x_start[s], t.x_start[s + 1]):
            k = t.x_kind[j]
            y = x
            if k == EDGE_CALL:  # CALL: push a frame returning to the target, enter the rule
                if t.tail[t.x_tgt[j]]:
                    f = x.parent  # a tail call: right recursion runs in constant stack
                else:
                    f = _frame(a, t.x_tgt[j], x.counter, x.parent, flags)
                    if f < 0:
                        return -1
                y.state = t.rule_start[t.x_arg[j]]
                y.counter = 0
                y.parent = f
            elif k == EDGE_INC:  # INC: one more iteration, if under max
                r = t.state_rule[s]
                if x.counter >= t.rule_max[r]:
                    continue
                y.state = t.x_tgt[j]
                y.counter = x.counter + 1
            else:           # EXIT: leave the repetition, if at least min iterations
                r = t.state_rule[s]
                if x.counter < t.rule_min[r]:
                    continue
                y.state = t.x_tgt[j]
            _push_seen(a, y, &seen, flags)
        if flags[0] & F_OVERFLOW:
            return -1
    return 0


cdef int32_t step(const Tables* t, Arena* a, int32_t src, int32_t n, uint8_t byte, bint ci, int32_t ws_cap,
                  int* flags) noexcept nogil:
    """Configurations ``cfg[src:src+n]`` after ``byte``, appended to the buffer; returns their count.

    Under a finite budget a whitespace edge is taken while ``Config.ws < ws_cap``. In a
    context-independent walk (``ci``) ``ws`` counts from 0 and ``ws_cap`` is the part of
    the real remaining budget the cache key records (at most WS_WINDOW): past a window of
    WS_WINDOW the edge sets F_NEED_CTX, for the real context to decide. A smaller window is
    the whole budget left, so past it the edge is refused as in the real context: else,
    once the budget is spent, every token that starts with a space (a third of SmolLM2's)
    would be left undecided and stepped at every mask.
    """
    cdef int32_t out_start = a.cfg_len, i, e, s
    cdef Config c, y
    a.step_frames = a.n_frames
    for i in range(src, src + n):
        c = a.cfg[i]
        s = c.state
        if s < 0 or not (t.byteset[s * 8 + (byte >> 5)] >> (byte & 31)) & 1:
            continue
        for e in range(t.b_start[s], t.b_start[s + 1]):
            if t.b_lo[e] > byte:
                break
            if byte > t.b_hi[e]:
                continue
            y = c
            if t.b_ws[e] and t.ws_budget >= 0:
                if c.ws >= ws_cap:
                    if ci and ws_cap >= WS_WINDOW:
                        flags[0] |= F_NEED_CTX
                    continue
                y.ws = c.ws + 1
            y.state = t.b_tgt[e]
            if closure(t, a, y, out_start, flags) < 0:
                return 0
    return a.cfg_len - out_start


cdef void _fill_byteset(const int32_t* start, const uint8_t* lo, const uint8_t* hi, uint32_t* out,
                        int32_t n) noexcept nogil:
    cdef int32_t s, e, w, a, z
    for s in range(n):
        for e in range(start[s], start[s + 1]):
            if lo[e] == hi[e]:  # one byte (most edges: literals, keys)
                out[s * 8 + (lo[e] >> 5)] |= (<uint32_t> 1) << (lo[e] & 31)
                continue
            for w in range(lo[e] >> 5, (hi[e] >> 5) + 1):  # the range's bits, a 32-bit word at a time
                a = lo[e] - 32 * w if lo[e] > 32 * w else 0
                z = hi[e] - 32 * w if hi[e] < 32 * w + 31 else 31
                out[s * 8 + w] |= ((<uint32_t> 0xFFFFFFFF) >> (31 - z + a)) << a


cdef inline uint32_t _mix(uint32_t h, uint32_t x) noexcept nogil:
    h ^= x
    h *= 0x9E3779B1u
    return (h << 15) | (h >> 17)


cdef void _sort_tuples(int32_t* a, int32_t n, int32_t w) noexcept nogil:
    """Insertion sort of ``n`` tuples of ``w`` ints, lexicographically: a state has few edges."""
    cdef int32_t i, k, j, c
    cdef int32_t x[4]
    for i in range(1, n):
        for j in range(w):
            x[j] = a[i * w + j]
        k = i - 1
        while k >= 0:
            c = 0
            for j in range(w):
                if a[k * w + j] != x[j]:
                    c = 1 if a[k * w + j] > x[j] else -1
                    break
            if c <= 0:
                break
            for j in range(w):
                a[(k + 1) * w + j] = a[k * w + j]
            k -= 1
        for j in range(w):
            a[(k + 1) * w + j] = x[j]


cdef int32_t _unique_tuples(int32_t* a, int32_t n, int32_t w) noexcept nogil:
    """Drop repeated tuples from sorted ``a``; returns how many are left."""
    cdef int32_t i, j, m = 0
    for i in range(n):
        if m > 0:
            for j in range(w):
                if a[(m - 1) * w + j] != a[i * w + j]:
                    break
            else:
                continue
        for j in range(w):
            a[m * w + j] = a[i * w + j]
        m += 1
    return m


cdef inline int32_t _as_set(int32_t* a, int32_t n, int32_t w) noexcept nogil:
    """Sort and deduplicate ``n`` tuples of ``w`` ints, unless they are strictly increasing already
    (packed edges come sorted by label: the usual case); returns how many are left."""
    cdef int32_t i, j
    for i in range(1, n):
        j = 0
        while j < w and a[(i - 1) * w + j] == a[i * w + j]:
            j += 1
        if j == w or a[(i - 1) * w + j] > a[i * w + j]:  # equal, or out of order
            _sort_tuples(a, n, w)
            return _unique_tuples(a, n, w)
    return n


cdef int32_t _signature(const Tables* t, const int32_t* cls, int32_t s, int32_t* x) noexcept nogil:
    """State ``s``'s signature into ``x``: its class, then its byte edges' labels (one int each) and
    special edges' labels, with their targets' classes (each kind sorted and deduplicated); returns
    its length."""
    cdef int32_t e, nb = 0, nx = 0
    cdef int32_t* y = &x[3]
    x[0] = cls[s]
    for e in range(t.b_start[s], t.b_start[s + 1]):
        y[2 * nb] = (<int32_t> t.b_lo[e] << 16) | (<int32_t> t.b_hi[e] << 8) | t.b_ws[e]  # in packing's order
        y[2 * nb + 1] = cls[t.b_tgt[e]]
        nb += 1
    nb = _as_set(y, nb, 2)
    y = &x[3 + 2 * nb]
    for e in range(t.x_start[s], t.x_start[s + 1]):
        y[3 * nx] = t.x_kind[e]
        y[3 * nx + 1] = t.x_arg[e]
        y[3 * nx + 2] = cls[t.x_tgt[e]]
        nx += 1
    nx = _as_set(y, nx, 3)
    x[1] = nb
    x[2] = nx
    return 3 + 2 * nb + 3 * nx


cdef int bisimulation(const Tables* t, int32_t* canon) noexcept nogil:
    """Map every state onto the first state of its bisimulation class; -1 when out of memory.

    Lowering still builds some parts twice (alternatives that end alike, such as the offsets of
    a leap second in ``format: time``; copies whose continuations behave alike), so some states
    behave alike: same finality and rule, and edges with the same labels to states that behave
    alike. Configurations at such states have the same future, so the set machine and the mask
    cache treat them as one.

    Partition refinement, in the manner of Hopcroft, from (rule, finality, steps to the nearest
    final state, ``_digest`` of the next ``LOOKAHEAD`` steps): a partition no finer than the
    answer, so that most states get one signature. (The distance costs one walk and sets apart
    the positions of literals that read alike for a few steps, which a shallow digest leaves
    together, so that fewer classes need splitting.) A state whose successor moved to
    another class is *dirty*, and only dirty states get a fresh signature (``_signature``).
    The clean members of a class still share the signature they had when it was last split,
    so one of them stands for all; the largest group keeps the class and the others move,
    their predecessors becoming dirty. Work follows moves, so a schema's long chains of
    inlined literals cost their length, not their length times the automaton's size.
    """
    cdef int32_t n = t.n_states, s, e, k, c, g, j, q, m, r, keep, n_groups, n_moved, n_cls = 0, n_work = 0
    cdef int32_t cap = 1, gen = 0, n_edges = t.b_start[n] + t.x_start[n]
    cdef int64_t total = 0
    cdef uint32_t h
    cdef int rc = 0
    cdef int32_t n1 = max(n, 1)
    # per state: class, class-list links, dirty flag and dirty-list link, signature offset and length
    cdef int32_t* cls = <int32_t*> malloc(n1 * sizeof(int32_t))
    cdef int32_t* next_m = <int32_t*> malloc(n1 * sizeof(int32_t))
    cdef int32_t* prev_m = <int32_t*> malloc(n1 * sizeof(int32_t))
    cdef uint8_t* dirty = <uint8_t*> malloc(n1 * sizeof(uint8_t))
    cdef int32_t* next_d = <int32_t*> malloc(n1 * sizeof(int32_t))
    cdef int64_t* off = <int64_t*> malloc((n + 1) * sizeof(int64_t))
    cdef int32_t* size = <int32_t*> malloc(n1 * sizeof(int32_t))
    # per class: member list, its length, dirty list, queued flag; the work stack of classes
    cdef int32_t* head = <int32_t*> malloc(n1 * sizeof(int32_t))
    cdef int32_t* count = <int32_t*> calloc(n1, sizeof(int32_t))
    cdef int32_t* head_d = <int32_t*> malloc(n1 * sizeof(int32_t))
    cdef uint8_t* queued = <uint8_t*> calloc(n1, sizeof(uint8_t))
    cdef int32_t* work = <int32_t*> malloc(n1 * sizeof(int32_t))
    # the class looked at: its dirty members, their groups; per group: size and class; moved states
    cdef int32_t* members = <int32_t*> malloc(n1 * sizeof(int32_t))
    cdef int32_t* group = <int32_t*> malloc(n1 * sizeof(int32_t))
    cdef int32_t* g_size = <int32_t*> malloc((n + 1) * sizeof(int32_t))
    cdef int32_t* g_cls = <int32_t*> malloc((n + 1) * sizeof(int32_t))
    cdef int32_t* moved = <int32_t*> malloc(n1 * sizeof(int32_t))
    cdef int32_t* rev_start = <int32_t*> calloc(n + 1, sizeof(int32_t))        # reverse edges
    cdef int32_t* rev = <int32_t*> malloc(max(n_edges, 1) * sizeof(int32_t))
    cdef int32_t* sig = NULL
    cdef int32_t* slot_state = NULL   # hash table of signatures: a slot is in use when stamped this generation
    cdef int32_t* slot_group = NULL
    cdef int32_t* slot_gen = NULL
    cdef uint32_t* digest = <uint32_t*> malloc(n1 * sizeof(uint32_t))
    cdef uint32_t* digest2 = <uint32_t*> malloc(n1 * sizeof(uint32_t))
    for s in range(n):
        canon[s] = s
    if off != NULL:
        for s in range(n):
            off[s] = total
            total += 3 + 2 * (t.b_start[s + 1] - t.b_start[s]) + 3 * (t.x_start[s + 1] - t.x_start[s])
    while cap < 2 * n + 2:
        cap *= 2
    sig = <int32_t*> malloc(max(total, 1) * sizeof(int32_t))
    slot_state = <int32_t*> malloc(cap * sizeof(int32_t))
    slot_group = <int32_t*> malloc(cap * sizeof(int32_t))
    slot_gen = <int32_t*> calloc(cap, sizeof(int32_t))
    if (cls == NULL or next_m == NULL or prev_m == NULL or dirty == NULL or next_d == NULL or off == NULL
            or size == NULL or head == NULL or count == NULL or head_d == NULL or queued == NULL or work == NULL
            or members == NULL or group == NULL or g_size == NULL or g_cls == NULL or moved == NULL
            or rev_start == NULL or rev == NULL or sig == NULL or slot_state == NULL or slot_group == NULL
            or slot_gen == NULL or digest == NULL or digest2 == NULL):
        rc = -1
    if rc == 0:
        for s in range(n):  # every class (at most one per state) starts empty
            head[s] = head_d[s] = -1
        for s in range(n):
            for e in range(t.b_start[s], t.b_start[s + 1]):
                rev_start[t.b_tgt[e] + 1] += 1
            for e in range(t.x_start[s], t.x_start[s + 1]):
                rev_start[t.x_tgt[e] + 1] += 1
        for s in range(n):
            rev_start[s + 1] += rev_start[s]
        memcpy(next_m, rev_start, n * sizeof(int32_t))  # fill cursors, for now
        for s in range(n):
            for e in range(t.b_start[s], t.b_start[s + 1]):
                rev[next_m[t.b_tgt[e]]] = s
                next_m[t.b_tgt[e]] += 1
            for e in range(t.x_start[s], t.x_start[s + 1]):
                rev[next_m[t.x_tgt[e]]] = s
                next_m[t.x_tgt[e]] += 1
        # the steps to the nearest final state (a breadth-first walk back from them): states alike
        # share it, and it tells apart states that read alike for a few steps (a key's bytes)
        for s in range(n):
            digest2[s] = 0xFFFFFFFFu
        m = 0
        for s in range(n):
            if t.final[s]:
                digest2[s] = 0
                moved[m] = s
                m += 1
        j = 0
        while j < m:
            s = moved[j]
            j += 1
            for e in range(rev_start[s], rev_start[s + 1]):
                q = rev[e]
                if digest2[q] == 0xFFFFFFFFu:
                    digest2[q] = digest2[s] + 1
                    moved[m] = q
                    m += 1
        # the first partition: rule, finality, that distance and a digest of the next few steps;
        # all dirty, all queued
        for s in range(n):
            digest[s] = _mix(_mix(_mix(0x811C9DC5u, <uint32_t> t.state_rule[s]), t.final[s]), digest2[s])
        for k in range(LOOKAHEAD):
            for s in range(n):
                digest2[s] = _digest(t, digest, s)
            memcpy(digest, digest2, n * sizeof(uint32_t))
        gen = 1
        for s in range(n - 1, -1, -1):
            h = digest[s]
            q = h & <uint32_t> (cap - 1)
            while slot_gen[q] == gen:
                g = slot_state[q]
                if t.state_rule[g] == t.state_rule[s] and t.final[g] == t.final[s] and digest[g] == h:
                    break
                q = (q + 1) & (cap - 1)
            if slot_gen[q] != gen:
                slot_gen[q] = gen
                slot_state[q] = s
                slot_group[q] = n_cls
                queued[n_cls] = 1
                work[n_work] = n_cls
                n_work += 1
                n_cls += 1
            c = slot_group[q]
            cls[s] = c
            _link(head, next_m, prev_m, c, s)
            count[c] += 1
            dirty[s] = 1
            next_d[s] = head_d[c]
            head_d[c] = s
        for j in range(n_work // 2):  # classes of later states first: lowering numbers a state's successors after it
            c = work[j]
            work[j] = work[n_work - 1 - j]
            work[n_work - 1 - j] = c
        while n_work > 0:
            n_work -= 1
            c = work[n_work]
            queued[c] = 0
            if count[c] == 1:  # a class of one cannot split: no signature to compute
                dirty[head[c]] = 0
                head_d[c] = -1
                continue
            # a clean member stands for the others: found before the dirty flags are cleared
            r = head[c]
            while r >= 0 and dirty[r]:
                r = next_m[r]
            m = 0
            s = head_d[c]
            while s >= 0:
                members[m] = s
                m += 1
                dirty[s] = 0
                s = next_d[s]
            head_d[c] = -1
            gen += 1
            n_groups = 0
            if r >= 0:  # group 0: the clean members
                g_size[0] = count[c] - m
                _group(t, cls, sig, off, size, slot_state, slot_group, slot_gen, cap, gen, r, 0)
                n_groups = 1
            for j in range(m):
                g = _group(t, cls, sig, off, size, slot_state, slot_group, slot_gen, cap, gen, members[j], n_groups)
                if g == n_groups:
                    g_size[g] = 0
                    n_groups += 1
                g_size[g] += 1
                group[j] = g
            if n_groups < 2:
                continue
            keep = 0
            for g in range(1, n_groups):
                if g_size[g] > g_size[keep]:
                    keep = g
            for g in range(n_groups):
                if g == keep:
                    g_cls[g] = c
                else:
                    g_cls[g] = n_cls
                    n_cls += 1
            n_moved = 0
            if r >= 0 and keep != 0:  # the clean members move: dirty ones were stamped with their group
                for j in range(m):
                    cls[members[j]] = -1 - group[j]
                s = head[c]
                while s >= 0:
                    if cls[s] == c:
                        moved[n_moved] = s
                        n_moved += 1
                    s = next_m[s]
                for j in range(m):
                    cls[members[j]] = c
                for k in range(n_moved):
                    s = moved[k]
                    _unlink(head, next_m, prev_m, c, s)
                    _link(head, next_m, prev_m, g_cls[0], s)
                    cls[s] = g_cls[0]
                count[g_cls[0]] += n_moved
                count[c] -= n_moved
            for j in range(m):
                g = group[j]
                if g != keep:
                    s = members[j]
                    _unlink(head, next_m, prev_m, c, s)
                    _link(head, next_m, prev_m, g_cls[g], s)
                    cls[s] = g_cls[g]
                    count[g_cls[g]] += 1
                    count[c] -= 1
                    moved[n_moved] = s
                    n_moved += 1
            for k in range(n_moved):  # every state leading to a moved one is dirty now
                s = moved[k]
                for e in range(rev_start[s], rev_start[s + 1]):
                    q = rev[e]
                    if not dirty[q]:
                        dirty[q] = 1
                        g = cls[q]
                        next_d[q] = head_d[g]
                        head_d[g] = q
                        if not queued[g]:
                            queued[g] = 1
                            work[n_work] = g
                            n_work += 1
        for s in range(n - 1, -1, -1):  # the smallest member stands for its class
            head[cls[s]] = s
        for s in range(n):
            canon[s] = head[cls[s]]
    free(cls); free(next_m); free(prev_m); free(dirty); free(next_d); free(off); free(size); free(head)
    free(count); free(head_d); free(queued); free(work); free(members); free(group); free(g_size); free(g_cls)
    free(moved); free(rev_start); free(rev); free(sig); free(slot_state); free(slot_group); free(slot_gen)
    free(digest); free(digest2)
    return rc


cdef uint32_t _digest(const Tables* t, const uint32_t* d, int32_t s) noexcept nogil:
    """``d[s]`` mixed with the set of ``s``'s edge labels and their targets' ``d``.

    Min, max and a 64-bit Bloom filter of the edges' hashes: like a signature, blind to the
    order and repetition of edges, so states alike keep equal digests; unlike one, no sort."""
    cdef int32_t e
    cdef uint32_t h, lo = 0xFFFFFFFFu, hi = 0, n = 0
    cdef uint64_t bloom = 0
    for e in range(t.b_start[s], t.b_start[s + 1]):
        h = _mix(_mix(_mix(t.b_lo[e] | (<uint32_t> t.b_hi[e] << 8) | (<uint32_t> t.b_ws[e] << 16), 1u), d[t.b_tgt[e]]), 7u)
        lo = h if h < lo else lo
        hi = h if h > hi else hi
        bloom |= (<uint64_t> 1) << (h >> 26)
        n = 1
    for e in range(t.x_start[s], t.x_start[s + 1]):
        h = _mix(_mix(_mix(<uint32_t> t.x_kind[e], <uint32_t> t.x_arg[e]), d[t.x_tgt[e]]), 11u)
        lo = h if h < lo else lo
        hi = h if h > hi else hi
        bloom |= (<uint64_t> 1) << (h >> 26)
        n |= 2
    return _mix(_mix(_mix(_mix(_mix(d[s], n), lo), hi), <uint32_t> bloom), <uint32_t> (bloom >> 32))


cdef inline void _link(int32_t* head, int32_t* next_m, int32_t* prev_m, int32_t c, int32_t s) noexcept nogil:
    next_m[s] = head[c]
    prev_m[s] = -1
    if head[c] >= 0:
        prev_m[head[c]] = s
    head[c] = s


cdef inline void _unlink(int32_t* head, int32_t* next_m, int32_t* prev_m, int32_t c, int32_t s) noexcept nogil:
    if prev_m[s] >= 0:
        next_m[prev_m[s]] = next_m[s]
    else:
        head[c] = next_m[s]
    if next_m[s] >= 0:
        prev_m[next_m[s]] = prev_m[s]


cdef int32_t _group(const Tables* t, const int32_t* cls, int32_t* sig, const int64_t* off, int32_t* size,
                    int32_t* slot_state, int32_t* slot_group, int32_t* slot_gen, int32_t cap, int32_t gen,
                    int32_t s, int32_t fresh) noexcept nogil:
    """The group of ``s``'s signature in this generation's table; a new signature gets ``fresh``."""
    cdef int32_t* x = &sig[off[s]]
    cdef int32_t sz = _signature(t, cls, s, x), e, g, q
    cdef uint64_t h = 0x9E3779B97F4A7C15u
    size[s] = sz
    for e in range(0, sz - 1, 2):  # two ints a step
        h = (h ^ (<uint64_t> <uint32_t> x[e] | (<uint64_t> <uint32_t> x[e + 1] << 32))) * 0xBF58476D1CE4E5B9u
        h ^= h >> 31
    if sz & 1:
        h = (h ^ <uint32_t> x[sz - 1]) * 0xBF58476D1CE4E5B9u
        h ^= h >> 31
    q = <int32_t> ((h ^ (h >> 32)) & <uint64_t> (cap - 1))
    while slot_gen[q] == gen:
        g = slot_state[q]
        if size[g] == sz and memcmp(&sig[off[g]], x, sz * sizeof(int32_t)) == 0:
            return slot_group[q]
        q = (q + 1) & (cap - 1)
    slot_gen[q] = gen
    slot_state[q] = s
    slot_group[q] = fresh
    return fresh


cdef enum:
    LOOKAHEAD = 1  # steps digested into the first partition of ``bisimulation``


_FIELDS = ("b_start", "b_lo", "b_hi", "b_tgt", "b_ws", "x_start", "x_kind", "x_arg", "x_tgt", "final",
           "state_rule", "rule_start", "rule_min", "rule_max")


cdef class CompiledGrammar:
    """An immutable automaton: flat typed arrays, shared by every matcher and thread.

    Built by ``llamay._core.lowering`` from IR rules; ``warnings`` lists what the source asked
    for and the automaton does not enforce. Token-mask caches per vocabulary hang off it.
    ``limits`` are the bounds it was compiled under, which its matchers and caches keep to.
    """

    def __init__(self, dict arrays, int ws_budget, list rule_names, list warnings, limits):
        self.limits = limits
        cdef int32_t n = len(arrays["final"]), s
        cdef dict keep = {}
        cdef uint8_t* tails
        for name in _FIELDS:  # through the C API: numpy's Python-level calls would dominate this on a small schema
            arr = arrays[name]
            if not (type(arr) is np.ndarray and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray> arr)):
                arr = np.ascontiguousarray(arr)
            if cnp.PyArray_SIZE(<cnp.ndarray> arr) == 0:  # a zero-length array has no data pointer to borrow
                arr = zeros(1, cnp.PyArray_TYPE(<cnp.ndarray> arr))
            keep[name] = arr
        byteset = zeros(max(n, 1) * 8, cnp.NPY_UINT32)
        _fill_byteset(<const int32_t*> array_data(keep["b_start"]), <const uint8_t*> array_data(keep["b_lo"]),
                      <const uint8_t*> array_data(keep["b_hi"]), <uint32_t*> array_data(byteset), n)
        self._arrays = keep
        self._byteset = byteset
        self.t.n_states = n
        self.t.ws_budget = ws_budget
        self.t.b_start = <const int32_t*> array_data(keep["b_start"])
        self.t.b_lo = <const uint8_t*> array_data(keep["b_lo"])
        self.t.b_hi = <const uint8_t*> array_data(keep["b_hi"])
        self.t.b_tgt = <const int32_t*> array_data(keep["b_tgt"])
        self.t.b_ws = <const uint8_t*> array_data(keep["b_ws"])
        self.t.byteset = <const uint32_t*> array_data(byteset)
        self.t.x_start = <const int32_t*> array_data(keep["x_start"])
        self.t.x_kind = <const int32_t*> array_data(keep["x_kind"])
        self.t.x_arg = <const int32_t*> array_data(keep["x_arg"])
        self.t.x_tgt = <const int32_t*> array_data(keep["x_tgt"])
        self.t.final = <const uint8_t*> array_data(keep["final"])
        self.t.state_rule = <const int32_t*> array_data(keep["state_rule"])
        self.t.rule_start = <const int32_t*> array_data(keep["rule_start"])
        self.t.rule_min = <const int32_t*> array_data(keep["rule_min"])
        self.t.rule_max = <const int32_t*> array_data(keep["rule_max"])
        tail = zeros(max(n, 1), cnp.NPY_UINT8)  # final states without edges: reaching one pops at once
        tails = <uint8_t*> array_data(tail)
        for s in range(n):
            tails[s] = self.t.final[s] and self.t.b_start[s] == self.t.b_start[s + 1] and (
                self.t.x_start[s] == self.t.x_start[s + 1])
        keep["tail"] = tail
        self.t.tail = <const uint8_t*> array_data(tail)
        canon = zeros(max(n, 1), cnp.NPY_INT32)
        self.t.canon = <const int32_t*> array_data(canon)
        if bisimulation(&self.t, <int32_t*> array_data(canon)) < 0:
            raise MemoryError("state classes")
        keep["canon"] = canon
        self.rule_names = rule_names
        self.warnings = warnings
        self.whitespace_budget = None if ws_budget < 0 else ws_budget
        self._mask_caches = None
        for arr in keep.values():  # read-only, through the C API (``.flags`` builds an object per access)
            cnp.PyArray_CLEARFLAGS(<cnp.ndarray> arr, cnp.NPY_ARRAY_WRITEABLE)

    @property
    def n_states(self):
        return self.t.n_states

    @property
    def tables(self):
        """The flat arrays (read-only numpy views), for inspection and tests."""
        n, arrays = self.t.n_states, self._arrays
        size = dict.fromkeys(("b_start", "x_start"), n + 1) | dict.fromkeys(("final", "state_rule"), n)
        size |= dict.fromkeys(("b_lo", "b_hi", "b_tgt", "b_ws"), int(arrays["b_start"][n]))
        size |= dict.fromkeys(("x_kind", "x_arg", "x_tgt"), int(arrays["x_start"][n]))
        size |= dict.fromkeys(("rule_start", "rule_min", "rule_max"), len(self.rule_names))
        return {name: arrays[name][: size[name]] for name in _FIELDS}

    @property
    def state_classes(self):
        """Per state, the first state of its bisimulation class (read-only numpy view), for tests."""
        return self._arrays["canon"][: self.t.n_states]

    def __repr__(self):
        return f"CompiledGrammar(states={self.t.n_states}, rules={len(self.rule_names)}, warnings={self.warnings!r})"
