"""llamay: tool calls and structured output that cannot be malformed.

Re-exports only. ``import llamay`` never imports torch, mlx or llama_cpp.
"""

from . import _build  # noqa: F401  (first: it refuses a stale build before a compiled module loads)
from ._core.automaton import CompiledGrammar
from ._core.bitmask import allocate_bitmask, apply_bitmask
from ._core.matcher import Matcher
from .chat import ToolCall
from .engine import ChatResult, Done, Model, TextDelta, load
from .errors import GrammarError, LlamayError, SchemaError, UsageError, VocabularyError
from .grammars.gbnf import compile_gbnf
from .grammars.jsonschema.compiler import any_json, compile_json_schema
from .grammars.lexicon import compile_lexicon
from .options import CompileOptions, Limits, Tuning
from .vocab import Vocabulary

__all__ = [
    "ChatResult",
    "CompileOptions",
    "CompiledGrammar",
    "Done",
    "GrammarError",
    "Limits",
    "LlamayError",
    "Matcher",
    "Model",
    "SchemaError",
    "TextDelta",
    "ToolCall",
    "Tuning",
    "UsageError",
    "Vocabulary",
    "VocabularyError",
    "allocate_bitmask",
    "any_json",
    "apply_bitmask",
    "compile_gbnf",
    "compile_json_schema",
    "compile_lexicon",
    "load",
]
