"""llamay: tool calls and structured output that cannot be malformed.

Re-exports only. ``import llamay`` never imports torch, mlx or llama_cpp.
"""

from ._core.automaton import CompiledGrammar
from ._core.bitmask import allocate_bitmask, apply_bitmask
from ._core.matcher import Matcher
from .errors import GrammarError, LlamayError, SchemaError, UsageError, VocabularyError
from .gbnf import compile_gbnf
from .lexicon import compile_lexicon
from .vocab import Vocabulary

__all__ = [
    "CompiledGrammar",
    "GrammarError",
    "LlamayError",
    "Matcher",
    "SchemaError",
    "UsageError",
    "Vocabulary",
    "VocabularyError",
    "allocate_bitmask",
    "apply_bitmask",
    "compile_gbnf",
    "compile_lexicon",
]
