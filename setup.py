"""Build the Cython core. ``LLAMAY_DEBUG=1`` restores bounds checks, line tracing and annotation."""

import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("LLAMAY_DEBUG") == "1"
MODULES = ["automaton", "lowering", "trie", "walk", "dfa", "lexicon", "matcher", "bitmask"]

directives = {
    "language_level": "3",
    "embedsignature": True,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": not DEBUG,
    "linetrace": DEBUG,
}
macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
if DEBUG:
    macros.append(("CYTHON_TRACE_NOGIL", "1"))
compile_args = ["-O0", "-g"] if DEBUG else ["-O3"]

extensions = [
    Extension(
        f"llamay._core.{name}",
        [f"llamay/_core/{name}.pyx"],
        include_dirs=[np.get_include()],
        define_macros=macros,
        extra_compile_args=compile_args,
    )
    for name in MODULES
]

setup(ext_modules=cythonize(extensions, compiler_directives=directives, annotate=DEBUG))
