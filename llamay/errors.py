"""The three error families: refused input, API misuse, and our own bugs.

Every message has one shape, "<what is wrong> - at <where>", and every refused-input
error carries an ``http_status`` hint so each API can render it in its own shape.
"""

from __future__ import annotations


class LlamayError(Exception):
    """Base of every error llamay raises on purpose."""

    http_status = 400


class SchemaError(LlamayError):
    """A JSON Schema that llamay refuses, naming the keyword and its JSON Pointer.

    A bound of ``options.Limits`` exceeded is reported with ``keyword`` set to the limit's name
    in capitals (``max_depth``: ``MAX_DEPTH``).
    """

    def __init__(self, message: str, *, keyword: str, pointer: str = "") -> None:
        self.keyword = keyword
        self.pointer = pointer
        where = pointer if pointer else "(root)"
        super().__init__(f"{message} - at {where}")


class GrammarError(LlamayError):
    """A grammar that llamay refuses, naming the rule and, for GBNF text, line and column."""

    def __init__(
        self, message: str, *, rule: str | None = None, line: int | None = None, column: int | None = None
    ) -> None:
        self.rule = rule
        self.line = line
        self.column = column
        self.reason = message
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.rule is not None:
            parts.append(f"rule {self.rule!r}")
        if self.line is not None:
            parts.append(f"line {self.line}" + (f", column {self.column}" if self.column is not None else ""))
        return self.reason + (" - at " + ", ".join(parts) if parts else "")

    def locate(self, line: int, column: int) -> GrammarError:
        """Fill in the position once the text layer knows where ``rule`` was written."""
        if self.line is None:
            self.line, self.column = line, column
            self.args = (self._render(),)
        return self


class VocabularyError(LlamayError):
    """A tokenizer or GGUF file that cannot be read as a vocabulary."""


class UsageError(LlamayError, ValueError):
    """The caller misused the API: wrong mask size or dtype, two constraints at once."""


class InternalError(LlamayError):
    """A bug in llamay: an invariant of the automaton did not hold."""

    http_status = 500
