"""The package's surface: public names, lazy heavy imports, lint."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PUBLIC = [
    "Vocabulary", "Matcher", "CompiledGrammar", "allocate_bitmask", "apply_bitmask",
    "LlamayError", "SchemaError", "GrammarError", "VocabularyError", "UsageError",
    "compile_json_schema", "compile_gbnf", "compile_lexicon", "any_json",
    "load", "Model", "ChatResult", "TextDelta", "ToolCall", "Done",
]


@pytest.mark.parametrize("name", PUBLIC)
def test_public_name_is_exported(name):
    import llamay

    assert name in llamay.__all__ and hasattr(llamay, name)


def test_usage_error_is_a_value_error():
    import llamay

    assert issubclass(llamay.UsageError, ValueError) and issubclass(llamay.UsageError, llamay.LlamayError)


def test_import_loads_no_heavy_runtime():
    heavy = ("torch", "mlx", "llama_cpp", "vllm", "sglang")
    code = f"import sys, llamay; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_ruff_is_clean():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "llamay", "tests", "benchmarks", "setup.py"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("source", "checkout", "built_after", "refused"),
    [
        ("mod.py", True, False, True),
        ("_core/mod.pyx", True, False, True),
        ("_core/mod.pxd", True, False, True),
        ("mod.py", True, True, False),
        ("mod.py", False, False, False),  # installed: file times are when the installer wrote them
    ],
)
def test_a_source_edited_after_its_build_is_refused_in_a_checkout(tmp_path, source, checkout, built_after, refused):
    from llamay._build import check_build

    package = tmp_path / "pkg"
    (package / "_core").mkdir(parents=True)
    if checkout:
        (tmp_path / "setup.py").write_text("")
    src = package / source
    built = src.with_name("mod" + EXTENSION_SUFFIXES[0])
    src.write_text("")
    built.write_bytes(b"")
    os.utime(src, (2000, 2000))
    os.utime(built, (3000, 3000) if built_after else (1000, 1000))
    if refused:
        with pytest.raises(ImportError, match=f"pkg/{source} changed after it was compiled: run `python setup.py"):
            check_build(package)
    else:
        check_build(package)



def test_a_pxd_edited_after_a_module_that_cimports_it_was_built_is_refused(tmp_path):
    from llamay._build import check_build

    package = tmp_path / "pkg"
    (package / "_core").mkdir(parents=True)
    (tmp_path / "setup.py").write_text("")
    pyx = package / "_core" / "mod.pyx"
    pyx.write_text("from ..ir cimport Seq\nfrom .automaton cimport zeros\n")
    (package / "ir.pxd").write_text("")
    (package / "_core" / "automaton.pxd").write_text("")
    built = pyx.with_name("mod" + EXTENSION_SUFFIXES[0])
    built.write_bytes(b"")
    for path in (pyx, package / "_core" / "automaton.pxd"):
        os.utime(path, (1000, 1000))
    os.utime(built, (2000, 2000))
    os.utime(package / "ir.pxd", (3000, 3000))
    with pytest.raises(ImportError, match=r"pkg/ir\.pxd changed after it was compiled"):
        check_build(package)
    os.utime(package / "ir.pxd", (1000, 1000))
    check_build(package)
