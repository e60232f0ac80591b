# cython: language_level=3
"""The compiled pushdown automaton: flat arrays, and the byte step over configurations.

A configuration is the automaton's whole state along one path: the current NFA state, the
counter of the current frame, the frame below (an index into a matcher's frame arena, or
BOTTOM / CTX), and the whitespace spent so far. A set of configurations is the state of a
(possibly ambiguous) grammar after some bytes.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.stdlib cimport realloc

cimport numpy as cnp

cdef enum:
    ACCEPT = -1      # Config.state of "the document is complete"
    BOTTOM = -1      # Config.parent of the root frame
    CTX = -2         # Config.parent in context-independent walks: "the frames below are unknown"
    F_NEED_CTX = 1   # a path popped into CTX or needed the whitespace budget
    F_OVERFLOW = 2   # more than MAX_CONFIGURATIONS configurations, or out of memory
    WS_WINDOW = 16   # whitespace a context-independent walk may spend before deferring to the context
    CTX_FRAMES = 3   # frames below the top that a mask-cache position includes

cdef enum:           # x_kind: the special edges
    EDGE_CALL = 1    # push a frame returning to the target, enter rule x_arg
    EDGE_INC = 2     # one more iteration of the frame's counted repetition, if under max
    EDGE_EXIT = 3    # leave it, if at least min iterations were started

ctypedef struct Config:
    int32_t state
    int32_t counter
    int32_t parent
    int32_t ws

ctypedef struct Frame:
    int32_t ret
    int32_t counter
    int32_t parent

ctypedef struct Tables:
    int32_t n_states
    int32_t ws_budget          # -1: unbounded
    const int32_t* b_start
    const uint8_t* b_lo
    const uint8_t* b_hi
    const int32_t* b_tgt
    const uint8_t* b_ws
    const uint32_t* byteset    # 8 words per state: the bytes any edge of the state accepts
    const int32_t* x_start
    const int32_t* x_kind
    const int32_t* x_arg
    const int32_t* x_tgt
    const uint8_t* final
    const uint8_t* tail        # final with no edges: returning there is returning to the caller's caller
    const int32_t* state_rule
    const int32_t* rule_start
    const int32_t* rule_min
    const int32_t* rule_max
    const int32_t* canon       # per state: the first state of its bisimulation class (same future)

ctypedef struct Arena:
    Config* cfg
    int32_t cfg_len
    int32_t cfg_cap
    Frame* frames
    int32_t n_frames
    int32_t frames_cap
    int32_t step_frames        # first frame created in the current step (frame sharing)
    Config* work
    int32_t work_cap
    int32_t max_configs

cdef inline bint resize(void** buf, size_t size) noexcept nogil:
    """``realloc`` in place: on failure ``*buf`` is left as it was, still valid, and False returned."""
    cdef void* p = realloc(buf[0], size)
    if p == NULL:
        return False
    buf[0] = p
    return True


ctypedef fused capacity_t:  # the capacities of the arrays that grow: 32-bit, and 64-bit for large pools
    int32_t
    int64_t


cdef inline bint grow(void** buf, capacity_t* cap, int64_t need, size_t item) noexcept nogil:
    """Double ``*cap`` (positive) until ``*buf`` holds ``need`` items; False, both unchanged, when out of memory."""
    cdef capacity_t new_cap = cap[0]
    if need <= new_cap:
        return True
    while new_cap < need:
        new_cap *= 2
    if not resize(buf, new_cap * item):
        return False
    cap[0] = new_cap
    return True


cdef inline int32_t fold_counter(const Tables* t, int32_t state, int32_t counter, int32_t horizon) noexcept nogil:
    """``counter``, or ``min`` where no walk of ``horizon`` bytes can tell them apart.

    Each iteration of a counted repetition reads a byte, so a counter at least ``min`` and
    more than ``horizon`` below ``max`` allows the same strings of up to ``horizon`` bytes
    as ``min`` does: folded, such configurations share cache entries and machine sets.
    """
    cdef int32_t r
    if state < 0:
        return counter
    r = t.state_rule[state]
    if t.rule_max[r] > 0 and counter >= t.rule_min[r] and t.rule_max[r] - counter > horizon:
        return t.rule_min[r]
    return counter


cdef int arena_init(Arena* a, int32_t max_configs) noexcept nogil
cdef void arena_free(Arena* a) noexcept nogil
cdef int32_t push_frame(Arena* a, int32_t ret, int32_t counter, int32_t parent) noexcept nogil
cdef int32_t closure(const Tables* t, Arena* a, Config c, int32_t out_start, int* flags) noexcept nogil
cdef int32_t step(const Tables* t, Arena* a, int32_t src, int32_t n, uint8_t byte, bint ci, int32_t ws_cap,
                  int* flags) noexcept nogil

cdef class CompiledGrammar:
    cdef Tables t
    cdef dict _arrays
    cdef object _byteset
    cdef readonly list rule_names
    cdef public list warnings
    cdef readonly object whitespace_budget
    cdef readonly object limits
    cdef public object _mask_caches
    cdef object __weakref__


cdef inline void* array_data(cnp.ndarray arr) noexcept:
    """The first byte of a contiguous array (``.ctypes.data`` builds an object per call)."""
    return cnp.PyArray_DATA(arr)


cdef inline cnp.ndarray zeros(cnp.npy_intp n, int typenum):
    """A new one-dimensional array of ``n`` zeros, through the C API (no interpreter call)."""
    return cnp.PyArray_ZEROS(1, &n, typenum, 0)
