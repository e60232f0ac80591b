"""``allocate_bitmask`` and ``apply_bitmask`` against a numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

from llamay import UsageError, allocate_bitmask, apply_bitmask


def reference(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    v = logits.shape[-1]
    bits = np.unpackbits(mask.view(np.uint8), axis=-1, bitorder="little")[..., :v].astype(bool)
    return np.where(bits, logits, -np.inf).astype(logits.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(49152,), (70,), (3, 262144), (2, 33)])
def test_apply_matches_numpy_reference(dtype, shape):
    rng = np.random.default_rng(7)
    logits = rng.standard_normal(shape).astype(dtype)
    mask = rng.integers(-(2**31), 2**31, size=(*shape[:-1], (shape[-1] + 31) // 32), dtype=np.int64).astype(np.int32)
    mask.reshape(-1)[::5] = -1  # whole words allowed take the fast path
    expected = reference(logits, mask)
    apply_bitmask(logits, mask)
    np.testing.assert_array_equal(logits, expected)


def test_allocated_mask_allows_everything():
    mask = allocate_bitmask(100)
    assert mask.dtype == np.int32 and mask.shape == (4,) and (mask == -1).all()
    assert allocate_bitmask(100, batch=2).shape == (2, 4)


@pytest.mark.parametrize(
    ("logits", "mask", "needle"),
    [
        (np.zeros(64, np.float64), np.zeros(2, np.int32), "float32 or float16"),
        (np.zeros(64, np.float32), np.zeros(1, np.int32), "covers 32 tokens"),
        (np.zeros(64, np.float32), np.zeros(2, np.uint32), "int32"),
        (np.zeros((2, 64), np.float32), np.zeros(2, np.int32), "must both be 1-D or both 2-D"),
        (np.zeros((2, 64), np.float32), np.zeros((3, 2), np.int32), "batch"),
        (np.zeros(128, np.float32)[::2], np.zeros(2, np.int32), "contiguous"),
    ],
    ids=["float64", "short-mask", "uint32-mask", "ndim", "batch", "strided"],
)
def test_bad_arguments_are_usage_errors(logits, mask, needle):
    with pytest.raises(UsageError, match=needle):
        apply_bitmask(logits, mask)
