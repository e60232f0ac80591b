"""One compile budget per request, counted in the compiling thread's CPU time.

``Limits.compile_seconds`` bounds what one request may spend compiling its constraint,
however many schemas it carries: ten tools share one budget, not one each. The clock is
the compiling thread's CPU time, not the wall: load from other requests (or the model
decoding beside the compile) stretches a compile's wall time but not its CPU time, so a
schema that compiles on an idle server is never refused on a busy one.

Every check compares ``clock()`` with ``deadline()``: inside a ``budget()`` block that is
the block's deadline, shared by every compile in it; outside one, each compile opens its
own (the library's ``compile_json_schema`` called directly).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: CPU seconds of the calling thread.
clock = time.thread_time

_deadline: ContextVar[float | None] = ContextVar("llamay_compile_deadline", default=None)


def deadline(seconds: float) -> float:
    """When the current budget runs out, on ``clock``: the enclosing ``budget()``'s, or ``seconds`` from now."""
    shared = _deadline.get()
    return clock() + seconds if shared is None else shared


@contextmanager
def budget(seconds: float) -> Iterator[None]:
    """Every compile inside shares one budget of ``seconds``; an outer block's holds."""
    if _deadline.get() is not None:
        yield
        return
    token = _deadline.set(clock() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)
