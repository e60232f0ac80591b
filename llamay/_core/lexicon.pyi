from collections.abc import Iterable

from ..options import Limits
from .automaton import CompiledGrammar

SEPARATORS: bytes

def fold(word: bytes) -> bytes: ...

class CompiledLexicon(CompiledGrammar):
    """A word list as an automaton; ``Matcher`` fills its masks through the skeleton index."""

    n_words: int
    def __init__(self, words: Iterable[bytes], warnings: list[str], limits: Limits) -> None: ...

class SkeletonIndex:
    @property
    def n_skeletons(self) -> int: ...

def skeleton_index(vocab: object) -> SkeletonIndex: ...
def masks_for(lex: CompiledLexicon, vocab: object) -> object: ...
