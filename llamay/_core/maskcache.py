"""Token masks per automaton position, shared by every matcher of a (grammar, vocabulary) pair.

A position is a state of the top frame, its counter (folded where it cannot matter), the
whitespace budget left (up to a window) and a few frames below; an entry is keyed by the
positions of a whole configuration set. It holds the tokens those positions alone accept (a
bitmask, or a string slice of the vocabulary plus a list) and the few whose fate depends on
deeper frames or more whitespace (checked per step against the real set). The grammar's set
machine (``setmachine.SetMachine``), which computes entries under its own lock and without the GIL,
hangs off the cache too; entries are inserted under the GIL, so concurrent matchers at worst
compute one twice. The cache stops growing at the grammar's ``limits.mask_cache_bytes``;
positions past it are walked in full at every step. What an entry learns later (the budget
check's findings, its undecided tokens' fate per whitespace budget left) is charged to the
same bound.
"""

from __future__ import annotations

import weakref


class MaskCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity  # bytes
        self.entries: dict[tuple, tuple] = {}
        self.nbytes = 0
        self.machine = None
        self.distances = None  # distance.Distances, built by the first matcher that closes a document

    def get(self, key: tuple):
        return self.entries.get(key)

    def charge(self, size: int) -> bool:
        """Count ``size`` more bytes, unless that would pass the capacity (then False, nothing counted)."""
        if self.nbytes + size > self.capacity:
            return False
        self.nbytes += size
        return True

    def put(self, key: tuple, entry: tuple, size: int) -> bool:
        if not self.charge(size):
            return False
        self.entries[key] = entry
        return True


def cache_for(grammar, vocab) -> MaskCache:
    caches = grammar._mask_caches
    if caches is None:
        caches = grammar._mask_caches = weakref.WeakKeyDictionary()
    cache = caches.get(vocab)
    if cache is None:
        cache = caches[vocab] = MaskCache(grammar.limits.mask_cache_bytes)
    return cache
