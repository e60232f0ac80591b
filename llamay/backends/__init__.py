"""Runtimes behind one interface. Each is imported only when named, so ``import llamay`` stays light."""

from __future__ import annotations

import importlib

from ..errors import UsageError
from .base import Backend, Sampling

_MODULES = {"llamacpp": "llamacpp", "transformers": "transformers", "mlx": "mlx", "fixture": "fixture"}


def load_backend(name: str, model=None, **options) -> Backend:
    """Import backend ``name`` and load ``model`` (None: the embedded default)."""
    if name not in _MODULES:
        raise UsageError(f"unknown backend {name!r}; choose one of {', '.join(sorted(_MODULES))}")
    module = importlib.import_module(f"{__name__}.{_MODULES[name]}")
    return module.load(model, **options)


__all__ = ["Backend", "Sampling", "load_backend"]
