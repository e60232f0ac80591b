from typing import Any

from ..options import Limits

CALL: int
INC: int
EXIT: int

class CompiledGrammar:
    """An immutable automaton shared by every matcher and thread; ``warnings`` lists what is not enforced."""

    rule_names: list[str]
    warnings: list[str]
    whitespace_budget: int | None
    limits: Limits
    def __init__(
        self, arrays: dict[str, Any], ws_budget: int, rule_names: list[str], warnings: list[str], limits: Limits
    ) -> None: ...
    @property
    def n_states(self) -> int: ...
    @property
    def tables(self) -> dict[str, Any]: ...
    @property
    def state_classes(self) -> Any: ...
