"""``compile_lexicon``: output made only of words from a list (the README's lexicon mode).

Words are separated by spaces, newlines and ``. , ; : ! ? ' " ( ) -``; no digits; a word
matches its list entry case-insensitively (ASCII). List entries holding a separator, a
digit or a control character can never be written whole and are left out, with a warning.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from .._core.lexicon import SEPARATORS, CompiledLexicon
from ..errors import GrammarError, UsageError
from ..options import DEFAULT, Limits


def compile_lexicon(words: Iterable[str | bytes] | None = None, *, limits: Limits = DEFAULT.limits) -> CompiledLexicon:
    """The lexicon automaton for ``words`` (None: the default English list), at most ``limits.max_lexicon_bytes``."""
    if words is None:
        return default_lexicon()
    if isinstance(words, (str, bytes)):
        raise UsageError("compile_lexicon takes a list of words, not one string")
    encoded = []
    total = 0
    for w in words:
        if not isinstance(w, (str, bytes)):
            raise GrammarError(f"lexicon entries must be strings, got {type(w).__name__}", rule="lexicon")
        b = w.encode("utf-8") if isinstance(w, str) else bytes(w)
        total += len(b) + 1
        if total > limits.max_lexicon_bytes:
            raise GrammarError(
                f"lexicon is over {limits.max_lexicon_bytes} bytes (limit MAX_LEXICON_BYTES)", rule="lexicon"
            )
        encoded.append(b)
    dropped = [w for w in encoded if not w or any(c in SEPARATORS or c < 0x20 or 0x30 <= c <= 0x39 for c in w)]
    warnings = [f"{len(dropped)} lexicon entries hold a separator, a digit or nothing and were left out"]
    if not dropped:
        warnings = []
    lexicon = CompiledLexicon(encoded, warnings, limits)
    if lexicon.n_words == 0:
        raise GrammarError("the lexicon has no usable word", rule="lexicon")
    return lexicon


@lru_cache(maxsize=1)
def default_lexicon() -> CompiledLexicon:
    """English words from the ``english-words`` package (web2 list, about 234k words), built once."""
    try:
        from english_words import get_english_words_set
    except ImportError as exc:
        raise UsageError("the default lexicon needs the english-words package: pip install english-words") from exc
    return compile_lexicon(sorted(get_english_words_set(["web2"], lower=True, alpha=True)))


def read_lexicon(path: str | Path) -> CompiledLexicon:
    """A lexicon file: one word per line (``llamay serve --lexicon FILE``)."""
    text = Path(path).read_text(encoding="utf-8")
    return compile_lexicon([line.strip() for line in text.splitlines() if line.strip()])
