"""Runtimes behind one interface. Each is imported only when named, so ``import llamay`` stays light."""

from __future__ import annotations

import importlib

from ..errors import UsageError
from .base import Backend, BatchBackend, Sampling, SteppedBackend, TokenStream

#: Backend names, each the module under this package that implements it.
NAMES = ("llamacpp", "transformers", "mlx", "vllm", "fixture")


def load_backend(name: str, model=None, *, jump_ahead: bool = True, **options) -> Backend:
    """Import backend ``name`` and load ``model`` (None: the embedded default).

    ``jump_ahead``: tokens a constraint forces are appended without sampling (``llamay.jump_ahead``),
    where the runtime's loop is llamay's (llamacpp, transformers, mlx one at a time).
    """
    if name not in NAMES:
        raise UsageError(f"unknown backend {name!r}; choose one of {', '.join(sorted(NAMES))}")
    module = importlib.import_module(f"{__name__}.{name}")
    backend = module.load(model, **options)
    backend.jump_ahead = jump_ahead
    return backend


__all__ = ["Backend", "BatchBackend", "Sampling", "SteppedBackend", "TokenStream", "load_backend"]
