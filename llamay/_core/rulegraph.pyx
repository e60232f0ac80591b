# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The graph of IR rules that lowering needs before it builds anything: who calls whom, which
rules recurse (frames), and which inlining would build more than once.

Schemas compile to hundreds of rules (a ``$ref`` target, a shared member list each), and as
Python walks the three questions would be a noticeable part of a large schema's compile. Here
rules are numbered, references and their places are C arrays, and only the walk over IR
expressions touches Python objects.
"""

from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport calloc, free, malloc

from ..ir cimport Alt, Bytes, Ref, Repeat, Seq, _Items

from .automaton cimport grow
from .pairmap cimport PairMap, pair_get_or_put, pair_map_free, pair_map_init


ctypedef struct _Use:
    int32_t callee
    int32_t place  # 0: where the caller itself continues (a use in tail position); else a number
                   # for (the sequence and its item after the use) or (the repetition around it)


cdef class _Refs:
    """Every reference of every rule, grouped by caller: the callee and the place the use continues at."""
    cdef int32_t n_rules, n, cap
    cdef int32_t* start  # per rule, its references' range [start[r], start[r + 1])
    cdef _Use* use

    def __cinit__(self, int32_t n_rules):
        self.n_rules, self.n, self.cap = n_rules, 0, 64
        self.start = <int32_t*> malloc((n_rules + 1) * sizeof(int32_t))
        self.use = <_Use*> malloc(self.cap * sizeof(_Use))
        if self.start == NULL or self.use == NULL:
            raise MemoryError("rule references")

    def __dealloc__(self):
        free(self.start)
        free(self.use)

    cdef int add(self, int32_t callee, int32_t place) except -1:
        if not grow(<void**> &self.use, &self.cap, self.n + 1, sizeof(_Use)):
            raise MemoryError("rule references")
        self.use[self.n] = _Use(callee, place)
        self.n += 1
        return 0


ctypedef struct _Place:
    int64_t node  # 0: where the rule itself continues
    int32_t item  # the sequence ``node``'s item after this one; -1: the loop of the repetition ``node``


cdef _Refs _references(list exprs, dict index):
    """Per rule (in ``exprs``' order), the defined rules it refers to, in the order a depth-first
    walk from the last item meets them, and where each use continues. Expressions are DAGs: a
    rule walks a shared subtree once, from the first place that reaches it."""
    cdef int32_t n_rules = len(exprs), r, i, n, top, cap = 64, k, here
    cdef _Refs refs = _Refs(n_rules)
    cdef PairMap seen, places
    cdef _Place* place = <_Place*> malloc(cap * sizeof(_Place))  # per stack entry
    cdef _Place at
    cdef int64_t node
    cdef list stack
    cdef tuple items
    cdef bint ok = (pair_map_init(&seen, 128) == 0) & (pair_map_init(&places, 64) == 0) & (place != NULL)
    try:
        if not ok:
            raise MemoryError("rule references")
        for r in range(n_rules):
            refs.start[r] = refs.n
            stack = [exprs[r]]
            place[0] = _Place(0, 0)
            while stack:
                e = stack.pop()
                at = place[len(stack)]
                tp = type(e)
                if tp is Ref:
                    got = index.get((<Ref> e).name)
                    if got is not None:
                        here = 0
                        if at.node != 0:
                            here = pair_get_or_put(&places, at.node, at.item, places.n + 1)
                            if here == -2:
                                raise MemoryError("rule references")
                            if here == -1:
                                here = places.n
                        refs.add(<int32_t> got, here)
                    continue
                if tp is Repeat:
                    items = ((<Repeat> e).item,)
                elif tp is Seq or tp is Alt:
                    items = (<_Items> e).items
                else:
                    continue
                node = <int64_t> <void*> e
                n = len(items)
                for i in range(n):
                    x = items[i]
                    if type(x) is Bytes:
                        continue
                    k = pair_get_or_put(&seen, <int64_t> <void*> x, r, 0)
                    if k == -2:
                        raise MemoryError("rule references")
                    if k >= 0:
                        continue
                    top = len(stack)
                    if not grow(<void**> &place, &cap, top + 1, sizeof(_Place)):
                        raise MemoryError("rule references")
                    if tp is Repeat:
                        place[top] = _Place(node, -1)
                    elif tp is Alt or i == n - 1:
                        place[top] = at
                    else:
                        place[top] = _Place(node, i)
                    stack.append(x)
        refs.start[n_rules] = refs.n
    finally:
        pair_map_free(&seen)
        pair_map_free(&places)
        free(place)
    return refs


cdef int32_t _recursive(_Refs refs, int32_t root, char* out, int32_t* post) except -1:
    """Flags the rules on a reference cycle (Tarjan's SCC, iterative): they must be frames.

    The walk starts at ``root``; the rules reachable from it are written to ``post`` in the
    order the walk leaves them (post-order), and their count returned.
    """
    cdef int32_t n = refs.n_rules, v, k, u, w, p, counter = 0, n_work, n_scc = 0, x, size, n_post = 0
    cdef int32_t* order = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))  # per rule: index, -1 unvisited
    cdef int32_t* low = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
    cdef char* on_stack = <char*> calloc(max(n, 1), 1)
    cdef int32_t* scc = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
    cdef int32_t* work = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))  # the rules being walked
    cdef int32_t* pos = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))   # and their next reference
    cdef bint self_loop
    try:
        if order == NULL or low == NULL or on_stack == NULL or scc == NULL or work == NULL or pos == NULL:
            raise MemoryError("rule references")
        for v in range(n):
            order[v] = -1
        for k in range(-1, n):
            v = root if k < 0 else k
            if order[v] >= 0:
                continue
            work[0], pos[0], n_work = v, refs.start[v], 1
            order[v] = -2
            while n_work:
                u, p = work[n_work - 1], pos[n_work - 1]
                if p == refs.start[u] and order[u] < 0:  # entered
                    order[u] = low[u] = counter
                    counter += 1
                    scc[n_scc] = u
                    n_scc += 1
                    on_stack[u] = 1
                if p < refs.start[u + 1]:
                    pos[n_work - 1] = p + 1
                    w = refs.use[p].callee
                    if order[w] == -1:
                        order[w] = -2
                        work[n_work], pos[n_work] = w, refs.start[w]
                        n_work += 1
                    elif on_stack[w] and order[w] < low[u]:
                        low[u] = order[w]
                    continue
                n_work -= 1
                if k < 0:
                    post[n_post] = u
                    n_post += 1
                if n_work and low[u] < low[work[n_work - 1]]:
                    low[work[n_work - 1]] = low[u]
                if low[u] != order[u]:
                    continue
                self_loop = False
                for p in range(refs.start[u], refs.start[u + 1]):
                    self_loop = self_loop or refs.use[p].callee == u
                size = 0
                while True:
                    n_scc -= 1
                    x = scc[n_scc]
                    on_stack[x] = 0
                    size += 1
                    if x == u:
                        break
                if size > 1 or self_loop:
                    for x in range(n_scc, n_scc + size):
                        out[scc[x]] = 1
    finally:
        free(order)
        free(low)
        free(on_stack)
        free(scc)
        free(work)
        free(pos)
    return n_post


cdef int _copied(_Refs refs, const int32_t* post, int32_t n_post, const char* frame, char* out) except -1:
    """Flags the rules reachable from the root that inlining would build more than once.

    Lowering inlines a rule once per state it continues at. A frame (the root, a recursive rule)
    continues at its own end; a use in tail position, wherever its caller continues; any other
    use, at its own place in each copy of its caller. Each rule collects those places (two are
    all the answer needs), callers before callees: in the reverse of ``post`` (but for callers
    on a cycle, which are frames). An end is a number: a frame's own, or (caller, the caller's
    end, place) numbered through a table.
    """
    cdef int32_t n = refs.n_rules, w, p, j, k, c, end, x
    cdef int32_t* count = <int32_t*> calloc(max(n, 1), sizeof(int32_t))  # per rule: ends found, at most 2
    cdef int32_t* ends = <int32_t*> malloc(2 * max(n, 1) * sizeof(int32_t))
    cdef PairMap triples
    cdef bint ok = pair_map_init(&triples, 64) == 0
    try:
        if not ok or count == NULL or ends == NULL:
            raise MemoryError("rule references")
        for k in range(n_post - 1, -1, -1):
            c = post[k]
            if frame[c]:
                count[c], ends[2 * c] = 1, c
            for p in range(refs.start[c], refs.start[c + 1]):
                w = refs.use[p].callee
                if frame[w]:
                    continue
                for j in range(count[c]):
                    if count[w] == 2:
                        break
                    end = ends[2 * c + j]
                    if refs.use[p].place != 0:
                        x = pair_get_or_put(&triples, (<int64_t> c << 32) | end, refs.use[p].place, n + triples.n)
                        if x == -2:
                            raise MemoryError("rule references")
                        end = n + triples.n - 1 if x == -1 else x
                    if count[w] == 0 or ends[2 * w] != end:
                        ends[2 * w + count[w]] = end
                        count[w] += 1
        for k in range(n_post):
            out[post[k]] = count[post[k]] > 1
    finally:
        pair_map_free(&triples)
        free(count)
        free(ends)
    return 0


cdef tuple rule_graph(dict rules, root):
    """``(callees, recursive, copied)``: per rule name, the rules it refers to (each once, in the
    order of ``_references``); the names of rules on a reference cycle; and the names of rules
    reachable from ``root`` that inlining would build more than once (``_copied``)."""
    cdef list names = list(rules), out
    cdef dict index = {name: i for i, name in enumerate(names)}, callees = {}
    cdef _Refs refs = _references(list(rules.values()), index)
    cdef int32_t n = len(names), r, p, w, n_post, root_id = index[root]
    cdef char* flags = <char*> calloc(2 * max(n, 1), 1)  # recursive (a frame, with the root), copied
    cdef int32_t* stamp = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))  # then the rules in post-order
    try:
        if flags == NULL or stamp == NULL:
            raise MemoryError("rule references")
        for r in range(n):
            stamp[r] = -1
        for r in range(n):
            out = []
            for p in range(refs.start[r], refs.start[r + 1]):
                w = refs.use[p].callee
                if stamp[w] != r:
                    stamp[w] = r
                    out.append(names[w])
            callees[names[r]] = out
        n_post = _recursive(refs, root_id, flags, stamp)
        recursive = {names[r] for r in range(n) if flags[r]}
        flags[root_id] = 1
        _copied(refs, stamp, n_post, flags, &flags[n])
        copied = {names[r] for r in range(n) if flags[n + r]}
    finally:
        free(flags)
        free(stamp)
    return callees, recursive, copied
