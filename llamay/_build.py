"""Refuse a source checkout whose compiled modules are older than their sources.

Python imports an extension module ahead of the ``.py`` of the same name, and the schema
compilers are compiled from theirs (``setup.py``): after an edit or a ``git checkout`` without a
rebuild, the old code would run with no sign of it. The package imports this module first.
"""

from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

SOURCES = (".py", ".pyx", ".pxd")


def stale_modules(package: Path) -> list[Path]:
    """Sources under ``package`` (and its ``_core``) newer than the extension module built from them."""
    stale = []
    for folder in (package, package / "_core"):
        for suffix in EXTENSION_SUFFIXES:
            for built in folder.glob("*" + suffix):
                stem = built.name[: -len(suffix)]
                built_at = built.stat().st_mtime
                stale += [
                    source
                    for source in (folder / (stem + ext) for ext in SOURCES)
                    if source.exists() and source.stat().st_mtime > built_at
                ]
    return stale


def check_build(package: Path) -> None:
    """Raise ``ImportError`` naming the stale sources, in a source checkout (an installed package's
    file times say nothing: they are when the installer wrote them)."""
    if not (package.parent / "setup.py").exists():
        return
    stale = stale_modules(package)
    if stale:
        names = ", ".join(str(path.relative_to(package.parent)) for path in stale)
        raise ImportError(f"{names} changed after it was compiled: run `python setup.py build_ext --inplace`")


check_build(Path(__file__).parent)
