"""Refuse a source checkout whose compiled modules are older than their sources.

Python imports an extension module ahead of the ``.py`` of the same name, and the schema
compilers are compiled from theirs (``setup.py``): after an edit or a ``git checkout`` without a
rebuild, the old code would run with no sign of it. The package imports this module first.
"""

from __future__ import annotations

import re
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

SOURCES = (".py", ".pyx", ".pxd")
_CIMPORT = re.compile(r"^from (\.+)([\w.]+) cimport", re.MULTILINE)


def cimported(pyx: Path) -> list[Path]:
    """The ``.pxd`` files of the package that ``pyx`` cimports: an edit to one changes its build too."""
    if not pyx.exists():
        return []
    return [pyx.parents[len(dots) - 1].joinpath(*name.split(".")).with_suffix(".pxd")
            for dots, name in _CIMPORT.findall(pyx.read_text(encoding="utf-8"))]


def stale_modules(package: Path) -> list[Path]:
    """Sources under ``package``, at any depth, and the ``.pxd`` files they cimport, newer than the
    extension module built from them."""
    stale = []
    for suffix in EXTENSION_SUFFIXES:
        for built in package.rglob("*" + suffix):
            folder, stem = built.parent, built.name[: -len(suffix)]
            built_at = built.stat().st_mtime
            sources = [folder / (stem + ext) for ext in SOURCES] + cimported(folder / (stem + ".pyx"))
            stale += [source for source in sources if source.exists() and source.stat().st_mtime > built_at]
    return list(dict.fromkeys(stale))  # a .pxd that several modules cimport, named once


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
