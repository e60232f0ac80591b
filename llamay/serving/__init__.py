"""Many generations on one model at once: slots, their states, and the scheduler that batches them.

A backend that evaluates several sequences in one call (``BatchBackend``: llama.cpp's
multi-sequence batches) is driven by a ``Scheduler``: each request takes a slot, the slot's
prompt is evaluated in chunks beside the others' decoding, and every step is one batched
evaluation over all active sequences. A runtime with continuous batching of its own (mlx-lm's
``BatchGenerator``) is driven by an ``MlxRunner``, which chooses each token the same way; vLLM's
engine, which constrains inside its workers, by a ``VllmRunner``. The engine sees the same
``TokenStream`` as from a backend that runs one generation at a time.
"""

from __future__ import annotations

from ..backends.base import Backend, BatchBackend
from .jobs import Runner
from .scheduler import Scheduler
from .slots import Event, Slot, SlotError, State

__all__ = ["Event", "Runner", "Scheduler", "Slot", "SlotError", "State", "runner_for"]


def runner_for(backend: Backend) -> Runner | None:
    """What runs ``backend``'s generations side by side; None where they run one at a time."""
    if isinstance(backend, BatchBackend):
        return Scheduler(backend)
    if backend.name == "mlx" and backend.slots > 1:
        from .mlx_runner import MlxRunner  # imports mlx

        return MlxRunner(backend, slots=backend.slots, cache_prompt=backend.cache_prompt)
    if backend.name == "vllm":
        from .vllm_runner import VllmRunner  # imports vllm

        return VllmRunner(backend)
    return None
