import numpy as np
import numpy.typing as npt

from .automaton import CompiledGrammar
from .trie import TokenTrie

INF: int

class Distances:
    build_seconds: float
    def __init__(self, grammar: CompiledGrammar, trie: TokenTrie) -> None: ...
    def state_distances(self) -> npt.NDArray[np.int32]: ...
    def token_bounds(self) -> npt.NDArray[np.int32]: ...
