# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The token bitmask (int32, ``ceil(V/32)`` words, bit i = token i allowed) and its kernels.

The layout is the one xgrammar, llguidance and outlines-core share, so their kernels and
benchmarks line up. ``apply_bitmask`` is a tight loop here because numpy's own masking
(``np.where`` on unpacked bits) costs more than computing the mask.
"""

from libc.stdint cimport int32_t, uint16_t, uint32_t

import numpy as np

from ..errors import UsageError

cdef float NEG_INF = float("-inf")
cdef uint16_t HALF_NEG_INF = 0xFC00
cdef uint32_t ALL_ALLOWED = 0xFFFFFFFFu


def allocate_bitmask(int vocab_size, int batch=0):
    """A mask with every token allowed: ``ceil(V/32)`` int32 words (``(batch, words)`` when batch > 0)."""
    if vocab_size <= 0:
        raise UsageError(f"vocabulary size must be positive, got {vocab_size}")
    cdef object words = (vocab_size + 31) // 32
    if batch > 0:
        return np.full((batch, words), -1, np.int32)
    return np.full(words, -1, np.int32)


def apply_bitmask(logits, bitmask):
    """Set the logits of disallowed tokens to -inf, in place (numpy float32 or float16, 1-D or 2-D).

    ``for i in range(V): if not bitmask[i // 32] >> (i % 32) & 1: logits[i] = -inf``.
    Logits wider than the mask are refused; a mask wider than the logits is fine.
    """
    if not isinstance(logits, np.ndarray) or logits.dtype not in (np.float32, np.float16):
        raise UsageError("logits must be a numpy float32 or float16 array; torch and mlx have their own kernels")
    if not isinstance(bitmask, np.ndarray) or bitmask.dtype != np.int32:
        raise UsageError("bitmask must be a numpy int32 array (allocate_bitmask)")
    if logits.ndim != bitmask.ndim or logits.ndim not in (1, 2):
        raise UsageError(f"logits ({logits.ndim}-D) and bitmask ({bitmask.ndim}-D) must both be 1-D or both 2-D")
    if not logits.flags.c_contiguous or not logits.flags.writeable or not bitmask.flags.c_contiguous:
        raise UsageError("logits must be writeable and C-contiguous, bitmask C-contiguous")
    if logits.ndim == 2 and logits.shape[0] != bitmask.shape[0]:
        raise UsageError(f"logits batch {logits.shape[0]} != bitmask batch {bitmask.shape[0]}")
    v = logits.shape[logits.ndim - 1]
    words = bitmask.shape[bitmask.ndim - 1]
    if words * 32 < v:
        raise UsageError(f"bitmask of {words} words covers {words * 32} tokens, logits have {v}")
    rows = 1 if logits.ndim == 1 else logits.shape[0]
    lf = logits.reshape(rows, v)
    bm = bitmask.reshape(rows, words)
    if logits.dtype == np.float32:
        _apply[float](lf, bm, NEG_INF)
    else:
        _apply[uint16_t](lf.view(np.uint16), bm, HALF_NEG_INF)


ctypedef fused logit_t:
    float
    uint16_t  # float16 bits: numpy's half has no C type here


cdef void _apply(logit_t[:, ::1] logits, const int32_t[:, ::1] mask, logit_t neg_inf) noexcept:
    cdef Py_ssize_t r, w, b, i, v = logits.shape[1]
    cdef uint32_t word
    with nogil:
        for r in range(logits.shape[0]):
            for w in range((v + 31) // 32):
                word = <uint32_t> mask[r, w]
                if word == ALL_ALLOWED:
                    continue
                for b in range(32):
                    i = w * 32 + b
                    if i >= v:
                        break
                    if not (word >> b) & 1:
                        logits[r, i] = neg_inf
