"""Build the Cython core, and compile the schema compilers with Cython.

``LLAMAY_DEBUG=1`` restores bounds checks, line tracing and annotation.
"""

import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("LLAMAY_DEBUG") == "1"
MODULES = [
    "automaton", "rulegraph", "lowering", "trie", "walk", "safechars", "setmachine", "slices", "entrywalk", "lexicon",
    "distance", "matcher", "bitmask",
]
# Python modules on the compile path, compiled as they are (Cython's pure Python mode): a schema's
# compile spends much of its time in them, and compiled they run it faster (docs/performance-notes.md).
# The ``.py`` stays the source; ``llamay._build`` refuses a checkout whose build is older.
COMPILED_PYTHON = ["ir", "grammars.utf8", "grammars.json_lexical", "grammars.gbnf"] + [
    f"grammars.jsonschema.{name}"
    for name in (
        "compiler", "combinators", "keywords", "refs", "numeric", "digit_ladders", "nesting", "regex", "formats",
        "structure",
    )
]

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
# Python semantics kept whole: negative indices, bounds checks, Python's division, annotations that do not check
python_directives = {"language_level": "3", "annotation_typing": False, "linetrace": DEBUG}
compiled_python = [
    Extension(f"llamay.{name}", [f"llamay/{name.replace('.', '/')}.py"],
              define_macros=macros, extra_compile_args=compile_args)
    for name in COMPILED_PYTHON
]

setup(
    ext_modules=cythonize(extensions, compiler_directives=directives, annotate=DEBUG)
    + cythonize(compiled_python, compiler_directives=python_directives, annotate=DEBUG)
)
