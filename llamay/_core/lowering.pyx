# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Lowering: IR rules onto the core's flat pushdown automaton.

Theory of operation. Every *frame rule* becomes a small NFA over bytes with one start
and one final state; reaching the final state pops the frame. Frame rules are the root,
rules that take part in recursion, rules too big to copy (``Tuning.inline_states``), or
to copy more than once (``Tuning.share_states``: a ``$ref`` target or a ``format`` used at
several places), and counted repetitions. Everything else is inlined at each use, so a
JSON Schema without shared parts is one frame: the mask cache (``_core.maskcache``) can
then decide most tokens from the top frame alone.

Edges are of four kinds: a byte range (optionally charged to the whitespace budget);
``CALL r`` (push a frame returning to the edge's target, enter rule ``r`` with counter 0);
``INC`` (start one more iteration of the frame's counted repetition, if under ``max``);
``EXIT`` (leave it, if at least ``min`` iterations were started). Plain epsilon edges exist
only while building: they are eliminated before the arrays are emitted, so the runtime
closure follows only calls, counters and pops.

The walk over IR expressions holds Python objects; states and edges live in C arrays, and
epsilon elimination, renumbering and packing run on them without the interpreter: a large
schema lowers to tens of thousands of states, and compile time is a product target.

An ``Except`` (a finite-state item less some words: an additional key, which must be none of
the declared names) is built here in C: the item's DFA (determinized once per process), the
words' trie walked over it, and one copy of the DFA for the keys that leave the trie.

Refused here, by rule name: undefined rules, a missing root, ``Alt()`` and empty byte
sets, bad repetition bounds, left recursion (direct, indirect or through a nullable
prefix: the automaton expands a call before it reads a byte, so it would never stop),
and automata over ``Limits.max_states``.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.stdlib cimport free, malloc, qsort
from libc.string cimport memcmp, memcpy, memset
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.long cimport PyLong_FromVoidPtr


cimport numpy as cnp

from .. import compile_budget
from ..errors import GrammarError
from ..ir cimport Alt, Bytes, Except, Ref, Repeat, Seq, _Items
from ..ir import EMPTY, MAX_REPEAT, PERMANENT, alt, seq
from ..ir import alt_distinct as _alt_distinct

from .automaton cimport EDGE_CALL, EDGE_EXIT, EDGE_INC, CompiledGrammar, array_data, grow, zeros
from .pairmap cimport PairMap, pair_get, pair_get_or_put, pair_map_free, pair_map_init
from .rulegraph cimport rule_graph

cnp.import_array()

cdef enum:
    EDGE_EPS = 0              # build-time only: eliminated before packing
    DEADLINE_EVERY = 1024     # ticks between two looks at the clock
    TEMPLATE_BYTES = 64 << 20  # recorded fragments kept per lowering, at most

ctypedef struct ByteEdge:
    uint8_t lo
    uint8_t hi
    int32_t tgt
    uint8_t ws
    int32_t src

ctypedef struct Special:
    int32_t kind
    int32_t arg
    int32_t tgt
    int32_t src

ctypedef struct Edges:          # edges grouped by source state: [start[s], start[s + 1])
    int32_t* start
    ByteEdge* b
    int32_t* b_start
    Special* x
    int32_t* x_start


ctypedef int32_t* int32_ptr     # one declaration for many pointers (the packed tables' columns)
ctypedef uint8_t* uint8_ptr


ctypedef struct Template:       # a fragment as first built: its ends, its new states, its edges, its depth
    int32_t s, t, first, n_states, n_b, n_x, height


cdef inline int32_t _moved(const Template* m, int32_t v, int32_t s, int32_t t, int32_t base) noexcept nogil:
    """State ``v`` of a template's first copy, in the copy from ``s`` to ``t`` whose new states start at ``base``."""
    if v == m.s:
        return s
    if v == m.t:
        return t
    return v - m.first + base


cdef inline bint _inside(const Template* m, int32_t src, int32_t tgt) noexcept nogil:
    """Whether an edge stays within the fragment: from its start or a new state, to its ends or a new state."""
    cdef bint src_in = src == m.s or m.first <= src < m.first + m.n_states
    return src_in and (tgt == m.s or tgt == m.t or m.first <= tgt < m.first + m.n_states)


cdef inline object _id(object o):
    """``id(o)`` without a call through the interpreter (the walks key millions of nodes by it)."""
    return PyLong_FromVoidPtr(<void*> o)


cdef int _cmp_byte(const void* a, const void* b) noexcept nogil:
    cdef const ByteEdge* p = <const ByteEdge*> a
    cdef const ByteEdge* q = <const ByteEdge*> b
    if p.lo != q.lo:
        return -1 if p.lo < q.lo else 1
    if p.hi != q.hi:
        return -1 if p.hi < q.hi else 1
    if p.tgt != q.tgt:
        return -1 if p.tgt < q.tgt else 1
    return <int> p.ws - <int> q.ws


cdef int _cmp_special(const void* a, const void* b) noexcept nogil:
    cdef const Special* p = <const Special*> a
    cdef const Special* q = <const Special*> b
    if p.kind != q.kind:
        return -1 if p.kind < q.kind else 1
    if p.arg != q.arg:
        return -1 if p.arg < q.arg else 1
    if p.tgt != q.tgt:
        return -1 if p.tgt < q.tgt else 1
    return 0


cdef class _NFA:
    """States and edges under construction: appended in any order, grouped by source at the end."""

    cdef int32_t n_states, states_cap, n_b, b_cap, n_x, x_cap
    cdef int32_t* rule
    cdef uint8_t* final
    cdef ByteEdge* b
    cdef Special* x

    def __cinit__(self):
        self.states_cap = self.b_cap = self.x_cap = 1024
        self.rule = <int32_t*> malloc(self.states_cap * sizeof(int32_t))
        self.final = <uint8_t*> malloc(self.states_cap)
        self.b = <ByteEdge*> malloc(self.b_cap * sizeof(ByteEdge))
        self.x = <Special*> malloc(self.x_cap * sizeof(Special))
        if self.rule == NULL or self.final == NULL or self.b == NULL or self.x == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.rule)
        free(self.final)
        free(self.b)
        free(self.x)

    cdef int32_t state(self, int32_t rule) except -1:
        self.states(rule, 1)
        return self.n_states - 1

    cdef int states(self, int32_t rule, int32_t n) except -1:
        """Append ``n`` states of ``rule``, none final."""
        cdef int32_t cap = self.states_cap, i
        if not grow(<void**> &self.rule, &self.states_cap, self.n_states + n, sizeof(int32_t)):
            raise MemoryError()
        if not grow(<void**> &self.final, &cap, self.n_states + n, 1):
            raise MemoryError()
        for i in range(self.n_states, self.n_states + n):
            self.rule[i] = rule
            self.final[i] = 0
        self.n_states += n
        return 0

    cdef int byte_edge(self, int32_t s, int lo, int hi, int32_t t, bint ws) except -1:
        if not grow(<void**> &self.b, &self.b_cap, self.n_b + 1, sizeof(ByteEdge)):
            raise MemoryError()
        self.b[self.n_b] = ByteEdge(<uint8_t> lo, <uint8_t> hi, t, ws, s)
        self.n_b += 1
        return 0

    cdef int special(self, int32_t s, int32_t kind, int32_t arg, int32_t t) except -1:
        if not grow(<void**> &self.x, &self.x_cap, self.n_x + 1, sizeof(Special)):
            raise MemoryError()
        self.x[self.n_x] = Special(kind, arg, t, s)
        self.n_x += 1
        return 0

    cdef int group(self, Edges* e) except -1:
        """Counting-sort the edges by source, keeping each state's edges in insertion order."""
        cdef int32_t n = self.n_states, i
        e.b_start = <int32_t*> malloc((n + 1) * sizeof(int32_t))
        e.x_start = <int32_t*> malloc((n + 1) * sizeof(int32_t))
        e.b = <ByteEdge*> malloc((self.n_b + 1) * sizeof(ByteEdge))
        e.x = <Special*> malloc((self.n_x + 1) * sizeof(Special))
        if e.b_start == NULL or e.x_start == NULL or e.b == NULL or e.x == NULL:
            _edges_free(e)
            raise MemoryError()
        memset(e.b_start, 0, (n + 1) * sizeof(int32_t))
        memset(e.x_start, 0, (n + 1) * sizeof(int32_t))
        for i in range(self.n_b):
            e.b_start[self.b[i].src + 1] += 1
        for i in range(self.n_x):
            e.x_start[self.x[i].src + 1] += 1
        for i in range(n):
            e.b_start[i + 1] += e.b_start[i]
            e.x_start[i + 1] += e.x_start[i]
        for i in range(self.n_b):  # fill, then shift the starts back
            e.b[e.b_start[self.b[i].src]] = self.b[i]
            e.b_start[self.b[i].src] += 1
        for i in range(self.n_x):
            e.x[e.x_start[self.x[i].src]] = self.x[i]
            e.x_start[self.x[i].src] += 1
        for i in range(n, 0, -1):
            e.b_start[i] = e.b_start[i - 1]
            e.x_start[i] = e.x_start[i - 1]
        e.b_start[0] = e.x_start[0] = 0
        return 0


cdef void _edges_free(Edges* e) noexcept nogil:
    free(e.b_start)
    free(e.x_start)
    free(e.b)
    free(e.x)
    e.b_start = e.x_start = NULL
    e.b = NULL
    e.x = NULL


cdef int _forward(_Lowering low, Edges* e) except -1:
    """Point every edge into a state that only passes on (one epsilon edge, no other, not final) past it.

    Sequences and inlined rules join their pieces through such states, and epsilon elimination
    would give each one a copy of what follows: a key's way out of the names' trie copied the
    whole string loop. Bypassed states become unreachable, and packing leaves them out. A cycle
    of them (it matches nothing) stops at one of its states.
    """
    cdef _NFA nfa = low.nfa
    cdef int32_t n = nfa.n_states, s, y, r, top, i
    cdef int32_t* to = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
    cdef int32_t* path = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
    cdef uint8_t* mark = <uint8_t*> malloc(max(n, 1))  # 0 unresolved, 1 on the current path, 2 resolved
    if to == NULL or path == NULL or mark == NULL:
        free(to)
        free(path)
        free(mark)
        raise MemoryError()
    try:
        for s in range(n):
            to[s] = s
            mark[s] = 2
            if (not nfa.final[s] and e.b_start[s] == e.b_start[s + 1] and e.x_start[s + 1] - e.x_start[s] == 1
                    and e.x[e.x_start[s]].kind == EDGE_EPS and e.x[e.x_start[s]].tgt != s):
                to[s] = e.x[e.x_start[s]].tgt
                mark[s] = 0
        for s in range(n):
            top = 0
            y = s
            while mark[y] == 0:
                mark[y] = 1
                path[top] = y
                top += 1
                y = to[y]
            r = to[y] if mark[y] == 2 else y  # on the path: a cycle, which ends at ``y``
            to[y] = r
            mark[y] = 2
            for i in range(top):
                to[path[i]] = r
                mark[path[i]] = 2
        for i in range(e.b_start[n]):
            e.b[i].tgt = to[e.b[i].tgt]
        for i in range(e.x_start[n]):
            e.x[i].tgt = to[e.x[i].tgt]
        for i in range(len(low.rule_start)):
            low.rule_start[i] = to[<int32_t> low.rule_start[i]]
    finally:
        free(to)
        free(path)
        free(mark)
    return 0


cdef int _eliminate_epsilon(_NFA nfa, Edges* e) except -1:
    """Give every state the byte edges, special edges and finality of its epsilon closure.

    ``e`` holds the grouped edges on entry and the epsilon-free ones on return; a state
    with a closure gets its edges sorted and deduplicated, the others keep their order.
    """
    cdef int32_t n = nfa.n_states, s, x, i, top, nb, nx, ob, ox
    # closures copy byte edges: sized for twice as many, so that reallocation (a copy each time) is rare
    cdef int32_t bcap = 2 * nfa.n_b + 16, xcap = nfa.n_x + 16
    cdef Edges out
    cdef int32_t* stamp = <int32_t*> malloc(n * sizeof(int32_t))
    cdef int32_t* stack = <int32_t*> malloc(n * sizeof(int32_t))
    cdef bint has_eps
    out.b_start = <int32_t*> malloc((n + 1) * sizeof(int32_t))
    out.x_start = <int32_t*> malloc((n + 1) * sizeof(int32_t))
    out.b = <ByteEdge*> malloc(bcap * sizeof(ByteEdge))
    out.x = <Special*> malloc(xcap * sizeof(Special))
    if stamp == NULL or stack == NULL or out.b_start == NULL or out.x_start == NULL or out.b == NULL or out.x == NULL:
        free(stamp)
        free(stack)
        _edges_free(&out)
        raise MemoryError()
    for s in range(n):
        stamp[s] = -1
    nb = nx = 0
    try:
        for s in range(n):
            out.b_start[s] = nb
            out.x_start[s] = nx
            has_eps = False
            for i in range(e.x_start[s], e.x_start[s + 1]):
                if e.x[i].kind == EDGE_EPS:
                    has_eps = True
                    break
            if not has_eps:
                ob, ox = e.b_start[s + 1] - e.b_start[s], e.x_start[s + 1] - e.x_start[s]
                if not grow(<void**> &out.b, &bcap, nb + ob, sizeof(ByteEdge)) or not grow(
                        <void**> &out.x, &xcap, nx + ox, sizeof(Special)):
                    raise MemoryError()
                for i in range(ob):
                    out.b[nb + i] = e.b[e.b_start[s] + i]
                for i in range(ox):
                    out.x[nx + i] = e.x[e.x_start[s] + i]
                nb += ob
                nx += ox
                continue
            # the closure: a depth-first walk over epsilon edges, marked with this state's stamp;
            # its byte and special edges are gathered after those already kept, then deduplicated
            stamp[s] = s
            stack[0] = s
            top = 1
            ob = ox = 0
            while top:
                top -= 1
                x = stack[top]
                if nfa.final[x]:
                    nfa.final[s] = 1  # x's closure is within s's: its flag already covers it
                if not grow(<void**> &out.b, &bcap, nb + ob + e.b_start[x + 1] - e.b_start[x], sizeof(ByteEdge)) \
                        or not grow(<void**> &out.x, &xcap, nx + ox + e.x_start[x + 1] - e.x_start[x], sizeof(Special)):
                    raise MemoryError()
                for i in range(e.b_start[x], e.b_start[x + 1]):
                    out.b[nb + ob] = e.b[i]
                    ob += 1
                for i in range(e.x_start[x], e.x_start[x + 1]):
                    if e.x[i].kind != EDGE_EPS:
                        out.x[nx + ox] = e.x[i]
                        ox += 1
                    elif stamp[e.x[i].tgt] != s:
                        stamp[e.x[i].tgt] = s
                        stack[top] = e.x[i].tgt
                        top += 1
            nb += _sorted_unique_bytes(out.b + nb, ob)
            nx += _sorted_unique_specials(out.x + nx, ox)
        out.b_start[n] = nb
        out.x_start[n] = nx
    except BaseException:
        _edges_free(&out)
        raise
    finally:
        free(stamp)
        free(stack)
    _edges_free(e)
    e[0] = out
    return 0


cdef void _sort_bytes(ByteEdge* a, int32_t n) noexcept nogil:
    """Insertion sort below 16 edges (most states have one or two), else ``qsort``."""
    cdef int32_t i, j
    cdef ByteEdge x
    if n > 16:
        qsort(a, n, sizeof(ByteEdge), _cmp_byte)
        return
    for i in range(1, n):
        x = a[i]
        j = i
        while j > 0 and _cmp_byte(&a[j - 1], &x) > 0:
            a[j] = a[j - 1]
            j -= 1
        a[j] = x


cdef int32_t _sorted_unique_bytes(ByteEdge* a, int32_t n) noexcept nogil:
    cdef int32_t i, k = 0
    if n == 0:
        return 0
    _sort_bytes(a, n)
    for i in range(1, n):
        if _cmp_byte(&a[k], &a[i]) != 0:
            k += 1
            a[k] = a[i]
    return k + 1


cdef int32_t _sorted_unique_specials(Special* a, int32_t n) noexcept nogil:
    cdef int32_t i, k = 0
    if n == 0:
        return 0
    qsort(a, n, sizeof(Special), _cmp_special)
    for i in range(1, n):
        if _cmp_special(&a[k], &a[i]) != 0:
            k += 1
            a[k] = a[i]
    return k + 1


ctypedef struct _TrieNode:      # a node of ``excluding``'s walk: its state, the DFA's, its words, their shared length
    int32_t state, q, lo, hi, depth

ctypedef struct _Tail:          # a node of that walk with one word left: its state, the DFA's, the word, its depth
    int32_t state, q, word, depth


cdef _Tail* _tail(_Tail* table, int32_t cap, const uint8_t** ptr, const int32_t* lens, int32_t q, int32_t w,
                  int32_t depth, uint32_t h) noexcept nogil:
    """The slot of ``table`` (open addressing) that holds the node of DFA state ``q`` and rest
    ``ptr[w][depth:]`` (whose hash is ``h``), or the empty one where it goes."""
    cdef int32_t i = <int32_t> ((h ^ (<uint32_t> q * 0x9E3779B1u)) & <uint32_t> (cap - 1))
    cdef int32_t n = lens[w] - depth
    cdef _Tail* x
    while True:
        x = &table[i]
        if x.state < 0 or (x.q == q and lens[x.word] - x.depth == n
                           and memcmp(ptr[x.word] + x.depth, ptr[w] + depth, n) == 0):
            return x
        i = (i + 1) & (cap - 1)


cdef class _DFA:
    """A deterministic automaton over bytes: state ``q``'s edges ``lo..hi -> tgt`` are ``start[q]..start[q + 1]``, sorted."""

    cdef int32_t n, initial
    cdef int32_t* start
    cdef uint8_t* lo
    cdef uint8_t* hi
    cdef int32_t* tgt
    cdef uint8_t* final

    def __dealloc__(self):
        free(self.start)
        free(self.lo)
        free(self.hi)
        free(self.tgt)
        free(self.final)


cdef dict _FRAMES = {}  # (permanent body's id, limits that shape it) -> (body, fragment, rules it calls)
cdef dict _KEPT = {}  # (permanent inlined node's id, limits) -> its template: ``composite``
cdef enum:
    MAX_FRAMES = 64       # frames kept at most across compiles

cdef class _Lowering:
    cdef dict rules, refs, rule_ids, rule_sizes, inline_entries
    cdef dict factored, templates  # keyed by id(): IR equality compares whole trees in Python
    cdef PairMap sizes  # node's address -> its size (``size``), the nodes in ``sized`` kept alive meanwhile
    cdef list sized
    cdef int64_t template_bytes
    cdef int32_t impure  # fragments that defined a rule or deferred work: theirs cannot be copied
    cdef bint copies  # whether fragments are copied at all (off: the tests' oracle)
    cdef int deepest  # the deepest expression walked so far (a copy is refused as deep as its first build)
    cdef list rule_names, rule_start, rule_bounds, pending, frames
    cdef set recursive, nullable_rules, copied  # copied: rules that inlining would build more than once
    cdef object root
    cdef object options
    cdef double deadline
    cdef int64_t ticks, next_clock  # expressions walked and states copied; when to look at the clock
    cdef int max_depth, max_states, inline_states, share_states, unroll_states, max_repeat  # limits, read once
    cdef tuple shape  # the limits that shape a fragment
    cdef _NFA nfa

    def __init__(self, dict rules, root, options, bint copies):
        self.options = options
        self.rules = rules
        self.nfa = _NFA()
        self.rule_ids = {}
        self.rule_names = []
        self.rule_start = []
        self.rule_bounds = []
        self.refs, self.recursive, self.copied = rule_graph(rules, root)
        if pair_map_init(&self.sizes, 256) < 0:
            raise MemoryError("sizes")
        self.sized = []
        self.rule_sizes = {}
        # the request's budget, shared with the schema compiler
        self.deadline = compile_budget.deadline(options.limits.compile_seconds)
        self.max_depth = options.limits.max_depth
        self.max_states = options.limits.max_states
        self.inline_states = options.tuning.inline_states
        self.share_states = options.tuning.share_states
        self.unroll_states = options.tuning.unroll_states
        self.max_repeat = MAX_REPEAT
        self.shape = (self.inline_states, self.share_states, self.unroll_states, self.max_repeat)
        self.root = root
        self.nullable_rules = _nullable_rules(rules)
        self.inline_entries = {}
        self.factored = {}
        self.templates = {}
        self.template_bytes = 0
        self.impure = 0
        self.copies = copies
        self.deepest = 0
        self.pending = []
        self.frames = []
        self.ticks = 0
        self.next_clock = DEADLINE_EVERY

    def __dealloc__(self):
        pair_map_free(&self.sizes)

    cdef too_deep(self, rule):
        return GrammarError(f"nesting deeper than {self.max_depth} (limit MAX_DEPTH)", rule=rule)

    cdef too_many_states(self):
        message = f"grammar needs more than {self.max_states} automaton states (limit MAX_STATES)"
        return GrammarError(message, rule=self.root)

    # -- sizes decide what is inlined and what is unrolled -------------------------------
    cdef int size(self, expr, int depth) except -1:
        cdef int n, body
        cdef Repeat rep
        tp = type(expr)
        if tp is Bytes:
            return 1
        if tp is Ref:  # rule sizes have a memo of their own
            return 1 if self.is_frame((<Ref> expr).name) else self.rule_size((<Ref> expr).name)
        n = pair_get(&self.sizes, <int64_t> <void*> expr, 0)
        if n >= 0:
            return n
        if depth > self.max_depth:
            raise self.too_deep(self.root)
        if tp is Seq or tp is Alt:
            n = 1
            for x in (<_Items> expr).items:
                n += self.size(x, depth + 1)
                if n > self.max_states:
                    break
            else:
                if tp is Seq:
                    n -= self.listed(expr.items, depth + 1)
        elif tp is Except:  # the trie's nodes and a copy of the item
            n = 1 + self.size((<Except> expr).item, depth + 1) + sum([len(w) for w in (<Except> expr).words])
        else:
            rep = <Repeat> expr
            body = self.size(rep.item, depth + 1)
            n = 2 + body * (1 if self.counted(rep) else max(rep.min, rep.max or 1, 1))
        n = min(n, self.max_states + 1)
        if pair_get_or_put(&self.sizes, <int64_t> <void*> expr, 0, n) == -2:
            raise MemoryError("sizes")
        self.sized.append(expr)  # its address stays its own
        return n

    cdef int listed(self, tuple items, int depth) except -1:
        """The size of the items of lists in ``items`` that ``chain`` builds once and ``size`` counted twice."""
        cdef int32_t i = 0, j, k, n = len(items)
        cdef int total = 0
        while i < n:
            j = _next_star(items, i, n)
            if j == n:
                break
            k = _repeated(items, i, j)
            for x in items[j - k:j]:
                total += self.size(x, depth)
            i = j + 1
        return total

    cdef int rule_size(self, str name) except -1:
        """The expanded size of rule ``name``, its inlined callees measured first.

        Callees are measured from an explicit stack, not by recursion: a chain of thousands of
        rules (each calling the next) is valid GBNF, and would overflow the C stack.
        """
        cdef list stack
        cdef int i
        got = self.rule_sizes.get(name)
        if got is not None:
            return got
        stack = [[name, 0]]
        while stack:
            entry = stack[len(stack) - 1]
            callees = self.refs[entry[0]]
            i = entry[1]
            while i < len(callees) and (callees[i] in self.rule_sizes or self.is_frame_by_name(callees[i])):
                i += 1
            entry[1] = i
            if i < len(callees):
                stack.append([callees[i], 0])
                continue
            stack.pop()
            self.rule_sizes[entry[0]] = self.size(self.rules[entry[0]], 0)
        return self.rule_sizes[name]

    cdef bint is_frame_by_name(self, str name) except -1:
        """A frame whatever its size: the root, and rules on a reference cycle."""
        return name in self.recursive or name == self.root

    cdef bint is_frame(self, str name) except -1:
        """A frame by name, or too big to inline: at each use, or at every use but one."""
        cdef int bound = self.inline_states
        if name in self.copied:
            bound = min(bound, self.share_states)
        return self.is_frame_by_name(name) or self.rule_size(name) > bound

    cdef bint counted(self, Repeat rep) except -1:
        """Whether ``rep`` runs on a frame counter rather than unrolled states."""
        top = rep.max if rep.max is not None else rep.min
        return top > 1 and self.size(rep.item, 0) * top > self.unroll_states

    cdef non_empty(self, expr, int depth):
        """``expr`` without the empty string; None when nothing else is left.

        A nullable rule is expanded in place; a nullable *recursive* rule cannot be, and under
        a counter its empty matches would spin the counter: such a grammar is refused.
        """
        if depth > self.max_depth:
            raise self.too_deep(self.root)
        if not _nullable(expr, self.nullable_rules):
            return expr
        tp = type(expr)
        if tp is Ref:
            if expr.name in self.recursive:
                raise GrammarError(
                    f"rule {expr.name!r} matches the empty string and recurses; it cannot be repeated a counted "
                    "number of times (write the empty case outside the repetition)", rule=expr.name)
            return self.non_empty(self.rules[expr.name], depth + 1)
        parts = []
        if tp is Seq:  # every item is nullable: some item is the first to read a byte
            items = expr.items
            for i in range(len(items)):
                first = self.non_empty(items[i], depth + 1)
                if first is not None:
                    parts.append(seq(first, *items[i + 1 :]))
        elif tp is Alt:
            for item in expr.items:
                item = self.non_empty(item, depth + 1)
                if item is not None:
                    parts.append(item)
        elif tp is Repeat:
            item = self.non_empty(expr.item, depth + 1)
            if item is None or expr.max == 0:
                return None
            if expr.max == 1:
                return item
            return seq(item, Repeat(expr.item, 0, None if expr.max is None else expr.max - 1))
        elif tp is Except:
            return Except(expr.item, expr.words + (b"",))
        return alt(*parts) if parts else None

    # -- construction ---------------------------------------------------------------------
    cdef int32_t new_state(self, int32_t rid) except -1:
        if self.nfa.n_states > self.max_states:
            raise self.too_many_states()
        return self.nfa.state(rid)

    cdef int32_t frame_rule(self, key, str name, body, int32_t lo, int32_t hi) except -1:
        """The frame rule for ``key``; its body is built later, from ``frames`` (see ``build``)."""
        cdef int32_t rid, start, final
        got = self.rule_ids.get(key)
        if got is not None:
            return got
        rid = len(self.rule_names)
        self.rule_ids[key] = rid
        self.impure += 1
        self.rule_names.append(name)
        self.rule_bounds.append((lo, hi))
        start = self.new_state(rid)
        final = self.new_state(rid)
        self.rule_start.append(start)
        self.nfa.final[final] = 1
        self.frames.append((rid, name, body, start, final, lo, hi))
        return rid

    cdef int build(self) except -1:
        """Build the bodies of the frame rules, from a worklist: a chain of calls does not nest."""
        cdef int32_t rid, start, final, lo, hi, loop
        while self.frames:
            rid, name, body, start, final, lo, hi = self.frames.pop()
            if lo == 0 and hi == 0:
                if not (self.copies and _id(body) in PERMANENT and self.permanent_frame(body, start, final, rid, name)):
                    self.frag(body, start, final, rid, name, 0)
            else:
                # item{min,max} on a counter: start --EXIT--> final; start --INC--> loop --item--> start
                loop = self.new_state(rid)
                self.nfa.special(start, EDGE_EXIT, 0, final)
                self.nfa.special(start, EDGE_INC, 0, loop)
                self.frag(body, loop, start, rid, name, 0)
            while self.pending:
                expr, s, t, r, n = self.pending.pop()
                self.frag(expr, s, t, r, n, 0)
        return 0

    cdef int frag(self, expr, int32_t s, int32_t t, int32_t rid, str name, int depth) except -1:
        """Connect ``s`` to ``t`` through ``expr``. Never adds an edge into ``s`` (loops get their own state)."""
        cdef int32_t entry, callee
        cdef int lo, hi
        cdef tuple items
        if depth > self.max_depth:
            raise self.too_deep(name)
        if depth > self.deepest:
            self.deepest = depth
        self.ticks += 1
        if self.ticks >= self.next_clock:
            self.next_clock = self.ticks + DEADLINE_EVERY
            if compile_budget.clock() > self.deadline:
                seconds = self.options.limits.compile_seconds
                raise GrammarError(f"compile took over {seconds} s of CPU time (limit COMPILE_SECONDS)",
                                   rule=name)
        tp = type(expr)
        if tp is Bytes:
            items = (<Bytes> expr).ranges
            if not items:
                raise GrammarError("empty byte set matches nothing", rule=name)
            ws = (<Bytes> expr).whitespace
            for lo, hi in items:  # C ints: a bound past them raises OverflowError (IR is built by code)
                if not 0 <= lo <= hi <= 255:
                    raise GrammarError(f"byte range {lo}..{hi} is not within 0..255", rule=name)
                self.nfa.byte_edge(s, lo, hi, t, ws)
        elif tp is Ref:
            callee_name = (<Ref> expr).name
            if callee_name not in self.rules:
                raise GrammarError(f"undefined rule {callee_name!r}", rule=name)
            if self.is_frame(callee_name):
                callee = self.frame_rule(callee_name, callee_name, self.rules[callee_name], 0, 0)
                self.nfa.special(s, EDGE_CALL, callee, t)
            else:
                # inlined once per (rule, target, frame): every use that continues at ``t`` shares
                # the copy, and it is built later from a worklist, so chains of rules do not nest
                key = (callee_name, t, rid)
                got = self.inline_entries.get(key)
                self.impure += 1  # the copy is per target: a fragment holding it is not a template
                if got is None:
                    entry = self.new_state(rid)
                    self.inline_entries[key] = entry
                    self.pending.append((self.rules[callee_name], entry, t, rid, callee_name))
                else:
                    entry = got
                self.nfa.special(s, EDGE_EPS, 0, entry)
        elif tp is Seq or tp is Alt or tp is Repeat:
            self.composite(expr, tp, s, t, rid, name, depth)
        elif tp is Except:
            self.excluding(<Except> expr, s, t, rid, name)
        else:
            raise GrammarError(f"not an IR expression: {expr!r}", rule=name)
        return 0

    cdef int composite(self, expr, tp, int32_t s, int32_t t, int32_t rid, str name, int depth) except -1:
        """A sequence, alternative or repetition; from its template once the same node was built twice.

        Schemas repeat subtrees (every string value, a ``$ref`` target inlined at each use), and
        walking the IR costs the interpreter per node, where copying a built fragment costs a
        few C stores per edge. A node is recorded on its second use, so unique nodes cost no
        memory; a fragment that defined a rule or deferred an inlined rule is never recorded.
        """
        cdef int32_t n0 = self.nfa.n_states, nb0 = self.nfa.n_b, nx0 = self.nfa.n_x, impure = self.impure
        cdef int outer = self.deepest, height
        key = _id(expr)
        got = self.templates.get(key) if self.copies else None
        if got is None and self.copies and key in PERMANENT:  # built by an earlier compile, perhaps
            got = _KEPT.get((key, self.shape))
            if got is not None:
                self.templates[key] = got
        if got is not None and got[1] is not None:
            return self.replay(<bytes> got[1], s, t, rid, name, depth)
        self.deepest = depth
        if tp is Seq:
            self.sequence(<Seq> expr, s, t, rid, name, depth)
        elif tp is Alt:
            if not (<Alt> expr).items:
                raise GrammarError("empty alternative matches nothing", rule=name)
            got_f = self.factored.get(key)
            if got_f is None:
                got_f = self.factored[key] = (_left_factor((<Alt> expr).items), expr)
            for item in got_f[0]:
                self.frag(item, s, t, rid, name, depth + 1)
        else:
            self.repeat(<Repeat> expr, s, t, rid, name, depth)
        height = self.deepest - depth
        self.deepest = max(outer, self.deepest)
        if got is None:
            self.templates[key] = (expr, None)  # seen once (holding expr keeps its id unique)
        kept = got is None and self.copies and key in PERMANENT  # recorded at once, for later compiles too
        if (got is not None or kept) and self.impure == impure and s != t and self.nfa.n_states > n0 and (
                self.template_bytes < TEMPLATE_BYTES):
            self.record(expr, s, t, n0, nb0, nx0, height)
            if kept and self.templates[key][1] is not None:
                if len(_KEPT) >= MAX_FRAMES:
                    _KEPT.clear()
                _KEPT[(key, self.shape)] = self.templates[key]
        return 0

    cdef int record(self, expr, int32_t s, int32_t t, int32_t n0, int32_t nb0, int32_t nx0, int height) except -1:
        """Keep the fragment just built from ``s`` to ``t`` as ``expr``'s template, if it is self-contained."""
        data = self.fragment(s, t, n0, nb0, nx0, height)
        if data is not None:
            self.templates[_id(expr)] = (expr, data)
            self.template_bytes += len(data)
        return 0

    cdef fragment(self, int32_t s, int32_t t, int32_t n0, int32_t nb0, int32_t nx0, int height):
        """The fragment just built from ``s`` to ``t`` (its new states from ``n0``, its edges from
        ``nb0``/``nx0``) as bytes, or ``None`` where an edge leaves it."""
        cdef int32_t n1 = self.nfa.n_states, i
        cdef Template m = Template(s, t, n0, n1 - n0, self.nfa.n_b - nb0, self.nfa.n_x - nx0, height)
        for i in range(nb0, self.nfa.n_b):
            if not _inside(&m, self.nfa.b[i].src, self.nfa.b[i].tgt):
                return None
        for i in range(nx0, self.nfa.n_x):
            if not _inside(&m, self.nfa.x[i].src, self.nfa.x[i].tgt):
                return None
        data = PyBytes_FromStringAndSize(NULL, sizeof(Template) + m.n_b * sizeof(ByteEdge) + m.n_x * sizeof(Special))
        cdef char* p = PyBytes_AS_STRING(data)
        memcpy(p, &m, sizeof(Template))
        memcpy(p + sizeof(Template), &self.nfa.b[nb0], m.n_b * sizeof(ByteEdge))
        memcpy(p + sizeof(Template) + m.n_b * sizeof(ByteEdge), &self.nfa.x[nx0], m.n_x * sizeof(Special))
        return data

    cdef bint permanent_frame(self, body, int32_t start, int32_t final, int32_t rid, str name) except -1:
        """Build a frame whose body is ``ir.permanent`` from the copy kept across compiles, or keep one.

        The copy names the rules it calls, which must be frames here too (then the body's walk is
        the same: every ``Ref`` in it a call). A body that inlines a rule or counts a repetition is
        never kept: both depend on the grammar around it. False: build it as any other.
        """
        cdef int32_t n0 = self.nfa.n_states, nb0 = self.nfa.n_b, nx0 = self.nfa.n_x, i, pending = len(self.pending)
        cdef int outer, height
        cdef char* p
        cdef Special* x
        cdef list calls
        key = (_id(body), self.shape)
        got = _FRAMES.get(key)
        if got is not None:
            for callee in got[2]:
                if callee not in self.rules or not self.is_frame(callee):
                    return False
            calls = [self.frame_rule(callee, callee, self.rules[callee], 0, 0) for callee in got[2]]
            self.replay(<bytes> got[1], start, final, rid, name, 0, calls)
            return True
        outer, self.deepest = self.deepest, 0
        self.frag(body, start, final, rid, name, 0)
        height, self.deepest = self.deepest, max(outer, self.deepest)
        if len(self.pending) != pending:
            return True
        data = self.fragment(start, final, n0, nb0, nx0, height)
        if data is None:
            return True
        p = PyBytes_AS_STRING(data)
        x = <Special*> (p + sizeof(Template) + (<Template*> p).n_b * sizeof(ByteEdge))
        callees = []
        for i in range((<Template*> p).n_x):
            if x[i].kind == EDGE_CALL:
                callee = self.rule_names[x[i].arg]
                if self.rule_ids.get(callee) != x[i].arg:  # a counted repetition's frame
                    return True
                if callee not in callees:
                    callees.append(callee)
                x[i].arg = callees.index(callee)
        if len(_FRAMES) >= MAX_FRAMES:
            _FRAMES.clear()
        _FRAMES[key] = (body, data, tuple(callees))
        return True

    cdef int replay(self, bytes data, int32_t s, int32_t t, int32_t rid, str name, int depth,
                    list calls=None) except -1:
        """A copy of a recorded fragment from ``s`` to ``t``, its new states in frame ``rid``.

        ``calls``: the rule ids its calls name, by index (a frame kept from another compile).

        Refused where building it here would have been: nested past ``MAX_DEPTH``, over ``MAX_STATES``.
        """
        cdef const char* p = PyBytes_AS_STRING(data)
        cdef const Template* m = <const Template*> p
        cdef const ByteEdge* b = <const ByteEdge*> (p + sizeof(Template))
        cdef const Special* x = <const Special*> (p + sizeof(Template) + m.n_b * sizeof(ByteEdge))
        cdef int32_t base = self.nfa.n_states, i
        cdef ByteEdge* bo
        cdef Special* xo
        if depth + m.height > self.max_depth:
            raise self.too_deep(name)
        if depth + m.height > self.deepest:
            self.deepest = depth + m.height
        if base + m.n_states > self.max_states + 1:
            raise self.too_many_states()
        self.ticks += m.n_states
        self.nfa.states(rid, m.n_states)
        if not grow(<void**> &self.nfa.b, &self.nfa.b_cap, self.nfa.n_b + m.n_b, sizeof(ByteEdge)):
            raise MemoryError()
        if not grow(<void**> &self.nfa.x, &self.nfa.x_cap, self.nfa.n_x + m.n_x, sizeof(Special)):
            raise MemoryError()
        bo = &self.nfa.b[self.nfa.n_b]
        for i in range(m.n_b):
            bo[i] = b[i]
            bo[i].src = _moved(m, b[i].src, s, t, base)
            bo[i].tgt = _moved(m, b[i].tgt, s, t, base)
        self.nfa.n_b += m.n_b
        xo = &self.nfa.x[self.nfa.n_x]
        for i in range(m.n_x):
            xo[i] = x[i]
            xo[i].src = _moved(m, x[i].src, s, t, base)
            xo[i].tgt = _moved(m, x[i].tgt, s, t, base)
            if calls is not None and x[i].kind == EDGE_CALL:
                xo[i].arg = calls[x[i].arg]
        self.nfa.n_x += m.n_x
        return 0

    cdef int sequence(self, Seq expr, int32_t s, int32_t t, int32_t rid, str name, int depth) except -1:
        return self.chain(expr.items, 0, len(expr.items), s, t, rid, name, depth)

    cdef int chain(self, tuple items, int32_t i, int32_t n, int32_t s, int32_t t, int32_t rid, str name,
                   int depth) except -1:
        """``items[i:n]`` one after another from ``s`` to ``t``.

        A list, ``A (S A)*`` (array items, the members after the first), is one loop through a
        single copy of ``A``: built as written, it holds two, and each doubles again where ``A``
        holds a list, and the copies only behave alike.
        """
        cdef int32_t j, a, k, cur = s, nxt, head, tail
        cdef tuple body
        if i == n:
            self.nfa.special(s, EDGE_EPS, 0, t)
        while i < n:
            j = _next_star(items, i, n)
            a = j - _repeated(items, i, j) if j < n else j
            while i < a:
                nxt = t if i == n - 1 else self.new_state(rid)
                self.frag(items[i], cur, nxt, rid, name, depth + 1)
                cur = nxt
                i += 1
            if i == n:
                break
            nxt = t if j == n - 1 else self.new_state(rid)
            if a == j:
                self.frag(items[j], cur, nxt, rid, name, depth + 1)
            else:  # items[a:j] are the A that items[j], a star of S A, repeats
                body = (<Seq> (<Repeat> items[j]).item).items
                k = len(body) - (j - a)
                head = self.new_state(rid)
                tail = self.new_state(rid)
                self.nfa.special(cur, EDGE_EPS, 0, head)
                self.chain(items, a, j, head, tail, rid, name, depth)
                self.chain(body, 0, k, tail, head, rid, name, depth)
                self.nfa.special(tail, EDGE_EPS, 0, nxt)
            cur = nxt
            i = j + 1
        return 0

    cdef int repeat(self, Repeat rep, int32_t s, int32_t t, int32_t rid, str name, int depth) except -1:
        cdef int32_t cur, nxt, mid, loop, callee, i, mandatory
        lo, hi = rep.min, rep.max
        if lo < 0 or (hi is not None and hi < lo):
            raise GrammarError(f"repetition bounds {{{lo},{hi}}} are invalid", rule=name)
        if max(lo, hi or 0) > self.max_repeat:
            raise GrammarError(f"repetition bound above {self.max_repeat} (limit MAX_REPEAT)", rule=name)
        if self.counted(rep):
            if _nullable(rep.item, self.nullable_rules):
                # empty iterations would each bump the counter: x{m,n} = (x minus ""){0,n}
                item = self.non_empty(rep.item, 0)
                if item is None:  # only the empty string
                    self.nfa.special(s, EDGE_EPS, 0, t)
                    return 0
                rep, lo = Repeat(item, 0, hi), 0
            if hi is None:  # item{lo,} = item{lo,lo} item*
                mid = self.new_state(rid)
                self.repeat(Repeat(rep.item, lo, lo), s, mid, rid, name, depth)
                self.repeat(Repeat(rep.item, 0, None), mid, t, rid, name, depth)
                return 0
            callee = self.frame_rule(("repeat", rep), f"{name}{{{lo},{hi}}}", rep.item, lo, hi)
            self.nfa.special(s, EDGE_CALL, callee, t)
            return 0
        item = rep.item
        cur = s
        mandatory = lo - 1 if hi is None and lo else lo  # item+ loops through its last mandatory copy
        for i in range(mandatory):
            nxt = t if hi == lo and i == lo - 1 else self.new_state(rid)
            self.frag(item, cur, nxt, rid, name, depth + 1)
            cur = nxt
        if hi is None:  # then item* or, the last mandatory copy looping, item+: a loop on fresh states
            loop = self.new_state(rid)
            self.nfa.special(cur, EDGE_EPS, 0, loop)
            if lo:
                mid = self.new_state(rid)
                self.frag(item, loop, mid, rid, name, depth + 1)
                self.nfa.special(mid, EDGE_EPS, 0, loop)
                self.nfa.special(mid, EDGE_EPS, 0, t)
            else:
                self.frag(item, loop, loop, rid, name, depth + 1)
                self.nfa.special(loop, EDGE_EPS, 0, t)
            return 0
        for i in range(hi - lo):  # then (item (item ...)?)?
            self.nfa.special(cur, EDGE_EPS, 0, t)
            nxt = t if i == hi - lo - 1 else self.new_state(rid)
            self.frag(item, cur, nxt, rid, name, depth + 1)
            cur = nxt
        if cur != t:  # the last copy ends at t itself: a rule inlined there shares the copy its other uses make
            self.nfa.special(cur, EDGE_EPS, 0, t)
        return 0


    cdef int excluding(self, Except expr, int32_t s, int32_t t, int32_t rid, str name) except -1:
        """``expr.item`` less ``expr.words``: the words' trie walked over the item's DFA.

        A trie node is a prefix of some words and the DFA state it reaches, ``s`` the root. A
        byte no word continues with leaves the trie for a copy of the DFA, where nothing is
        excluded any more; a node is final where the item may end and no word does. All of it
        runs in C: as ``Alt``/``Seq`` nodes, the trie would cost more than the rest of a schema.
        """
        cdef _DFA d = _dfa_of(expr.item, name, self.options)
        cdef list words
        for w in expr.words:
            if type(w) is not bytes:
                raise GrammarError(f"an Except word must be bytes, not {w!r}", rule=name)
        words = sorted(set(expr.words))
        cdef int32_t n = len(words), base, q, k, jend, i, top = 0, cap = 64, cur, tcap = 16
        cdef int c
        cdef _TrieNode node
        cdef const uint8_t** ptr = <const uint8_t**> malloc(max(n, 1) * sizeof(uint8_t*))
        cdef int32_t* lens = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
        cdef _TrieNode* stack = <_TrieNode*> malloc(cap * sizeof(_TrieNode))
        cdef _Tail* tail
        cdef int32_t total = 0
        for w in words:
            total += len(<bytes> w) + 1
        while tcap < 2 * total:  # at most a node per byte of a word is the only word left
            tcap *= 2
        cdef _Tail* tails = <_Tail*> malloc(tcap * sizeof(_Tail))
        cdef uint32_t* hashes = <uint32_t*> malloc(max(total, 1) * sizeof(uint32_t))  # per word, of each rest
        cdef int32_t* offset = <int32_t*> malloc(max(n, 1) * sizeof(int32_t))
        if ptr == NULL or lens == NULL or stack == NULL or tails == NULL or hashes == NULL or offset == NULL:
            free(ptr)
            free(lens)
            free(stack)
            free(tails)
            free(hashes)
            free(offset)
            raise MemoryError()
        for i in range(tcap):
            tails[i].state = -1
        try:
            cur = 0
            for i in range(n):
                ptr[i] = <const uint8_t*> PyBytes_AS_STRING(words[i])
                lens[i] = len(<bytes> words[i])
                offset[i] = cur
                hashes[cur + lens[i]] = 0x811C9DC5u
                for k in range(lens[i] - 1, -1, -1):
                    hashes[cur + k] = (hashes[cur + k + 1] ^ ptr[i][k]) * 0x01000193u
                cur += lens[i] + 1
            if self.nfa.n_states + d.n > self.max_states:
                raise self.too_many_states()
            base = self.nfa.n_states
            self.nfa.states(rid, d.n)
            for q in range(d.n):
                for k in range(d.start[q], d.start[q + 1]):
                    self.nfa.byte_edge(base + q, d.lo[k], d.hi[k], base + d.tgt[k], False)
                if d.final[q]:
                    self.nfa.special(base + q, EDGE_EPS, 0, t)
            stack[0] = _TrieNode(s, d.initial, 0, n, 0)
            top = 1
            while top:
                top -= 1
                node = stack[top]
                self.ticks += 1
                i = node.lo
                if i < node.hi and lens[i] == node.depth:  # sorted: the word that ends here comes first
                    i += 1
                elif d.final[node.q]:
                    self.nfa.special(node.state, EDGE_EPS, 0, t)
                for k in range(d.start[node.q], d.start[node.q + 1]):
                    while i < node.hi and ptr[i][node.depth] < d.lo[k]:  # the item cannot spell these words
                        i += 1
                    cur = d.lo[k]
                    while i < node.hi and ptr[i][node.depth] <= d.hi[k]:
                        c = ptr[i][node.depth]
                        jend = i + 1
                        while jend < node.hi and ptr[jend][node.depth] == c:
                            jend += 1
                        if cur < c:
                            self.nfa.byte_edge(node.state, cur, c - 1, base + d.tgt[k], False)
                        q = d.tgt[k]
                        if lens[i] == node.depth + 1 and d.start[q] == d.start[q + 1]:
                            pass  # c ends a word and the item: no edge, rather than one to a dead state
                        else:  # one word left: its node behaves as any other with the same rest and DFA state
                            tail = NULL
                            if jend - i == 1:
                                tail = _tail(tails, tcap, ptr, lens, q, i, node.depth + 1,
                                             hashes[offset[i] + node.depth + 1])
                            if tail != NULL and tail.state >= 0:
                                self.nfa.byte_edge(node.state, c, c, tail.state, False)
                            else:
                                if not grow(<void**> &stack, &cap, top + 1, sizeof(_TrieNode)):
                                    raise MemoryError()
                                stack[top] = _TrieNode(self.new_state(rid), q, i, jend, node.depth + 1)
                                if tail != NULL:
                                    tail[0] = _Tail(stack[top].state, q, i, node.depth + 1)
                                self.nfa.byte_edge(node.state, c, c, stack[top].state, False)
                                top += 1
                        cur = c + 1
                        i = jend
                    if cur <= d.hi[k]:
                        self.nfa.byte_edge(node.state, cur, d.hi[k], base + d.tgt[k], False)
        finally:
            free(ptr)
            free(lens)
            free(stack)
            free(tails)
            free(hashes)
            free(offset)
        return 0


cdef dict _DFAS = {}  # (item, limits, tuning) -> its _DFA, across compiles: the items are few
cdef enum:
    MAX_DFAS = 64         # items kept at most: IR built by a library user could bring new ones forever
    MAX_DFA_STATES = 4096  # an item's DFA, at most: its subset construction runs in the interpreter


cdef _DFA _dfa_of(item, str name, options):
    """The DFA of a finite-state IR expression (subset construction over its epsilon-free NFA)."""
    cdef tuple key = (item, options.limits, options.tuning)
    cdef _DFA d = _DFAS.get(key)
    cdef _Lowering low
    cdef Edges e
    cdef int32_t i, m, q, k
    if d is not None:
        return d
    low = _Lowering({"item": item}, "item", options, True)
    low.frame_rule("item", "item", item, 0, 0)
    low.build()
    low.nfa.group(&e)
    try:
        for i in range(e.x_start[low.nfa.n_states]):
            if e.x[i].kind != EDGE_EPS:
                raise GrammarError("an Except item must be finite-state (no rule, no counted repetition)", rule=name)
        for i in range(e.b_start[low.nfa.n_states]):
            if e.b[i].ws:
                raise GrammarError("an Except item cannot hold whitespace bytes", rule=name)
        _forward(low, &e)
        _eliminate_epsilon(low.nfa, &e)
        first = (low.rule_start[0],)
        ids, order, rows = {first: 0}, [first], []
        while len(rows) < len(order):
            members = order[len(rows)]
            cuts = set()
            for m in members:
                for i in range(e.b_start[m], e.b_start[m + 1]):
                    cuts.add(e.b[i].lo)
                    cuts.add(e.b[i].hi + 1)
            cuts = sorted(cuts)
            row = []
            for k in range(len(cuts) - 1):
                targets = set()
                for m in members:
                    for i in range(e.b_start[m], e.b_start[m + 1]):
                        if e.b[i].lo <= cuts[k] and cuts[k + 1] - 1 <= e.b[i].hi:
                            targets.add(e.b[i].tgt)
                if not targets:
                    continue
                subset = tuple(sorted(targets))
                if subset not in ids:
                    if len(order) > MAX_DFA_STATES:
                        raise GrammarError(f"an Except item's DFA needs over {MAX_DFA_STATES} states", rule=name)
                    ids[subset] = len(order)
                    order.append(subset)
                if row and row[len(row) - 1][1] == cuts[k] - 1 and row[len(row) - 1][2] == ids[subset]:
                    row[len(row) - 1] = (row[len(row) - 1][0], cuts[k + 1] - 1, ids[subset])
                else:
                    row.append((cuts[k], cuts[k + 1] - 1, ids[subset]))
            rows.append(row)
        d = _DFA()
        d.n = len(order)
        d.initial = 0
        edges = [edge for row in rows for edge in row]
        d.start = <int32_t*> malloc((d.n + 1) * sizeof(int32_t))
        d.final = <uint8_t*> malloc(d.n)
        d.lo = <uint8_t*> malloc(max(len(edges), 1))
        d.hi = <uint8_t*> malloc(max(len(edges), 1))
        d.tgt = <int32_t*> malloc(max(len(edges), 1) * sizeof(int32_t))
        if d.start == NULL or d.final == NULL or d.lo == NULL or d.hi == NULL or d.tgt == NULL:
            raise MemoryError()
        k = 0
        for q in range(d.n):
            d.start[q] = k
            d.final[q] = any(low.nfa.final[m] for m in order[q])
            for lo, hi, tgt in rows[q]:
                d.lo[k], d.hi[k], d.tgt[k] = lo, hi, tgt
                k += 1
        d.start[d.n] = k
    finally:
        _edges_free(&e)
    if len(_DFAS) >= MAX_DFAS:
        _DFAS.clear()
    _DFAS[key] = d
    return d


def kept_except_items() -> list:
    """The ``Except`` items whose DFA is kept for later compiles (for tests)."""
    return [key[0] for key in _DFAS]


cdef list _left_factor(tuple items):
    """Alternatives that start with the same byte set share it: ``ab | ac`` becomes ``a (b | c)``.

    Without this a keyword list of thousands of words would be thousands of configurations
    after its first byte; with it the automaton follows one path per distinct prefix. An
    alternative alone in its group is kept as it is (the same node: its template still applies).
    """
    cdef dict groups = {}
    cdef list out = [], group
    cdef tuple parts
    for item in items:
        tp = type(item)
        head = (<Seq> item).items[0] if tp is Seq and (<Seq> item).items else item
        if type(head) is Bytes:  # keyed by value, as Bytes compares: its hash is Python code
            groups.setdefault(((<Bytes> head).ranges, (<Bytes> head).whitespace), []).append(item)
        else:
            groups[len(groups), None] = [item]
    for group in groups.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        tails = []
        for item in group:
            if type(item) is Bytes:
                tails.append(EMPTY)
            else:  # the tail of a Seq is flat already: no seq() to re-flatten it
                parts = (<Seq> item).items
                tails.append(parts[1] if len(parts) == 2 else Seq(parts[1:]))
        head = group[0] if type(group[0]) is Bytes else (<Seq> group[0]).items[0]
        out.append(Seq((head, _alt_distinct(*tails))))
    return out


cdef int32_t _next_star(tuple items, int32_t i, int32_t n) except -1:
    """The index of the first ``(S A)*`` at or after ``i``: a star of a sequence; ``n`` if none."""
    cdef Repeat rep
    for j in range(i, n):
        if type(items[j]) is Repeat:
            rep = <Repeat> items[j]
            if rep.min == 0 and rep.max is None and type(rep.item) is Seq:
                return j
    return n


cdef int32_t _repeated(tuple items, int32_t i, int32_t j) except -1:
    """The most items before the star ``items[j]`` (from ``i`` on) that its body ends with."""
    cdef tuple body = (<Seq> (<Repeat> items[j]).item).items
    cdef int32_t k, m = len(body)
    for k in range(min(j - i, m), 0, -1):
        if body[m - k:] == items[j - k:j]:
            return k
    return 0


cdef bint _nullable(e, set nullable_rules) except -1:
    tp = type(e)
    if tp is Bytes:
        return False
    if tp is Seq:
        for x in (<Seq> e).items:
            if not _nullable(x, nullable_rules):
                return False
        return True
    if tp is Alt:
        for x in (<Alt> e).items:
            if _nullable(x, nullable_rules):
                return True
        return False
    if tp is Repeat:
        return (<Repeat> e).min == 0 or _nullable((<Repeat> e).item, nullable_rules)
    if tp is Except:
        return _nullable((<Except> e).item, nullable_rules) and b"" not in (<Except> e).words
    return (<Ref> e).name in nullable_rules


cdef set _nullable_rules(dict rules):
    """Rules that match the empty string (a fixpoint over the references)."""
    cdef set found = set()
    cdef bint changed = True
    while changed:
        changed = False
        for name, expr in rules.items():
            if name not in found and _nullable(expr, found):
                found.add(name)
                changed = True
    return found


cdef int _check_left_recursion(_Lowering low, Edges* e) except -1:
    """Refuse a rule that can call itself before reading a byte, naming the cycle."""
    cdef int32_t n_rules = len(low.rule_names), rid
    cdef list nullable = [False] * n_rules
    cdef bint changed = True
    while changed:
        changed = False
        for rid in range(n_rules):
            if not nullable[rid] and _scan(low, e, rid, nullable)[0]:
                nullable[rid] = changed = True
    graph = {rid: _scan(low, e, rid, nullable)[1] for rid in range(n_rules)}
    color = [0] * n_rules
    for root in range(n_rules):
        if color[root]:
            continue
        path, work = [], [(root, iter(sorted(graph[root])))]
        color[root] = 1
        path.append(root)
        while work:
            node, it = work[len(work) - 1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = 2
                work.pop()
                path.pop()
            elif color[nxt] == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                names = " -> ".join(low.rule_names[r] for r in cycle)
                message = f"left recursion: {names} calls itself before reading a byte"
                raise GrammarError(message, rule=low.rule_names[nxt])
            elif color[nxt] == 0:
                color[nxt] = 1
                path.append(nxt)
                work.append((nxt, iter(sorted(graph[nxt]))))
    return 0


cdef tuple _scan(_Lowering low, Edges* e, int32_t rid, list nullable):
    """(reaches final without bytes, rules called without bytes) from rule ``rid``'s start."""
    cdef int32_t start = low.rule_start[rid], x, i, y
    cdef set seen = {start}, calls = set()
    cdef list stack = [start]
    cdef bint fin = False
    while stack:
        x = stack.pop()
        fin = fin or low.nfa.final[x]
        for i in range(e.x_start[x], e.x_start[x + 1]):
            y = e.x[i].tgt
            if e.x[i].kind == EDGE_CALL:
                calls.add(e.x[i].arg)
                if not nullable[e.x[i].arg]:
                    continue
            if y not in seen:
                seen.add(y)
                stack.append(y)
    return fin, calls


def lower(dict rules, root, options, *, list warnings, bint copies=True):
    """Lower ``rules`` onto the core automaton; raises ``GrammarError`` naming the rule at fault.

    ``options`` is a ``CompileOptions``: its limits, tuning and whitespace budget apply here.
    ``copies=False`` builds every fragment from its IR, never from a copy (same tables, slower).
    """
    whitespace_budget = options.whitespace_budget
    cdef Edges e
    cdef _Lowering low
    if root not in rules:
        raise GrammarError(f"the root rule {root!r} is not defined", rule=root)
    if whitespace_budget is not None and whitespace_budget < 0:
        raise GrammarError(f"whitespace budget {whitespace_budget} is negative", rule=root)
    low = _Lowering(rules, root, options, copies)
    low.frame_rule(root, root, rules[root], 0, 0)
    low.build()
    low.nfa.group(&e)
    try:
        _forward(low, &e)
        _eliminate_epsilon(low.nfa, &e)
        _check_left_recursion(low, &e)
        arrays = _pack(low, &e)
    finally:
        _edges_free(&e)
    budget = -1 if whitespace_budget is None else int(whitespace_budget)
    return CompiledGrammar(arrays, budget, list(low.rule_names), list(warnings), options.limits)


cdef inline void _visit(int32_t y, int32_t* order, int32_t* old, int32_t* stack, int32_t* n,
                        int32_t* top) noexcept nogil:
    """Number state ``y`` next and push it, unless it is numbered already."""
    if order[y] < 0:
        order[y] = n[0]
        old[n[0]] = y
        n[0] += 1
        stack[top[0]] = y
        top[0] += 1


cdef dict _pack(_Lowering low, Edges* e):
    """Renumber the states reachable from the root (depth first) and pack them into flat arrays."""
    cdef _NFA nfa = low.nfa
    cdef int32_t n_all = nfa.n_states, n = 0, x, i, j, o, top, nb = 0, nx = 0, n_rules = len(low.rule_start)
    cdef int32_t* rule_start = <int32_t*> malloc(max(n_rules, 1) * sizeof(int32_t))
    cdef int32_t* order = <int32_t*> malloc(max(n_all, 1) * sizeof(int32_t))  # old state -> new, -1: unreached
    cdef int32_t* old = <int32_t*> malloc(max(n_all, 1) * sizeof(int32_t))
    cdef int32_t* stack = <int32_t*> malloc((n_all + 1) * sizeof(int32_t))
    cdef int32_ptr b_start, b_tgt, x_start, x_kind, x_arg, x_tgt, state_rule, rule_out, rule_min, rule_max
    cdef uint8_ptr b_lo, b_hi, b_ws, final
    cdef dict arrays
    if rule_start == NULL or order == NULL or old == NULL or stack == NULL:
        free(rule_start)
        free(order)
        free(old)
        free(stack)
        raise MemoryError()
    try:
        for i in range(n_rules):
            rule_start[i] = low.rule_start[i]
        for i in range(n_all):
            order[i] = -1
        n = top = 0
        _visit(rule_start[0], order, old, stack, &n, &top)
        while top:
            top -= 1
            x = stack[top]
            for i in range(e.b_start[x], e.b_start[x + 1]):
                _visit(e.b[i].tgt, order, old, stack, &n, &top)
            for i in range(e.x_start[x], e.x_start[x + 1]):
                _visit(e.x[i].tgt, order, old, stack, &n, &top)
            for i in range(e.x_start[x], e.x_start[x + 1]):
                if e.x[i].kind == EDGE_CALL:
                    _visit(rule_start[e.x[i].arg], order, old, stack, &n, &top)
        for i in range(n):
            o = old[i]
            nb += e.b_start[o + 1] - e.b_start[o]
            nx += e.x_start[o + 1] - e.x_start[o]
        arrays = {name: zeros(size, typenum) for name, size, typenum in (
            ("b_start", n + 1, cnp.NPY_INT32), ("b_lo", nb, cnp.NPY_UINT8), ("b_hi", nb, cnp.NPY_UINT8),
            ("b_tgt", nb, cnp.NPY_INT32), ("b_ws", nb, cnp.NPY_UINT8), ("x_start", n + 1, cnp.NPY_INT32),
            ("x_kind", nx, cnp.NPY_INT32), ("x_arg", nx, cnp.NPY_INT32), ("x_tgt", nx, cnp.NPY_INT32),
            ("final", n, cnp.NPY_UINT8), ("state_rule", n, cnp.NPY_INT32), ("rule_start", n_rules, cnp.NPY_INT32),
            ("rule_min", n_rules, cnp.NPY_INT32), ("rule_max", n_rules, cnp.NPY_INT32))}
        b_start = <int32_t*> array_data(arrays["b_start"])
        b_tgt = <int32_t*> array_data(arrays["b_tgt"])
        x_start = <int32_t*> array_data(arrays["x_start"])
        x_kind = <int32_t*> array_data(arrays["x_kind"])
        x_arg = <int32_t*> array_data(arrays["x_arg"])
        x_tgt = <int32_t*> array_data(arrays["x_tgt"])
        state_rule = <int32_t*> array_data(arrays["state_rule"])
        rule_out = <int32_t*> array_data(arrays["rule_start"])
        rule_min = <int32_t*> array_data(arrays["rule_min"])
        rule_max = <int32_t*> array_data(arrays["rule_max"])
        b_lo = <uint8_t*> array_data(arrays["b_lo"])
        b_hi = <uint8_t*> array_data(arrays["b_hi"])
        b_ws = <uint8_t*> array_data(arrays["b_ws"])
        final = <uint8_t*> array_data(arrays["final"])
        nb = nx = 0
        for i in range(n):
            o = old[i]
            _sort_bytes(&e.b[e.b_start[o]], e.b_start[o + 1] - e.b_start[o])
            for j in range(e.b_start[o], e.b_start[o + 1]):
                b_lo[nb] = e.b[j].lo
                b_hi[nb] = e.b[j].hi
                b_tgt[nb] = order[e.b[j].tgt]
                b_ws[nb] = e.b[j].ws
                nb += 1
            for j in range(e.x_start[o], e.x_start[o + 1]):
                x_kind[nx] = e.x[j].kind
                x_arg[nx] = e.x[j].arg
                x_tgt[nx] = order[e.x[j].tgt]
                nx += 1
            b_start[i + 1] = nb
            x_start[i + 1] = nx
            final[i] = nfa.final[o]
            state_rule[i] = nfa.rule[o]
        for i in range(n_rules):
            rule_out[i] = order[rule_start[i]]
            rule_min[i], rule_max[i] = low.rule_bounds[i]
    finally:
        free(rule_start)
        free(order)
        free(old)
        free(stack)
    return arrays
