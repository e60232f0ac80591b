"""Many generations on one model at once: slots, their states, and the scheduler that batches them.

A backend that evaluates several sequences in one call (``BatchBackend``: llama.cpp's
multi-sequence batches) is driven by a ``Scheduler``: each request takes a slot, the slot's
prompt is evaluated in chunks beside the others' decoding, and every step is one batched
evaluation over all active sequences. The engine sees the same ``TokenStream`` as from a
backend that runs one generation at a time.
"""

from .scheduler import Scheduler
from .slots import Event, Slot, SlotError, State

__all__ = ["Event", "Scheduler", "Slot", "SlotError", "State"]
