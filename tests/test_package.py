"""The package's surface: public names, lazy heavy imports, lint."""

from __future__ import annotations

import subprocess
import sys
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
    code = "import sys, llamay; print(sorted(m for m in ('torch', 'mlx', 'llama_cpp') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_ruff_is_clean():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "llamay", "tests", "benchmarks", "setup.py"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
