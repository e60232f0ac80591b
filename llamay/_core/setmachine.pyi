from .automaton import CompiledGrammar

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
