import numpy as np
import numpy.typing as npt

from .automaton import CompiledGrammar
from .trie import TokenTrie

MAX_SETS: int

class SetMachine:
    """A grammar's lazily built DFA over configuration sets (one per mask cache, shared by its matchers)."""

    computed: int
    stepped: int
    visited: int
    checked: int
    imm_pairs: int
    def __init__(self, grammar: CompiledGrammar, horizon: int) -> None: ...
    @property
    def n_sets(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def kinds(self) -> list[tuple[int, int]]:
        """Walks so far by kind (whole trie, other tokens, rest groups, long tokens, class): (count, nodes)."""

class StringSlices:
    """A vocabulary's tokens of safe characters by length, and tries of the others."""

    def __init__(self, trie: TokenTrie) -> None: ...
    @property
    def kmax(self) -> int: ...
    @property
    def levels(self) -> int: ...
    def arrays(self) -> dict[str, npt.NDArray[np.generic]]: ...

def slices_for(trie: TokenTrie) -> StringSlices: ...
