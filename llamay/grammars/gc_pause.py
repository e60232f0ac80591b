"""The cyclic garbage collector, paused while a grammar compiles.

A compile is a burst of small acyclic objects (IR nodes, tuples, dicts). Each burst sets off
collections that walk every tracked object of the process: a cost that grows with the
application's heap and frees nothing. Reference counting frees as usual meanwhile; the few
cycles a compile leaves behind are collected once the collector runs again.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the collector; at the end, turn it back on if it was on (also a decorator: ``@gc_paused()``).

    No count is kept across threads: overlapping compiles cannot keep the collector off for
    longer than one compile (each is bounded by ``Limits.compile_seconds``), and a collector
    the application turned off before the compile stays off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
