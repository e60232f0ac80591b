"""The vocabulary's string slices (``_core.slices``): tokens of safe characters by length, and their bitmasks."""

from __future__ import annotations

import numpy as np
import pytest
from test_mask import allowed

from llamay._core.slices import slices_for

VOCABS = ["byte_vocab", "smollm2_vocab", "llama3_vocab", "gemma_vocab"]


def _safe_chars(b: bytes) -> tuple[int, int]:
    """(bytes, characters) of the longest prefix of ``b`` made of whole safe characters."""
    i = n = 0
    while i < len(b):
        for k in (1, 2, 3, 4):
            try:
                ch = b[i : i + k].decode("utf-8")
            except UnicodeDecodeError:
                continue
            break
        else:
            break
        if len(ch) != 1 or ch in '"\\' or ord(ch) < 0x20:
            break
        i += k
        n += 1
    return i, n


@pytest.mark.parametrize("vocab_name", VOCABS)
def test_slices_split_the_vocabulary(request, vocab_name):
    vocab = request.getfixturevalue(vocab_name)
    sl = slices_for(vocab.trie)
    a = sl.arrays()
    kinds, cum = a["kinds"], a["cum"]
    expected = np.full(len(kinds), -1)
    for i in range(len(kinds)):
        b = vocab.token_bytes(i)
        if b:
            used, chars = _safe_chars(b)
            if used == len(b):
                expected[i] = chars
    np.testing.assert_array_equal(kinds, expected)
    for r in sorted({min(r, sl.kmax) for r in (1, 2, 5, 16, sl.kmax)}):
        want = np.flatnonzero((kinds >= 1) & (kinds <= r))
        np.testing.assert_array_equal(allowed(cum[r].view(np.int32), vocab.size), want)
    # the short slice tokens by the bytes they hold, and by group of ASCII bytes
    short = [i for i in range(len(kinds)) if 1 <= kinds[i] <= sl.levels]
    holds = {i: set(vocab.token_bytes(i)) for i in short}
    for b in (0x20, 0x2D, 0x30, 0x41, 0x5F, 0x61, 0x7A, 0x7F):
        want = [i for i in short if b in holds[i]]
        np.testing.assert_array_equal(allowed(a["has"][b].view(np.int32), vocab.size), want, err_msg=hex(b))
    np.testing.assert_array_equal(
        allowed(a["wide"].view(np.int32), vocab.size), [i for i in short if max(holds[i]) >= 0x80]
    )
    digits = [i for i in short if holds[i] & set(b"0123456789")]
    np.testing.assert_array_equal(allowed(a["grp"][0].view(np.int32), vocab.size), digits)
