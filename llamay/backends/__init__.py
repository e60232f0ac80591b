"""Runtimes behind one interface. Each is imported only when named, so ``import llamay`` stays light."""

from __future__ import annotations

import importlib

from ..errors import UsageError
from .base import Backend, BatchBackend, Sampling, SteppedBackend, TokenStream

#: Backend names, each the module under this package that implements it.
NAMES = ("llamacpp", "transformers", "mlx", "vllm", "fixture")


def load_backend(name: str, model=None, **options) -> Backend:
    """Import backend ``name`` and load ``model`` (None: the embedded default)."""
    if name not in NAMES:
        raise UsageError(f"unknown backend {name!r}; choose one of {', '.join(sorted(NAMES))}")
    module = importlib.import_module(f"{__name__}.{name}")
    return module.load(model, **options)


__all__ = ["Backend", "BatchBackend", "Sampling", "SteppedBackend", "TokenStream", "load_backend"]
